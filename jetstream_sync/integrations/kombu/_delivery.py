"""How a channel's consumers get messages: one puller thread per JetStream consumer, an inbox, a prefetch quota
and a keeper that sends in-progress acks.

kombu reads from one thread and asks, in ``drain_events``, for whatever arrived on any of the queues it
consumes. A JetStream pull waits on one consumer, so each consumer being read (a queue, or one priority band of
a queue) gets a **puller**: a thread that sends one pull at a time (``fetch``) for as many messages as the
channel's prefetch leaves room for (the `Quota`), and puts what arrives into the channel's
`Inbox`. The inbox is ordered by priority band, then arrival, and its ``wake`` callback tells the
transport's waiter (a condition for ``drain_events``, a pipe for an event loop) that something is there.

Nothing a worker holds is left to the server's ack wait while the worker lives: the `Keeper` sends
``in_progress()`` (+WPI) for every message in the inbox and every message delivered and not yet acked, every
third of the consumer's ack wait. So a task may run, or wait for its ETA, for as long as it needs, and a worker
that dies (SIGKILL, a lost machine) has its messages redelivered one ack wait after its last keep-alive.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING

import attrs

from ... import errors

if TYPE_CHECKING:
    from ...jetstream.consumers import Consumer
    from ...message import Msg

__all__ = ["Delivery", "Inbox", "Keeper", "Puller", "Quota"]

log = logging.getLogger("jetstream_sync.integrations")

#: how long a puller waits before pulling again after an error it does not end on
_RETRY_DELAY = 1.0


@attrs.define(eq=False)
class Delivery:
    """A message received for one reader (a ``basic_consume``), not yet handed to kombu."""

    reader: object
    msg: Msg
    rank: int


class Inbox:
    """What the pullers received and kombu has not taken yet: highest rank (priority band) first, then in the
    order received. Thread-safe; ``wake`` is called after each put (on the puller's thread).

    ``arrivals`` numbers what is put; the transport gives every channel's inbox the same counter, so that it
    can hand kombu what arrived first across channels too (`head`)."""

    def __init__(self, wake: Callable[[], None], arrivals: Iterator[int] | None = None) -> None:
        self._lock = threading.Lock()
        self._heap: list[tuple[int, int, Delivery]] = []
        self._order = arrivals if arrivals is not None else itertools.count()
        self._wake = wake

    def __len__(self) -> int:
        return len(self._heap)

    def put(self, delivery: Delivery) -> None:
        with self._lock:
            heapq.heappush(self._heap, (-delivery.rank, next(self._order), delivery))
        self._wake()

    def pop(self) -> Delivery | None:
        with self._lock:
            return heapq.heappop(self._heap)[2] if self._heap else None

    def head(self) -> int | None:
        """The arrival number of what `pop` would return next, or None when empty."""
        with self._lock:
            return self._heap[0][1] if self._heap else None

    def take_reader(self, reader: object) -> list[Delivery]:
        """Remove and return what is waiting for ``reader`` (its consume was cancelled)."""
        with self._lock:
            mine = [entry[2] for entry in self._heap if entry[2].reader is reader]
            if mine:
                self._heap = [entry for entry in self._heap if entry[2].reader is not reader]
                heapq.heapify(self._heap)
            return mine

    def messages(self) -> list[Msg]:
        with self._lock:
            return [entry[2].msg for entry in self._heap]


class Quota:
    """The channel's prefetch, shared by its pullers: a puller reserves room before it pulls and gives back
    what the pull did not fill.

    ``used`` counts what the channel holds (in the inbox and delivered unacked). With ``prefetch_count`` 0
    (no limit, kombu's default) the channel still holds at most ``unlimited`` messages. Each puller may reserve
    at most its share (the limit divided by the number of pullers, at least 1), so an idle queue's waiting
    pull never takes all the room from a busy one; with more pullers than prefetch (many priority bands and a
    prefetch of 1) each still pulls one, and the worker holds one per band (kept alive all the same)."""

    def __init__(self, used: Callable[[], int], *, unlimited: int, batch: int) -> None:
        self._used = used
        self._cond = threading.Condition()
        self._prefetch = 0
        self._unlimited = unlimited
        self._batch = batch
        self._reserved = 0
        self._pullers = 0

    @property
    def prefetch(self) -> int:
        return self._prefetch

    def set_prefetch(self, count: int) -> None:
        with self._cond:
            self._prefetch = max(0, int(count))
            self._cond.notify_all()

    def changed(self) -> None:
        """Something was acked, delivered or given back: pullers waiting for room look again."""
        with self._cond:
            self._cond.notify_all()

    def joined(self, count: int) -> None:
        with self._cond:
            self._pullers += count
            self._cond.notify_all()

    def _free(self) -> tuple[int, int]:
        limit = max(self._prefetch or self._unlimited, self._pullers)
        share = max(1, limit // max(1, self._pullers))
        return limit - self._used() - self._reserved, share

    def reserve(self, stopped: threading.Event) -> int:
        """Room for the next pull, waiting until there is enough; 0 once ``stopped`` is set.

        Enough is half of what one pull may ask for (the puller's share, at most ``batch``), not one message:
        a worker that acks one task of eight prefetched still holds seven, so pulling the one freed place at
        once would cost a pull (a subscription, a request, an unsubscription) per message and gain nothing;
        pulling four when four are free halves the pulls at a prefetch of 2 and quarters them at 8. With a
        prefetch of 1 (or a share of 1) every freed place is pulled at once, as before."""
        with self._cond:
            while not stopped.is_set():
                free, share = self._free()
                most = min(share, self._batch)
                if free >= max(1, most // 2):
                    count = min(free, most)
                    self._reserved += count
                    return count
                self._cond.wait(1.0)  # woken by changed(); the timeout only bounds a missed wake-up
            return 0

    def release(self, count: int) -> None:
        """Give back the part of a reservation that is done: received into the inbox or not filled."""
        with self._cond:
            self._reserved -= count
            self._cond.notify_all()


class Puller:
    """One thread pulling one JetStream consumer for one reader (see the module docstring).

    ``sink(puller, msg)`` takes each message (on this thread): into the inbox, or dropped when expired.
    ``on_failure`` gets an error that ends the pulling (the consumer was deleted, the client closed). The
    first pull takes what is there now (no wait), so that a consume started on a backlog sees every band's
    first messages together before the channel delivers (``first_done``).
    """

    def __init__(
        self,
        consumer: Consumer,
        rank: int,
        quota: Quota,
        sink: Callable[[Puller, Msg], None],
        on_failure: Callable[[Puller, BaseException], None],
        *,
        expires: float,
        label: str,
    ) -> None:
        self.consumer = consumer
        self.rank = rank
        self._quota = quota
        self._sink = sink
        self._on_failure = on_failure
        self._expires = expires
        self.label = label
        self.stopped = threading.Event()
        self.first_done = threading.Event()
        self._batch_lock = threading.Lock()
        self._batch: object | None = None
        self._thread = threading.Thread(target=self._run, name=f"kombu-pull {label}", daemon=True)

    def start(self) -> None:
        self._quota.joined(1)
        self._thread.start()

    def stop(self) -> None:
        """Any thread: no new pulls; a pull waiting at the server ends now (what it brought and was not put
        into the inbox is given back)."""
        self.stopped.set()
        self._quota.changed()
        with self._batch_lock:
            batch = self._batch
        if batch is not None:
            try:
                batch.close()  # type: ignore[attr-defined]
            except errors.JetStreamError:  # a forked or closed client: nothing of it is ours to end
                log.debug("kombu pull %s: closing the pull failed", self.label, exc_info=True)

    def join(self, timeout: float) -> None:
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def _run(self) -> None:
        try:
            self._loop()
        except BaseException as exc:  # anything unexpected ends the pulling, reported, never silently
            if not self.stopped.is_set():
                log.exception("kombu pull %s failed", self.label)
                self._on_failure(self, exc)
        finally:
            self.first_done.set()
            self._quota.joined(-1)

    def _loop(self) -> None:
        first = True
        while not self.stopped.is_set():
            room = self._quota.reserve(self.stopped)
            if room == 0:
                return
            try:
                batch = self.consumer.fetch_no_wait(room) if first else self.consumer.fetch(room, expires=self._expires)
                with self._batch_lock:
                    self._batch = batch
                if self.stopped.is_set():
                    batch.close()
                for msg in batch:
                    self._sink(self, msg)  # into the inbox (counted as used there) before the room is released
                    room -= 1
                    self._quota.release(1)
            except (errors.ConnectionClosedError, errors.ForkedClientError, errors.ConsumerNotFoundError,
                    errors.ConsumerDeletedError) as exc:  # fmt: skip
                if not self.stopped.is_set():
                    self._on_failure(self, exc)
                return
            except errors.JetStreamError as exc:
                if self.stopped.is_set():
                    return
                log.warning("kombu pull %s: %s; pulling again in %g s", self.label, exc, _RETRY_DELAY)
                self.stopped.wait(_RETRY_DELAY)
            finally:
                with self._batch_lock:
                    self._batch = None
                self._quota.release(room)
                if first:
                    first = False
                    self.first_done.set()


class Keeper:
    """Sends ``in_progress()`` for what a channel holds, every ``interval`` seconds, on its own thread.

    ``held()`` lists the messages (inbox and delivered unacked), read on the keeper's thread."""

    def __init__(self, held: Callable[[], Iterable[Msg]], interval: float, label: str) -> None:
        self._held = held
        self.interval = interval
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"kombu-keepalive {label}", daemon=True)
        self.sent = 0

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()

    def _run(self) -> None:
        while not self._stopped.wait(self.interval):
            started = time.monotonic()
            for msg in self._held():
                if self._stopped.is_set():
                    return
                try:
                    msg.in_progress()
                    self.sent += 1
                except errors.ForkedClientError:  # the client is another process's: nothing of it to keep alive
                    return
                except errors.JetStreamError as exc:  # disconnected: the next round tries again
                    log.debug("kombu keep-alive of %s failed: %s", msg.subject, exc)
            spent = time.monotonic() - started
            if spent > self.interval / 2:
                log.warning("kombu keep-alive round took %.1f s (interval %.1f s)", spent, self.interval)
