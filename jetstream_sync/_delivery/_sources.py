"""The contract between the delivery engines and the handles that read them.

A handle ([`MessageBatch`][jetstream_sync.MessageBatch], [`MessagesIterator`][jetstream_sync.MessagesIterator],
[`ConsumeContext`][jetstream_sync.ConsumeContext], user-thread code in ``jetstream/consumers/``) reads a
[`BatchSource`][jetstream_sync.BatchSource] (one bounded delivery: a fetch) or a
[`DeliverySource`][jetstream_sync.DeliverySource] (an unbounded one, kept filled until stopped), and knows nothing
of how the messages are asked for. Every engine of this layer implements one of the two: the continuous pull, the
push engine and their ordered variants are delivery sources; fetch and ``ack_next`` pulls are batch sources. So a
new kind of consumer reuses the handles unchanged. See docs/ARCHITECTURE.md, "The delivery layer".
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol

import attrs

from ..message import Msg

__all__ = ["BatchSource", "ConsumeStats", "DeliverySource"]


@attrs.frozen(kw_only=True)
class ConsumeStats:
    """A snapshot of one consume's counters."""

    pulls_sent: int
    messages_delivered: int
    bytes_delivered: int
    pending_messages: int
    pending_bytes: int
    buffered: int
    heartbeats_missed: int
    reconnect_pulls: int
    warnings: int
    statuses: dict[int, int]
    #: ordered consumers: how many times the server-side consumer was recreated, and why
    resets: int = 0
    reset_reasons: dict[str, int] = attrs.field(factory=dict)
    #: push consumers: messages dropped over the buffer limits, gaps detected, flow-control requests received
    #: and flow-control answers sent (on the request, and again when a heartbeat says the answer was lost)
    dropped: int = 0
    gaps: int = 0
    flow_control_requests: int = 0
    flow_control_answered: int = 0


class BatchSource(Protocol):
    """One bounded delivery (a fetch): it ends by itself when complete, expired or failed."""

    @property
    def label(self) -> str:
        """``stream/consumer``, for messages and repr."""

    @property
    def received(self) -> int:
        """Messages received so far (handed out or not)."""

    def take(self, timeout: float) -> Msg:
        """The next message within ``timeout``. Raises BufferFinished when the delivery ended cleanly,
        TimeoutError when nothing came in time, or the JetStreamError that ended it."""

    def cancel(self) -> None:
        """Any thread, also a garbage collector's: the reader is done (deadline passed, error raised, batch
        closed or dropped); end the delivery and give back what it will not hand out. Cheap when finished."""


class DeliverySource(Protocol):
    """An unbounded delivery, kept filled until stopped or drained (messages(), consume())."""

    @property
    def label(self) -> str:
        """``stream/consumer``, for messages, thread names and repr."""

    @property
    def halted(self) -> bool:
        """stop() or client close: buffered messages must not be delivered any more."""

    @property
    def closed(self) -> bool:
        """Stopped or draining: no new pulls."""

    def take_into(self, held: deque[Msg], limit: int, timeout: float | None) -> None:
        """Move up to ``limit`` messages into ``held`` (the reader's burst, registered with
        [`hold`][jetstream_sync.DeliverySource.hold]), waiting at most ``timeout`` for the first (None: until one
        comes). Raises BufferFinished at a clean end, TimeoutError, or the JetStreamError that ended the delivery."""

    def hold(self, surrender: Callable[[], Iterable[Msg]]) -> None:
        """Any thread: a reader's hold on messages it took and has not handed out (its burst, a worker pool's
        queue). When the delivery is aborted (``stop()``, the client closing) the source gives back what
        ``surrender`` gives up with its own buffer, before the connection closes; ``surrender`` must not
        block (it runs on the closing thread while the reader may be waiting in
        [`take_into`][jetstream_sync.DeliverySource.take_into])."""

    def handed_out(self, msg: Msg) -> None:
        """The reader hands ``msg`` to the user now: it counts as processed for flow control."""

    def handed_out_many(self, msgs: Sequence[Msg]) -> None:
        """As [`handed_out`][jetstream_sync.DeliverySource.handed_out] for a whole list at once (the last one is the
        newest); not empty."""

    def give_back(self, msgs: Sequence[Msg]) -> None:
        """Any thread: ``msgs`` were taken from the source and will not reach the user (the reader stopped):
        nak those that await an ack, so the server redelivers them now rather than after their ack wait."""

    def report(self, exc: BaseException) -> None:
        """Hand an asynchronous error to the user's error handler (or the log)."""

    def adopt_thread(self, thread: threading.Thread) -> None:
        """A thread that runs user code for this delivery; closing the client joins it."""

    def stop(self) -> None:
        """Stop at once: no new pulls, and what is buffered is not handed out."""

    def drain(self) -> None:
        """Stop pulling, but hand out what is buffered first."""

    def stats(self) -> ConsumeStats:
        """A snapshot of the source's counters."""
