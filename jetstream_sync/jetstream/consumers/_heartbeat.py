"""HeartbeatMonitor: one way to notice that the server went quiet, for fetch and for consume alike.

A pull that asked for idle heartbeats is owed *something* (a message, a heartbeat or a status) at least every
``idle_heartbeat`` seconds while the server still owes it messages. The IO thread marks every arrival; the
watchdog thread looks a few times per interval and, when twice the interval passed in silence, posts a
confirmation to the IO thread, which looks again with its own (authoritative) state before it acts. So the
watchdog only ever reads, and the action runs where the pull's state lives (docs/ARCHITECTURE.md, "Rules: one
writer per piece of state").
"""

from __future__ import annotations

import time
from collections.abc import Callable

from ..._runtime import Runtime, Timer

__all__ = ["HeartbeatMonitor"]

# The watchdog looks at most this far apart, so a long heartbeat is still noticed within a second of its limit.
_MAX_CHECK_INTERVAL = 1.0


class HeartbeatMonitor:
    """Calls ``on_missed()`` on the IO thread when nothing arrived for twice ``interval`` while ``owed()``.

    ``owed`` is read on the watchdog thread and again on the IO thread; it must only read state. ``touch``
    (IO thread) marks activity; ``on_missed`` runs after the silence was confirmed, and the clock restarts.
    """

    def __init__(self, runtime: Runtime, interval: float, owed: Callable[[], bool], on_missed: Callable[[], None]):
        self.interval = interval
        self.last_activity = time.monotonic()
        self._runtime = runtime
        self._owed = owed
        self._on_missed = on_missed
        self._check_every = min(interval / 2, _MAX_CHECK_INTERVAL)
        self._posted = False  # watchdog sets it, the IO thread clears it: at most one confirmation in flight
        self._stopped = False
        self._timer: Timer | None = None

    def touch(self) -> None:
        """IO thread: something arrived (or the server just started owing us, so the clock starts now)."""
        self.last_activity = time.monotonic()

    def silent(self, now: float) -> bool:
        return now - self.last_activity > 2 * self.interval

    def start(self) -> None:
        """Begin watching (no-op without heartbeats)."""
        if self.interval > 0 and not self._stopped:
            self._timer = self._runtime.watchdog_later(self._check_every, self._check)

    def stop(self) -> None:
        """Any thread: stop watching; a confirmation already posted does nothing."""
        self._stopped = True
        timer = self._timer
        if timer is not None:
            timer.cancel()

    def _check(self) -> None:
        """Watchdog thread: only reads, then posts the decision to the IO thread."""
        if self._stopped or self._runtime.is_closed:
            return
        if not self._posted and self._owed() and self.silent(time.monotonic()):
            self._posted = True
            self._runtime.post_if_open(self._confirm)
        self._timer = self._runtime.watchdog_later(self._check_every, self._check)

    def _confirm(self) -> None:
        """IO thread: act only if the silence is still there by the IO thread's own state."""
        self._posted = False
        now = time.monotonic()
        if self._stopped or not self._owed() or not self.silent(now):
            return
        self.last_activity = now
        self._on_missed()
