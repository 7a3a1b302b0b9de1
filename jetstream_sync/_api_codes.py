"""The JetStream API's err_codes, each mapped to the error class callers branch on (:func:`errors.api_error`).

The codes come from nats-server's errors.json; a code not listed here is a plain :class:`APIError`.
"""

from __future__ import annotations

from .errors import (
    APIError,
    BatchPublishError,
    BatchPublishNotEnabledError,
    ClusterMemberChangeError,
    ClusterUnavailableError,
    ConsumerConfigError,
    ConsumerExistsError,
    ConsumerNotFoundError,
    ExpectedLastSequenceUnavailableError,
    JetStreamNotEnabledError,
    MessageNotFoundError,
    MessageScheduleError,
    MessageTooLargeError,
    MinLastSequenceError,
    StreamConfigError,
    StreamIdentityMismatchError,
    StreamNameInUseError,
    StreamNotFoundError,
    StreamReconfigureInProgressError,
    StreamStoreFailedError,
    WrongLastMsgIdError,
    WrongLastSequenceError,
)

__all__ = ["API_ERRORS"]

# JetStream API err_code -> class; codes from the server's errors.json.
API_ERRORS: dict[int, type[APIError]] = {
    10039: JetStreamNotEnabledError,  # JetStream not enabled for account
    10076: JetStreamNotEnabledError,  # JetStream not enabled
    10008: ClusterUnavailableError,  # JetStream system temporarily unavailable (no leader: an election)
    10059: StreamNotFoundError,
    10058: StreamNameInUseError,
    10014: ConsumerNotFoundError,
    10148: ConsumerExistsError,  # consumer already exists (create with a different config)
    10105: ConsumerExistsError,  # consumer name already in use
    10013: ConsumerExistsError,  # consumer name already in use (older servers)
    10037: MessageNotFoundError,
    10071: WrongLastSequenceError,  # wrong last sequence: {seq}
    10164: WrongLastSequenceError,  # wrong last sequence (a replicated stream, another write to the subject in flight)
    10163: ExpectedLastSequenceUnavailableError,  # expected last sequence per subject temporarily unavailable
    10180: MinLastSequenceError,  # min last sequence (a read's min_last_seq not reached by the server answering)
    10070: WrongLastMsgIdError,
    10054: MessageTooLargeError,  # message size exceeds maximum allowed
    10052: StreamConfigError,  # invalid stream configuration (an update cannot change storage, ...)
    10077: StreamStoreFailedError,  # maximum bytes/messages exceeded (discard new), or another store failure
    # ADR-50 batches: atomic (allow_atomic) and fast ingest (allow_batched)
    10174: BatchPublishNotEnabledError,  # atomic publish is disabled
    10175: BatchPublishError,  # atomic publish sequence is missing
    10176: BatchPublishError,  # atomic publish batch is incomplete
    10177: BatchPublishError,  # atomic publish unsupported header used
    10179: BatchPublishError,  # atomic publish batch ID is invalid
    10199: BatchPublishError,  # atomic publish batch is too large
    10200: BatchPublishError,  # atomic publish batch commit is invalid
    10201: BatchPublishError,  # atomic publish batch contains duplicate message id
    10210: BatchPublishError,  # atomic publish too many inflight
    10205: BatchPublishNotEnabledError,  # batch publish is disabled
    10206: BatchPublishError,  # batch publish pattern is invalid
    10207: BatchPublishError,  # batch publish ID is invalid
    10208: BatchPublishError,  # batch publish ID unknown
    10211: BatchPublishError,  # batch publish too many inflight
    # ADR-51 message schedules
    10188: MessageScheduleError,  # message schedules is disabled
    10189: MessageScheduleError,  # message schedules pattern is invalid
    10190: MessageScheduleError,  # message schedules target is invalid
    10191: MessageScheduleError,  # message schedules invalid per-message TTL
    10192: MessageScheduleError,  # message schedules invalid rollup
    10203: MessageScheduleError,  # message schedules source is invalid
    10212: MessageScheduleError,  # message schedules invalid scheduler
    10223: MessageScheduleError,  # message schedules time zone is invalid
    # nats-server 2.12 to 2.15
    10226: StreamReconfigureInProgressError,  # stream reconfiguration already in progress (retried)
    10202: ClusterMemberChangeError,  # cluster member change is in progress (retried)
    10225: StreamIdentityMismatchError,  # consumer's stream identity does not match
    10204: ConsumerConfigError,  # invalid reset
    10218: ConsumerConfigError,  # flow control ack policy requires a push based consumer
    10219: ConsumerConfigError,  # flow control ack policy requires flow control
    10220: ConsumerConfigError,  # flow control ack policy requires max ack pending
    10221: ConsumerConfigError,  # flow control ack policy requires unset ack wait
    10222: ConsumerConfigError,  # flow control ack policy requires unset max deliver
    10209: StreamConfigError,  # stream mirrors can not also use batch publishing
    10213: StreamConfigError,  # stream mirror consumer config is invalid
    10214: StreamConfigError,  # stream mirror consumer requires flow control ack policy
    10215: StreamConfigError,  # stream source consumer config is invalid
    10216: StreamConfigError,  # duplicate stream source consumer detected
    10217: StreamConfigError,  # stream source consumer requires flow control ack policy
}
