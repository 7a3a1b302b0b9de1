"""The one bounded wait on a condition variable that the runtime's gates share.

Back-pressure gates (the outbound queue's high water, publish_async's in-flight cap and its "wait until
empty") all block a user thread while some state holds, for at most a timeout, and must wake promptly when
the client closes even if nobody notifies them. See docs/ARCHITECTURE.md, "Rules".
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from .. import errors

__all__ = ["wait_while"]

# The longest a waiter sleeps before it looks at ``closed()`` again: close() wakes gates, but a notify that
# races with a waiter entering the wait must not leave it asleep for the whole timeout.
_TICK = 0.25


def wait_while(
    cond: threading.Condition,
    busy: Callable[[], bool],
    timeout: float,
    *,
    closed: Callable[[], bool],
    timed_out: Callable[[], BaseException],
) -> None:
    """With ``cond`` held: wait while ``busy()`` is true, at most ``timeout`` seconds.

    Raises ConnectionClosedError once ``closed()`` is true, and ``timed_out()`` when the time is up.
    """
    deadline = time.monotonic() + timeout
    while busy():
        if closed():
            raise errors.ConnectionClosedError()
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise timed_out()
        cond.wait(min(remaining, _TICK))
