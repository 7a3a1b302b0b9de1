"""HeartbeatMonitor: one way to notice that the server went quiet, for fetch and for consume alike.

A pull that asked for idle heartbeats is owed *something* (a message, a heartbeat or a status) at least every
``idle_heartbeat`` seconds while the server still owes it messages. The IO thread marks every arrival; the
watchdog thread looks four times a second (the runtime's watch tick, shared by every monitor) and, when twice
the interval passed in silence, posts a confirmation to the IO thread, which looks again with its own
(authoritative) state before it acts. So the watchdog only ever reads, and the action runs where the pull's
state lives (docs/ARCHITECTURE.md, "Rules: one writer per piece of state").
"""

from __future__ import annotations

import time
from collections.abc import Callable

from .._runtime import Runtime, io_thread

__all__ = ["HeartbeatMonitor"]


class HeartbeatMonitor:
    """Calls ``on_missed()`` on the IO thread when nothing arrived for ``alarm_after`` while ``owed()``.

    ``owed`` is read on the watchdog thread and again on the IO thread; it must only read state. ``touch``
    (IO thread) marks activity; ``on_missed`` runs after the silence was confirmed, and the clock restarts.
    """

    def __init__(
        self,
        runtime: Runtime,
        interval: float,
        owed: Callable[[], bool],
        on_missed: Callable[[], None],
        *,
        alarm_after: float | None = None,
    ):
        self.interval = interval
        #: silence longer than this is an alarm: twice the interval for pulls (ADR-37), three times for push
        #: consumers (ADR-15), or what the user chose
        self.alarm_after = 2 * interval if alarm_after is None else alarm_after
        self.last_activity = time.monotonic()
        self._runtime = runtime
        self._owed = owed
        self._on_missed = on_missed
        self._posted = False  # watchdog sets it, the IO thread clears it: at most one confirmation in flight
        self._stopped = False

    @io_thread
    def retime(self, interval: float) -> None:
        """IO thread: the pulls ask for heartbeats every ``interval`` from now on (a consume fitted to its
        consumer's ``max_expires``); the alarm keeps its ratio to the interval. The watchdog reads the new
        values at its next tick."""
        ratio = self.alarm_after / self.interval if self.interval > 0 else 2.0
        self.interval = interval
        self.alarm_after = ratio * interval

    @io_thread
    def touch(self) -> None:
        """IO thread: something arrived (or the server just started owing us, so the clock starts now)."""
        self.last_activity = time.monotonic()

    def silent(self, now: float) -> bool:
        return now - self.last_activity > self.alarm_after

    def start(self) -> None:
        """Begin watching (no-op without heartbeats)."""
        if self.interval > 0 and not self._stopped:
            self._runtime.watch(self._check)

    def stop(self) -> None:
        """Any thread: stop watching; a confirmation already posted does nothing."""
        self._stopped = True
        if self.interval > 0:
            self._runtime.unwatch(self._check)

    def _check(self, now: float) -> None:
        """Watchdog thread: only reads, then posts the decision to the IO thread."""
        if self._stopped or self._runtime.is_closed:
            return
        if not self._posted and self._owed() and self.silent(now):
            self._posted = True
            self._runtime.post_if_open(self._confirm)

    @io_thread
    def _confirm(self) -> None:
        """IO thread: act only if the silence is still there by the IO thread's own state."""
        self._posted = False
        now = time.monotonic()
        if self._stopped or not self._owed() or not self.silent(now):
            return
        self.last_activity = now
        self._on_missed()
