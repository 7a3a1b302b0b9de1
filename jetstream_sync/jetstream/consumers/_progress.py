"""``consume(auto_in_progress=True)``: a slow handler's message is not redelivered while it works.

While the handler holds a message for longer than half the consumer's ``ack_wait``, the watchdog thread sends
the message's ``in_progress()`` (+WPI), which restarts the server's ack timer, and again every ``ack_wait / 2``.
It stops the moment the handler acks (``in_progress`` then does nothing) or returns. The watchdog sends, never
the IO thread, and a handler thread pays two lock operations per message. With ``workers=N`` each worker's
message is kept alive on its own.
"""

from __future__ import annotations

import logging
import threading
import time

from ... import errors
from ..._runtime import Runtime
from ...message import Msg
from ...models import AckPolicy, ConsumerConfig

__all__ = ["ProgressKeeper", "progress_keeper"]

_SERVER_ACK_WAIT = 30.0  # the server's ack_wait when a consumer's config leaves it unset

log = logging.getLogger("jetstream_sync")


class ProgressKeeper:
    """Keeps the message a consume handler is working on alive at the server (see the module docstring)."""

    def __init__(self, runtime: Runtime, ack_wait: float) -> None:
        self._runtime = runtime
        self.interval = ack_wait / 2
        self._lock = threading.Lock()
        self._in_hand: dict[int, tuple[Msg, float]] = {}  # by id: each message a handler holds, its next +WPI due
        #: how many +WPI were sent
        self.sent = 0

    def start(self) -> None:
        self._runtime.watch(self._check)

    def stop(self) -> None:
        self._runtime.unwatch(self._check)

    def begin(self, msg: Msg) -> None:
        """A handler thread starts on ``msg``."""
        with self._lock:
            self._in_hand[id(msg)] = (msg, time.monotonic() + self.interval)

    def end(self, msg: Msg) -> None:
        """The handler returned from ``msg``."""
        with self._lock:
            self._in_hand.pop(id(msg), None)

    def _check(self, now: float) -> None:
        """Watchdog thread."""
        with self._lock:
            due = [msg for msg, at in self._in_hand.values() if at <= now and not msg.is_acked]
            for msg in due:
                self._in_hand[id(msg)] = (msg, now + self.interval)
        for msg in due:
            try:
                msg.in_progress()
            except errors.JetStreamError as exc:  # disconnected or closing: the next round tries again
                log.debug("auto_in_progress: +WPI for %s not sent: %s", msg.subject, exc)
                continue
            self.sent += 1


def progress_keeper(runtime: Runtime, config: ConsumerConfig | None, auto_in_progress: object) -> ProgressKeeper | None:
    """The keeper a consume with ``auto_in_progress`` needs (None without it). ``config`` is the consumer's, or
    None for an ordered consumer, which takes no acks (as an AckNone consumer): both are refused."""
    if not isinstance(auto_in_progress, bool):
        raise errors.InvalidTypeError("auto_in_progress", f"must be a bool, got {type(auto_in_progress).__name__}")
    if not auto_in_progress:
        return None
    if config is None or config.ack_policy == AckPolicy.NONE:
        raise errors.InvalidArgumentError(
            "auto_in_progress", "this consumer takes no acks (AckNone, or an ordered consumer): nothing to keep alive"
        )
    return ProgressKeeper(runtime, config.ack_wait or _SERVER_ACK_WAIT)


def acks_checked(config: ConsumerConfig | None, deferred_ack: object) -> bool:
    """Whether a consume warns when its handler returns leaving a message unanswered: on an AckExplicit consumer
    (``config``; None for an ordered consumer, which takes no acks), unless ``deferred_ack`` says that the
    application acks later, elsewhere, on purpose. AckAll answers many messages with one ack, AckNone none."""
    if not isinstance(deferred_ack, bool):
        raise errors.InvalidTypeError("deferred_ack", f"must be a bool, got {type(deferred_ack).__name__}")
    return config is not None and config.ack_policy == AckPolicy.EXPLICIT and not deferred_ack
