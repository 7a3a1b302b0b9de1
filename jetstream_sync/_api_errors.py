"""The APIError classes of nats-server's newer err_codes (2.11 to 2.15), part of
[`jetstream_sync.errors`][jetstream_sync.errors].

They live here only so that errors.py stays under 700 lines: errors.py imports them all (and lists them in its
``__all__``), so ``errors.StreamSealedError`` is the name to use; each class reports that module as its own.
The err_code table that raises them is in ``_api_codes.py``.
"""

from __future__ import annotations

from .errors import (
    APIError,
    ClusterUnavailableError,
    FeatureNotSupportedError,
    JetStreamError,
    PublishBackpressureError,
)

__all__ = [
    "ConsumerOfflineError",
    "CounterError",
    "DuplicateMessageInProgressError",
    "ExpectedStreamMismatchError",
    "MessageTTLError",
    "RequiredApiLevelError",
    "ResourceLimitError",
    "StaleReadError",
    "StreamOfflineError",
    "StreamSealedError",
    "TooManyRequestsError",
]


class StreamOfflineError(APIError):
    """The stream exists but no server runs it: "stream is offline" (err_code 10118, every server that holds it
    is down) or "stream is offline: <reason>" (10194, the server cannot run it, e.g. "unsupported - required API
    level" for a stream made by a newer nats-server). Its data is kept; it is back when its servers are (10118)
    or are upgraded (10194). Not retried like an election: servers down or too old seldom return within a call."""


class ConsumerOfflineError(APIError):
    """The consumer exists but no server runs it: "consumer is offline" (err_code 10119, its servers are down)
    or "consumer is offline: <reason>" (10195, the server cannot run it, e.g. one made by a newer nats-server).
    Its state is kept; it is back when its servers are (10119) or are upgraded (10195)."""


class StreamSealedError(APIError):
    """ "invalid operation on sealed stream" (err_code 10109): the stream was sealed (``sealed=True``), which is
    for good: it refuses publishes, message deletes and purges, and reads go on. Write to another stream. (An
    object store raises [`ObjectStoreSealedError`][jetstream_sync.errors.ObjectStoreSealedError] for its sealed
    buckets.)"""


class ResourceLimitError(APIError):
    """JetStream has no room for what was asked: the account's limits (10002 "resource limits exceeded for
    account", 10027 streams, 10120 no limits for this replica count's tier, 10053 any other), a count limit
    (10026 consumers: the account's, or the stream's ``max_consumers``) or the server's room (10023 "insufficient
    resources", 10028 memory, 10047 storage: for a stream, its ``max_bytes`` cannot be reserved). Sending it
    again will not help: remove data, streams or consumers, ask for less, or raise the limits."""


class MessageTTLError(APIError):
    """The stream refused a message's TTL (ADR-43): 10166 "per-message TTL is disabled" (create or update the
    stream with ``allow_msg_ttl=True``), 10165 "invalid per-message TTL". Nothing was stored."""


class CounterError(APIError):
    """The stream refused a counter write (ADR-49): 10168 it does not allow counters (``allow_msg_counter``),
    10169 a publish without an increment to a counter stream (write with ``js.counter(stream).add()``), 10170
    an increment with a payload, 10171 an invalid increment (or one combined with an ``expected_*`` check or a
    rollup), 10172 the subject's last message is not a counter value. Nothing was stored."""


class DuplicateMessageInProgressError(ClusterUnavailableError):
    """ "duplicate message id is in process" (err_code 10158, status 409): a replicated stream is storing a
    message with the same ``msg_id`` right now (another producer's, or an earlier attempt of this publish whose
    answer was lost) and cannot yet say at which sequence. Transient like
    [`ClusterUnavailableError`][jetstream_sync.errors.ClusterUnavailableError], and safe to resend as is: once stored,
    the same ``msg_id`` is answered with ``duplicate=True`` and its sequence (or stored, if that attempt failed).
    Nothing was stored by this publish."""


class TooManyRequestsError(APIError, PublishBackpressureError):
    """ "too many requests" (err_code 10167, status 429): the stream's inbound queue was full and it dropped the
    message unstored. Back-pressure from the server, so also a
    [`PublishBackpressureError`][jetstream_sync.errors.PublishBackpressureError]: slow down, and send it again after a
    pause (with a ``msg_id`` the resend cannot be stored twice)."""


class RequiredApiLevelError(APIError, FeatureNotSupportedError):
    """ "JetStream minimum api level required" (err_code 10185, status 412): the request carried a
    ``Nats-Required-Api-Level`` header (ADR-44) above the answering server's level and was refused unprocessed.
    Also a [`FeatureNotSupportedError`][jetstream_sync.errors.FeatureNotSupportedError], like the client's own version
    checks: upgrade the server. The server does not say the levels, so ``needed`` and ``server`` are empty."""

    def __init__(self, code: int, err_code: int, description: str) -> None:
        # APIError's attributes, and FeatureNotSupportedError's; neither __init__ can call the other's.
        self.code, self.err_code, self.description = code, err_code, description
        self.feature, self.needed, self.server = "a required JetStream API level", "", ""
        JetStreamError.__init__(self, f"{description} (code={code}, err_code={err_code})")


class ExpectedStreamMismatchError(APIError):
    """ "expected stream does not match" (err_code 10060): a publish with ``expected_stream`` reached another
    stream (its subject is captured by that one). Nothing was stored; check which stream holds the subject."""


class StaleReadError(ClusterUnavailableError):
    """The stream leader answered a read with an older revision of a key than this client has already written or
    read there: a deposed leader, cut off by a network partition, answering before it notices (it steps down once
    it misses its quorum). Retried within the read's timeout like an election; raised when it outlasts it."""


for _name in __all__:  # tracebacks and pickles name the public module
    globals()[_name].__module__ = "jetstream_sync.errors"
