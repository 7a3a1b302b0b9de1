"""The push engine: a delivery source fed by the server on a deliver subject, with ADR-15's automatic status
management.

What the server pushes arrives on the IO thread: messages go to a bounded buffer (past its limits they are
dropped and a SlowConsumerError reported, so memory stays bounded whatever the handler's speed); idle
heartbeats feed the heartbeat monitor (alarm after 3x the interval by default, silent while disconnected) and
the gap check (their ``Nats-Last-Consumer`` header); a flow-control request is answered once the message
before it was handed to the user, never on receipt, and a heartbeat's ``Nats-Consumer-Stalled`` header is
answered at once; each flow-control subject is answered once. Error statuses (409, 503, unknown) are reported,
never handed out. The lifecycle and the hand-out accounting are `DeliveryEngine`'s (``_engine.py``); the
ordered variant, `OrderedPush`, is `Ordering` in front of this feed (``_ordered.py``). The handles
(MessagesIterator, ConsumeContext) are the pull ones.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence

import attrs

from .. import errors
from .._protocol import ACK_PREFIX, ack_position, encode_pub
from .._runtime import BufferFinished, Handler, NatsSubscription, Runtime, io_thread
from ..headers import parse_header_block
from ..message import Msg
from . import _giveback
from ._engine import DeliveryEngine
from ._heartbeat import HeartbeatMonitor
from ._sources import ConsumeStats

__all__ = ["PushEngine", "PushLimits"]

log = logging.getLogger("jetstream_sync")

#: How long closing the client waits for the server to confirm the UNSUB of a push subscription just stopped,
#: before what it gives back is sent (one round trip on a healthy connection)
_CLOSE_WAITS_FOR_UNSUB = 1.0

_LAST_CONSUMER = "Nats-Last-Consumer"
_STALLED = "Nats-Consumer-Stalled"


@attrs.frozen(kw_only=True)
class PushLimits:
    """How much a push consumer may hold unread, and when silence is an alarm."""

    max_messages: int
    max_bytes: int
    alarm_after: float | None  # None: 3x the consumer's idle heartbeat


class PushEngine(DeliveryEngine):
    """One subscription on a push consumer's deliver subject (a [`DeliverySource`][jetstream_sync.DeliverySource]).

    IO-thread state: ``received``/``received_bytes``, ``consumer_seq`` (gap detection), the status counters.
    User side: ``delivered``/``delivered_bytes``. The flow-control queue is shared under its own lock: the IO
    thread appends "answer S once message #k was handed out", whichever side sees #k handed out answers it.
    """

    _starting = "subscribe"
    _kind = "push"

    def __init__(
        self,
        runtime: Runtime,
        *,
        label: str,
        deliver_subject: str,
        queue: str,
        ack_none: bool,
        heartbeat: float,
        limits: PushLimits,
        gap_detection: bool,
        report: Callable[[BaseException], None],
    ) -> None:
        super().__init__(runtime, report=report)
        self._label = label
        self.deliver_subject = deliver_subject
        self.queue = queue
        self.ack_none = ack_none
        self.limits = limits
        self.gap_detection = gap_detection
        self._nats_sub: NatsSubscription | None = None
        self._given_back = _giveback.HeldGiveBack(runtime, label, ack_none)  # held from stop() until unsubscribed
        self._retiring = False  # IO thread: a drain's UNSUB awaits its confirmation
        # IO thread only
        self.consumer_seq = 0
        self.dropped = 0
        self._slow = False
        self.gaps = 0
        self.flow_control_requests = 0
        self.flow_control_answered = 0
        self.reconnects = 0
        # both sides, under _fc_lock: (message count that must be handed out first, subject to answer)
        self._fc: deque[tuple[int, bytes]] = deque()
        self._fc_lock = threading.Lock()
        self._fc_last: bytes | None = None
        self._fc_last_at = 0.0  # monotonic time of the last answer
        self._heartbeat_interval = heartbeat
        self.heartbeat = HeartbeatMonitor(
            runtime, heartbeat, self._owes_us, self._on_missed_heartbeat, alarm_after=self._alarm_after(heartbeat)
        )

    def _alarm_after(self, heartbeat: float) -> float:
        alarm = self.limits.alarm_after
        return 3 * heartbeat if alarm is None else alarm

    @property
    def label(self) -> str:
        return self._label

    # -- lifecycle --------------------------------------------------------------------------------------
    @io_thread
    async def _start(self) -> None:
        self._nats_sub = await self.runtime.subscribe_async(self.deliver_subject, self._on_message, self.queue)
        self.runtime.add_listener(self)
        self.connected = self.runtime.is_connected
        self.heartbeat.touch()

    def stop(self) -> None:
        """Any thread: end delivery at once; buffered messages are not handed out but given back (nak'd, when
        the consumer takes acks), and so is what the server pushed before it saw the UNSUB: all of it once the
        server has seen the UNSUB (`HeldGiveBack` says why)."""
        if self.halted:
            return
        self._given_back.hold()
        self.halted = self.stopped = True
        self.heartbeat.stop()
        self.give_back(self.buffer.abort(BufferFinished()))
        try:
            self.runtime.post(self._shutdown)
        except errors.ConnectionClosedError:  # nothing can be unsubscribed or sent any more
            self._given_back.release()

    @io_thread
    def _quiet(self) -> NatsSubscription | None:
        """IO thread: no more deliveries, heartbeat checks or connection events; the subscription, taken."""
        self.stopped = True
        self.heartbeat.stop()
        self.runtime.remove_listener(self)
        sub, self._nats_sub = self._nats_sub, None
        return sub

    @io_thread
    def _shutdown(self) -> None:
        """IO thread: UNSUB; once the server confirmed it, what is held is given back and the client forgets us
        (until then closing the client gives it back: ``on_client_closed``)."""
        sub = self._quiet()
        if sub is not None:
            self._retire(sub, self._given_back_late, then_finish=False)
        elif not self._retiring:
            self._released()

    @io_thread
    def _retire(self, sub: NatsSubscription, late: Handler, *, then_finish: bool) -> None:
        """IO thread: what arrives for ``sub`` goes to ``late`` until the server has seen its UNSUB; then what
        was held is given back and, for a drain (``then_finish``), the reader ends after what was buffered."""
        self._retiring = True
        self.runtime.spawn(self._after_retired(self.runtime.retire(sub, late), then_finish))

    @io_thread
    async def _after_retired(self, retired: Awaitable[None], then_finish: bool) -> None:
        try:
            await retired
        finally:
            self._retiring = False
            self._released()
            if then_finish:
                self.buffer.finish()

    @io_thread
    def _released(self) -> None:
        """IO thread: give back what was held; the client need no longer tell us it closes."""
        self._given_back.release()
        self.runtime.untrack(self)

    @io_thread
    def _given_back_late(self, subject: bytes, reply: bytes, data: bytes, headers: bytes | None) -> None:
        """IO thread: what the server pushed before it saw the UNSUB, given back with the rest."""
        self._given_back.give_back_reply(reply)

    @io_thread
    def _drain(self) -> None:
        """IO thread: as the pull engine's drain: what the server pushed before it saw the UNSUB is handed out
        too (a consumer that takes no acks ends at once: nothing of it waits for an ack wait)."""
        sub = self._quiet()
        if sub is None or self.ack_none:
            if sub is not None:
                self.runtime.unsubscribe_soon(sub, self.deliver_subject)
            if not self._retiring:
                self._released()
            self.buffer.finish()
            return
        self._retire(sub, self._on_draining, then_finish=True)

    @io_thread
    def _on_draining(self, subject: bytes, reply: bytes, data: bytes, headers: bytes | None) -> None:
        """IO thread, while a drain waits for the UNSUB's confirmation: messages are handed out (given back once
        the reader stopped); statuses and flow control no longer matter."""
        if not reply.startswith(ACK_PREFIX):
            return
        if self.halted:
            self._given_back.give_back_reply(reply)
            return
        size = len(subject) + len(reply) + len(data) + (len(headers) if headers else 0)
        self.received += 1
        self.received_bytes += size
        msg = Msg(subject.decode(), reply.decode(), data, headers, self.acks, size=size, ack_none=self.ack_none)
        if not self.buffer.put(msg):
            self._given_back.give_back_reply(reply)  # stopped meanwhile

    @io_thread
    def _end(self, exc: BaseException) -> None:
        """IO thread: readers get the buffered messages, then ``exc``."""
        self._shutdown()
        self.buffer.finish(exc)

    def on_client_closed(self, exc: BaseException) -> None:
        """The closing thread, before the connection closes: what is buffered or held is given back. After a
        ``stop()`` whose UNSUB awaits its confirmation, once it came (the IO thread still runs), at most
        ``_CLOSE_WAITS_FOR_UNSUB`` seconds: given back before the server has seen the UNSUB, a message may be
        redelivered to this closing connection, then waits for its ack wait (`HeldGiveBack`)."""
        stopped_before = self.halted  # stop() posted the UNSUB; the IO thread sends it and awaits the answer
        sub = self._nats_sub
        if not stopped_before and sub is not None:  # the UNSUB ahead of the naks, as a pull read's close does
            with contextlib.suppress(errors.JetStreamError):
                self.runtime.send_unsub(sub)
        self.halted = self.stopped = True
        self.heartbeat.stop()
        self.give_back(self.buffer.abort(exc))
        if stopped_before and not self.runtime.in_io_thread:
            self._given_back.wait_released(_CLOSE_WAITS_FOR_UNSUB)
        self._given_back.release()

    def give_back(self, msgs: Sequence[Msg]) -> None:
        """Any thread: nak ``msgs`` (those that await an ack); after ``stop()`` once the UNSUB was confirmed."""
        self._given_back.give_back(msgs)

    # -- what arrives (IO thread) -----------------------------------------------------------------------
    @io_thread
    def _on_message(self, subject: bytes, reply: bytes, data: bytes, headers: bytes | None) -> None:
        if self.stopped:
            self._given_back.give_back_reply(reply)  # stop() ran; the UNSUB follows
            return
        self.heartbeat.touch()
        if reply.startswith(ACK_PREFIX):
            limits = self.limits
            if (
                self.received - self.delivered >= limits.max_messages
                or self.received_bytes - self.delivered_bytes >= limits.max_bytes
            ):
                self._drop(reply)
                return
            if not self._accept(reply):
                return
            size = len(subject) + len(reply) + len(data) + (len(headers) if headers else 0)
            self._slow = False
            self.received += 1
            self.received_bytes += size
            msg = Msg(subject.decode(), reply.decode(), data, headers, self.acks, size=size, ack_none=self.ack_none)
            if not self.buffer.put(msg):
                self._given_back.give_back_reply(reply)  # stopped meanwhile
            return
        if not headers:
            return
        status, description, parsed = parse_header_block(headers)
        if status is None:
            return
        self.statuses[status] += 1
        if status == 100:
            if reply:  # a flow-control request: answered once what came before it was handed out
                self.flow_control_requests += 1
                self._flow_control(reply)
                return
            stalled = parsed.get(_STALLED)
            if stalled:
                self._on_stalled(stalled.encode())
            last = parsed.get(_LAST_CONSUMER)
            if last is not None and last.isdigit():
                self._check_heartbeat_position(int(last))
            return
        self._on_error_status(status, description)

    @io_thread
    def _accept(self, reply: bytes) -> bool:
        """Gap detection on a message's consumer sequence (not for queue groups); always accepts."""
        if self.gap_detection:
            position = ack_position(reply)
            if position is not None:
                expected = self.consumer_seq + 1
                if self.consumer_seq and position.consumer_seq > expected:
                    self._on_gap(expected, position.consumer_seq)
                self.consumer_seq = max(self.consumer_seq, position.consumer_seq)
        return True

    @io_thread
    def _check_heartbeat_position(self, last_consumer: int) -> None:
        """A heartbeat says the server delivered up to ``last_consumer``: more than we saw means a gap."""
        if self.gap_detection and last_consumer > self.consumer_seq:
            self._on_gap(self.consumer_seq + 1, last_consumer + 1)
            self.consumer_seq = last_consumer

    @io_thread
    def _on_gap(self, expected: int, received: int) -> None:
        self.gaps += 1
        self._report(errors.ConsumerSequenceGapError(self.label, expected, received))

    @io_thread
    def _on_error_status(self, status: int, description: str) -> None:
        """ADR-15: 409, 503 and unknown statuses are errors, reported and never handed out; a deleted
        consumer ends the delivery after the buffered messages."""
        if status == 409 and "consumer deleted" in description.lower():
            exc: errors.JetStreamError = errors.ConsumerDeletedError(status, description)
            self._report(exc)
            self._end(exc)
            return
        self._report(errors.PushStatusError(status, description, self.label))

    @io_thread
    def _drop(self, reply: bytes) -> None:
        """IO thread: the buffer is full; the message is dropped on purpose (not a gap)."""
        self.dropped += 1
        position = ack_position(reply)
        if position is not None:
            self.consumer_seq = max(self.consumer_seq, position.consumer_seq)
        if not self._slow:
            self._slow = True
            self._report(
                errors.SlowConsumerError(
                    f"push consumer {self.label}: {self.limits.max_messages} messages or {self.limits.max_bytes} "
                    "bytes wait unread; dropping new ones until the handler catches up (they are redelivered after "
                    "ack_wait when the consumer takes acks; use flow_control=True to let the server slow down)"
                )
            )

    # -- flow control -----------------------------------------------------------------------------------
    @io_thread
    def _flow_control(self, subject: bytes) -> None:
        """IO thread: answer ``subject`` once every message received so far was handed out."""
        due = self.received
        with self._fc_lock:
            self._fc.append((due, subject))
        self._answer_due()

    def _answer_due(self) -> None:
        """Any thread: answer the flow-control requests whose preceding messages were all handed out."""
        ready: list[bytes] = []
        with self._fc_lock:
            fc = self._fc
            while fc and fc[0][0] <= self.delivered:
                ready.append(fc.popleft()[1])
        for subject in ready:
            self._answer(subject)

    @io_thread
    def _on_stalled(self, subject: bytes) -> None:
        """IO thread: a heartbeat says the server still waits for the answer to ``subject``. A request still
        queued is answered once its messages were handed out, as ever. Otherwise our answer was lost (or the
        request never came): answer again. A heartbeat sent just before our answer reached the server still
        names the subject, so the last subject is answered again only once a heartbeat interval has passed
        since its answer: a lost answer costs at most two heartbeats, a late heartbeat no duplicate."""
        with self._fc_lock:
            if any(queued == subject for _, queued in self._fc):
                return
            if subject == self._fc_last:
                if time.monotonic() - self._fc_last_at < self._heartbeat_interval:
                    return
                self._fc_last = None
        self._answer(subject)

    def _answer(self, subject: bytes) -> None:
        """Any thread: an empty publish to the flow-control subject, once per subject (see _on_stalled)."""
        with self._fc_lock:
            if subject == self._fc_last:
                return
            self._fc_last = subject
            self._fc_last_at = time.monotonic()
        self.flow_control_answered += 1
        self.runtime.send(encode_pub(subject, b"", None, b""))

    # -- connection events and heartbeats (IO thread) ---------------------------------------------------
    @io_thread
    def _note_reconnected(self) -> None:
        self.connected = True
        self.reconnects += 1
        self.heartbeat.touch()

    @io_thread
    def on_reconnected(self) -> None:
        """IO thread: the server owes heartbeats again (the base's ``_owes_us``: whenever connected and
        subscribed); the push consumer resumes by itself."""
        self._note_reconnected()

    @io_thread
    def _on_missed_heartbeat(self) -> None:
        self._count_missed_heartbeat()
        self._report(
            errors.MissedHeartbeatError(
                f"push consumer {self.label}: nothing from the server for {self.heartbeat.alarm_after:g}s "
                f"(idle heartbeat {self.heartbeat.interval:g}s)"
            )
        )

    # -- the user side ----------------------------------------------------------------------------------
    def _count_handed_out(self, count: int, size: int) -> None:
        """User side: count what was handed out, and answer the flow-control requests that are now due."""
        self.delivered += count
        self.delivered_bytes += size
        if self._fc:
            self._answer_due()

    def _bounds(self) -> tuple[int, int]:
        return self.limits.max_messages, self.limits.max_bytes

    def stats(self) -> ConsumeStats:
        return self._stats(
            pulls_sent=0,
            pending_messages=0,
            pending_bytes=0,
            reconnect_pulls=0,
            warnings=self.gaps + self.dropped,
            dropped=self.dropped,
            gaps=self.gaps,
            flow_control_requests=self.flow_control_requests,
            flow_control_answered=self.flow_control_answered,
        )
