"""LanePool: the handlers of several lanes (a service's endpoints) on one bounded pool of threads.

A service runs every endpoint's handler on one pool of ``workers`` threads. Each endpoint is a `Lane` with
two bounds of its own: ``limit``, how many of its items run at once (per-endpoint concurrency), and
``max_pending`` / ``max_bytes``, how many may wait for a thread. `LanePool.offer` never blocks and never
queues past those bounds: it answers False, and the caller (a service's IO-thread handler) refuses the request
at once (a 503 reply) instead of queueing it without bound or blocking the connection. A lane whose bounds are
reached refuses only its own items, so one slow endpoint never starves the others of threads.

Workers take the lanes that have something ready in turn (round robin), so an endpoint with a deep backlog does
not hold every thread while another waits; a lane at its ``limit`` is skipped until one of its items finishes.

Shutting down: `LanePool.close` takes no more items and lets the workers run what waits, then end;
`LanePool.halt` also drops what waits (returned, for the caller to answer) and the workers end after the
item in hand. The caller joins the threads with `LanePool.wait`, and the client's ``close()`` joins them too
(they are adopted through ``Runtime.track_thread``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ["Lane", "LanePool"]

log = logging.getLogger("jetstream_sync")

T = TypeVar("T")


class Lane(Generic[T]):
    """One lane of a `LanePool` (made by `LanePool.lane`). Its state is the pool's, under the
    pool's lock; ``running`` and ``waiting`` may be read from any thread (a snapshot)."""

    __slots__ = ("_bytes", "_queue", "_ready", "label", "limit", "max_bytes", "max_pending", "running")

    def __init__(self, label: str, limit: int, max_pending: int, max_bytes: int) -> None:
        self.label = label
        #: at most this many of the lane's items run at once
        self.limit = limit
        #: at most this many wait for a thread (items running not counted)
        self.max_pending = max_pending
        #: the waiting items' sizes add up to at most this (one item is always let in, whatever its size)
        self.max_bytes = max_bytes
        #: items of the lane running now
        self.running = 0
        self._queue: deque[tuple[T, int]] = deque()
        self._bytes = 0
        self._ready = False  # in the pool's ready queue

    @property
    def waiting(self) -> int:
        """Items of the lane waiting for a thread."""
        return len(self._queue)

    def __repr__(self) -> str:
        return f"Lane({self.label!r}, running={self.running}/{self.limit}, waiting={len(self._queue)})"


class LanePool(Generic[T]):
    """``workers`` threads running ``run(item)`` for the items offered to its lanes (see the module docstring).

    ``run`` must not raise: it is the caller's wrapper around user code, which reports what user code raises.
    Anything that still escapes it is logged and the worker goes on. ``idle``, if given, is called by a worker
    (outside the pool's lock) after it ran one or more items and found nothing more ready for it, before it
    waits or ends: a service sends the replies of the burst it ran there (``ServiceInstance._flush``). It must not
    raise either.
    """

    def __init__(
        self, name: str, workers: int, run: Callable[[T], None], idle: Callable[[], None] | None = None
    ) -> None:
        self._name = name
        self._run = run
        self._idle_hook = idle
        self._cond = threading.Condition(threading.Lock())
        self._lanes: list[Lane[T]] = []
        self._ready: deque[Lane[T]] = deque()  # lanes with a waiting item and room under their limit
        self._closed = False  # no more items are taken
        self._halted = False  # workers end after the item in hand, leaving what waits
        self._idle = 0  # workers waiting for an item
        self._waking = False  # one of them was woken and has not taken its item yet
        self.workers = workers
        self.threads = [threading.Thread(target=self._work, name=f"{name}-w{i}", daemon=True) for i in range(workers)]

    def lane(self, label: str, *, limit: int, max_pending: int, max_bytes: int) -> Lane[T]:
        """A new lane; any thread, before or after start."""
        lane: Lane[T] = Lane(label, limit, max_pending, max_bytes)
        with self._cond:
            self._lanes.append(lane)
        return lane

    def start(self, adopt: Callable[[threading.Thread], None]) -> None:
        """Start the workers; ``adopt`` hands each to the client, whose close() joins them."""
        for thread in self.threads:
            adopt(thread)
            thread.start()

    @property
    def closed(self) -> bool:
        """No more items are taken (after `close` or `halt`)."""
        return self._closed

    def offer(self, lane: Lane[T], item: T, size: int = 0, *, wake: bool = True) -> bool:
        """Any thread, never blocking (the IO thread calls it): queue ``item`` on ``lane``; False, with nothing
        queued, when the lane has ``max_pending`` items (or ``max_bytes``) waiting or the pool is closed.

        With ``wake=False`` no idle worker is woken: the caller calls `wake` once it has offered a whole
        burst (the IO thread, once per burst of input, so that it is not preempted by a worker that cannot run
        yet: it holds the GIL)."""
        with self._cond:
            if self._closed:
                return False
            queue = lane._queue
            if len(queue) >= lane.max_pending or (queue and lane._bytes + size > lane.max_bytes):
                return False
            queue.append((item, size))
            lane._bytes += size
            if not lane._ready and lane.running < lane.limit:
                lane._ready = True
                self._ready.append(lane)
            if lane._ready and wake:
                self._wake_one()
        return True

    def wake(self) -> None:
        """Any thread: wake an idle worker if something is ready (after offers made with ``wake=False``)."""
        with self._cond:
            if self._ready:
                self._wake_one()

    def _wake_one(self) -> None:
        """Lock held, something ready: wake an idle worker, unless one was woken and has yet to take its item.

        Waking one at a time (each worker that takes an item wakes the next while more is ready) keeps a burst of
        quick requests on one or two threads instead of every idle one, which would only take turns at the GIL:
        measured on the echo benchmark (benchmarks/services.py), a wake-up per request cost a fifth of the
        IO thread's time. Slow handlers still spread over every worker, one wake-up after another."""
        if self._idle and not self._waking:
            self._waking = True
            self._cond.notify()

    def _take(self) -> tuple[Lane[T], T]:
        """Lock held, a lane ready: the next item of the next ready lane."""
        lane = self._ready.popleft()
        item, size = lane._queue.popleft()
        lane._bytes -= size
        lane.running += 1
        if lane._queue and lane.running < lane.limit:
            self._ready.append(lane)  # more of it may run at once: another worker may take it
        else:
            lane._ready = False
        if self._ready:
            self._wake_one()
        return lane, item

    def _work(self) -> None:
        cond = self._cond
        idle = self._idle_hook
        done: Lane[T] | None = None  # the lane of the item just run: released in the same lock round as the next take
        try:
            while True:
                with cond:
                    wait = True
                    if done is not None:
                        done.running -= 1
                        if done._queue and not done._ready:
                            done._ready = True
                            self._ready.append(done)  # this worker takes it next, or an idle one it wakes in _take
                        done = None
                        wait = bool(self._ready) or idle is None
                    if wait:
                        while not self._ready:
                            if self._closed or self._halted:
                                return  # a worker finishing an item of a lane at its limit runs the rest of that lane
                            self._idle += 1
                            cond.wait()
                            self._idle -= 1
                            self._waking = False
                        lane, item = self._take()
                if not wait:
                    if idle is not None:  # always, when ``wait`` is False
                        idle()  # nothing more ready for this worker: what its burst made goes out before it waits
                    continue
                try:
                    self._run(item)
                except BaseException:  # the runner reports user errors itself; this is a bug of ours: say so, go on
                    log.exception("%s: a request escaped its runner; the worker goes on", self._name)
                done = lane
        finally:
            if idle is not None:
                idle()  # a worker that ends (close, halt) leaves nothing unsent

    def close(self) -> None:
        """Any thread: take no more items; the workers run what waits, then end."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def halt(self) -> list[T]:
        """Any thread: take no more items and drop what waits (returned, in lane order); the workers end after
        the item in hand."""
        with self._cond:
            self._closed = True
            self._halted = True
            self._ready.clear()
            left: list[T] = []
            for lane in self._lanes:
                left.extend(item for item, _ in lane._queue)
                lane._queue.clear()
                lane._bytes = 0
                lane._ready = False
            self._cond.notify_all()
        return left

    def wait(self, timeout: float | None) -> bool:
        """Any thread: join the workers (after `close` or `halt`; a worker calling it skips
        itself); False when one is still running after ``timeout`` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for thread in self.threads:
            if thread is threading.current_thread():
                continue
            thread.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
            if thread.is_alive():
                return False
        return True
