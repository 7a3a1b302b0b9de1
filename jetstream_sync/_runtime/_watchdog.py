"""The watchdog thread: timers (heartbeat deadlines) and user callbacks, never on the IO thread.

User callbacks (errors, disconnect, reconnect, close) run here, so a slow callback can only delay other
callbacks and timers, never the connection (docs/ARCHITECTURE.md, "Rules: no user code on the IO thread").
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

log = logging.getLogger("jetstream_sync")

WATCHDOG_THREAD_NAME = "jetstream-sync-watchdog"


class Timer:
    """A handle to a scheduled call; ``cancel()`` is cheap and thread-safe."""

    __slots__ = ("cancelled", "fn", "when")

    def __init__(self, when: float, fn: Callable[[], object]) -> None:
        self.when = when
        self.fn = fn
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class Watchdog:
    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._heap: list[tuple[float, int, Timer]] = []
        self._seq = itertools.count()
        self._stopping = False
        self.thread = threading.Thread(target=self._run, name=WATCHDOG_THREAD_NAME, daemon=True)
        self.thread.start()

    @property
    def in_watchdog_thread(self) -> bool:
        return threading.current_thread() is self.thread

    def call_soon(self, fn: Callable[..., object], *args: Any) -> None:
        """Run ``fn(*args)`` on the watchdog thread; exceptions are logged, never propagated."""
        self.call_at(0.0, (lambda: fn(*args)) if args else fn)

    def call_later(self, delay: float, fn: Callable[[], object]) -> Timer:
        return self.call_at(time.monotonic() + delay, fn)

    def call_at(self, when: float, fn: Callable[[], object]) -> Timer:
        timer = Timer(when, fn)
        with self._cond:
            if self._stopping:
                timer.cancelled = True
                return timer
            heapq.heappush(self._heap, (when, next(self._seq), timer))
            if self._heap[0][2] is timer:
                self._cond.notify()
        return timer

    def _next_due(self) -> Timer | None:
        """Wait for the earliest timer to fall due; None when stopping."""
        with self._cond:
            while True:
                if self._stopping and not self._heap:
                    return None
                if not self._heap:
                    self._cond.wait()
                    continue
                when, _, timer = self._heap[0]
                if timer.cancelled:
                    heapq.heappop(self._heap)
                    continue
                delay = when - time.monotonic()
                if delay <= 0:
                    heapq.heappop(self._heap)
                    return timer
                if self._stopping:
                    # Only callbacks already due run after stop(); future timers are dropped.
                    self._heap.clear()
                    return None
                self._cond.wait(delay)

    def _run(self) -> None:
        while True:
            timer = self._next_due()
            if timer is None:
                return
            try:
                timer.fn()
            except BaseException:
                # SystemExit or KeyboardInterrupt raised by a user callback would otherwise end this thread, and
                # with it every later callback, heartbeat check and the close after reconnects run out
                log.exception("a jetstream_sync callback raised; the watchdog goes on")

    def stop(self, timeout: float) -> None:
        """Run callbacks already due, drop future timers, and join the thread."""
        with self._cond:
            self._stopping = True
            self._cond.notify()
        if not self.in_watchdog_thread:
            self.thread.join(timeout)
