"""``BandedPull``: the worker's delivery source, which takes each task from the highest priority band that has
one, and only as many tasks as it has threads free.

A plain consume could not honour priorities: it keeps a buffer filled from one consumer, in stream order. Here
each (queue, band) has its own durable consumer, and every take asks them highest band first with a no-wait
fetch for what the free threads can start now (``capacity`` minus the tasks in hand): under a backlog, no task of
a lower band starts while a higher band has one ready. Nothing is pulled ahead, so no task waits in a worker
that cannot start it (where its ack wait could run out and another worker run it too), and a task left
waiting on the server goes to whichever worker frees up first.

Asking every band on every take would cost a request per empty band per task, so a band is asked only while it
may hold tasks: after a fetch that left some, after a publish to its subject rings the worker's core
subscription (a JetStream publish is also a core NATS message), and every ``poll`` seconds (schedules' copies
and redeliveries ring nothing). An idle worker waits on that subscription, so a task published to an idle
worker starts at once; a deferred or retried one within ``poll`` seconds of its time.

It is a ``DeliverySource`` of the consume machinery (``jetstream.consumers.delivery``), so the worker's consume
is the client's own ``ConsumeContext``: the worker pool, in-progress acks while a task runs, drain and stop.
Called by the consume's reader thread (``take_many``), its pool's threads (`finished`) and the thread
that stops or drains it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence

from .... import errors
from ...._runtime._buffer import BufferFinished
from ....client import Client
from ....jetstream.consumers import Consumer
from ....jetstream.consumers.delivery import ConsumeStats
from ....message import Msg
from ....subscription import Subscription

__all__ = ["Band", "BandedPull"]

log = logging.getLogger("jetstream_sync.integrations.django")

#: how often a waiting reader looks at the wake-up subscription and whether it was stopped
_SLICE = 0.25
#: errors after which asking again cannot help: the consume ends and the worker command exits
_TERMINAL = (errors.ConsumerNotFoundError, errors.StreamNotFoundError, errors.ConnectionClosedError)


class Band:
    """One (queue, band) consumer and its subject, in the order the bands are asked (highest first)."""

    def __init__(self, subject: str, consumer: Consumer) -> None:
        self.subject = subject
        self.consumer = consumer
        #: the band may hold tasks: ask it at the next take
        self.stale = True


class BandedPull:
    """See the module docstring. ``bands`` highest first; ``rings`` the subject of the wake-up subscription."""

    def __init__(
        self,
        client: Client,
        bands: Sequence[Band],
        *,
        capacity: int,
        poll: float,
        rings: str,
        label: str,
        report: Callable[[BaseException], object],
    ) -> None:
        self._runtime = client.runtime
        self._bands = list(bands)
        self._by_subject = {band.subject: band for band in self._bands}
        self._capacity = capacity
        self._poll = poll
        self._label = label
        self._report = report
        self._cond = threading.Condition(threading.Lock())
        self._in_hand = 0  # tasks handed to the consume and not yet finished or given back
        self._held: dict[int, Msg] = {}  # those tasks' messages, by id, for abandon()
        self._holds: list[Callable[[], Iterable[Msg]]] = []  # the consume's burst and pool queue, for abandon()
        self._halted = False  # only ever set
        self._closed = False  # only ever set
        self._next_poll = 0.0
        self._pulls = 0
        self._delivered = 0
        self._bytes = 0
        self._failing = False  # the last fetch failed (reported once until one succeeds)
        self._rings: Subscription = client.subscribe(rings)

    # -- DeliverySource -------------------------------------------------------------------------------------
    @property
    def label(self) -> str:
        return self._label

    @property
    def halted(self) -> bool:
        return self._halted

    @property
    def closed(self) -> bool:
        return self._closed

    def take_into(self, held: deque[Msg], limit: int, timeout: float | None) -> None:
        """Reader thread: up to ``limit`` tasks into ``held``, no more than the free threads, highest band first."""
        held.extend(self._take(limit, timeout))

    def hold(self, surrender: Callable[[], Iterable[Msg]]) -> None:
        """The consume's burst and its pool's queue: `abandon` empties them before it naks what is in
        hand, so no task it gives back is still handed to a thread afterwards."""
        with self._cond:
            self._holds.append(surrender)

    def _take(self, limit: int, timeout: float | None) -> list[Msg]:
        """Reader thread: up to ``limit`` tasks, no more than the free threads, highest band first."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            free = self._wait_for_room(deadline)
            self._read_rings(0.0)
            now = time.monotonic()
            if now >= self._next_poll:
                for band in self._bands:
                    band.stale = True
                self._next_poll = now + self._poll
            msgs = self._fetch(min(limit, free))
            if msgs:
                with self._cond:
                    self._in_hand += len(msgs)
                    self._held.update((id(msg), msg) for msg in msgs)
                return msgs
            wait = self._next_poll - time.monotonic()
            if deadline is not None:
                wait = min(wait, deadline - time.monotonic())
                if wait <= 0:
                    raise errors.TimeoutError(f"no task on {self._label} within {timeout:g}s")
            self._read_rings(max(0.0, min(wait, _SLICE)))

    def handed_out(self, msg: Msg) -> None:
        self._delivered += 1
        self._bytes += len(msg.data)

    def handed_out_many(self, msgs: Sequence[Msg]) -> None:
        for msg in msgs:
            self.handed_out(msg)

    def give_back(self, msgs: Sequence[Msg]) -> None:
        """Tasks taken but not run (the consume stopped): nak'd, so another worker runs them now."""
        for msg in msgs:
            if not msg.is_acked:
                try:
                    msg.nak()
                except errors.JetStreamError as exc:  # closing: they come back after their ack wait
                    log.debug("tasks: give back of %s failed: %s", msg.subject, exc)
        self._release(msgs)

    def report(self, exc: BaseException) -> None:
        self._report(exc)

    def adopt_thread(self, thread: threading.Thread) -> None:
        self._runtime.track_thread(thread)

    def stop(self) -> None:
        self._halted = True
        self._end()

    def drain(self) -> None:
        self._end()

    def stats(self) -> ConsumeStats:
        with self._cond:
            in_hand = self._in_hand
        return ConsumeStats(
            pulls_sent=self._pulls,
            messages_delivered=self._delivered,
            bytes_delivered=self._bytes,
            pending_messages=in_hand,
            pending_bytes=0,
            buffered=0,
            heartbeats_missed=0,
            reconnect_pulls=0,
            warnings=0,
            statuses={},
        )

    # -- the worker's side ----------------------------------------------------------------------------------
    def finished(self, msg: Msg) -> None:
        """A pool thread is done with ``msg`` (acked, nak'd or termed): its thread is free for the next task."""
        self._release([msg])

    def abandon(self) -> int:
        """Stop at once (a second signal): nak the messages of the tasks still running, so that other workers
        run them now instead of after their ack wait; returns how many. Those tasks' threads are left to the
        process's exit; what they write afterwards no longer settles anything (a nak'd message takes no ack)."""
        self.stop()
        with self._cond:
            holds = list(self._holds)
        for surrender in holds:
            surrender()  # taken out of the consume's hands; each is in _held too, and nak'd below
        with self._cond:
            held = list(self._held.values())
        for msg in held:
            if not msg.is_acked:
                try:
                    msg.nak()
                except errors.JetStreamError as exc:
                    log.debug("tasks: nak of %s on stop failed: %s", msg.subject, exc)
        return len(held)

    # -- internals ------------------------------------------------------------------------------------------
    def _release(self, msgs: Sequence[Msg]) -> None:
        with self._cond:
            self._in_hand -= len(msgs)
            for msg in msgs:
                self._held.pop(id(msg), None)
            self._cond.notify_all()

    def _end(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        try:
            self._rings.unsubscribe()
        except errors.JetStreamError as exc:  # closing or disconnected: the subscription goes with the client
            log.debug("tasks: unsubscribing %s failed: %s", self._rings.subject, exc)

    def _wait_for_room(self, deadline: float | None) -> int:
        """How many tasks the free threads can start; waits while none is free. BufferFinished once stopped
        or drained (nothing is buffered here, so a drain has nothing more to hand out)."""
        while True:
            with self._cond:
                if self._closed:
                    raise BufferFinished
                free = self._capacity - self._in_hand
                if free > 0:
                    return free
                if deadline is not None and time.monotonic() >= deadline:
                    raise errors.TimeoutError(f"no thread free on {self._label}")
                self._cond.wait(_SLICE)
            self._read_rings(0.0)  # while busy: keep the subscription's buffer from filling up

    def _read_rings(self, wait: float) -> None:
        """Mark the bands a publish rang for; wait up to ``wait`` seconds for the first ring."""
        while True:
            try:
                msg = self._rings.next_msg(wait) if wait > 0 else self._next_ring()
            except errors.TimeoutError:  # no ring within ``wait``: no band has news
                return
            except (errors.SubscriptionClosedError, errors.ConnectionClosedError):
                return  # stopped or drained: the caller sees it
            if msg is None:
                return
            band = self._by_subject.get(msg.subject)
            if band is not None:
                band.stale = True
            wait = 0.0

    def _next_ring(self) -> Msg | None:
        if self._rings.pending == 0:
            return None
        return self._rings.next_msg(0.001)

    def _fetch(self, want: int) -> list[Msg]:
        """Reader thread: up to ``want`` tasks from the stale bands, highest first."""
        got: list[Msg] = []
        for band in self._bands:
            if not band.stale or self._closed:
                continue
            asked = want - len(got)
            last: Msg | None = None
            count = 0
            try:
                self._pulls += 1
                for msg in band.consumer.fetch(asked, no_wait=True):
                    got.append(msg)
                    last = msg
                    count += 1
            except _TERMINAL:
                raise
            except errors.JetStreamError as exc:  # disconnected, a timeout: asked again at the next poll
                band.stale = False
                if not self._failing:  # once per outage, not at every poll
                    self._failing = True
                    self._report(exc)
                continue
            self._failing = False
            if count < asked or (last is not None and last.metadata.num_pending == 0):
                band.stale = False  # nothing more there now
            if len(got) >= want:
                break
        return got
