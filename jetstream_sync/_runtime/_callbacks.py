"""The callbacks thread: user callbacks run here, one after another, never on the watchdog or the IO thread.

Why a thread of its own: the watchdog runs the library's own timers and checks (heartbeat checks, the
catch-up probe, idle checks, the close after the reconnect attempts ran out). When user callbacks ran there
too, one that blocked (a disconnected callback waiting for a lock, an error handler writing to a hung socket)
stopped every one of them for every consume of the client: a silent link went unnoticed and close() waited
for it. Here a callback that never returns holds up only the callbacks queued after it
(docs/ARCHITECTURE.md, "Rules: no user code on the watchdog").

- **Order.** One thread per client and a FIFO queue, so callbacks run in the order they were queued
  (disconnected before reconnected before closed, a consume's errors as they happened).
- **Bounded.** At most `MAX_QUEUED` wait. Past that, new ones are dropped: what is kept stays in order
  and the first errors usually say what went wrong, as a subscription drops new messages past its limit.
  They are counted (``dropped``, the client's ``stats["callbacks_dropped"]``) and logged twice per backlog: a
  warning when the queue fills, naming the callback that holds it up, and one with the count once it has
  emptied. The closed callback is queued whatever the count (it comes once per client).
- **A raising callback** is logged, BaseException included (SystemExit, KeyboardInterrupt): it must not end
  the thread, and with it every later callback.
- **Closing.** `CallbackRunner.stop` refuses new callbacks, lets the thread run what is queued (the
  closed callback last) and waits at most `CLOSE_WAIT`: a callback still running then is left behind
  (the thread is a daemon) with a warning naming it, as close() does with a consume handler that never
  returns; the thread runs the rest once it returns, then ends.
- **Forks.** In a forked child the thread does not exist: a callback queued there is dropped before any lock
  is taken (a parent thread may have held it at fork time).
- Started with the first callback: a client that has none keeps its two threads.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from ._fork import ForkGuard

__all__ = ["CALLBACKS_THREAD_NAME", "CLOSE_WAIT", "MAX_QUEUED", "CallbackRunner"]

log = logging.getLogger("jetstream_sync")

CALLBACKS_THREAD_NAME = "jetstream-sync-callbacks"
#: callbacks waiting behind a running one; past this new ones are dropped and counted
MAX_QUEUED = 10_000
#: the most close() waits for the queued callbacks (the closed callback included) before it returns
CLOSE_WAIT = 0.5


def callback_name(fn: Callable[..., object]) -> str:
    """``module.qualname`` of a callback, for log messages."""
    name = getattr(fn, "__qualname__", None) or type(fn).__qualname__
    return f"{getattr(fn, '__module__', None) or type(fn).__module__}.{name}"


class CallbackRunner:
    """Runs user callbacks in order on the client's callbacks thread (see the module docstring).

    ``submit`` is called from any thread (the IO thread too: it takes one short lock and never waits);
    everything else about a callback happens on the callbacks thread.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._queue: deque[tuple[Callable[..., object], tuple[Any, ...]]] = deque()
        self._thread: threading.Thread | None = None
        self._stopping = False
        self._fork_guard = ForkGuard()
        #: the callback running now and since when (time.monotonic()), for the warnings; written only by the
        #: callbacks thread, read by others (one reference, replaced whole)
        self._running: tuple[Callable[..., object], float] | None = None
        self._backlog_dropped = 0  # dropped since the queue last filled; reset (and reported) once it empties
        #: callbacks dropped because the queue was full, over the client's life
        self.dropped = 0

    @property
    def thread(self) -> threading.Thread | None:
        """The callbacks thread, or None until the first callback."""
        return self._thread

    def submit(self, fn: Callable[..., object], *args: Any, always: bool = False) -> None:
        """Any thread: run ``fn(*args)`` on the callbacks thread after what was queued before it.

        Dropped (and counted) when `MAX_QUEUED` callbacks wait already, unless ``always`` (the closed
        callback); dropped quietly once the client closed, or in a forked child.
        """
        if self._fork_guard.inherited:
            log.debug("a callback in a forked child was dropped: %s", callback_name(fn))
            return
        with self._cond:
            if self._stopping:
                log.debug("a callback after close was dropped: %s", callback_name(fn))
                return
            if len(self._queue) >= MAX_QUEUED and not always:
                self.dropped += 1
                self._backlog_dropped += 1
                first = self._backlog_dropped == 1
            else:
                first = False
                self._queue.append((fn, args))
                if self._thread is None:
                    # started under the lock, so stop() never meets a thread that is set but not started
                    self._thread = threading.Thread(target=self._run, name=CALLBACKS_THREAD_NAME, daemon=True)
                    self._thread.start()
                self._cond.notify()
                return
        if first:
            log.warning(
                "%d callbacks wait on %s behind %s; later callbacks are dropped until the queue empties "
                "(client.stats['callbacks_dropped'] counts them)",
                MAX_QUEUED,
                CALLBACKS_THREAD_NAME,
                self._holder(),
            )

    def _holder(self) -> str:
        """What holds the queue up, for a warning: the running callback and for how long."""
        running = self._running
        if running is None:
            return "the callback being started"
        fn, since = running
        return f"{callback_name(fn)} (running for {time.monotonic() - since:.1f}s)"

    def _run(self) -> None:
        """The callbacks thread: run the queue in order; end once stopping and nothing is left."""
        while True:
            with self._cond:
                while not self._queue and not self._stopping:
                    self._cond.wait()
                if not self._queue:
                    return
                fn, args = self._queue.popleft()
                dropped = 0
                if not self._queue and self._backlog_dropped:
                    dropped, self._backlog_dropped = self._backlog_dropped, 0
            if dropped:
                log.warning("%d callbacks were dropped while the queue was full (%d so far)", dropped, self.dropped)
            self._running = (fn, time.monotonic())
            try:
                fn(*args)
            except BaseException:
                # SystemExit or KeyboardInterrupt from a callback would otherwise end this thread, and with it
                # every later callback
                log.exception("the callback %s raised; the callbacks thread goes on", callback_name(fn))
            finally:
                self._running = None
                del fn, args  # not kept alive while the thread waits for the next one

    def stop(self, timeout: float) -> None:
        """Any thread (close): refuse new callbacks; wait at most ``timeout`` for those queued to run.

        A callback still running then is left to finish on the (daemon) thread, with a warning; the thread runs
        what is queued after it, then ends. Called on the callbacks thread itself (a callback closing the
        client) it does not wait: the queue runs once that callback returns.
        """
        with self._cond:
            self._stopping = True
            self._cond.notify()
            thread = self._thread
        if thread is None or thread is threading.current_thread():
            return
        thread.join(timeout)
        if thread.is_alive():
            with self._cond:
                left = len(self._queue)
            log.warning(
                "close: %s is still running %s; the %d callbacks queued after it run when it returns, then the "
                "thread ends",
                CALLBACKS_THREAD_NAME,
                self._holder(),
                left,
            )
