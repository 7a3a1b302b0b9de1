"""The ADR-37 continuous pull: pull requests, pending counts, status handling and heartbeats: a feed on
`DeliveryEngine` (``_engine.py``: the lifecycle and the hand-out accounting) and the pull engines' common part
(``_pullbase.py``: the inbox subscription).

`ContinuousPull` keeps a bounded buffer filled (a [`DeliverySource`][jetstream_sync.DeliverySource]) for ``messages()``
and ``consume()``; the one-off pulls (``fetch``, ``next``) are in ``_fetch.py`` and ``_single.py``. Each routes messages
by its own inbox subscription and builds them on the IO thread. IO-thread state is written only on the IO thread;
the user side writes only its delivery counters (which the IO thread applies) and the watchdog only reads
(docs/ARCHITECTURE.md, "Rules: one writer per piece of state"). A message counts as processed when it is handed
to the user, so at most ``max_messages`` (or ``max_bytes``) unprocessed messages are held per consume.

The server-side consumer a pull engine asks is a `PullTarget`, replaceable on a running engine
(`ContinuousPull.retarget`): that is where an ordered consumer plugs in.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence

from .. import errors
from .._protocol import ACK_PREFIX, pending_counts, pull_request, status_of
from .._runtime import BufferFinished, Runtime, io_thread
from ..message import Msg
from ..models.reads import PullPlan
from . import _giveback
from ._engine import DeliveryEngine
from ._heartbeat import HeartbeatMonitor
from ._limits import fit_plan, plan_fits, request_limit
from ._pullbase import PullEngine
from ._sources import ConsumeStats
from ._status import StatusKind, classify, oversized
from ._target import PinTracker, PullTarget, consumer_gone, pull_unanswered, pulled_message

__all__ = ["ContinuousPull", "PinTracker", "PullTarget", "pull_unanswered", "pulled_message"]

log = logging.getLogger("jetstream_sync")

_CHECK_CONSUMER_AFTER = 3  # pulls in a row without responders before asking whether the consumer exists
# After statuses in a row that brought no message, the next pull waits this long after the last one, doubling
# per status up to _HOLD_MAX (ContinuousPull._pull_after_status).
_HOLD_FIRST = 0.05
_HOLD_MAX = 5.0


# -- messages() and consume() -------------------------------------------------------------------------------
class ContinuousPull(PullEngine, DeliveryEngine):
    """The ADR-37 consume algorithm: keep the buffer filled, re-pull at the thresholds, survive reconnects.

    Each pull's reply subject is ``<inbox>.<batch>.<max_bytes>`` (the subscription is on ``<inbox>.*.*``): a
    status comes on the reply subject of its own pull, so a pull the server refused outright (a 409 without
    ``Nats-Pending-*`` headers, see ``_limits.py``) releases exactly what it had added to the pending counts.
    Counting it on left the consume waiting for messages nobody owed it until the missed-heartbeat alarm (30 s
    by default), after which the same pull met the same refusal.
    """

    _starting = "consume"
    _kind = "pull"
    BATCHED = True

    def __init__(
        self, runtime: Runtime, target: PullTarget, plan: PullPlan, report: Callable[[BaseException], None]
    ) -> None:
        super().__init__(runtime, target, report=report)
        # replaced whole, only on the IO thread, when fitted to the consumer's limits (_on_limit); the user side
        # reads it (its thresholds), and one reference read sees the old plan or the new one
        self.options = plan
        # IO thread only
        self.pending_msgs = 0
        self.pending_bytes = 0
        self.applied = 0
        self.applied_bytes = 0
        self.pulls_sent = 0
        self.reconnect_pulls = 0
        self.warnings = 0
        self._retry_handle: asyncio.TimerHandle | None = None
        self._retry_delay = 0.25
        self._pulled_pinned = False  # the last pull carried a pin id
        self._unanswered = 0  # pulls in a row that met no responders
        self._fruitless = 0  # statuses in a row with no message between them (see _pull_after_status)
        self._last_pull_at = 0.0  # time.monotonic() of the last pull sent
        self._checking = False  # a consumer info request is out (ADR-37: does the consumer still exist?)
        self._probing = False  # pulls go without idle heartbeats, so the server says 409 MaxWaiting (_on_full)
        self._full_reported = False  # 409 Exceeded MaxWaiting reported in this episode
        # Two-writer handshake, on purpose: the user side sets it when it posts _apply_delivered, the IO thread
        # clears it when that runs, so at most one such post is in flight (docs/ARCHITECTURE.md, "Rules").
        self._apply_posted = False
        self.heartbeat = HeartbeatMonitor(runtime, plan.idle_heartbeat, self._owes_us, self._on_missed_heartbeat)

    # -- lifecycle --------------------------------------------------------------------------------------
    def _listen_on(self) -> str:
        return self.inbox + ".*.*"

    @io_thread
    def _refused(self, subject: bytes) -> tuple[int, int]:
        """IO thread: the batch and bytes of the pull a refusal answers, from its reply subject."""
        batch, _, size = subject[len(self._inbox_b) + 1 :].partition(b".")
        try:
            return int(batch), int(size)
        except ValueError:
            return 0, 0

    @io_thread
    async def _start(self) -> None:
        await self._subscribe()
        self.runtime.add_listener(self)
        self.connected = self.runtime.is_connected
        self.heartbeat.touch()
        self._pull()

    @io_thread
    def retarget(self, target: PullTarget) -> None:
        """IO thread: ask another server-side consumer from now on, under the same buffer and readers.

        Outstanding pulls to the old consumer are forgotten (their late messages still arrive on the inbox);
        an ordered consumer calls this after recreating its consumer past the last delivered sequence.
        """
        log.debug("consume %s: retargeted to %s", self.label, target.label)
        self.target = target
        self._reset_pending()
        self.heartbeat.touch()
        self._pull()

    def stop(self) -> None:
        """Any thread: end delivery at once; buffered messages are not handed out but given back (nak'd), and
        so is what the server sent before it saw the subscription end (``_giveback.py``).

        The UNSUB goes out first, from this thread: the server then drops this read's waiting pulls before it
        sees the naks. Given back first, a nak's redelivery went to one of those pulls, was given back again on
        arrival and cost the message one more delivery attempt (8 of 30 stops), against ``max_deliver``."""
        if self.halted:
            return
        self.halted = self.stopped = True
        self.heartbeat.stop()
        self._unsubscribe_before_giving_back()
        _giveback.give_back(self.runtime, self.buffer.abort(BufferFinished()), self.label)
        self.runtime.post_if_open(self._shutdown)

    @io_thread
    def _shutdown(self) -> None:
        """IO thread."""
        self._quiet()
        self._retire()
        self.runtime.untrack(self)

    @io_thread
    def _quiet(self) -> None:
        """IO thread: no more heartbeat checks, retried pulls or connection events."""
        self.heartbeat.stop()
        if self._retry_handle is not None:
            self._retry_handle.cancel()
        self.runtime.remove_listener(self)

    @io_thread
    def _drain(self) -> None:
        """IO thread: end the subscription and hand out what is buffered and what still arrives for the pulls
        already sent, until the server confirms the UNSUB (it then forgets those pulls); then end.

        Ending at once, as before, left what the server had sent meanwhile to its ack wait (102 to 167 messages
        in 3 of 5 drains of a busy consume). A consumer that takes no acks (an ordered one) has nothing to give
        back and no reason to wait: it ends at once.
        """
        sub, self._nats_sub = self._nats_sub, None
        self._quiet()
        if sub is None or self.target.ack_none:
            if sub is not None:
                self.runtime.unsubscribe_soon(sub, self.inbox)
            self.runtime.untrack(self)
            self.buffer.finish()
            return
        self.runtime.spawn(self._finish_after(self.runtime.retire(sub, self._on_draining)))

    @io_thread
    def _on_draining(self, subject: bytes, reply: bytes, data: bytes, headers: bytes | None) -> None:
        """IO thread, while a drain waits for the UNSUB's confirmation: a message is handed out as any other;
        once the reader stopped (``stop()`` during the drain), it is given back."""
        if not reply.startswith(ACK_PREFIX):
            return  # a status of a pull the drain ended: nothing is pulled any more
        if self.stopped:
            _giveback.give_back_now(self.runtime, reply, self.target.ack_none)
            return
        self.received += 1
        msg = self._make_msg(subject, reply, data, headers)
        self.received_bytes += msg.size
        if not self.buffer.put(msg):
            _giveback.give_back_now(self.runtime, reply, self.target.ack_none)  # stopped meanwhile

    @io_thread
    def _end(self, exc: BaseException) -> None:
        """IO thread: a terminal status; readers get the buffered messages, then ``exc``."""
        log.debug("consume %s: ended by %s", self.label, exc)
        self.stopped = True
        self.buffer.finish(exc)
        self._shutdown()

    def on_client_closed(self, exc: BaseException) -> None:
        """The closing thread, before the connection closes: what is buffered is given back (the naks go out
        with everything else queued before the close, behind the UNSUB, as in ``stop()``)."""
        self._unsubscribe_before_giving_back()
        self.halted = self.stopped = True
        self.heartbeat.stop()
        _giveback.give_back(self.runtime, self.buffer.abort(exc), self.label)

    # -- pulling (IO thread) ----------------------------------------------------------------------------
    @io_thread
    def _sync_delivered(self) -> None:
        """Apply what the user side has taken since the last time: a handed-out message is processed."""
        delivered, delivered_bytes = self.delivered, self.delivered_bytes
        self.pending_msgs = max(0, self.pending_msgs - (delivered - self.applied))
        if self.options.by_bytes:
            self.pending_bytes = max(0, self.pending_bytes - (delivered_bytes - self.applied_bytes))
        self.applied, self.applied_bytes = delivered, delivered_bytes

    @io_thread
    def _pull(self) -> None:
        """Publish a pull when the pending counts reached their threshold, sized to fill the buffer."""
        if self.stopped or self.draining or not self.connected or self._nats_sub is None:
            return
        self._sync_delivered()
        opts = self.options
        if opts.by_bytes:
            if self.pending_bytes > opts.threshold_bytes:
                return
            max_bytes = opts.max_bytes - self.pending_bytes
            batch = opts.max_messages - self.pending_msgs
            if max_bytes < 1 or batch < 1:
                return
        else:
            if self.pending_msgs > opts.threshold_messages:
                return
            batch = opts.max_messages - self.pending_msgs
            max_bytes = 0
            if batch < 1:
                return
        if self.outstanding() <= 0:
            # Nothing was outstanding, so the server owed us nothing until now: the heartbeat clock starts here,
            # not at the last message before the user's own (possibly long) processing time.
            self.heartbeat.touch()
        self.pending_msgs += batch
        self.pending_bytes += max_bytes
        self.pulls_sent += 1
        self._last_pull_at = time.monotonic()
        fields = self._priority_fields(opts.priority)
        self._pulled_pinned = bool(fields and "id" in fields)
        # probing (_on_full): no heartbeats, so a full consumer answers 409; expiring within the heartbeat's
        # time, the pull's own 408 keeps the heartbeat monitor fed
        heartbeat, expires = (0.0, opts.idle_heartbeat) if self._probing else (opts.idle_heartbeat, opts.expires)
        reply = b"%s.%d.%d" % (self._inbox_b, batch, max_bytes)
        self._send_pull(pull_request(batch, expires, max_bytes, heartbeat, extra=fields), reply)
        log.debug(
            "consume %s: pull batch=%d max_bytes=%d (pending %d msgs, %d bytes)",
            self.label,
            batch,
            max_bytes,
            self.pending_msgs,
            self.pending_bytes,
        )

    @io_thread
    def _apply_delivered(self) -> None:
        """IO thread, posted by the user side when a threshold was crossed."""
        self._apply_posted = False
        self._pull()

    @io_thread
    def _reset_pending(self) -> None:
        """Forget outstanding requests (they are gone after a reconnect or missed heartbeat); keep the buffer."""
        self._sync_delivered()
        buffered = self.received - self.applied
        self.pending_msgs = buffered
        if self.options.by_bytes:
            self.pending_bytes = min(self.pending_bytes, sum(m.size for m in self.buffer.snapshot()))

    @io_thread
    def _took(self, count: int, size: int) -> None:
        """IO thread: ``count`` deliveries of ``size`` bytes in all arrived: the pulls were answered."""
        self.received += count
        self.received_bytes += size  # an add, no lock: what the health snapshot reports as held
        self._unanswered = 0
        self._fruitless = 0
        self._probing = self._full_reported = False

    @io_thread
    def _on_messages(self, msgs: list[Msg], size: int) -> None:
        """IO thread: the `DeliverySink`'s batch (``_pullbase.py``), the Msgs it built from one read: what
        `_on_message` does for a delivery, once for all of them."""
        if self.stopped:
            _giveback.give_back_all_now(self.runtime, msgs, self.target.ack_none)
            return
        self.heartbeat.touch()
        self._took(len(msgs), size)
        refused = self.buffer.put_many(msgs)  # stopped meanwhile
        _giveback.give_back_all_now(self.runtime, refused, self.target.ack_none)

    @io_thread
    def _on_message(self, subject: bytes, reply: bytes, data: bytes, headers: bytes | None) -> None:
        if self.stopped:
            _giveback.give_back_now(self.runtime, reply, self.target.ack_none)  # stop() ran; the subscription ends next
            return
        self.heartbeat.touch()
        if reply.startswith(ACK_PREFIX):
            pin = self.target.pin
            if headers is not None and pin is not None and pin.note(headers):
                priority = self.options.priority
                self._report(errors.ConsumerPinnedEvent(self.label, priority.group if priority else "", pin.id))
            msg = self._make_msg(subject, reply, data, headers)
            self._took(1, msg.size)
            if not self.buffer.put(msg):
                _giveback.give_back_now(self.runtime, reply, self.target.ack_none)  # stopped meanwhile
            return
        status, description = status_of(headers)
        if status is None:
            return
        self.statuses[status] += 1
        if status != 503:
            self._unanswered = 0
        kind, exc = classify(status, description)
        refused = kind is StatusKind.LIMIT or kind is StatusKind.FULL
        if not refused and kind is not StatusKind.NO_RESPONDERS:
            self._probing = self._full_reported = False  # a pull got in: the consumer had room
        if status == 100:
            return
        # a refused pull was never registered: all it asked for is released (its 409 has no pending headers)
        msgs_left, bytes_left = self._refused(subject) if refused else pending_counts(headers)
        self.pending_msgs = max(0, self.pending_msgs - msgs_left)
        if self.options.by_bytes:
            self.pending_bytes = max(0, self.pending_bytes - bytes_left)
        log.debug("consume %s: status %d %s (pending %d msgs)", self.label, status, description, self.pending_msgs)
        if kind is StatusKind.TERMINAL:
            assert exc is not None
            self._on_terminal(exc)
            return
        if kind is StatusKind.OVERSIZED and self.options.by_bytes and bytes_left >= self.options.max_bytes:
            self._on_oversized(oversized(status, description, self.label, self.options.max_bytes))
            return
        if kind is StatusKind.WARNING:
            self.warnings += 1
            assert exc is not None
            self._report(exc)
        elif kind is StatusKind.RESET:
            self._reset_pending()
        elif kind is StatusKind.UNPINNED:
            self._on_unpinned(exc)
        elif kind is StatusKind.LIMIT:
            if not self._on_limit(status, description):
                return
        elif kind is StatusKind.FULL:
            self._on_full(exc)
        elif kind is StatusKind.NO_RESPONDERS:
            self._retry_later(exc)
            return
        self._pull_after_status()

    @io_thread
    def _pull_after_status(self) -> None:
        """IO thread, after a status that ended or refused a pull: pull again when the thresholds say so, but
        never at once after a run of statuses with no message between them.

        A status the server sends the moment a pull arrives (a 409; a byte budget, what is left of ``max_bytes``
        beside the buffered messages, too small for the next message) would otherwise be answered with the same
        pull at once, thousands of times a second while the handler works. So the second such status in a row
        waits until 50 ms after the last pull, each further one twice as long, up to 5 s; a delivered message
        starts over. A pull that waited out its expiry (408) was sent long before, and is replaced at once.
        """
        fruitless = self._fruitless
        self._fruitless += 1
        if self._retry_handle is not None and not self._retry_handle.cancelled():
            return  # a pull is already due then
        hold = min(_HOLD_FIRST * 2 ** min(fruitless - 1, 10), _HOLD_MAX) if fruitless else 0.0
        wait = self._last_pull_at + hold - time.monotonic()
        if wait <= 0:
            self._pull()
        else:
            self._retry_handle = self.runtime.call_later(wait, self._retry_now)

    @io_thread
    def _on_oversized(self, exc: errors.MessageExceedsMaxBytesError) -> None:
        """IO thread: a pull asking for the whole ``max_bytes`` got nothing, its next message being larger.

        Terminal, although ADR-37 lets a consume go on after every 409 but Consumer Deleted and push based: the
        consumer delivers in order, so every later pull meets the same message, and going on would leave the
        consume looking idle while the stream fills behind that message (``num_pending`` growing), its one
        report easily missed; an iterator without an error handler would wait forever. Ended, the error
        raises from the iteration and stays in ``ctx.error``, where a supervisor sees it. (A consumer shared
        with readers of a larger ``max_bytes`` could go on once one of them took the message; one whose reader
        cannot read every message is misconfigured all the same.) An ordered consumer ends too: a new link
        would stop at the same message.
        """
        self._on_terminal(exc)

    @io_thread
    def _on_limit(self, status: int, description: str) -> bool:
        """IO thread, 409 Exceeded MaxRequestBatch / MaxRequestExpires / MaxRequestMaxBytes: fit the pulls to the
        consumer's limit and report that once; False when no consume can fit it (ended with the error then).

        Adapted rather than ended (``_limits.py`` says why): the options size this consume's buffer and re-pull
        cadence, the consumer's limits bound every client's pulls, and a consume can honour both. A refusal of
        a pull sent before the fit (in flight meanwhile) only releases that pull.
        """
        limit = request_limit(description)
        assert limit is not None  # classify() said LIMIT
        if plan_fits(self.options, limit):
            return True
        plan, exc = fit_plan(self.options, limit, self.label, status, description)
        if plan is None:
            self._on_terminal(exc)
            return False
        log.debug("consume %s: fitted to %s=%s", self.label, limit.setting, limit.show())
        self.options = plan
        self.heartbeat.retime(plan.idle_heartbeat)
        self.warnings += 1
        self._report(exc)
        return True

    @io_thread
    def _on_full(self, exc: errors.JetStreamError | None) -> None:
        """IO thread, 409 Exceeded MaxWaiting: the consumer holds ``max_waiting`` pulls already. Transient, so
        pull again with the no-progress back-off (``_pull_after_status``: 50 ms doubling to 5 s) and report it
        once until a pull gets in.

        Since nats-server 2.12 the server answers this only to a pull without idle heartbeats; one with them is
        dropped without a word, and the consume learns it from the missed-heartbeat alarm. So after a 409 or a
        missed heartbeat the engine probes: its pulls go without heartbeats, expiring within the heartbeat's
        time (the 408 then plays the heartbeat's part), until a status other than a refusal or a message shows
        a pull got in. Each refusal is then answered at once, and the back-off paces the retries.
        """
        self._probing = True
        if not self._full_reported:
            self._full_reported = True
            self.warnings += 1
            if exc is not None:
                self._report(exc)

    @io_thread
    def _on_unpinned(self, exc: errors.JetStreamError | None) -> None:
        """IO thread, 423: the pin moved. Every outstanding pull carried the old id and is refused, so forget
        them and pull again without one. A 423 that arrives after that re-pull answers an older pull: its
        pending counts (if it has them) were applied above, nothing else to do."""
        pin = self.target.pin
        if pin is not None and not pin.id and not self._pulled_pinned:
            return
        if pin is not None:
            pin.id = ""
        self.warnings += 1
        if exc is not None:
            self._report(exc)
        self._reset_pending()

    @io_thread
    def _on_terminal(self, exc: errors.JetStreamError) -> None:
        """IO thread: a status that ends this consumer (deleted, bad request): report, end after the buffer."""
        self._report(exc)
        self._end(exc)

    @io_thread
    def _retry_later(self, exc: BaseException | None) -> None:
        """503 on a pull: the consumer or JetStream is not there (yet, after a restart, or while a cluster elects
        the consumer's leader); try again, backing off. After a few in a row, ask whether the consumer still
        exists (ADR-37): if the server says it does not, the consume ends with ConsumerNotFoundError."""
        self.warnings += 1
        if exc is not None:
            self._report(exc)
        self._reset_pending()
        self._unanswered += 1
        if self._unanswered >= _CHECK_CONSUMER_AFTER and not self._checking:
            self._checking = True
            self.runtime.spawn(self._check_consumer())
        if self._retry_handle is None or self._retry_handle.cancelled():
            delay = self._retry_delay
            self._retry_delay = min(self._retry_delay * 2, 5.0)
            self._retry_handle = self.runtime.call_later(delay, self._retry_now)

    @io_thread
    async def _check_consumer(self) -> None:
        """IO thread: the consumer's info; its absence ends the consume, anything else lets it retry."""
        try:
            gone = await consumer_gone(self.runtime, self.target)
        except errors.JetStreamError as exc:  # the API does not answer either (restarting, electing): retry on
            log.debug("consume %s: could not ask whether the consumer exists: %s", self.label, exc)
            return
        finally:
            self._checking = False
        if gone is not None and not self.stopped:
            log.debug("consume %s: the consumer is gone (%s)", self.label, gone)
            self._on_terminal(gone)

    @io_thread
    def _retry_now(self) -> None:
        self._retry_handle = None
        self._pull()

    # -- connection events (IO thread) ------------------------------------------------------------------
    @io_thread
    def _note_reconnected(self) -> None:
        self.connected = True
        self.reconnect_pulls += 1

    @io_thread
    def on_reconnected(self) -> None:
        self._note_reconnected()
        self.heartbeat.touch()
        self._retry_delay = 0.25
        self._reset_pending()
        log.debug("consume %s: reconnected, pulling again", self.label)
        self._pull()

    # -- heartbeats ---------------------------------------------------------------------------------------
    def outstanding(self) -> int:
        """Messages asked for and not yet arrived: only then must the server send something."""
        return self.pending_msgs - (self.received - self.applied)

    def _owes_us(self) -> bool:
        """Read by the heartbeat monitor on the watchdog and the IO thread: the server owes us messages now."""
        return super()._owes_us() and self.outstanding() > 0

    @io_thread
    def _on_missed_heartbeat(self) -> None:
        """IO thread, confirmed by the monitor: report, forget the lost pulls and pull again, probing (see
        _on_full): a consumer holding ``max_waiting`` pulls drops one that asks for heartbeats in silence."""
        self._count_missed_heartbeat()
        self._report(
            errors.MissedHeartbeatError(
                f"consume {self.label}: nothing from the server for {2 * self.options.idle_heartbeat:g}s "
                "(twice the idle heartbeat); pulling again, without heartbeats until a pull gets in (a consumer "
                "holding max_waiting pulls drops one with heartbeats unanswered)"
            )
        )
        self._probing = True
        self._reset_pending()
        self._pull()

    # -- the user side ----------------------------------------------------------------------------------
    def give_back(self, msgs: Sequence[Msg]) -> None:
        _giveback.give_back(self.runtime, msgs, self.label)

    def _count_handed_out(self, count: int, size: int) -> None:
        """User side: post to the IO thread when what was handed out crosses a threshold (it pulls then)."""
        self.delivered += count
        self.delivered_bytes += size
        if self._apply_posted or self.stopped or self.draining:
            return
        opts = self.options
        if opts.by_bytes:
            crossed = self.pending_bytes - (self.delivered_bytes - self.applied_bytes) <= opts.threshold_bytes
        else:
            crossed = self.pending_msgs - (self.delivered - self.applied) <= opts.threshold_messages
        if crossed:
            self._apply_posted = True
            self.runtime.post_if_open(self._apply_delivered)

    def stats(self) -> ConsumeStats:
        unapplied = self.delivered - self.applied
        return self._stats(
            pulls_sent=self.pulls_sent,
            pending_messages=max(0, self.pending_msgs - unapplied),
            pending_bytes=max(0, self.pending_bytes - (self.delivered_bytes - self.applied_bytes))
            if self.options.by_bytes
            else 0,
            reconnect_pulls=self.reconnect_pulls,
            warnings=self.warnings,
        )

    def _bounds(self) -> tuple[int, int]:
        opts = self.options
        return opts.max_messages, opts.max_bytes
