"""The streaming source's offset: which stream, which incarnation of it, and the next sequence to read.

Spark keeps offsets in the query's checkpoint as JSON and hands them back to the source to plan and to replay
micro-batches, so the offset alone must say what a batch reads, whatever Spark asks again later:

* ``seq``: the next stream sequence to read (a batch ``start..end`` reads ``start.seq .. end.seq - 1``);
* ``created``: when the stream was created. A stream deleted and made again under the same name numbers its
  messages from 1 again; sequences of the old one mean nothing in the new one, so an offset from another
  incarnation is data loss, never a position (see [`StreamRecreatedError`][jetstream_sync.spark.StreamRecreatedError]);
* ``from`` (end offsets only): the sequence the batch was planned to start at. Spark asks a new query's
  initial offset again when it runs batch 0, and again after a driver restart; with ``latest`` each answer is
  the stream's end at that moment. The batch reads from ``from``, so what was planned is what is read.

Checkpoints written before ``created`` and ``from`` existed (``{"stream", "seq"}``) still load: the first
check adopts the stream as it is then, and a batch without ``from`` starts at its start offset.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import attrs

from ... import errors
from ...models import StreamInfo

__all__ = ["StreamOffset", "StreamRecreatedError", "incarnation"]


def incarnation(info: StreamInfo) -> str:
    """The stream's creation time as the offsets write it (ISO 8601, UTC): what tells two streams of one name
    apart."""
    return info.created.isoformat()


class StreamRecreatedError(errors.JetStreamError):
    """The stream was deleted and created again under the query's checkpoint: the checkpoint's sequences
    belong to the old stream, whose messages are gone. Raised when ``failOnDataLoss`` is true (the default)."""

    def __init__(self, stream: str, checkpoint_created: str, stream_created: str) -> None:
        self.stream = stream
        self.checkpoint_created = checkpoint_created
        self.stream_created = stream_created
        super().__init__(
            f"stream {stream!r} was deleted and created again: the query's checkpoint is for the stream created "
            f"at {checkpoint_created}, the stream now was created at {stream_created}, and the old stream's "
            "unread messages are gone. Start the query with a new checkpointLocation, or set the option "
            "failOnDataLoss=false to go on from the new stream's first sequence"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.stream, self.checkpoint_created, self.stream_created))


def _unreadable(which: str, offset: object, why: str) -> errors.JetStreamError:
    return errors.JetStreamError(
        f"unreadable {which} offset in the checkpoint ({why}): {offset!r}; the checkpoint was not written by "
        "this source, or was edited"
    )


@attrs.frozen
class StreamOffset:
    """A position in one incarnation of a stream (see the module docstring). Immutable and JSON-friendly."""

    stream: str
    seq: int
    created: str | None = None
    planned_from: int | None = None

    def to_json(self) -> dict[str, Any]:
        """The dict Spark stores in the checkpoint (it compares offsets by their JSON)."""
        out: dict[str, Any] = {"stream": self.stream, "seq": self.seq}
        if self.created is not None:
            out["created"] = self.created
        if self.planned_from is not None:
            out["from"] = self.planned_from
        return out

    @classmethod
    def from_json(cls, offset: object, which: str, stream: str) -> StreamOffset:
        """Check an offset Spark hands back; ``stream`` is the stream this query reads."""
        if not isinstance(offset, dict):
            raise _unreadable(which, offset, "not an object")
        name = offset.get("stream")
        if name != stream:
            raise errors.InvalidArgumentError(
                "stream",
                f"the checkpoint's {which} offset is for stream {name!r}, this query reads {stream!r}; "
                "use a new checkpointLocation to read another stream",
            )
        seq = _sequence(offset.get("seq"))
        if seq is None:
            raise _unreadable(which, offset, "seq must be a sequence >= 1")
        created = offset.get("created")
        if created is not None and not _is_time(created):
            raise _unreadable(which, offset, "created must be an ISO 8601 time")
        planned_from = offset.get("from")
        if planned_from is not None:
            planned_from = _sequence(planned_from)
            if planned_from is None or planned_from > seq:
                raise _unreadable(which, offset, "from must be a sequence >= 1 and <= seq")
        return cls(stream, seq, created, planned_from)

    @property
    def start(self) -> int:
        """Where a batch ending at this offset starts, when it says (``from``); else where it ends."""
        return self.seq if self.planned_from is None else self.planned_from


def _sequence(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        return None
    return value


def _is_time(value: object) -> bool:
    if not isinstance(value, str):
        return False
    try:
        datetime.fromisoformat(value)
    except ValueError:
        return False
    return True
