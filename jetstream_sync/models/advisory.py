"""Typed JetStream advisories and metrics: the events nats-server publishes on ``$JS.EVENT.ADVISORY.>`` and
``$JS.EVENT.METRIC.>`` (nats-server ``server/jetstream_events.go``).

Every event is a frozen model on ``_base``: the server's JSON names are the field names (``ack_time`` and the
other nanosecond durations become float seconds, times become aware datetimes), keys we do not model land in
``extra``, and decoding trusts the server like every other model (no validation, a missing key takes the Go
zero value, an enum value from a newer server stays a ``str``). Two fields are not in the payload: ``subject``
(where the event arrived, which the reader knows and the payload does not always say) and ``raw`` (the decoded
JSON, so nothing the server sent is lost even when a field is not modelled).

The ``type`` field picks the class. A type this client does not model, or a payload that is not a JSON object,
becomes an [`UnknownAdvisory`][jetstream_sync.models.UnknownAdvisory] rather than an error: a newer server, or a stray
publish on ``$JS.EVENT``, must never break a reader. [`AdvisoryKind`][jetstream_sync.models.AdvisoryKind] names the
kinds a reader can ask for (``js.advisories(kinds=)``).
"""

from __future__ import annotations

import builtins
import enum
import json
import logging
from collections.abc import Mapping
from datetime import datetime
from typing import Any, TypeVar

import attrs

from ._base import _meta, _Model, from_wire, to_wire
from .cluster import PeerInfo

__all__ = [
    "APIAudit",
    "Advisory",
    "AdvisoryAction",
    "AdvisoryKind",
    "ConsumerAckMetric",
    "ConsumerAction",
    "ConsumerLeaderElected",
    "ConsumerPaused",
    "MaxDeliveriesExceeded",
    "MessageNaked",
    "MessageTerminated",
    "StreamAction",
    "StreamLeaderElected",
    "UnknownAdvisory",
    "parse_advisory",
]

_log = logging.getLogger("jetstream_sync")

# Wire names for the fields that are not in the payload. Go's JSON keys are identifiers, so a name in
# parentheses can never collide with one (an audit event has its own "subject" key, the API subject); the
# decoder passes these in beside the payload so from_wire fills them like any other field.
_SUBJECT = "(subject)"
_RAW = "(raw)"
_PAYLOAD = "(payload)"
_LOCAL = (_SUBJECT, _RAW, _PAYLOAD)


class AdvisoryKind(enum.Enum):
    """The kinds ``js.advisories(kinds=...)`` accepts (the enum or its value); each is one event class."""

    CONSUMER_ACK = "consumer_ack"
    MAX_DELIVER = "max_deliver"
    TERMINATED = "terminated"
    NAK = "nak"
    STREAM_ACTION = "stream_action"
    CONSUMER_ACTION = "consumer_action"
    STREAM_LEADER_ELECTED = "stream_leader_elected"
    CONSUMER_LEADER_ELECTED = "consumer_leader_elected"
    CONSUMER_PAUSE = "consumer_pause"
    API_AUDIT = "api_audit"


class AdvisoryAction(enum.Enum):
    """What happened to a stream or consumer. The values are the server's; the names follow the subjects
    (``...STREAM.CREATED``, ``DELETED``, ``UPDATED``): an update arrives as ``"modify"``."""

    CREATED = "create"
    DELETED = "delete"
    UPDATED = "modify"


_A = TypeVar("_A", bound="Advisory")


@attrs.frozen(kw_only=True)
class Advisory(_Model):
    """What every event has: its ``type`` (e.g. ``io.nats.jetstream.advisory.v1.max_deliver``), ``id``,
    ``timestamp``, the JetStream ``domain`` of the server that sent it (None without one), the ``subject`` it
    arrived on, and the whole decoded payload as ``raw``."""

    type: str = ""
    id: str = ""
    timestamp: datetime | None = attrs.field(default=None, metadata=_meta("datetime"))
    domain: str | None = None
    subject: str = attrs.field(default="", metadata=_meta(wire=_SUBJECT))
    raw: dict[str, Any] = attrs.field(factory=dict, repr=False, eq=False, metadata=_meta(wire=_RAW))

    @classmethod
    def from_json(cls: builtins.type[_A], data: Mapping[str, Any], subject: str = "") -> _A:
        """Decode one payload (already parsed JSON) that arrived on ``subject``; trusts the server."""
        # builtins.type: inside the class body, ``type`` is the event's field
        return from_wire(cls, {**data, _SUBJECT: subject, _RAW: dict(data)})

    def to_json(self) -> dict[str, Any]:
        """The payload as the server sent it; for an event built in code, its fields in the server's form."""
        if self.raw:
            return dict(self.raw)
        out = to_wire(self)
        for key in _LOCAL:
            out.pop(key, None)
        return out


@attrs.frozen(kw_only=True)
class ConsumerAckMetric(Advisory):
    """A sampled acknowledgement (only for consumers with ``sample_freq``): how long the message waited
    between delivery and ack (``ack_time``, seconds) and how many times it was delivered."""

    stream: str = ""
    consumer: str = ""
    consumer_seq: int = 0
    stream_seq: int = 0
    ack_time: float = attrs.field(default=0.0, metadata=_meta("duration"))
    deliveries: int = 0


@attrs.frozen(kw_only=True)
class MaxDeliveriesExceeded(Advisory):
    """A message reached the consumer's ``max_deliver`` and will not be delivered again: the usual hook for
    dead-letter handling (read it back by ``stream_seq``)."""

    stream: str = ""
    consumer: str = ""
    stream_seq: int = 0
    deliveries: int = 0


@attrs.frozen(kw_only=True)
class MessageTerminated(Advisory):
    """A message was acknowledged with ``+TERM`` (``msg.term(reason)``); ``reason`` is "" when none was given."""

    stream: str = ""
    consumer: str = ""
    consumer_seq: int = 0
    stream_seq: int = 0
    deliveries: int = 0
    reason: str = ""


@attrs.frozen(kw_only=True)
class MessageNaked(Advisory):
    """A message was negatively acknowledged (``msg.nak()``) and will be redelivered (max_deliver permitting)."""

    stream: str = ""
    consumer: str = ""
    consumer_seq: int = 0
    stream_seq: int = 0
    deliveries: int = 0


@attrs.frozen(kw_only=True)
class StreamAction(Advisory):
    """A stream was created, updated or deleted (see [`AdvisoryAction`][jetstream_sync.models.AdvisoryAction])."""

    stream: str = ""
    action: AdvisoryAction | str = attrs.field(
        default=AdvisoryAction.CREATED, metadata=_meta("enum", enum_type=AdvisoryAction)
    )


@attrs.frozen(kw_only=True)
class ConsumerAction(Advisory):
    """A consumer was created or deleted (nats-server sends no advisory for a consumer update)."""

    stream: str = ""
    consumer: str = ""
    action: AdvisoryAction | str = attrs.field(
        default=AdvisoryAction.CREATED, metadata=_meta("enum", enum_type=AdvisoryAction)
    )


@attrs.frozen(kw_only=True)
class StreamLeaderElected(Advisory):
    """A clustered stream elected a leader (the server's name); ``replicas`` are its followers, as in
    [`ClusterInfo`][jetstream_sync.models.ClusterInfo]. Only clustered JetStream sends it: a stream on a single,
    non-clustered server has no election."""

    stream: str = ""
    leader: str = ""
    replicas: list[PeerInfo] = attrs.field(factory=list, metadata=_meta("models", model=PeerInfo))
    account: str | None = None


@attrs.frozen(kw_only=True)
class ConsumerLeaderElected(Advisory):
    """A clustered consumer elected a leader (clustered JetStream only, as
    [`StreamLeaderElected`][jetstream_sync.models.StreamLeaderElected])."""

    stream: str = ""
    consumer: str = ""
    leader: str = ""
    replicas: list[PeerInfo] = attrs.field(factory=list, metadata=_meta("models", model=PeerInfo))
    account: str | None = None


@attrs.frozen(kw_only=True)
class ConsumerPaused(Advisory):
    """A consumer was paused until ``pause_until``, or resumed (``paused`` False: by request or at the deadline)."""

    stream: str = ""
    consumer: str = ""
    paused: bool = False
    pause_until: datetime | None = attrs.field(default=None, metadata=_meta("datetime"))


@attrs.frozen(kw_only=True)
class APIAudit(Advisory):
    """One JetStream API call answered by the server: its ``api_subject``, the ``request`` and ``response``
    bodies (JSON text), the ``server`` that answered and the calling ``client`` (the server's client-info)."""

    server: str = ""
    client: dict[str, Any] | None = None
    api_subject: str = attrs.field(default="", metadata=_meta(wire="subject"))
    request: str = ""
    response: str = ""


@attrs.frozen(kw_only=True)
class UnknownAdvisory(Advisory):
    """An event of a type this client does not model: read ``raw``. When the payload was not a JSON object at
    all, ``raw`` is empty and ``payload`` holds the bytes as they came."""

    payload: bytes = attrs.field(default=b"", repr=False, metadata=_meta(wire=_PAYLOAD))


_PREFIX = "io.nats.jetstream."

#: the event class of each kind, and the ``type`` its payload carries
KIND_CLASSES: Mapping[AdvisoryKind, type[Advisory]] = {
    AdvisoryKind.CONSUMER_ACK: ConsumerAckMetric,
    AdvisoryKind.MAX_DELIVER: MaxDeliveriesExceeded,
    AdvisoryKind.TERMINATED: MessageTerminated,
    AdvisoryKind.NAK: MessageNaked,
    AdvisoryKind.STREAM_ACTION: StreamAction,
    AdvisoryKind.CONSUMER_ACTION: ConsumerAction,
    AdvisoryKind.STREAM_LEADER_ELECTED: StreamLeaderElected,
    AdvisoryKind.CONSUMER_LEADER_ELECTED: ConsumerLeaderElected,
    AdvisoryKind.CONSUMER_PAUSE: ConsumerPaused,
    AdvisoryKind.API_AUDIT: APIAudit,
}
KIND_TYPES: Mapping[AdvisoryKind, str] = {
    kind: _PREFIX + ("metric.v1." if kind is AdvisoryKind.CONSUMER_ACK else "advisory.v1.") + kind.value
    for kind in AdvisoryKind
}
_BY_TYPE: dict[str, type[Advisory]] = {KIND_TYPES[kind]: cls for kind, cls in KIND_CLASSES.items()}


def _unreadable(subject: str, data: bytes, why: str) -> UnknownAdvisory:
    _log.debug("advisory on %s %s; passing it on as UnknownAdvisory: %r", subject, why, data[:200])
    return UnknownAdvisory(subject=subject, payload=bytes(data))


def parse_advisory(subject: str, data: bytes) -> Advisory:
    """The typed event for one message on ``$JS.EVENT``. Never raises: whatever cannot be read as its type
    (not JSON, not an object, a field of an unexpected shape) comes back as an
    [`UnknownAdvisory`][jetstream_sync.models.UnknownAdvisory]."""
    try:
        payload = json.loads(data)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return _unreadable(subject, data, "is not JSON")
    if not isinstance(payload, dict):
        return _unreadable(subject, data, "is not a JSON object")
    kind = payload.get("type")
    cls = _BY_TYPE.get(kind, UnknownAdvisory) if isinstance(kind, str) else UnknownAdvisory
    try:
        return cls.from_json(payload, subject)
    except Exception:  # a field of a shape the model cannot take: keep the event, as raw JSON
        _log.debug("advisory on %s does not decode as %s", subject, cls.__name__, exc_info=True)
    try:
        return UnknownAdvisory.from_json(payload, subject)
    except Exception:
        return UnknownAdvisory(subject=subject, raw=payload, payload=bytes(data))
