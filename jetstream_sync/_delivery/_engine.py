"""`DeliveryEngine`: the lifecycle and the accounting every unbounded delivery shares, written once.

An unbounded delivery (a [`DeliverySource`][jetstream_sync.DeliverySource]: ``messages()``, ``consume()``,
``js.subscribe``) is one engine. What differs between kinds is only how messages are asked for and how the
server's statuses are read: the *feed*. The continuous pull (``_pull.py``) asks with ADR-37 pull requests and
reads pending counts; the push engine (``_push.py``) is fed on a deliver subject and answers flow control. What
they share is here: the bounded buffer the handles read, the hand-out counters (IO thread counts what arrived,
the user side what it handed out), the three end states (``stopped``: no more asking; ``halted``: stop() or
client close, buffered messages are given back; ``draining``: no more asking, the buffer is still handed out),
start and drain, connection events, the heartbeat monitor's wiring, the health snapshot and the common part of
the stats. Ordering is one more layer over any feed (``_ordering.py``).

Threads: a method marked ``@io_thread`` runs on the client's IO thread and is the only writer of the IO-thread
counters; ``handed_out`` and the other [`DeliverySource`][jetstream_sync.DeliverySource] members run on the
reading (user) thread; ``stop``, ``drain``, ``fill`` and ``stats`` on any thread (docs/ARCHITECTURE.md, "Rules:
one writer per piece of state").
"""

from __future__ import annotations

import abc
import threading
from collections import Counter, deque
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Sequence
from typing import Any, ClassVar

from .._runtime import MessageBuffer, Runtime, io_thread
from .._telemetry import note_heartbeat_missed
from ..health import ConsumeFill
from ..message import Msg
from ._acks import ConsumerAcks
from ._heartbeat import HeartbeatMonitor
from ._sources import ConsumeStats

__all__ = ["DeliveryEngine", "Engine"]


class Engine:
    """What every engine of this layer has, bounded or not: its client's runtime, the acks its messages go
    through, the buffer its reader takes from, and the statuses it received."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.acks = ConsumerAcks(runtime)  # what the messages ack through (and ack_next pulls with)
        self.buffer: MessageBuffer[Msg] = runtime.new_buffer()
        self.statuses: Counter[int] = Counter()  # IO thread


class DeliveryEngine(Engine, abc.ABC):
    """The common part of the unbounded delivery engines (a [`DeliverySource`][jetstream_sync.DeliverySource]).

    A feed subclasses it and supplies ``_start`` (subscribe and ask, on the IO thread), ``_drain`` (end the
    asking, keep handing out), ``_count_handed_out`` (what a hand-out means for asking more), ``give_back``,
    ``_bounds`` (what ``fill`` measures against), ``stats`` and ``label``; it builds ``self.heartbeat`` once its
    own state exists, since the monitor reads it through ``_owes_us``.
    """

    #: the name of the start in a timeout's message ("consume", "subscribe")
    _starting: ClassVar[str]
    #: the health snapshot's kind ("pull", "push")
    _kind: ClassVar[str]

    heartbeat: HeartbeatMonitor

    def __init__(self, runtime: Runtime, *, report: Callable[[BaseException], None]) -> None:
        super().__init__(runtime)
        self._report = report
        # IO thread only
        self.received = 0
        self.received_bytes = 0
        self.connected = True
        self.heartbeats_missed = 0
        # user side only (the thread handing out messages)
        self.delivered = 0
        self.delivered_bytes = 0
        # any thread, only ever set: stopped ends the asking; halted (stop() or client close) also ends delivery
        self.stopped = False
        self.halted = False
        self.draining = False

    @property
    @abc.abstractmethod
    def label(self) -> str:
        """``stream/consumer`` (or what names the delivery), for messages, thread names and repr."""

    # -- lifecycle --------------------------------------------------------------------------------------
    def start(self, timeout: float) -> None:
        """Calling thread: start on the IO thread (raises if that fails within ``timeout``), then watch the
        heartbeats. The client tracks the engine from here on, so closing it gives back what is held."""
        self.runtime.track(self)
        self.runtime.call(self._start(), timeout, self._starting)
        self.heartbeat.start()

    @abc.abstractmethod
    def _start(self) -> Coroutine[Any, Any, None]:
        """IO thread: subscribe, listen for connection events, and ask for the first messages."""

    def drain(self) -> None:
        """Any thread: stop asking; what is buffered is still delivered, and so is what the server sent before
        it saw the subscription end, then the iteration ends."""
        if self.stopped or self.draining:
            return
        self.draining = True
        self.runtime.post_if_open(self._drain)

    @abc.abstractmethod
    def _drain(self) -> None:
        """IO thread: end the asking, hand out what is buffered and what still arrives, then end."""

    @io_thread
    async def _finish_after(self, retired: Awaitable[None]) -> None:
        """IO thread: once ``retired`` (the server confirmed an UNSUB) the client forgets this engine and the
        readers end after what was buffered."""
        try:
            await retired
        finally:
            self.runtime.untrack(self)
            self.buffer.finish()

    @abc.abstractmethod
    def _shutdown(self) -> None:
        """IO thread: stop asking and listening; what still arrives is given back."""

    @abc.abstractmethod
    def on_client_closed(self, exc: BaseException) -> None:
        """The closing thread, before the connection closes: give back what is buffered or held; the UNSUB goes
        out ahead of the naks, so no redelivery of them goes to this read."""

    @abc.abstractmethod
    def _end(self, exc: BaseException) -> None:
        """IO thread: the delivery ends by ``exc``; readers get the buffered messages, then ``exc``."""

    @property
    def closed(self) -> bool:
        """Any thread: stopped or draining: nothing more is asked for."""
        return self.stopped or self.draining

    @property
    def finished(self) -> bool:
        """Any thread: over for its reader: stopped, or ended with every received message handed out."""
        return self.halted or (self.buffer.ended and self.delivered >= self.received)

    # -- connection events and heartbeats (IO thread) ---------------------------------------------------
    @io_thread
    def on_disconnected(self) -> None:
        self.connected = False

    @abc.abstractmethod
    def _note_reconnected(self) -> None:
        """IO thread: count the reconnect; ``on_reconnected`` then does what the feed does about it."""

    @abc.abstractmethod
    def on_reconnected(self) -> None:
        """IO thread: the connection is back."""

    @abc.abstractmethod
    def _on_missed_heartbeat(self) -> None:
        """IO thread, confirmed by the heartbeat monitor: the server was silent while it owed us something."""

    @io_thread
    def _count_missed_heartbeat(self) -> None:
        """IO thread: the heartbeat monitor confirmed a silence; counted here and in telemetry."""
        self.heartbeats_missed += 1
        note_heartbeat_missed(self.label)

    def _owes_us(self) -> bool:
        """Read by the heartbeat monitor on the watchdog and the IO thread: the server owes us something now
        (a feed narrows this: a pull is owed only what it asked for)."""
        return not (self.stopped or self.draining) and self.connected

    # -- the user side (DeliverySource) -----------------------------------------------------------------
    def take_into(self, held: deque[Msg], limit: int, timeout: float | None) -> None:
        self.buffer.get_many_into(held, limit, timeout)

    def hold(self, surrender: Callable[[], Iterable[Msg]]) -> None:
        self.buffer.hold(surrender)

    def handed_out(self, msg: Msg) -> None:
        """User side: ``msg`` goes to the user now."""
        self._count_handed_out(1, msg.size)

    def handed_out_many(self, msgs: Sequence[Msg]) -> None:
        self._count_handed_out(len(msgs), sum(msg.size for msg in msgs))

    @abc.abstractmethod
    def _count_handed_out(self, count: int, size: int) -> None:
        """User side: count what was handed out, and do what that makes due (ask again, answer flow control)."""

    @abc.abstractmethod
    def give_back(self, msgs: Sequence[Msg]) -> None:
        """Any thread: nak ``msgs`` (those that await an ack); they will not reach the user."""

    def report(self, exc: BaseException) -> None:
        self._report(exc)

    def adopt_thread(self, thread: threading.Thread) -> None:
        self.runtime.track_thread(thread)

    # -- snapshots (any thread) ---------------------------------------------------------------------------
    @abc.abstractmethod
    def _bounds(self) -> tuple[int, int]:
        """The most messages and bytes this delivery may hold unread."""

    def fill(self) -> ConsumeFill | None:
        """Any thread (the health snapshot): what this delivery holds against its bounds; None once it ended.
        Counters of two threads, read without a lock: each is exact, the pair is as of one moment or two."""
        if self.halted:
            return None
        max_messages, max_bytes = self._bounds()
        return ConsumeFill(
            label=self.label,
            kind=self._kind,
            held_messages=max(0, self.received - self.delivered),
            held_bytes=max(0, self.received_bytes - self.delivered_bytes),
            max_messages=max_messages,
            max_bytes=max_bytes,
            delivered=self.delivered,
        )

    def _stats(self, **feed: Any) -> ConsumeStats:
        """Any thread: the counters every engine has, with the feed's own (``feed``)."""
        return ConsumeStats(
            messages_delivered=self.delivered,
            bytes_delivered=self.delivered_bytes,
            buffered=max(0, self.received - self.delivered),  # received, not yet handed to the user
            heartbeats_missed=self.heartbeats_missed,
            statuses=dict(self.statuses),
            **feed,
        )

    @abc.abstractmethod
    def stats(self) -> ConsumeStats:
        """Any thread: a snapshot of the counters."""
