"""The ordered engines: `OrderedPull` and `OrderedPush`, each a feed with `Ordering` (``_ordering.py``) in front.

`OrderedPull` is the continuous pull that checks every message's consumer sequence on the IO thread and, on a gap,
a missed heartbeat, a deleted consumer, "no responders" or a reconnect, moves to a new link under the same buffer
and readers; its `CatchUpProbe` notices a read that caught up when no message says so. `OrderedPush` does the same
over a push feed (flow control and heartbeats on, each link on a fresh inbox). An ordered *fetch* checks order on
the reading thread instead (``jetstream/consumers/_ordered_fetch.py``). See docs/ARCHITECTURE.md, "Ordered
consumers".
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from .. import errors
from .._protocol import ACK_PREFIX, ack_position
from .._runtime import Runtime, io_thread
from ..models import ConsumerInfo, DeliverPolicy
from ..models.reads import PullPlan
from ._ordering import OrderedLink, Ordering
from ._pull import ContinuousPull
from ._push import PushEngine, PushLimits
from ._target import PullTarget

__all__ = ["CATCH_UP_CHECK", "CatchUpProbe", "OrderedPull", "OrderedPush"]

log = logging.getLogger("jetstream_sync")


def _link_prefix(stream: str, consumer: str) -> bytes:
    """``$JS.ACK.<stream>.<consumer>.``: how the v1 ack subjects of one link begin (nothing, without a name)."""
    return f"{ACK_PREFIX.decode()}{stream}.{consumer}.".encode() if consumer else b"\x00"


#: how long an ordered read that has not caught up stays silent before it asks the server what is left
CATCH_UP_CHECK = 1.0


class CatchUpProbe:
    """Notices that an ordered read caught up when the message that would say so never comes.

    A read learns it caught up from a delivered message's pending count (0), or from the link's info when it
    is made. When the last pending messages vanish before they are delivered (aged out by a TTL, purged,
    deleted), no such message comes: a snapshot (``until_drained``, a KV listing) would wait forever, and a
    watcher would never report its initial values done. So while the server owes the read messages and has
    been silent for `CATCH_UP_CHECK`, the watchdog asks the IO thread to fetch the live link's info:
    nothing pending, and every message the link delivered received, means caught up. The consumer sequence
    (not the stream sequence, which moves past purged messages) is what tells "received" exactly. An answer
    that the link or its stream is gone starts a reset at once, instead of after two missed heartbeats.
    """

    def __init__(self, engine: OrderedPull) -> None:
        self._engine = engine
        self._posted = False  # watchdog sets it, the IO thread clears it: one question in flight
        self._stopped = False
        self._asked_at = 0.0  # the monotonic time of the last answer (the next question waits for silence again)

    def start(self) -> None:
        self._engine.runtime.watch(self._check)

    def stop(self) -> None:
        """Any thread."""
        self._stopped = True
        self._engine.runtime.unwatch(self._check)

    def _check(self, now: float) -> None:
        """Watchdog thread: only reads, then posts the question to the IO thread."""
        engine = self._engine
        if self._stopped or self._posted or engine.caught_up or not engine._owes_us():
            return
        if now - max(engine.heartbeat.last_activity, self._asked_at) < CATCH_UP_CHECK:
            return
        self._posted = True
        engine.runtime.post_if_open(self._ask)

    @io_thread
    def _ask(self) -> None:
        """IO thread."""
        if self._stopped or self._engine.caught_up:
            self._posted = False
            return
        self._engine.runtime.spawn(self._probe())

    @io_thread
    async def _probe(self) -> None:
        engine = self._engine
        asked = engine.chain.current
        try:
            info = await engine.chain.info_io()
        except (errors.ConsumerNotFoundError, errors.StreamNotFoundError) as exc:
            # the link is gone (deleted, or its stream with it): no heartbeat will come to say so sooner
            if not (self._stopped or engine.resetting) and engine.chain.current == asked:
                engine._reset(f"its consumer is gone ({exc})", "consumer deleted")
            return
        except errors.JetStreamError as exc:
            log.debug("ordered %s: cannot ask whether anything is left now: %s", engine.label, exc)
            return
        finally:
            self._asked_at = time.monotonic()
            self._posted = False
        if info is None or self._stopped or engine.resetting or engine.caught_up:
            return
        if (
            info.name == engine.chain.current
            and info.num_pending == 0
            and info.delivered.consumer_seq <= engine.consumer_seq
        ):
            log.debug("ordered %s: what was pending vanished before delivery; caught up", engine.label)
            engine.reached_the_end()


class OrderedPull(Ordering, ContinuousPull):
    """A continuous pull over a chain of links: in order, gap-free, no duplicates, self-healing.

    IO-thread state (besides `Ordering`'s): ``consumer_seq`` (of the last message accepted). A message is
    accepted only if it comes from the live link with the next consumer sequence; anything else starts a reset.
    """

    _log_prefix = "ordered "
    BATCHED = False  # every message's sequence is checked in _on_message

    def __init__(
        self,
        runtime: Runtime,
        chain: OrderedLink,
        first: ConsumerInfo | None,
        start_seq: int,
        plan: PullPlan,
        report: Callable[[BaseException], None],
        *,
        until_drained: bool = False,
    ) -> None:
        placeholder = PullTarget(chain.stream, "", b"", True) if first is None else chain.pull_target(first)
        super().__init__(runtime, placeholder, plan, report, chain=chain, start_seq=start_seq)
        self._first = first
        self.until_drained = until_drained
        # IO thread only
        self.consumer_seq = 0
        self._consumer_b = placeholder.consumer.encode()
        self._link_prefix = _link_prefix(chain.stream, placeholder.consumer)
        # A last-per-subject read is a snapshot until it first catches up: a reset in it recreates the link
        # last-per-subject again and skips what it already received (restarting by sequence would replay every
        # entry written after that point, superseded ones included).
        self.snapshot = chain.config.deliver_policy is DeliverPolicy.LAST_PER_SUBJECT
        self.skip_through = 0
        # Caught up once: nothing was pending past what was received (written on the IO thread, read anywhere).
        self.caught_up = False
        self.catch_up = CatchUpProbe(self)

    # -- lifecycle --------------------------------------------------------------------------------------
    @io_thread
    async def _start(self) -> None:
        await self._subscribe()
        self.runtime.add_listener(self)
        self.connected = self.runtime.is_connected
        info = self._first
        self._first = None
        if info is None:
            try:
                info = await self.chain.create_io(self._start_seq())
            except BaseException:
                self.stopped = True
                self._shutdown()
                raise
        self._use(info)
        if not self.caught_up:
            self.catch_up.start()

    @io_thread
    def _caught_up(self) -> None:
        """IO thread (until_drained): nothing is pending past what was received; end after the buffer."""
        log.debug("ordered %s: caught up at stream sequence %d", self.label, self.stream_seq)
        self.draining = True
        self._drain()

    @io_thread
    def _use(self, info: ConsumerInfo) -> None:
        if self.stream_seq == 0:
            self.stream_seq = self.chain.start_floor(info)
        target = self.chain.pull_target(info)
        self._consumer_b = target.consumer.encode()
        self._link_prefix = _link_prefix(self.chain.stream, target.consumer)
        self.consumer_seq = 0
        if info.num_pending == 0:
            self._now_caught_up()
        if self.until_drained and info.num_pending == 0:
            self.target = target
            self._caught_up()
            return
        self.retarget(target)

    @io_thread
    def _now_caught_up(self) -> None:
        """IO thread: nothing is pending past what was received (the first time)."""
        self.caught_up = True
        self.snapshot = False
        self.catch_up.stop()

    @io_thread
    def reached_the_end(self) -> None:
        """IO thread: the catch-up probe found nothing left that will ever be delivered."""
        self._now_caught_up()
        if self.until_drained and not self.draining:
            self._caught_up()

    @io_thread
    def _shutdown(self) -> None:
        super()._shutdown()
        self.catch_up.stop()

    # -- messages (IO thread) ---------------------------------------------------------------------------
    @io_thread
    def _on_message(self, subject: bytes, reply: bytes, data: bytes, headers: bytes | None) -> None:
        if self.stopped or self.resetting:
            return
        if not reply.startswith(ACK_PREFIX):
            super()._on_message(subject, reply, data, headers)
            return
        self.heartbeat.touch()
        prefix = self._link_prefix
        # the live link's v1 ack subject (what servers send without a domain): the five tokens after the
        # prefix, split alone, are the cheapest way to its numbers (this runs for every message)
        fields = reply[len(prefix) :].split(b".") if reply.startswith(prefix) else None
        if fields is not None and len(fields) == 5:
            try:
                consumer_seq, stream_seq, pending = int(fields[2]), int(fields[1]), int(fields[4])
            except ValueError:  # no link sends such a subject; had one, its next message shows the gap: a reset
                return
        else:
            position = ack_position(reply)  # the v2 format (a domain, an account hash), or another link's
            if position is None or position.consumer != self._consumer_b:
                return  # not from the live link
            consumer_seq, stream_seq, pending = position.consumer_seq, position.stream_seq, position.num_pending
        if consumer_seq != self.consumer_seq + 1:
            self._reset(f"gap (consumer sequence {consumer_seq}, expected {self.consumer_seq + 1})", "gap")
            return
        self.consumer_seq = consumer_seq
        self._fruitless = 0
        if pending == 0 and not self.caught_up:
            self._now_caught_up()
        if stream_seq <= self.skip_through:  # a recreated snapshot repeats what was received
            self.pending_msgs = max(0, self.pending_msgs - 1)
            if self.until_drained and pending == 0:
                self._caught_up()
            else:
                self._pull()
            return
        self.stream_seq = stream_seq
        self.received += 1
        msg = self._make_msg(subject, reply, data, headers)
        self.received_bytes += msg.size
        self.buffer.put(msg)
        if self.until_drained and pending == 0:
            self._caught_up()

    @io_thread
    def _pull(self) -> None:
        if not self.resetting:
            super()._pull()

    # -- reset triggers (IO thread) ---------------------------------------------------------------------
    @io_thread
    def _on_terminal(self, exc: errors.JetStreamError) -> None:
        if isinstance(exc, errors.ConsumerDeletedError):
            self._reset("the consumer was deleted", "consumer deleted")
        else:
            super()._on_terminal(exc)

    @io_thread
    def _retry_later(self, exc: BaseException | None) -> None:
        self._reset("no responders for a pull", "no responders")

    # -- resetting (IO thread) --------------------------------------------------------------------------
    @io_thread
    def _fault_while_resetting(self, why: str, reason: str) -> None:
        """IO thread: nothing to remember: the pulls wait for the next link's adoption (``_pull``), so what a
        reset sees meanwhile is of the link it leaves, and a reconnect needs nothing the adoption does not do."""
        log.debug("ordered %s: already resetting; %s", self.label, why)

    @io_thread
    def _leave_link(self) -> None:
        self._unsubscribe()

    @io_thread
    def _undo_attempt(self) -> None:
        self._unsubscribe()

    @io_thread
    async def _attempt(self) -> ConsumerInfo:
        await self._resubscribe()
        if self.snapshot:
            self.skip_through = self.stream_seq
            return await self.chain.create_io(0)
        return await self.chain.create_io(self._start_seq())

    @io_thread
    def start_over(self) -> None:
        """IO thread, in a reset: the stream was replaced; the next link reads the new one from its beginning
        (per the deliver policy), as the first link did."""
        self.stream_seq = 0
        self.skip_through = 0
        self.snapshot = False  # the next link is a fresh read of the new stream, not a snapshot to resume


class OrderedPush(Ordering, PushEngine):
    """An ordered push consumer: flow control and heartbeats on, no acks, each link on a fresh inbox, and a
    new link after the last stream sequence on a gap, a missed heartbeat, a deleted consumer or a reconnect."""

    def __init__(
        self,
        runtime: Runtime,
        chain: OrderedLink,
        *,
        start_seq: int,
        heartbeat: float,
        limits: PushLimits,
        report: Callable[[BaseException], None],
    ) -> None:
        super().__init__(
            runtime,
            label=f"ordered push {chain.stream}",
            deliver_subject=runtime.new_inbox(),
            queue="",
            ack_none=True,
            heartbeat=heartbeat,
            limits=limits,
            gap_detection=False,
            report=report,
            chain=chain,
            start_seq=start_seq,
        )
        self._hb = heartbeat
        # IO thread only
        self._consumer_b = b""

    @io_thread
    async def _start(self) -> None:
        await super()._start()
        try:
            self._expect_link()
            info = await self.chain.create_io(self._start_seq(), self.deliver_subject, self._hb)
        except BaseException:
            self._shutdown()
            raise
        self._use(info)

    @io_thread
    def _expect_link(self) -> None:
        """IO thread, just before a link is created: accept its messages (from consumer sequence 1) even if
        they arrive before the create call's reply."""
        self._consumer_b = self.chain.next_name().encode()
        self.consumer_seq = 0

    @io_thread
    def _use(self, info: ConsumerInfo) -> None:
        """IO thread: read from link ``info`` (its messages were accepted from ``_expect_link`` on)."""
        if self.stream_seq == 0 and self.consumer_seq == 0:
            self.stream_seq = self.chain.start_floor(info)
        self.heartbeat.touch()

    @io_thread
    def _accept(self, reply: bytes) -> bool:
        position = ack_position(reply)
        if position is None or position.consumer != self._consumer_b:
            return False
        if position.consumer_seq != self.consumer_seq + 1:
            self._reset(f"gap (consumer sequence {position.consumer_seq}, expected {self.consumer_seq + 1})", "gap")
            return False
        self.consumer_seq = position.consumer_seq
        self.stream_seq = position.stream_seq
        return True

    @io_thread
    def _drop(self, reply: bytes) -> None:
        # A dropped message would be a gap: start over after the last one kept instead.
        self.dropped += 1
        self._reset("the buffer was full", "slow consumer")

    @io_thread
    def _check_heartbeat_position(self, last_consumer: int) -> None:
        if not self.resetting and last_consumer > self.consumer_seq:
            self._reset(f"a heartbeat reports consumer sequence {last_consumer}, we saw {self.consumer_seq}", "gap")

    @io_thread
    def _on_error_status(self, status: int, description: str) -> None:
        if status == 409 and "consumer deleted" in description.lower():
            self._reset("the consumer was deleted", "consumer deleted")
        else:
            self._report(errors.PushStatusError(status, description, self.label))

    @io_thread
    def _leave_link(self) -> None:
        self._undo_attempt()
        with self._fc_lock:
            self._fc.clear()  # the old link's flow control dies with it

    @io_thread
    async def _attempt(self) -> ConsumerInfo:
        self.deliver_subject = self.runtime.new_inbox()
        self._nats_sub = await self.runtime.subscribe_async(self.deliver_subject, self._on_message)
        self._expect_link()
        return await self.chain.create_io(self._start_seq(), self.deliver_subject, self._hb)

    @io_thread
    def _undo_attempt(self) -> None:
        sub, self._nats_sub = self._nats_sub, None
        if sub is not None:
            self.runtime.unsubscribe_soon(sub, self.deliver_subject)
