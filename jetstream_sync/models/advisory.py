"""Typed JetStream advisories and metrics: what the server publishes on ``$JS.EVENT.ADVISORY.>`` and
``$JS.EVENT.METRIC.>`` (consumer ack samples, max deliveries, terminated and naked messages, stream and
consumer actions, leader elections).

Decoding trusts the server, as the other models do: a missing field is a default, a kind this client does not
know becomes an :class:`UnknownAdvisory` with the raw JSON, so a newer server never breaks the reader.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import attrs

from .._protocol import seconds
from ._base import parse_time

__all__ = [
    "Advisory",
    "ConsumerAckMetric",
    "ConsumerAction",
    "ConsumerLeaderElected",
    "MaxDeliveriesExceeded",
    "MessageNaked",
    "MessageTerminated",
    "StreamAction",
    "StreamLeaderElected",
    "UnknownAdvisory",
    "parse_advisory",
]


@attrs.frozen(kw_only=True)
class Advisory:
    """What every event has: its ``type`` (e.g. ``io.nats.jetstream.advisory.v1.max_deliver``), ``id``,
    ``timestamp``, the ``subject`` it arrived on, the stream and consumer it is about, and the ``raw`` JSON."""

    type: str
    id: str
    timestamp: datetime | None
    subject: str
    stream: str | None
    consumer: str | None
    raw: dict[str, Any] = attrs.field(repr=False)


@attrs.frozen(kw_only=True)
class ConsumerAckMetric(Advisory):
    """A sampled acknowledgement (the consumer's ``sample_freq``): how long the message took to be acked."""

    consumer_seq: int
    stream_seq: int
    ack_time: float  # seconds from delivery to ack
    deliveries: int
    domain: str | None


@attrs.frozen(kw_only=True)
class MaxDeliveriesExceeded(Advisory):
    """A message reached the consumer's max_deliver and will not be delivered again."""

    stream_seq: int
    deliveries: int


@attrs.frozen(kw_only=True)
class MessageTerminated(Advisory):
    """A message was acknowledged with ``+TERM`` (``msg.term(reason)``)."""

    consumer_seq: int
    stream_seq: int
    deliveries: int
    reason: str


@attrs.frozen(kw_only=True)
class MessageNaked(Advisory):
    """A message was negatively acknowledged (``msg.nak()``)."""

    consumer_seq: int
    stream_seq: int
    deliveries: int


@attrs.frozen(kw_only=True)
class StreamAction(Advisory):
    """A stream was created, updated or deleted: ``action`` is ``create``, ``modify`` or ``delete``."""

    action: str


@attrs.frozen(kw_only=True)
class ConsumerAction(Advisory):
    """A consumer was created or deleted: ``action`` is ``create``, ``modify`` or ``delete``."""

    action: str


@attrs.frozen(kw_only=True)
class StreamLeaderElected(Advisory):
    """A replicated stream elected a leader (``leader`` is the server name)."""

    leader: str
    replicas: list[dict[str, Any]]


@attrs.frozen(kw_only=True)
class ConsumerLeaderElected(Advisory):
    """A replicated consumer elected a leader."""

    leader: str
    replicas: list[dict[str, Any]]


@attrs.frozen(kw_only=True)
class UnknownAdvisory(Advisory):
    """An event of a kind this client does not model (or a payload it could not read): see ``raw``."""


_PREFIX = "io.nats.jetstream."


def _int(raw: dict[str, Any], key: str) -> int:
    value = raw.get(key, 0)
    return value if isinstance(value, int) else 0


def parse_advisory(subject: str, raw: dict[str, Any]) -> Advisory:
    """The typed event for one decoded payload (never raises on the server's content)."""
    kind = str(raw.get("type", ""))
    stamp = raw.get("timestamp")
    common: dict[str, Any] = {
        "type": kind,
        "id": str(raw.get("id", "")),
        "timestamp": parse_time(stamp) if isinstance(stamp, str) else None,
        "subject": subject,
        "stream": raw.get("stream"),
        "consumer": raw.get("consumer"),
        "raw": raw,
    }
    name = kind[len(_PREFIX) :] if kind.startswith(_PREFIX) else ""
    seqs: dict[str, Any] = {"consumer_seq": _int(raw, "consumer_seq"), "stream_seq": _int(raw, "stream_seq")}
    if name == "metric.v1.consumer_ack":
        return ConsumerAckMetric(
            **common,
            **seqs,
            ack_time=seconds(_int(raw, "ack_time")),
            deliveries=_int(raw, "deliveries"),
            domain=raw.get("domain") or None,
        )
    if name == "advisory.v1.max_deliver":
        return MaxDeliveriesExceeded(**common, stream_seq=seqs["stream_seq"], deliveries=_int(raw, "deliveries"))
    if name == "advisory.v1.terminated":
        return MessageTerminated(
            **common, **seqs, deliveries=_int(raw, "deliveries"), reason=str(raw.get("reason", ""))
        )
    if name == "advisory.v1.nak":
        return MessageNaked(**common, **seqs, deliveries=_int(raw, "deliveries"))
    if name == "advisory.v1.stream_action":
        return StreamAction(**common, action=str(raw.get("action", "")))
    if name == "advisory.v1.consumer_action":
        return ConsumerAction(**common, action=str(raw.get("action", "")))
    if name in ("advisory.v1.stream_leader_elected", "advisory.v1.consumer_leader_elected"):
        cls = StreamLeaderElected if "stream_leader" in name else ConsumerLeaderElected
        replicas = raw.get("replicas")
        return cls(**common, leader=str(raw.get("leader", "")), replicas=replicas if isinstance(replicas, list) else [])
    return UnknownAdvisory(**common)
