"""The watchdog thread: the library's own timers and checks, and nothing else.

It runs the shared watch tick (heartbeat checks, the ordered consumer's catch-up probe, ``next()``'s idle
check, ``auto_in_progress``) and the close after the reconnect attempts ran out. User code never runs here:
user callbacks run on the client's callbacks thread (``_callbacks.py``), so one that blocks cannot stop a
consume from noticing a silent link, nor hold up close() (docs/ARCHITECTURE.md, "Rules: no user code on the
watchdog"). `check_library_code` makes that a check: every function scheduled here must come from
this package.
"""

from __future__ import annotations

import functools
import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

log = logging.getLogger("jetstream_sync")

WATCHDOG_THREAD_NAME = "jetstream-sync-watchdog"
_PACKAGE = __name__.split(".", 1)[0]  # "jetstream_sync"


def check_library_code(fn: Callable[..., object]) -> None:
    """Refuse (RuntimeError) a function that is not defined in this package: the watchdog runs library code only.

    A user callback scheduled here by mistake would run where a block stops every heartbeat check; it belongs
    on ``Runtime.run_callback``. Functions, lambdas and bound methods name their module; a ``functools.partial``
    is judged by what it wraps. Checked when a function is scheduled, not each time it runs.
    """
    target: object = fn
    while isinstance(target, functools.partial):
        target = target.func
    module = getattr(target, "__module__", None) or ""
    if module != _PACKAGE and not module.startswith(_PACKAGE + "."):
        raise RuntimeError(
            f"{module or '?'}.{getattr(target, '__qualname__', type(target).__qualname__)} is not jetstream_sync "
            "code: user code never runs on the watchdog (Runtime.run_callback runs it on the callbacks thread)"
        )


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
    """The watchdog thread of one client: a heap of timers, each a library function (``check_library_code``).

    ``call_*`` may be called from any thread; the scheduled functions run on the watchdog thread.
    """

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
        """Any thread: run the library function ``fn(*args)`` on the watchdog thread; exceptions are logged."""
        check_library_code(fn)
        self.call_at(0.0, (lambda: fn(*args)) if args else fn)

    def call_later(self, delay: float, fn: Callable[[], object]) -> Timer:
        """Any thread: run the library function ``fn`` on the watchdog thread after ``delay`` seconds."""
        return self.call_at(time.monotonic() + delay, fn)

    def call_at(self, when: float, fn: Callable[[], object]) -> Timer:
        """Any thread: run the library function ``fn`` on the watchdog thread at ``when`` (time.monotonic())."""
        check_library_code(fn)
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
        """The watchdog thread: run timers as they fall due, until stopped."""
        while True:
            timer = self._next_due()
            if timer is None:
                return
            try:
                timer.fn()
            except BaseException:
                # a bug of ours (even a BaseException) must not end this thread, and with it every later heartbeat
                # check and the close after the reconnect attempts ran out
                log.exception("a jetstream_sync timer raised; the watchdog goes on")

    def stop(self, timeout: float) -> None:
        """Any thread (close): run the timers already due, drop future ones, and join the thread (not from the
        watchdog itself: the close after the reconnect attempts ran out runs here)."""
        with self._cond:
            self._stopping = True
            self._cond.notify()
        if not self.in_watchdog_thread:
            self.thread.join(timeout)
