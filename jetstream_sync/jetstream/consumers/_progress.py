"""``consume(auto_in_progress=True)``: a slow handler's message is not redelivered while it works.

While the handler holds a message for longer than half the consumer's ``ack_wait``, the watchdog thread sends
the message's ``in_progress()`` (+WPI), which restarts the server's ack timer, and again every ``ack_wait / 2``.
It stops the moment the handler acks (``in_progress`` then does nothing) or returns. The watchdog sends, never
the IO thread, and the consume thread pays two lock operations per message.
"""

from __future__ import annotations

import logging
import threading
import time

from ... import errors
from ..._runtime import Runtime
from ...message import Msg

__all__ = ["ProgressKeeper"]

log = logging.getLogger("jetstream_sync")


class ProgressKeeper:
    """Keeps the message a consume handler is working on alive at the server (see the module docstring)."""

    def __init__(self, runtime: Runtime, ack_wait: float) -> None:
        self._runtime = runtime
        self.interval = ack_wait / 2
        self._lock = threading.Lock()
        self._msg: Msg | None = None  # the message in the handler's hands
        self._due = 0.0  # when its next +WPI is due (time.monotonic())
        #: how many +WPI were sent
        self.sent = 0

    def start(self) -> None:
        self._runtime.watch(self._check)

    def stop(self) -> None:
        self._runtime.unwatch(self._check)

    def begin(self, msg: Msg) -> None:
        """Consume thread: the handler starts on ``msg``."""
        with self._lock:
            self._msg, self._due = msg, time.monotonic() + self.interval

    def end(self) -> None:
        """Consume thread: the handler returned."""
        with self._lock:
            self._msg = None

    def _check(self, now: float) -> None:
        """Watchdog thread."""
        with self._lock:
            msg = self._msg
            if msg is None or now < self._due or msg.is_acked:
                return
            self._due = now + self.interval
        try:
            msg.in_progress()
        except errors.JetStreamError as exc:  # disconnected or closing: the next tick tries again
            log.debug("auto_in_progress: +WPI for %s not sent: %s", msg.subject, exc)
            return
        self.sent += 1
