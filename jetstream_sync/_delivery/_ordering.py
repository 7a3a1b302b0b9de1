"""Ordering, written once for every feed: in order, gap-free, no duplicates, and self-healing.

An ordered consumer reads a chain of ephemeral, AckNone, R1 memory consumers (*links*); each starts after the
last stream sequence the previous one delivered in order. The engine checks every message against the live link
and the next consumer sequence on the IO thread; a gap, a missed heartbeat, a deleted consumer or a reconnect
leaves the link and makes the next one, under the same buffer and readers (`Ordering._reset`, `Ordering._relink`).

`Ordering` sits in front of a feed's engine in the class order (``class OrderedPull(Ordering, ContinuousPull)``,
``class OrderedPush(Ordering, PushEngine)``) rather than wrapping an engine object: the order check runs for
every message, and a wrapper would add a call and an attribute hop to each (the benchmarks' ordered reads are
among those issue 29 holds to). A feed adds four hooks: leave the link (``_leave_link``), listen for and create
the next one (``_attempt``, ``_undo_attempt``), and start reading one (``_use``).

The server-side chain is the JetStream layer's (``jetstream/consumers/_chain.py``); this layer knows it only
as an `OrderedLink`, so it never imports ``jetstream/``. See docs/ARCHITECTURE.md, "Ordered consumers".
"""

from __future__ import annotations

import abc
import asyncio
import logging
from collections import Counter
from collections.abc import Sequence
from typing import Any, ClassVar, Protocol

import attrs

from .. import errors
from .._runtime import io_thread
from ..message import Msg
from ..models import ConsumerInfo
from ..models.reads import OrderedConsumerConfig
from ._engine import DeliveryEngine
from ._sources import ConsumeStats
from ._target import PullTarget

__all__ = ["RESET_BACKOFF_FIRST", "RESET_BACKOFF_MAX", "OrderedLink", "Ordering", "next_backoff"]

log = logging.getLogger("jetstream_sync")

RESET_BACKOFF_FIRST = 0.25
RESET_BACKOFF_MAX = 2.0  # short: after a restart JetStream answers again within seconds


def next_backoff(delay: float) -> float:
    return min(delay * 2, RESET_BACKOFF_MAX)


class OrderedLink(Protocol):
    """What the ordered engines need of the chain of server-side consumers they read (``ConsumerChain``).

    ``current`` is the live link's name; a name is never reused, so a late message of an old link is told apart
    by the consumer name in its ack subject. The ``_io`` members run on the IO thread.
    """

    stream: str
    config: OrderedConsumerConfig
    current: str | None

    @property
    def max_attempts(self) -> int | None:
        """``max_reset_attempts``: failures in a row after which a reset gives up (None: never)."""

    def next_name(self) -> str:
        """The name the next link will have (a push link may deliver before its create call returns)."""

    async def create_io(
        self, start_seq: int, deliver_subject: str | None = None, heartbeat: float | None = None
    ) -> ConsumerInfo:
        """IO thread: create the next link, starting at stream sequence ``start_seq`` (0: the deliver policy)."""

    async def info_io(self) -> ConsumerInfo | None:
        """IO thread: the live link's info now (None between a reset and the next link)."""

    async def replaced_io(self, cursor: int) -> str | None:
        """IO thread: why the stream is not the one read up to ``cursor`` any more, or None when it is."""

    def replacement(self, label: str, why: str, cursor: int) -> errors.StreamReplacedError:
        """The event to report when the stream was replaced (raises StreamReplacedError when that ends reads)."""

    def delete_current_soon(self) -> None:
        """Any thread: delete the live link without waiting."""

    def start_floor(self, info: ConsumerInfo) -> int:
        """The stream sequence a new link starts after, before anything was delivered."""

    def pull_target(self, info: ConsumerInfo) -> PullTarget:
        """Where the pulls of link ``info`` go."""


class Ordering(DeliveryEngine, abc.ABC):
    """The order check's state and the reset loop, over the feed that follows it in the class order.

    IO-thread state: ``stream_seq`` (the last stream sequence accepted), ``resetting``, the reset counters. The
    user side only records the last message handed out (``last_handed``), which the handle reads once this read
    ended to continue from there (`next_start`).
    """

    #: what the reset log line names the read by, before its label
    _log_prefix: ClassVar[str] = ""

    def __init__(self, *feed_args: Any, chain: OrderedLink, start_seq: int, **feed_kwargs: Any) -> None:
        super().__init__(*feed_args, **feed_kwargs)
        self.chain = chain
        # IO thread only
        self.stream_seq = start_seq - 1 if start_seq > 0 else 0
        self.resetting = False
        self.resets = 0
        self.reset_reasons: Counter[str] = Counter()
        self.reset_failures = 0
        self._again: tuple[str, str] | None = None  # a fault seen while resetting, handled after the adoption
        # user side only
        self.last_handed: Msg | None = None

    # -- what a feed adds (IO thread) -------------------------------------------------------------------
    @abc.abstractmethod
    def _leave_link(self) -> None:
        """IO thread, as a reset starts: stop listening to the live link (its late messages are of a consumer
        being replaced)."""

    @abc.abstractmethod
    async def _attempt(self) -> ConsumerInfo:
        """IO thread: listen where the next link delivers and create it."""

    @abc.abstractmethod
    def _undo_attempt(self) -> None:
        """IO thread: an attempt failed; drop what it subscribed before the next one."""

    @abc.abstractmethod
    def _use(self, info: ConsumerInfo) -> None:
        """IO thread: read from link ``info`` from now on (its consumer sequence starts at 1)."""

    @io_thread
    def _fault_while_resetting(self, why: str, reason: str) -> None:
        """IO thread: a fault seen while the next link is made (a push link can deliver before its create call
        returned): handled once the link is adopted."""
        self._again = (why, reason)

    # -- reset triggers (IO thread) ---------------------------------------------------------------------
    @io_thread
    def on_reconnected(self) -> None:
        """IO thread: whatever the link was doing is lost with the connection; start after the last message."""
        self._note_reconnected()
        self._reset("reconnected", "reconnect")

    @io_thread
    def _on_missed_heartbeat(self) -> None:
        self._count_missed_heartbeat()
        self._reset(f"nothing from the server for {self.heartbeat.alarm_after:g}s", "missed heartbeat")

    def _owes_us(self) -> bool:
        return not self.resetting and super()._owes_us()

    @io_thread
    def _shutdown(self) -> None:
        super()._shutdown()  # type: ignore[safe-super]  # the feed after Ordering in the class order has it
        self.chain.delete_current_soon()

    # -- resetting --------------------------------------------------------------------------------------
    @io_thread
    def _reset(self, why: str, reason: str) -> None:
        """IO thread: leave the current link and build the next one after ``stream_seq``."""
        if self.stopped or self.draining:
            return
        if self.resetting:
            self._fault_while_resetting(why, reason)
            return
        log.info("%s%s: resetting after stream sequence %d: %s", self._log_prefix, self.label, self.stream_seq, why)
        self.resetting = True
        self.reset_reasons[reason] += 1
        self._leave_link()
        self.chain.delete_current_soon()
        self.runtime.spawn(self._relink())

    @io_thread
    async def _relink(self) -> None:
        """IO thread: create the next link, retrying with back-off (0.25 s doubling to 2 s).

        Each failure is reported; after ``max_reset_attempts`` failures in a row the read ends with
        OrderedConsumerResetError (its cause the last failure). A deleted stream ends it so at once, whatever
        ``max_reset_attempts``: no link can be made on it again, and a stream made anew under the same name is
        another stream, whose sequences continue nothing.
        """
        delay = RESET_BACKOFF_FIRST
        attempts = 0
        while not self.stopped:
            try:
                why = await self.chain.replaced_io(self.stream_seq)
                if why is not None:
                    self._stream_replaced(why)
                info = await self._attempt()
            except errors.JetStreamError as exc:
                if self.stopped or self.runtime.is_closed:
                    return
                self._undo_attempt()
                attempts += 1
                self.reset_failures += 1
                failure = self._reset_failure(exc, attempts)
                if failure is not None:
                    failure.__cause__ = exc
                    self.resetting = False
                    self.report(failure)
                    self._end(failure)
                    return
                log.debug("%s: reset attempt %d failed: %s", self.label, attempts, exc)
                self.report(exc)
                await asyncio.sleep(delay)
                delay = next_backoff(delay)
            else:
                self._adopt_link(info)
                return

    def _reset_failure(self, exc: errors.JetStreamError, attempts: int) -> errors.OrderedConsumerResetError | None:
        """The error that ends the read after a failed attempt, or None to try again."""
        limit = self.chain.max_attempts
        if isinstance(exc, errors.StreamReplacedError):
            return errors.StreamReplacedError(str(exc))  # its own error, caused by the finding
        if isinstance(exc, errors.StreamNotFoundError):
            return errors.OrderedConsumerResetError(f"{self.label}: the stream was deleted ({exc})")
        if limit is not None and attempts >= limit:
            return errors.OrderedConsumerResetError(
                f"{self.label}: could not recreate its consumer in {attempts} attempt(s) "
                f"(max_reset_attempts={limit}); last error: {exc}"
            )
        return None

    @io_thread
    def _stream_replaced(self, why: str) -> None:
        """IO thread: the stream was replaced under the read (see ``ConsumerChain.replacement``); on "restart"
        the event goes to the error handler and the next link reads the new stream from its beginning."""
        self.report(self.chain.replacement(self.label, why, self.stream_seq))
        self.start_over()

    def _start_seq(self) -> int:
        """IO thread: the stream sequence the next link starts at (0: the deliver policy, nothing read yet)."""
        return self.stream_seq + 1 if self.stream_seq else 0

    @io_thread
    def start_over(self) -> None:
        """IO thread, in a reset: the stream was replaced; the next link reads the new one from its beginning."""
        self.stream_seq = 0

    @io_thread
    def _adopt_link(self, info: ConsumerInfo) -> None:
        """IO thread: a reset succeeded; read from the new link unless the read was stopped meanwhile."""
        if self.stopped:
            self.chain.delete_current_soon()
            return
        self.resetting = False
        self.resets += 1
        self._use(info)
        again, self._again = self._again, None
        if again is not None:
            self._reset(*again)

    # -- the user side ----------------------------------------------------------------------------------
    def handed_out(self, msg: Msg) -> None:
        self.last_handed = msg
        super().handed_out(msg)

    def handed_out_many(self, msgs: Sequence[Msg]) -> None:
        self.last_handed = msgs[-1]
        super().handed_out_many(msgs)

    def next_start(self, fallback: int) -> int:
        """After this read ended: the stream sequence a successor starts from (what the user has not seen)."""
        msg = self.last_handed
        return fallback if msg is None else msg.metadata.sequence.stream + 1

    def stats(self) -> ConsumeStats:
        feed = super().stats()  # type: ignore[safe-super]  # the feed after Ordering in the class order has it
        return attrs.evolve(feed, resets=self.resets, reset_reasons=dict(self.reset_reasons))
