"""The error hierarchy.

Everything the library raises derives from `JetStreamError`, so one ``except`` catches it all.
Errors a caller branches on get their own class; every message says what to do next.
"""

from __future__ import annotations

import builtins
from typing import Any

__all__ = [
    "APIError",
    "AuthorizationError",
    "BadObjectMetaError",
    "BadRequestError",
    "BatchPublishError",
    "BatchPublishNotEnabledError",
    "BucketExistsError",
    "BucketFullError",
    "BucketNotFoundError",  # from _not_found (the import at the end)
    "ClusterMemberChangeError",
    "CodecError",  # from _codec_errors (the import at the end)
    "CodecExtraMissingError",  # from _codec_errors (the import at the end)
    "ClientNotPicklableError",  # from _usage_errors (the import at the end)
    "ClusterUnavailableError",
    "ConnectCallbackError",
    "ConnectionClosedError",
    "ConsumerConfigError",
    "ConsumerGroupError",  # from _group_errors (the import at the end)
    "ConsumerGroupExistsError",  # from _group_errors (the import at the end)
    "ConsumerGroupNotFoundError",  # from _group_errors (the import at the end)
    "ConsumerConfigMismatchError",  # noqa: F405 - from _subscribe_errors (the import at the end)
    "ConsumerDeletedError",
    "ConsumerExistsError",
    "ConsumerIsQueueBoundError",  # noqa: F405 - from _subscribe_errors (the import at the end)
    "ConsumerNotFoundError",  # from _not_found (the import at the end)
    "ConsumerNotQueueError",  # noqa: F405 - from _subscribe_errors (the import at the end)
    "ConsumerOfflineError",  # noqa: F405 - from _api_errors (the import at the end)
    "ConsumerPinnedEvent",
    "ConsumerSequenceGapError",
    "CounterError",  # noqa: F405 - from _api_errors (the import at the end)
    "DeliverGroupMismatchError",  # noqa: F405 - from _subscribe_errors (the import at the end)
    "DigestMismatchError",
    "DuplicateMessageInProgressError",  # noqa: F405 - from _api_errors (the import at the end)
    "DuplicateSubscriptionError",  # noqa: F405 - from _subscribe_errors (the import at the end)
    "ExpectedLastSequenceUnavailableError",
    "ExpectedStreamMismatchError",  # noqa: F405 - from _api_errors (the import at the end)
    "FeatureNotSupportedError",
    "ForkedClientError",
    "InvalidAckSubjectError",
    "InvalidArgumentError",
    "InvalidBucketNameError",
    "InvalidKeyError",
    "InvalidServerURLError",  # from _usage_errors (the import at the end)
    "InvalidObjectNameError",
    "InvalidTypeError",
    "IteratorClosedError",
    "JetStreamError",
    "JetStreamNotEnabledError",
    "KeyCodecError",  # from _codec_errors (the import at the end)
    "KeyDeletedError",
    "KeyExistsError",
    "KeyHistoryTooLargeError",
    "KeyNotFoundError",
    "KeyValueConfigError",
    "KeyValueError",
    "KeyWrongLastSequenceError",
    "LameDuckModeEvent",
    "LinkError",
    "LinkIsABucketError",
    "MaxPayloadError",
    "MessageExceedsMaxBytesError",
    "MessageNotFoundError",  # from _not_found (the import at the end)
    "MessageScheduleError",
    "MessageTTLError",  # noqa: F405 - from _api_errors (the import at the end)
    "MessageTooLargeError",
    "MinLastSequenceError",
    "MissedHeartbeatError",
    "NoLinkToDeletedError",
    "NoLinkToLinkError",
    "NoRespondersError",
    "NoServersError",
    "NoStreamResponseError",
    "NotConnectedError",
    "ObjectDeletedError",
    "ObjectExistsError",
    "ObjectNotFoundError",
    "ObjectStoreError",
    "ObjectStoreSealedError",
    "OrderedConsumerInUseError",
    "OrderedConsumerResetError",
    "PermissionViolationError",
    "PinIdMismatchError",
    "ProtocolError",
    "PublishBackpressureError",
    "PullLimitError",
    "PullSubscribeRequiredError",  # noqa: F405 - from _subscribe_errors (the import at the end)
    "PullSubscribeToPushConsumerError",  # noqa: F405 - from _subscribe_errors (the import at the end)
    "PayloadDecodeError",  # from _codec_errors (the import at the end)
    "PayloadEncodeError",  # from _codec_errors (the import at the end)
    "PullWarning",
    "PushConsumerError",
    "PushStatusError",
    "QueueFlowControlError",  # noqa: F405 - from _subscribe_errors (the import at the end)
    "QueueHeartbeatError",  # noqa: F405 - from _subscribe_errors (the import at the end)
    "RequiredApiLevelError",  # noqa: F405 - from _api_errors (the import at the end)
    "ResourceLimitError",  # noqa: F405 - from _api_errors (the import at the end)
    "SlowConsumerError",
    "StaleReadError",  # noqa: F405 - from _api_errors (the import at the end)
    "StreamConfigError",
    "StreamIdentityMismatchError",
    "StreamNameInUseError",
    "StreamNotFoundError",  # from _not_found (the import at the end)
    "StreamOfflineError",  # noqa: F405 - from _api_errors (the import at the end)
    "StreamReconfigureInProgressError",
    "StreamReplacedError",
    "StreamSealedError",  # noqa: F405 - from _api_errors (the import at the end)
    "StreamStoreFailedError",
    "StreamUnavailableError",
    "SubjectMismatchError",  # noqa: F405 - from _subscribe_errors (the import at the end)
    "SubscribeError",  # noqa: F405 - from _subscribe_errors (the import at the end)
    "SubscriptionClosedError",
    "ThreadsDisabledError",
    "TimeoutError",
    "TooManyRequestsError",  # noqa: F405 - from _api_errors (the import at the end)
    "ValueTooLargeError",
    "WrongLastMsgIdError",
    "WrongLastSequenceError",
    "WrongThreadError",
]


class JetStreamError(Exception):
    """Root of every error raised by jetstream_sync."""


class TimeoutError(JetStreamError, builtins.TimeoutError):  # noqa: A001 - deliberately shadows the builtin
    """A blocking call ran out of time. Subclasses the builtin, so ``except TimeoutError`` works too."""


class ConnectionClosedError(JetStreamError):
    """The client was closed; connect again to continue."""

    def __init__(self, message: str = "the client is closed; create a new one with jetstream_sync.connect()") -> None:
        super().__init__(message)


class NoServersError(JetStreamError, ConnectionError):
    """No server could be reached when connecting; check the URL and that the server runs."""


class ConnectCallbackError(JetStreamError):
    """A function given to ``connect()`` that a connection attempt waits for (``token_callback``,
    ``user_info_callback``, ``user_jwt_callback``, ``signature_callback``, ``socket_factory``) raised, returned
    something unusable, or did not return within ``connect_timeout``. That attempt failed (the cause is chained);
    the client tries the next server as for any failed attempt, and reports this to ``error_callback``. Fix the
    function: see the Connecting guide, "Functions a connection attempt waits for"."""


class IteratorClosedError(JetStreamError):
    """The messages() iterator was stopped or drained and holds no more messages."""


class SubscriptionClosedError(JetStreamError):
    """The subscription was unsubscribed or drained and holds no more messages."""


class NotConnectedError(JetStreamError):
    """The connection is down and the operation cannot be buffered until it comes back."""


class ProtocolError(JetStreamError):
    """The server sent something that is not what the NATS protocol or the JetStream API defines.

    A broken or hostile server (or something in between that rewrites traffic): an INFO that is not an object,
    a message larger than the connection's ``max_payload``, a reply whose fields have the wrong types. On the
    connection's read path the client reports it (to ``error_callback``, or logged) and reconnects; a call whose
    reply is malformed raises it, naming what was wrong, and the connection stays usable.
    """


class LameDuckModeEvent(JetStreamError):
    """An event, given to ``error_callback`` (else logged): the server the client is connected to entered lame-duck
    mode (it is shutting down and closes its clients over the next minutes). When the client knows another
    server (given, or announced by the cluster) it moves there itself within a few seconds; otherwise it stays
    until the server closes the connection, then reconnects as usual."""


class ForkedClientError(JetStreamError, RuntimeError):
    """A client was used in a process forked after it connected."""

    def __init__(self) -> None:
        super().__init__(
            "this client was created in a parent process and cannot be used after fork(); "
            "connect a new client in the child (gunicorn post_fork, Celery worker_process_init, "
            "or lazily on first use in the worker)"
        )


class ThreadsDisabledError(JetStreamError, RuntimeError):
    """``connect()`` refused a process whose Python threads do not run between requests (uWSGI before 2.0.27
    without ``--enable-threads``): the client's IO thread would send acks and answer the server only while a
    request runs. The message names the uWSGI version and the flags that fix it (the Deployments guide)."""


class WrongThreadError(JetStreamError, RuntimeError):
    """A method that runs on the IO thread only was called on another thread: a bug of the library, or of code
    that extends it (``jetstream_sync.plumbing``). Raised only while the IO-thread check is on (the test suite's
    pytest plugin, or ``JETSTREAM_SYNC_CHECK_THREADS=1``; docs/ARCHITECTURE.md, "Checked at run time"), and logged
    at ERROR the first time per method, since the caller may be a callback whose exception nobody sees. The
    message names the method and the thread."""

    def __init__(self, method: str, thread: str) -> None:
        super().__init__(
            f"{method} runs on its client's IO thread only, and was called on {thread}: its state has one writer "
            '(docs/ARCHITECTURE.md, "Rules: one writer per piece of state"); post the call to the IO thread '
            "(Runtime.post) instead"
        )
        self.method = method
        self.thread = thread

    def __reduce__(self) -> tuple[type[WrongThreadError], tuple[str, str]]:
        return (type(self), (self.method, self.thread))


class AuthorizationError(JetStreamError):
    """The server rejected the credentials; fix them, retrying will not help."""


class PermissionViolationError(JetStreamError):
    """The server refused a publish or subscribe for lack of permission on the subject."""


class SlowConsumerError(JetStreamError):
    """A subscription's buffer was full and messages were dropped; consume faster or raise its limits."""


class InvalidArgumentError(JetStreamError, ValueError):
    """An argument is invalid; ``field`` names it. Raised before anything is sent."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        super().__init__(f"{field}: {message}")


class InvalidTypeError(JetStreamError, TypeError):
    """An argument has the wrong type; ``field`` names it. Raised before anything is sent."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        super().__init__(f"{field}: {message}")


class MaxPayloadError(InvalidArgumentError):
    """The message is larger than the server's max_payload."""


class InvalidAckSubjectError(JetStreamError, ValueError):
    """A message's reply subject is not a JetStream ack subject, so it has no metadata and cannot be acked."""


class NoRespondersError(JetStreamError):
    """Nobody listens on the subject of a request (status 503)."""


class NoStreamResponseError(NoRespondersError):
    """No stream captured a JetStream publish (503 after retries)."""


class PublishBackpressureError(JetStreamError):
    """Too many asynchronous publishes stayed in flight for longer than the stall timeout."""


class FeatureNotSupportedError(JetStreamError):
    """The connected server is too old for this call (the message names the version it needs)."""

    def __init__(self, feature: str, needed: str, server: str) -> None:
        super().__init__(f"{feature} needs nats-server {needed} or later; this server is {server}")
        self.feature = feature
        self.needed = needed
        self.server = server


class APIError(JetStreamError):
    """The JetStream API answered with an error.

    ``code`` is the HTTP-like status, ``err_code`` the JetStream error code users branch on.
    """

    def __init__(self, code: int, err_code: int, description: str) -> None:
        self.code = code
        self.err_code = err_code
        self.description = description
        super().__init__(f"{description} (code={code}, err_code={err_code})")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.code, self.err_code, self.description))


class JetStreamNotEnabledError(APIError):
    """JetStream is not enabled on the server or for this account."""


class ClusterUnavailableError(APIError):
    """ "JetStream system temporarily unavailable" (err_code 10008): the stream, consumer or meta group that must
    answer has no leader at the moment, as during a cluster election. An idempotent API request is retried
    within its timeout (``nc.jetstream(api_retry=...)``); this is raised when the election outlasts it."""


class StreamReconfigureInProgressError(ClusterUnavailableError):
    """ "stream reconfiguration already in progress" (err_code 10226, nats-server 2.15) or "stream move already in
    progress" (10124): an earlier update or move of the stream is still being applied. It passes by waiting, so an
    idempotent request is retried within its timeout like `ClusterUnavailableError`, then this is raised."""


class ClusterMemberChangeError(ClusterUnavailableError):
    """ "cluster member change is in progress" (err_code 10202, nats-server 2.12+): a peer is being added to or
    removed from the group that must answer. Transient, and retried as an election is."""


class StreamUnavailableError(ClusterUnavailableError):
    """No server of the stream answered a read that any of its replicas may serve (a direct get with no
    responders while the stream exists): its servers are restarting or electing a leader. Retried within the
    call's timeout like `ClusterUnavailableError`; raised when the outage outlasts it."""


class MinLastSequenceError(ClusterUnavailableError):
    """ "min last sequence" (err_code 10180): the server that answered a read had not stored the sequence the read
    asked it to have. nats-server reserves the code for its read-after-write design, which it withdrew before
    2.12 shipped; it is mapped so that a server sending it is understood, and retried like an election."""


class ExpectedLastSequenceUnavailableError(ClusterUnavailableError):
    """ "expected last sequence per subject temporarily unavailable" (err_code 10163): a replicated stream could
    not check a compare-and-set right now (another write to the subject is being replicated). Nothing was stored;
    the write may be sent again, and a KV compare-and-set is, within its timeout."""


class ConsumerConfigError(APIError):
    """The server refused a consumer configuration (a rule it breaks, err_codes 10016 to 10222: e.g. 10220 a flow
    control ack policy without max_ack_pending) or a request it contradicts (10204 a reset, 10160 an unpin)."""


class StreamIdentityMismatchError(APIError):
    """ "consumer's stream identity does not match" (err_code 10225, nats-server 2.15): the consumer was made for
    a stream that has since been deleted and created anew under the same name."""


class StreamNameInUseError(APIError):
    """A stream with this name exists with a different configuration; use update_stream()."""


class ConsumerExistsError(APIError):
    """A consumer with this name exists with a different configuration; use update_consumer()."""


class WrongLastSequenceError(APIError):
    """The expected last sequence of a publish did not match the stream: err_code 10071 ("wrong last sequence:
    N", naming the sequence found) or 10164 ("wrong last sequence", what a replicated stream answers while
    another write to the same subject is in flight). Nothing was stored."""


class MessageTooLargeError(APIError):
    """The stream refused the message as larger than its ``max_msg_size`` (a KV bucket's ``max_value_size``);
    send less, or raise the limit by updating the stream."""


class StreamConfigError(APIError):
    """The server refused a stream configuration: 10052 most often an update of what a stream cannot change once made
    (its storage type, or a bucket's; create a new one and copy the data over), the other codes a rule it breaks
    (mirrors, sources, subject transforms and overlaps, replicas, the account's max_bytes): the description says."""


class StreamStoreFailedError(APIError):
    """The stream could not store the message. With ``discard=new`` (KV buckets, object stores) it is full:
    "maximum bytes/messages exceeded"; remove data or raise the limit by updating the stream."""


class WrongLastMsgIdError(APIError):
    """The expected last message id of a publish did not match the stream."""


class BatchPublishError(APIError):
    """The stream refused a batch (ADR-50 atomic, or 2.14 fast ingest): nothing of an atomic batch was stored.
    ``err_code`` says why (10176 incomplete, 10199 too large, 10201 duplicate message id, 10210 too many
    batches in flight, ...)."""


class BatchPublishNotEnabledError(BatchPublishError):
    """The stream does not take this kind of batch: create or update it with
    ``StreamConfig(allow_atomic_publish=True)`` (atomic batches) or ``allow_batched=True`` (fast ingest)."""


class MessageScheduleError(APIError):
    """The stream refused a message schedule (ADR-51): 10188 the stream does not allow schedules (create or
    update it with ``allow_msg_schedules=True``), 10190 the target is not a subject of this stream, 10189 the
    pattern, 10191 the TTL, 10223 the time zone, ..."""


class PullError(JetStreamError):
    """A pull request ended with a status that ends the fetch or consume."""

    def __init__(self, status: int, description: str, hint: str = "") -> None:
        self.status = status
        self.description = description
        text = f"{status} {description}".strip()
        super().__init__(f"{text}: {hint}" if hint else text)


class BadRequestError(PullError):
    """The server rejected the pull request (400)."""


class ConsumerDeletedError(PullError):
    """The consumer was deleted while messages were being pulled (409 Consumer Deleted)."""


class PushConsumerError(PullError):
    """The consumer is a push consumer; fetch/next/consume need a pull consumer (409)."""


class MessageExceedsMaxBytesError(PullError):
    """409 Message Size Exceeds MaxBytes to a pull that had delivered nothing: the consumer's next message is
    larger than the whole ``max_bytes`` of the fetch or consume (its size as the server counts it: subject,
    reply subject, headers and data). A consumer delivers in order, so no such pull can ever get past that
    message: a fetch raises this, and messages()/consume() end with it (reported once) rather than wait forever.
    Raise ``max_bytes`` above the message's size, or read by message count (``max_messages``)."""

    def __init__(self, status: int, description: str, label: str, max_bytes: int) -> None:
        #: the byte budget the message did not fit in
        self.max_bytes = max_bytes
        super().__init__(
            status,
            description,
            f"{label}: a stored message is larger than max_bytes={max_bytes}, so no pull of this size can deliver "
            "it; raise max_bytes above that message's size, or read by max_messages",
        )


class PullWarning(PullError):
    """A pull was refused by a consumer limit (409 Exceeded MaxWaiting, MaxRequestBatch...); not terminal to a
    consume, which pulls again (with back-off while the consumer holds ``max_waiting`` pulls already)."""


class PullLimitError(PullWarning):
    """A pull asked for more than the consumer allows one request: 409 Exceeded MaxRequestBatch (the consumer's
    ``max_batch``), MaxRequestExpires (``max_expires``) or MaxRequestMaxBytes (``max_bytes``).

    No retry of the same pull can succeed, so ``fetch()`` and ``next()`` raise it at once; ``messages()`` and
    ``consume()`` report it once and fit their pulls within the limit from then on (a consume's options size its
    buffer, not a contract on the size of each pull), or end with it when they cannot (a ``max_expires`` below
    the 1 s a consume's pull needs). ``setting`` is the consumer's field and ``limit`` its value (seconds for
    ``max_expires``; None when the server's text could not be read), ``option`` the read's option and
    ``requested`` what the read asked for; the message says what to change.
    """

    def __init__(
        self,
        status: int,
        description: str,
        *,
        setting: str,
        limit: float | None,
        option: str,
        requested: float,
        hint: str,
    ) -> None:
        #: the consumer's field that bounds each pull: "max_batch", "max_expires" or "max_bytes"
        self.setting = setting
        #: its value (messages, seconds or bytes); None when the 409 did not say it readably
        self.limit = limit
        #: the read's option that asked for more: "max_messages", "expires" or "max_bytes"
        self.option = option
        #: what the read asked for
        self.requested = requested
        super().__init__(status, description, hint)


class PinIdMismatchError(PullWarning):
    """423 on a consumer with a pinned client (ADR-42): this client's pin moved to another (it did not pull
    within ``priority_timeout``, or ``unpin`` was called). The pin is cleared; the next pull competes for it."""


class ConsumerPinnedEvent(JetStreamError):
    """Reported to a consume's error handler when the server pins this client to the consumer's priority group
    (ADR-42): from now on it alone receives that group's messages. Informational, not a failure."""

    def __init__(self, label: str, group: str, pin_id: str) -> None:
        self.group = group
        self.pin_id = pin_id
        super().__init__(f"{label}: pinned to priority group {group!r} (pin id {pin_id})")


class MissedHeartbeatError(JetStreamError):
    """No message, status or heartbeat arrived within twice the idle heartbeat."""


class OrderedConsumerResetError(JetStreamError):
    """An ordered consumer could not recreate its server-side consumer within ``max_reset_attempts``.

    The cause (``__cause__``) is the last failure, e.g. StreamNotFoundError when the stream was deleted.
    """


class StreamReplacedError(OrderedConsumerResetError):
    """The stream an ordered read follows was deleted and created anew under its name while the client was away
    (its creation time changed, or its last sequence is below what was already read).

    Its sequences continue nothing read so far, so reading on "after the last sequence seen" would skip the new
    stream's first messages without a word. With ``on_stream_replaced="restart"`` (the default) the read starts
    over from the new stream's beginning (per its deliver policy) and this is reported to the error handler (and
    logged) as an event; with ``"error"`` the read ends with it.
    """


class OrderedConsumerInUseError(JetStreamError, RuntimeError):
    """An ordered consumer reads in one place at a time: a second fetch, or a fetch while ``messages()`` or
    ``consume()`` runs (as nats.go). Finish or stop the first, or make a second ordered consumer."""


class ConsumerSequenceGapError(JetStreamError):
    """A push consumer saw a gap in its consumer sequence: ``expected`` came as ``received`` (ADR-15 gap
    detection), so messages were lost on the way; an explicit-ack consumer redelivers them after ack_wait."""

    def __init__(self, label: str, expected: int, received: int) -> None:
        self.expected = expected
        self.received = received
        super().__init__(
            f"{label}: consumer sequence gap, expected {expected} and received {received} "
            f"({received - expected} message(s) missing)"
        )


class PushStatusError(JetStreamError):
    """A push consumer received an error status (409, 503 or one this client does not know) instead of a
    message (ADR-15 "Miscellaneous Error Statuses"); it is reported, never handed out as a message."""

    def __init__(self, status: int, description: str, label: str) -> None:
        self.status = status
        self.description = description
        super().__init__(f"{label}: status {status} {description}".rstrip())


class KeyValueError(JetStreamError):
    """Base of the errors a key-value bucket raises."""


class ObjectStoreError(JetStreamError):
    """Base of the errors an object store raises."""


class BucketExistsError(KeyValueError, ObjectStoreError, StreamNameInUseError):
    """A bucket of that name exists with another configuration; use ``update_key_value`` /
    ``update_object_store`` (or the create_or_update form) to change it."""


class InvalidBucketNameError(InvalidArgumentError):
    """A bucket name may hold only letters, digits, ``-`` and ``_``."""


class BucketFullError(KeyValueError, ObjectStoreError, StreamStoreFailedError):
    """The bucket is at its ``max_bytes`` (or its stream's message limits) and refuses new data: delete or
    purge keys or objects, or raise ``max_bytes`` with ``update_key_value`` / ``update_object_store``."""


class ValueTooLargeError(KeyValueError, MessageTooLargeError):
    """The value is larger than the bucket's ``max_value_size``: store less, or raise it with
    ``update_key_value``."""


class KeyValueConfigError(KeyValueError, InvalidArgumentError):
    """A stream exists under the bucket's name but is not a key-value bucket (its subjects or settings differ)."""


class InvalidKeyError(KeyValueError, InvalidArgumentError):
    """The key is empty, has an empty token, starts or ends with ``.``, or holds a character keys may not have.

    Keys may contain letters, digits and ``-/_=.``; watch and keys filters may also use ``*`` and ``>``.
    """


class KeyNotFoundError(KeyValueError):
    """The key has no value: it was never put, or (see `KeyDeletedError`) it was deleted or purged."""


class KeyDeletedError(KeyNotFoundError):
    """The key's latest entry is a delete or purge marker; ``entry`` is that marker (revision, operation)."""

    def __init__(self, message: str, entry: Any = None) -> None:
        super().__init__(message)
        self.entry = entry

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (str(self), self.entry))


class KeyWrongLastSequenceError(KeyValueError, WrongLastSequenceError):
    """A compare-and-set write lost: the key's revision was not the ``last`` one given. Read it again and retry."""


class KeyExistsError(KeyWrongLastSequenceError):
    """``create()`` found a live value under the key; use ``update()`` with its revision to change it."""


class KeyHistoryTooLargeError(KeyValueError, InvalidArgumentError):
    """A bucket keeps at most 64 values per key."""


class ObjectNotFoundError(ObjectStoreError):
    """No object of that name in the bucket: never put, or (see `ObjectDeletedError`) deleted."""


class ObjectDeletedError(ObjectNotFoundError):
    """The object was deleted; ``info`` is its deleted record (``info(name, show_deleted=True)`` returns it)."""

    def __init__(self, message: str, info: Any = None) -> None:
        super().__init__(message)
        self.info = info


class InvalidObjectNameError(ObjectStoreError, InvalidArgumentError):
    """An object name must be a non-empty str of at most 2,048 bytes in UTF-8 (it travels base64-encoded in
    subjects, and nats-server drops a connection whose protocol line passes 4 KiB)."""


class DigestMismatchError(ObjectStoreError):
    """The data read back does not match the SHA-256 digest (or size) its metadata records: a chunk was lost
    or changed in the stream, or the object was replaced or deleted while it was read. Raised by the read
    that reaches the end, after the data was handed out: discard what was read (and read again if replaced)."""


class BadObjectMetaError(ObjectStoreError):
    """An object's stored metadata cannot be decoded or lacks what every client writes (its name and nuid)."""


class ObjectStoreSealedError(ObjectStoreError):
    """The bucket was sealed (``seal()``): it is read-only for good, so puts, deletes, meta updates and links
    fail. Reads, lists and watches go on working."""


class ObjectExistsError(ObjectStoreError):
    """A live object already holds that name: ``update_meta`` cannot rename onto it and ``add_link`` /
    ``add_bucket_link`` cannot replace it (a link of that name can be replaced)."""


class LinkError(ObjectStoreError, InvalidArgumentError):
    """A link cannot be made or followed this way (one of the subclasses says why); ``field`` names the
    argument at fault."""


class NoLinkToDeletedError(LinkError):
    """``add_link`` was given an object that is deleted (or no longer exists): a link points at a live object."""


class NoLinkToLinkError(LinkError):
    """``add_link`` was given a link: link to the object it points at instead (links are one hop)."""


class LinkIsABucketError(LinkError):
    """The name is a link to a whole bucket (``add_bucket_link``), which has no data to ``get``; bind to that
    bucket with ``js.object_store(info.link.bucket)`` instead."""


def api_error(code: int, err_code: int, description: str) -> APIError:
    """Build the most specific APIError for a server error object (the err_code table is in
    ``jetstream_sync/_api_codes.py``, kept apart so this module stays the hierarchy alone)."""
    from ._api_codes import API_ERRORS  # imported on use: it imports this module's classes

    cls = API_ERRORS.get(err_code, APIError)
    return cls(code, err_code, description)


from ._api_errors import *  # noqa: E402, F403 - the classes of newer err_codes, kept there for this module's size
from ._codec_errors import (  # noqa: E402 - typed-payload errors, kept there
    CodecError,
    CodecExtraMissingError,
    KeyCodecError,
    PayloadDecodeError,
    PayloadEncodeError,
)
from ._group_errors import ConsumerGroupError, ConsumerGroupExistsError, ConsumerGroupNotFoundError  # noqa: E402
from ._not_found import (  # noqa: E402
    BucketNotFoundError,
    ConsumerNotFoundError,
    MessageNotFoundError,
    StreamNotFoundError,
)
from ._subscribe_errors import *  # noqa: E402, F403 - the ADR-15 binding errors, kept there for this module's size
from ._usage_errors import ClientNotPicklableError, InvalidServerURLError  # noqa: E402 - set-up errors, kept there
