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
import os
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


class _Bed:
    """Where an idle worker sleeps: a pipe of its own, which it blocks reading; waking it writes one byte.

    Not a ``threading.Condition``: its ``notify`` releases a lock with a system call made while holding the GIL,
    and on a busy machine the kernel often preempts the waker right there, in favour of the thread it woke,
    which then cannot run either (the GIL is with the preempted waker). The IO thread wakes a worker for every
    burst of requests, so on the echo benchmark (benchmarks/services.py, load average 13 on 2 cores) it spent
    81% of the time it held the GIL inside ``notify``. ``os.write`` and ``os.read`` release the GIL around their
    system calls, so a waker preempted there holds nothing the woken worker needs.
    """

    __slots__ = ("_read", "_write")

    def __init__(self) -> None:
        self._read, self._write = os.pipe()

    def wait(self) -> None:
        """The worker: block until woken (one byte read; named ``wait`` so that tests see it parked)."""
        os.read(self._read, 1)

    def wake(self) -> None:
        """A waker, pool lock held: the worker was taken off the idle list, so exactly one byte is owed to it."""
        os.write(self._write, b"\0")

    def close(self) -> None:
        """The worker, ending (off the idle list: nobody writes to it any more)."""
        os.close(self._read)
        os.close(self._write)


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
        self._cond = threading.Lock()  # the lanes, the ready queue, the idle list and the flags
        self._lanes: list[Lane[T]] = []
        self._ready: deque[Lane[T]] = deque()  # lanes with a waiting item and room under their limit
        self._closed = False  # no more items are taken
        self._halted = False  # workers end after the item in hand, leaving what waits
        self._idle: list[_Bed] = []  # workers waiting for an item (the last to sleep is woken first)
        self._waking = False  # one of them was woken and has not taken its item yet
        self.workers = workers
        self._beds: list[_Bed] = []  # made by start(): each worker closes its own when it ends
        self.threads = [
            threading.Thread(target=self._work, args=(i,), name=f"{name}-w{i}", daemon=True) for i in range(workers)
        ]

    def lane(self, label: str, *, limit: int, max_pending: int, max_bytes: int) -> Lane[T]:
        """A new lane; any thread, before or after start."""
        lane: Lane[T] = Lane(label, limit, max_pending, max_bytes)
        with self._cond:
            self._lanes.append(lane)
        return lane

    def start(self, adopt: Callable[[threading.Thread], None]) -> None:
        """Start the workers; ``adopt`` hands each to the client, whose close() joins them. Raises OSError when the
        process has no file descriptors left for the workers' pipes (nothing is started then)."""
        beds: list[_Bed] = []
        try:
            for _ in self.threads:
                beds.append(_Bed())
        except OSError:
            for bed in beds:
                bed.close()
            raise
        self._beds = beds
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
        bed = None
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
                bed = self._wake_one()
        if bed is not None:
            bed.wake()
        return True

    def wake(self) -> None:
        """Any thread: wake an idle worker if something is ready (after offers made with ``wake=False``)."""
        bed = None
        with self._cond:
            if self._ready:
                bed = self._wake_one()
        if bed is not None:
            bed.wake()

    def _wake_one(self) -> _Bed | None:
        """Lock held, something ready: the idle worker to wake, unless one was woken and has yet to take its item.
        The caller wakes it once it released the lock: woken inside, the worker would only block on the lock, and
        the lock's release would then be a system call under the GIL again (see `_Bed`). The worker stays
        in its bed until that byte comes, so its pipe is still open when it is written.

        Waking one at a time (each worker that takes an item wakes the next while more is ready) keeps a burst of
        quick requests on one or two threads instead of every idle one, which would only take turns at the GIL:
        measured on the echo benchmark (benchmarks/services.py), a wake-up per request cost a fifth of the
        IO thread's time. Slow handlers still spread over every worker, one wake-up after another."""
        if self._idle and not self._waking:
            self._waking = True
            return self._idle.pop()
        return None

    def _take(self) -> tuple[Lane[T], T, _Bed | None]:
        """Lock held, a lane ready: the next item of the next ready lane, and the idle worker to wake for what is
        still ready (see `_wake_one`)."""
        lane = self._ready.popleft()
        item, size = lane._queue.popleft()
        lane._bytes -= size
        lane.running += 1
        if lane._queue and lane.running < lane.limit:
            self._ready.append(lane)  # more of it may run at once: another worker may take it
        else:
            lane._ready = False
        return lane, item, self._wake_one() if self._ready else None

    def _work(self, index: int) -> None:
        bed = self._beds[index]
        own: _Bed | None = bed  # closed when the worker ends (not if a waker may still write to it)
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
                            self._idle.append(bed)
                            cond.release()
                            try:
                                bed.wait()
                            except BaseException:  # not expected (a pipe read): no waker may write to it any more
                                cond.acquire()
                                if bed in self._idle:
                                    self._idle.remove(bed)
                                else:
                                    own = None  # a waker took it and may still write: the pipe stays open
                                raise
                            cond.acquire()
                            self._waking = False
                        lane, item, other = self._take()
                if not wait:
                    if idle is not None:  # always, when ``wait`` is False
                        idle()  # nothing more ready for this worker: what its burst made goes out before it waits
                    continue
                if other is not None:
                    other.wake()
                try:
                    self._run(item)
                except BaseException:  # the runner reports user errors itself; this is a bug of ours: say so, go on
                    log.exception("%s: a request escaped its runner; the worker goes on", self._name)
                done = lane
        finally:
            if idle is not None:
                idle()  # a worker that ends (close, halt) leaves nothing unsent
            if own is not None:
                own.close()

    def close(self) -> None:
        """Any thread: take no more items; the workers run what waits, then end."""
        with self._cond:
            self._closed = True
            beds, self._idle = self._idle, []
        for bed in beds:
            bed.wake()

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
            beds, self._idle = self._idle, []
        for bed in beds:
            bed.wake()
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
