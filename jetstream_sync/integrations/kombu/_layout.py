"""Where kombu's queues, exchanges and bindings live in JetStream: subjects, consumer names and their configs.

The layout (docs/frameworks/celery.md, "The stream layout", says the same for operators):

- **One stream** (``KOMBU`` by default) captures ``<prefix>.>`` (``kombu.>``) with *interest* retention: a
  message stays while some consumer whose filter matches it has not acked it, and is removed once all have.
  That is AMQP's queue semantics: a message routed to two queues is stored once and read by both; a message no
  queue is bound for is dropped at once (as an AMQP broker drops an unroutable message).
- **A message is published once** to ``<prefix>.<exchange>.<band>.<routing key words>``: the exchange and
  each dot-separated word of the routing key as one subject token (escaped, `token`), ``<band>`` the
  message's priority band. The publisher needs to know nothing about the exchange's type or its bindings.
- **A queue is a durable pull consumer** whose ``filter_subjects`` are its bindings; the server does the
  routing. Direct binding ``K``: the words of ``K``, exactly. Topic binding: ``*`` is NATS's ``*``, a trailing
  ``#`` is ``>`` (plus the prefix alone, since ``#`` also matches no word). Fanout: ``>``. Every queue is also
  bound to the default exchange ``""`` under its own name, as in AMQP.
- **Priorities** (a queue declared with ``max_priority``): one consumer per band (``<queue>~p<band>``), read
  highest band first; a queue without ``max_priority`` has one consumer matching every band (FIFO).

Consumer and subject names allow neither ``.`` nor ``*``, ``>`` or white space, so names are escaped
(``celery.pidbox`` becomes ``celery~2Epidbox``); the raw name is in the consumer's description and metadata.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence

from ... import errors
from ..._protocol import filter_covers

__all__ = [
    "DEFAULT_BAND",
    "Binding",
    "band_of",
    "binding_filters",
    "consumer_name",
    "message_subject",
    "prune_filters",
    "token",
]

#: characters kept as they are in a subject token or a consumer name; everything else is ``~XX`` (UTF-8 bytes)
_SAFE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_@=+,:")
#: consumer names are file names on the server: keep them well under common limits
_MAX_NAME = 200
#: the band of a message without a priority
DEFAULT_BAND = 0


def token(text: str) -> str:
    """``text`` as one subject token (or consumer name): unreserved characters as they are, others ``~XX``
    per UTF-8 byte; the empty string is ``~``. Injective, so two names never share a token."""
    if not text:
        return "~"
    out: list[str] = []
    for char in text:
        if char in _SAFE:
            out.append(char)
        else:
            out.extend(f"~{byte:02X}" for byte in char.encode())
    return "".join(out)


def _words(routing_key: str) -> list[str]:
    return [token(word) for word in routing_key.split(".")]


def band_of(priority: object, steps: Sequence[int]) -> int:
    """The band of a message's ``priority``: the highest of ``steps`` at or below it (kombu's 0-9 scale,
    higher is more urgent, as in AMQP); a missing or unreadable priority is the lowest band."""
    try:
        value = int(priority)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        return steps[0]
    chosen = steps[0]
    for step in steps:
        if step <= value:
            chosen = step
    return chosen


def message_subject(prefix: str, exchange: str, routing_key: str, band: int) -> str:
    """The subject a message for ``exchange`` with ``routing_key`` is published to."""
    return ".".join([prefix, token(exchange), str(band), *_words(routing_key)])


class Binding(tuple[str, str, str]):
    """(exchange, routing key, exchange type): one binding of a queue, as kept in its consumer's metadata."""

    __slots__ = ()

    def __new__(cls, exchange: str, routing_key: str, type_: str) -> Binding:
        return super().__new__(cls, (exchange, routing_key, type_))

    @property
    def exchange(self) -> str:
        return self[0]

    @property
    def routing_key(self) -> str:
        return self[1]

    @property
    def type(self) -> str:
        return self[2]


def binding_filters(prefix: str, binding: Binding, band: str) -> list[str]:
    """The filter subjects of one binding for one band (``"*"`` for a queue without priorities).

    Raises InvalidArgumentError for what subjects cannot express: a ``#`` that is not the last word of a topic
    binding, or a headers exchange."""
    head = [prefix, token(binding.exchange), band]
    if binding.type == "fanout":
        return [".".join([*head, ">"])]
    if binding.type == "direct":
        return [".".join([*head, *_words(binding.routing_key)])]
    if binding.type == "topic":
        words = binding.routing_key.split(".")
        if "#" in words[:-1]:
            raise errors.InvalidArgumentError(
                "routing_key",
                f"topic binding {binding.routing_key!r}: '#' is supported only as the last word "
                "(NATS's '>' matches the rest of a subject)",
            )
        fixed = ["*" if word == "*" else token(word) for word in (words[:-1] if words[-1] == "#" else words)]
        if words[-1] != "#":
            return [".".join([*head, *fixed])]
        if not fixed:
            return [".".join([*head, ">"])]  # '#' alone: every key (each has at least one word)
        return [".".join([*head, *fixed]), ".".join([*head, *fixed, ">"])]
    raise errors.InvalidArgumentError(
        "exchange", f"exchange {binding.exchange!r} of type {binding.type!r}: only direct, topic and fanout exist"
    )


def prune_filters(filters: Iterable[str]) -> list[str]:
    """The filters without duplicates and without those another one covers (a consumer's filters must not
    overlap), in a stable order."""
    unique = sorted(set(filters))
    return [f for f in unique if not any(other != f and filter_covers(other, f) for other in unique)]


def consumer_name(queue: str, band: int | None) -> str:
    """The durable consumer of ``queue`` (of one band of it, for a queue with priorities). Long names end in a
    digest of the queue's name, so that two long names stay two consumers."""
    name = token(queue)
    if len(name) > _MAX_NAME:
        digest = hashlib.sha256(queue.encode()).hexdigest()[:16]
        name = f"{name[: _MAX_NAME - 18]}~h{digest}"
    return name if band is None else f"{name}~p{band}"
