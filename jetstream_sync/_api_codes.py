"""The JetStream API's err_codes, each mapped to the error class callers branch on
([`errors.api_error`][jetstream_sync.errors.api_error]).

The codes come from nats-server's errors.json; a code not listed here is a plain
[`APIError`][jetstream_sync.errors.APIError]. Left so on purpose: codes whose meaning is mixed (10012 wraps both config
refusals and store failures, 10057 both a failed message delete and a file store's "no message found" below its first
sequence; 10133 is a stream's and a consumer's; 10005 is read by the retry policy, see ``jetstream/retry.py``), failures
of the server itself (10049, 10104, ...), requests this client never sends (snapshots, restores, templates, peer
removal, pedantic mode), and publish refusals no caller branches on (10097 headers over 64 KiB, 10193, 10227).
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
    ConsumerOfflineError,
    CounterError,
    DuplicateMessageInProgressError,
    ExpectedLastSequenceUnavailableError,
    ExpectedStreamMismatchError,
    JetStreamNotEnabledError,
    MessageNotFoundError,
    MessageScheduleError,
    MessageTooLargeError,
    MessageTTLError,
    MinLastSequenceError,
    RequiredApiLevelError,
    ResourceLimitError,
    StreamConfigError,
    StreamIdentityMismatchError,
    StreamNameInUseError,
    StreamNotFoundError,
    StreamOfflineError,
    StreamReconfigureInProgressError,
    StreamSealedError,
    StreamStoreFailedError,
    TooManyRequestsError,
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
    # the rest of errors.json (2.11 to 2.15): every code with one meaning a caller acts on
    10043: MessageNotFoundError,  # sequence {seq} not found (a message delete of a sequence not there)
    10149: ConsumerNotFoundError,  # consumer does not exist (an update of a consumer that does not)
    10106: ConsumerExistsError,  # consumer replacement durable config not the same (exists, another config)
    10124: StreamReconfigureInProgressError,  # stream move already in progress (retried)
    10118: StreamOfflineError,  # stream is offline
    10194: StreamOfflineError,  # stream is offline: {err}
    10119: ConsumerOfflineError,  # consumer is offline
    10195: ConsumerOfflineError,  # consumer is offline: {err}
    10109: StreamSealedError,  # invalid operation on sealed stream
    10002: ResourceLimitError,  # resource limits exceeded for account
    10023: ResourceLimitError,  # insufficient resources
    10026: ResourceLimitError,  # maximum consumers limit reached
    10027: ResourceLimitError,  # maximum number of streams reached
    10028: ResourceLimitError,  # insufficient memory resources available
    10047: ResourceLimitError,  # insufficient storage resources available
    10053: ResourceLimitError,  # {err} (a stream's limits check)
    10120: ResourceLimitError,  # no JetStream default or applicable tiered limit present
    10165: MessageTTLError,  # invalid per-message TTL
    10166: MessageTTLError,  # per-message TTL is disabled
    10168: CounterError,  # message counters is disabled
    10169: CounterError,  # message counter increment is missing
    10170: CounterError,  # message counter has payload
    10171: CounterError,  # message counter increment is invalid
    10172: CounterError,  # message counter is broken
    10158: DuplicateMessageInProgressError,  # duplicate message id is in process (transient)
    10167: TooManyRequestsError,  # too many requests (429: the message was dropped)
    10185: RequiredApiLevelError,  # JetStream minimum api level required
    10060: ExpectedStreamMismatchError,  # expected stream does not match
    # consumer configuration refusals (and requests a consumer's configuration refuses)
    10016: ConsumerConfigError,  # consumer expected to be durable but no durable name set in subject
    10017: ConsumerConfigError,  # consumer name in subject does not match durable name in request
    10018: ConsumerConfigError,  # consumer expected to be durable but a durable name was not set
    10019: ConsumerConfigError,  # consumer expected to be ephemeral but detected a durable name set in subject
    10020: ConsumerConfigError,  # consumer expected to be ephemeral but a durable name was set in request
    10078: ConsumerConfigError,  # consumer config required
    10079: ConsumerConfigError,  # consumer deliver subject has wildcards
    10080: ConsumerConfigError,  # consumer in push mode can not set max waiting
    10081: ConsumerConfigError,  # consumer deliver subject forms a cycle
    10082: ConsumerConfigError,  # consumer requires ack policy for max ack pending
    10083: ConsumerConfigError,  # consumer idle heartbeat needs to be >= 100ms
    10084: ConsumerConfigError,  # consumer in pull mode requires explicit ack policy on workqueue stream
    10085: ConsumerConfigError,  # consumer in pull mode requires a durable name
    10086: ConsumerConfigError,  # consumer in pull mode can not have rate limit set
    10087: ConsumerConfigError,  # consumer max waiting needs to be positive
    10088: ConsumerConfigError,  # consumer idle heartbeat requires a push based consumer
    10089: ConsumerConfigError,  # consumer flow control requires a push based consumer
    10090: ConsumerConfigError,  # consumer direct requires a push based consumer
    10091: ConsumerConfigError,  # consumer direct requires an ephemeral consumer
    10092: ConsumerConfigError,  # consumer direct on a mapped consumer
    10093: ConsumerConfigError,  # consumer filter subject is not a valid subset of the interest subjects
    10094: ConsumerConfigError,  # {err}
    10095: ConsumerConfigError,  # failed to parse consumer sampling configuration: {err}
    10098: ConsumerConfigError,  # workqueue stream requires explicit ack
    10099: ConsumerConfigError,  # multiple non-filtered consumers not allowed on workqueue stream
    10100: ConsumerConfigError,  # filtered consumer not unique on workqueue stream
    10101: ConsumerConfigError,  # consumer must be deliver all on workqueue stream
    10102: ConsumerConfigError,  # consumer name is too long, maximum allowed is {max}
    10103: ConsumerConfigError,  # durable name can not contain '.', '*', '>'
    10107: ConsumerConfigError,  # consumer description is too long, maximum allowed is {max}
    10108: ConsumerConfigError,  # consumer with flow control also needs heartbeats
    10112: ConsumerConfigError,  # invalid push consumer deliver subject
    10114: ConsumerConfigError,  # consumer max request batch needs to be > 0
    10115: ConsumerConfigError,  # consumer max request expires needs to be >= 1ms
    10116: ConsumerConfigError,  # max deliver is required to be > length of backoff values
    10121: ConsumerConfigError,  # consumer max ack pending exceeds system limit of {limit}
    10125: ConsumerConfigError,  # consumer max request batch exceeds server limit of {limit}
    10126: ConsumerConfigError,  # consumer config replica count exceeds parent stream
    10127: ConsumerConfigError,  # Consumer name can not contain path separators
    10131: ConsumerConfigError,  # Consumer create request did not match filtered subject from create subject
    10132: ConsumerConfigError,  # Consumer Durable and Name have to be equal if both are provided
    10134: ConsumerConfigError,  # consumer config replicas must match interest retention stream's replicas
    10135: ConsumerConfigError,  # consumer metadata exceeds maximum size of {limit}
    10136: ConsumerConfigError,  # consumer cannot have both FilterSubject and FilterSubjects specified
    10137: ConsumerConfigError,  # consumer with multiple subject filters cannot use subject based API
    10138: ConsumerConfigError,  # consumer subject filters cannot overlap
    10139: ConsumerConfigError,  # consumer filter in FilterSubjects cannot be empty
    10153: ConsumerConfigError,  # consumer inactive threshold exceeds system limit of {limit}
    10159: ConsumerConfigError,  # Setting PriorityPolicy requires at least one PriorityGroup to be set
    10160: ConsumerConfigError,  # Provided priority group does not exist for this consumer
    10161: ConsumerConfigError,  # Group name cannot be an empty string
    10162: ConsumerConfigError,  # Valid priority group name must match A-Z, a-z, 0-9, -_/=)+, at most 16 characters
    10178: ConsumerConfigError,  # priority groups can not be used with push consumers
    10181: ConsumerConfigError,  # consumer ack policy invalid
    10182: ConsumerConfigError,  # consumer replay policy invalid
    10183: ConsumerConfigError,  # consumer ack wait needs to be positive
    10184: ConsumerConfigError,  # consumer backoff needs to be positive
    10196: ConsumerConfigError,  # consumer can not have priority groups when policy is none
    10197: ConsumerConfigError,  # PinnedTTL cannot be set when PriorityPolicy is none
    # stream configuration refusals: mirrors, sources, transforms, subjects, replicas, the account's max_bytes rules
    10021: StreamConfigError,  # stream external api prefix {prefix} must not overlap with {subject}
    10022: StreamConfigError,  # stream external delivery prefix {prefix} overlaps with stream subject {subject}
    10024: StreamConfigError,  # stream external delivery prefix {prefix} must not contain wildcards
    10030: StreamConfigError,  # stream mirror must have max message size >= source
    10031: StreamConfigError,  # stream mirrors can not also contain other sources
    10032: StreamConfigError,  # stream mirrors can not have both start seq and start time configured
    10033: StreamConfigError,  # stream mirrors can not contain filtered subjects
    10034: StreamConfigError,  # stream mirrors can not contain subjects
    10046: StreamConfigError,  # stream source must have max message size >= target
    10055: StreamConfigError,  # stream mirror configuration can not be updated
    10056: StreamConfigError,  # stream name in subject does not match request
    10061: StreamConfigError,  # Replicas configuration can not be updated
    10065: StreamConfigError,  # subjects overlap with an existing stream
    10074: StreamConfigError,  # replicas > 1 not supported in non-clustered mode
    10113: StreamConfigError,  # account requires a stream config to have max bytes set
    10122: StreamConfigError,  # stream max bytes exceeds account limit max stream bytes
    10123: StreamConfigError,  # can not move and scale a stream in a single update
    10128: StreamConfigError,  # Stream name can not contain path separators
    10140: StreamConfigError,  # duplicate source configuration detected
    10141: StreamConfigError,  # sourced stream name is invalid
    10142: StreamConfigError,  # mirrored stream name is invalid
    10143: StreamConfigError,  # stream mirrors can not have first sequence configured
    10144: StreamConfigError,  # source with multiple subject transforms cannot also have a single subject filter
    10145: StreamConfigError,  # source transform source: {err}
    10146: StreamConfigError,  # source transform: {err}
    10147: StreamConfigError,  # source filters can not overlap
    10150: StreamConfigError,  # mirror with multiple subject transforms cannot also have a single subject filter
    10151: StreamConfigError,  # mirror transform source: {err}
    10152: StreamConfigError,  # mirror subject filters can not overlap
    10154: StreamConfigError,  # mirror transform: {err}
    10155: StreamConfigError,  # stream transform source: {err}
    10156: StreamConfigError,  # stream transform: {err}
    10173: StreamConfigError,  # stream mirrors can not also calculate counters
    10186: StreamConfigError,  # stream mirrors can not also schedule messages
    10187: StreamConfigError,  # stream source can not also schedule messages
    10198: StreamConfigError,  # stream mirrors can not also use atomic publishing
}
