"""How user threads wait: the one bounded wait the runtime's gates share, and the hint for a wait made where it
must not be.

Back-pressure gates (the outbound queue's high water, publish_async's in-flight cap and its "wait until
empty") all block a user thread while some state holds, for at most a timeout, and must wake promptly when
the client closes even if nobody notifies them. See docs/ARCHITECTURE.md, "Rules".

Every blocking call is a wait, and a wait made on a thread that runs an asyncio event loop (an async Django or
FastAPI view calling the client directly) stalls that loop, and every request it serves, for as long as the
call takes, without an error anywhere: `warn_if_in_event_loop` says so once per process.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
import time
from collections.abc import Callable

from .. import errors
from ._fork import after_fork

__all__ = ["wait_while", "warn_if_in_event_loop"]

log = logging.getLogger("jetstream_sync")

_warned_in_loop = False  # set once: the hint is logged once per process


def _forget_the_hint() -> None:
    """In a forked child (a worker of a server that forks): its own process, its own hint."""
    global _warned_in_loop
    _warned_in_loop = False


after_fork(_forget_the_hint)

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


def warn_if_in_event_loop(what: str) -> None:
    """Calling thread, before a blocking wait: warn once per process when this thread runs an asyncio event loop
    (not ours: a blocking call on the IO thread raises before it gets here).

    The call still runs: it is correct, only slow for everyone else on that loop, and refusing it would break
    code that works. About 40 ns when there is nothing to say, and nothing once it has been said.
    """
    global _warned_in_loop
    if _warned_in_loop or asyncio._get_running_loop() is None or _in_a_notebook_cell():
        return
    _warned_in_loop = True
    log.warning(
        "%s was called on a thread that runs an asyncio event loop: the loop, and everything it serves, waits "
        "until the call returns. jetstream_sync is a blocking client: from async code call it through "
        "asgiref.sync.sync_to_async (Django), asyncio.to_thread or loop.run_in_executor. Logged once.",
        what,
    )


def _in_a_notebook_cell() -> bool:
    """A Jupyter kernel runs each cell inside its event loop on the main thread: a blocking call there is what a
    cell does (the kernel waits for the cell whatever it runs), not an async view starving its peers. Known by
    the running IPython shell having a kernel (``ipykernel`` merely imported, as by a test runner, is not)."""
    if threading.current_thread() is not threading.main_thread():
        return False
    get_ipython = getattr(sys.modules.get("IPython"), "get_ipython", None)
    shell = get_ipython() if callable(get_ipython) else None
    return shell is not None and getattr(shell, "kernel", None) is not None
