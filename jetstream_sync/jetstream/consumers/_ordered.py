"""The machinery of ordered consumers: the chain of server-side consumers, and the pull engines that check order.

An ordered consumer is a chain of ephemeral, AckNone, R1 memory consumers: each one starts after the last
stream sequence the previous one delivered in order. `ConsumerChain` creates the links (on a user
thread for fetch, on the IO thread for a continuous pull) and deletes the old one best-effort.
`OrderedPull` is the continuous pull that checks every message's consumer sequence on the IO thread
and, on a gap, a missed heartbeat, a deleted consumer, "no responders" or a reconnect, moves to a new link
under the same buffer and readers. `OrderedBatch` does the same check for one fetch, on the reading
thread. See docs/ARCHITECTURE.md, "Ordered consumers".
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import attrs

from ... import errors
from ..._protocol import ACK_PREFIX, ack_position
from ..._runtime import BufferFinished, Runtime, io_thread
from ..._telemetry import note_heartbeat_missed
from ...message import Msg
from ...models import ConsumerInfo, DeliverPolicy
from ._chain import ConsumerChain, relink
from ._fetch import FetchPull
from ._pull import ContinuousPull
from ._target import PullTarget
from .delivery import ConsumeStats
from .options import PullPlan

if TYPE_CHECKING:
    pass

__all__ = [
    "CATCH_UP_CHECK",
    "CatchUpProbe",
    "OrderedBatch",
    "OrderedPull",
]

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


class OrderedPull(ContinuousPull):
    """A continuous pull over a `ConsumerChain`: in order, gap-free, no duplicates, self-healing.

    IO-thread state: ``stream_seq`` / ``consumer_seq`` (the last message accepted), ``resetting``. A message is
    accepted only if it comes from the live link with the next consumer sequence; anything else starts a
    reset. The user side only records the last message handed out (``last_handed``), which the handle reads
    once this pull ended to continue from there.
    """

    def __init__(
        self,
        runtime: Runtime,
        chain: ConsumerChain,
        first: ConsumerInfo | None,
        start_seq: int,
        plan: PullPlan,
        report: Callable[[BaseException], None],
        *,
        until_drained: bool = False,
    ) -> None:
        placeholder = PullTarget(chain.stream, "", b"", True) if first is None else chain.pull_target(first)
        super().__init__(runtime, placeholder, plan, report)
        self.chain = chain
        self._first = first
        self.until_drained = until_drained
        # IO thread only
        self.stream_seq = start_seq - 1 if start_seq > 0 else 0
        self.consumer_seq = 0
        self._consumer_b = placeholder.consumer.encode()
        self._link_prefix = _link_prefix(chain.stream, placeholder.consumer)
        self.resetting = False
        self.resets = 0
        self.reset_reasons: Counter[str] = Counter()
        self.reset_failures = 0
        # A last-per-subject read is a snapshot until it first catches up: a reset in it recreates the link
        # last-per-subject again and skips what it already received (restarting by sequence would replay every
        # entry written after that point, superseded ones included).
        self.snapshot = chain.config.deliver_policy is DeliverPolicy.LAST_PER_SUBJECT
        self.skip_through = 0
        # Caught up once: nothing was pending past what was received (written on the IO thread, read anywhere).
        self.caught_up = False
        self.catch_up = CatchUpProbe(self)
        # user side only
        self.last_handed: Msg | None = None

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
                info = await self.chain.create_io(self.stream_seq + 1 if self.stream_seq else 0)
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

    @property
    def finished(self) -> bool:
        """Any thread: over for its reader: stopped, or ended with every received message handed out."""
        return self.halted or (self.buffer.ended and self.delivered >= self.received)

    @io_thread
    def _use(self, info: ConsumerInfo) -> None:
        """IO thread: read from the link ``info`` from now on (its consumer sequence starts at 1)."""
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
        self.chain.delete_current_soon()

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
            except ValueError:
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

    @io_thread
    def _on_missed_heartbeat(self) -> None:
        self.heartbeats_missed += 1
        note_heartbeat_missed(self.label)
        self._reset(f"nothing from the server for {2 * self.options.idle_heartbeat:g}s", "missed heartbeat")

    @io_thread
    def on_reconnected(self) -> None:
        self.connected = True
        self.reconnect_pulls += 1
        self._reset("reconnected", "reconnect")

    def _owes_us(self) -> bool:
        return not self.resetting and super()._owes_us()

    # -- resetting --------------------------------------------------------------------------------------
    @io_thread
    def _reset(self, why: str, reason: str) -> None:
        """IO thread: leave the current link and build the next one after ``stream_seq``."""
        if self.resetting or self.stopped or self.draining:
            return
        log.info("ordered %s: resetting after stream sequence %d: %s", self.label, self.stream_seq, why)
        self.resetting = True
        self.reset_reasons[reason] += 1
        self._unsubscribe()
        self.chain.delete_current_soon()
        self.runtime.spawn(self._recreate())

    @io_thread
    async def _recreate(self) -> None:
        await relink(self, self._attempt, None)

    @io_thread
    async def _attempt(self) -> ConsumerInfo:
        await self._resubscribe()
        if self.snapshot:
            self.skip_through = self.stream_seq
            return await self.chain.create_io(0)
        return await self.chain.create_io(self.stream_seq + 1 if self.stream_seq else 0)

    @io_thread
    def start_over(self) -> None:
        """IO thread, in a reset: the stream was replaced; the next link reads the new one from its beginning
        (per the deliver policy), as the first link did."""
        self.stream_seq = 0
        self.skip_through = 0
        self.snapshot = False  # the next link is a fresh read of the new stream, not a snapshot to resume

    @io_thread
    def _adopt_link(self, info: ConsumerInfo) -> None:
        """IO thread: a reset succeeded; read from the new link unless the pull was stopped meanwhile."""
        if self.stopped:
            self.chain.delete_current_soon()
            return
        self.resetting = False
        self.resets += 1
        self._use(info)

    # -- the user side ----------------------------------------------------------------------------------
    def handed_out(self, msg: Msg) -> None:
        self.last_handed = msg
        super().handed_out(msg)

    def handed_out_many(self, msgs: Sequence[Msg]) -> None:
        self.last_handed = msgs[-1]
        super().handed_out_many(msgs)

    def next_start(self, fallback: int) -> int:
        """After this pull ended: the stream sequence a successor starts from (what the user has not seen)."""
        msg = self.last_handed
        return fallback if msg is None else msg.metadata.sequence.stream + 1

    def stats(self) -> ConsumeStats:
        return attrs.evolve(super().stats(), resets=self.resets, reset_reasons=dict(self.reset_reasons))


#: what ends an ordered fetch's pull but not the fetch: the link is replaced and the fetch goes on
_RESET_ERRORS = (
    errors.ConsumerDeletedError,
    errors.ConsumerNotFoundError,
    errors.StreamNotFoundError,  # a pull whose consumer info said the stream is gone: the renewal says how
    errors.MissedHeartbeatError,
)

#: renew(messages_left, bytes_left) -> a started pull on a new link, or None when the fetch should end
Renew = Callable[[int, int], "FetchPull | None"]


class OrderedBatch:
    """One fetch of an ordered consumer (a [`BatchSource`][jetstream_sync.BatchSource]), checking order on the reading
    thread.

    A message out of order, a deleted consumer, "no responders" or a missed heartbeat replace the link
    (through ``renew``) and the fetch goes on for what is left of its count and time; when it cannot, it ends
    quietly and the next read replaces the link.
    """

    def __init__(self, owner: OrderedFetchState, pull: FetchPull, renew: Renew, deadline: float) -> None:
        self.owner = owner
        self.pull = pull
        #: the fetch's client-side deadline (a renewed pull gets what is left of it)
        self.deadline = deadline
        self.superseded = False
        self.ended = False  # the reader gave up (deadline, error): no longer in progress, whatever the IO thread
        self.renewing = False
        self._renew = renew
        self._consumer = pull.target.consumer
        self._taken = 0
        self._taken_bytes = 0
        self._received_before = 0

    @property
    def in_progress(self) -> bool:
        return not self.ended and (self.renewing or not self.pull.done)

    @property
    def label(self) -> str:
        return self.pull.label

    @property
    def received(self) -> int:
        return self._received_before + self.pull.received

    def _replace_link(self, why: str) -> bool:
        """Reader thread: move to a new link for the rest of the fetch; False when the fetch must end."""
        self.owner.needs_reset = why
        self.pull.cancel()
        options = self.pull.options
        left = options.batch - self._taken
        left_bytes = options.max_bytes - self._taken_bytes if options.max_bytes else 0
        if left <= 0 or (options.max_bytes and left_bytes <= 0) or self.superseded:
            return False
        self.renewing = True
        try:
            pull = self._renew(left, left_bytes)
        finally:
            self.renewing = False
        if pull is None:
            return False
        self._received_before += self.pull.received
        self.pull = pull
        self._consumer = pull.target.consumer
        return True

    def take(self, timeout: float) -> Msg:
        owner = self.owner
        deadline = time.monotonic() + timeout
        while True:
            if self.superseded:
                raise BufferFinished()
            try:
                msg = self.pull.take(max(0.0, deadline - time.monotonic()))
            except _RESET_ERRORS as exc:
                if self._replace_link(type(exc).__name__):
                    continue
                raise BufferFinished() from None
            except errors.MessageExceedsMaxBytesError:
                if self._taken:  # a renewed pull asks for what is left of the budget: here, the fetch is full
                    raise BufferFinished() from None
                raise
            meta = msg.metadata
            if meta.consumer != self._consumer:
                continue
            if meta.sequence.consumer != owner.consumer_seq + 1:
                if self._replace_link("gap"):
                    continue
                raise BufferFinished()
            owner.consumer_seq = meta.sequence.consumer
            owner.stream_seq = meta.sequence.stream
            self._taken += 1
            self._taken_bytes += msg.size
            return msg

    def cancel(self) -> None:
        self.ended = True
        self.pull.cancel()


class OrderedFetchState:
    """The cursor a handle's fetches share: the last message returned, and whether the link must be replaced."""

    def __init__(self) -> None:
        self.stream_seq = 0
        self.consumer_seq = 0
        self.needs_reset: str | None = None
