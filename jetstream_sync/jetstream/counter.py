"""Distributed counters (ADR-49, nats-server 2.12+).

A stream created with ``allow_msg_counter`` keeps, per subject, the running total of the increments published
to it: the server does the adding, so any number of writers (and sourced streams, whose totals it aggregates)
never lose an update. A publish carries its increment in the ``Nats-Incr`` header and no payload; the PubAck
answers with the new total, and the last message on a subject holds it as ``{"val": "<decimal>"}``. Totals are
arbitrary-precision integers on the server, and Python ints here.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

from .. import errors
from .._runtime import ProcessLocal
from .direct import direct_get_last_raw

if TYPE_CHECKING:
    from .streams import Stream

__all__ = ["Counter"]


def _total(data: bytes, subject: str) -> int:
    """The total a counter message holds."""
    try:
        return int(json.loads(data)["val"])
    except (ValueError, KeyError, TypeError):
        raise errors.JetStreamError(f"the message on {subject!r} is not a counter value: {data[:100]!r}") from None


class Counter(ProcessLocal):
    """The counters of one stream with ``allow_msg_counter``; made by ``js.counter(stream)``. Thread-safe."""

    def __init__(self, stream: Stream) -> None:
        self.stream = stream
        self._js = stream.jetstream

    @property
    def name(self) -> str:
        """The name of the counter stream."""
        return self.stream.name

    def __repr__(self) -> str:
        return f"<Counter {self.name!r}>"

    def add(self, subject: str, delta: int) -> int:
        """Add ``delta`` (negative to subtract, 0 to read the total through the stream's leader) to the
        counter on ``subject``; returns its total after this increment."""
        if isinstance(delta, bool) or not isinstance(delta, int):
            raise errors.InvalidTypeError("delta", f"must be an int, got {type(delta).__name__}")
        ack = self._js.publish(subject, b"", headers={"Nats-Incr": f"{delta:+d}"})
        if ack.value is None:
            raise errors.JetStreamError(f"stream {ack.stream!r} did not answer with a counter value")
        return int(ack.value)

    def load(self, subject: str) -> int:
        """The total on ``subject`` now; MessageNotFoundError when it was never incremented."""
        return _total(self.stream.get_last_msg(subject).data, subject)

    def get_many(self, subjects: Sequence[str]) -> dict[str, int]:
        """The totals on every subject matching ``subjects`` (wildcards allowed), read at one moment (ADR-31
        multi-last; the stream needs ``allow_direct``). Subjects never incremented are absent."""
        return {m.subject: _total(m.data, m.subject) for m in direct_get_last_raw(self.stream, subjects)}
