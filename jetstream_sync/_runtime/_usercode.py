"""User functions a connection attempt must wait for, run off the IO thread with a bound.

Most user callbacks need no answer: they go to the callbacks thread (``_callbacks.py``) and the IO thread moves
on. A few are asked for a value in the middle of a connection attempt: the token, user/password, user JWT and
nonce-signature callbacks (the CONNECT cannot be written without them), the socket factory (the attempt has no
socket without it) and the reconnect-delay callback. nats-py would call such functions on the IO thread, where
one that blocks (a secret manager that does not answer, a proxy that hangs) would stop the whole connection:
every read, every write, the heartbeat answers of every consume, and ``close()``.

So they run here, on a thread of their own ("jetstream-sync-connect", started with the first call), one at a
time, and the IO loop awaits each for at most a bound (the attempt's ``connect_timeout``):

- **Returns in time**: the attempt goes on with the value.
- **Raises**: the attempt fails with [`ConnectCallbackError`][jetstream_sync.errors.ConnectCallbackError] naming the
  function and what it raised (chained); nats-py reports it to the error callback and tries the next server, as for any
  failed attempt; a first connect raises it.
- **Does not return in time**: the same, saying so. The function keeps its thread (Python cannot stop it); the
  next call waits behind it and times out in turn, saying that an earlier call still runs, so a stuck function
  costs one thread, never one per attempt. A value it returns late is handed to ``on_late`` (the socket factory
  closes a late socket) rather than leaked.

The thread is a daemon: a function that never returns cannot hold up the interpreter's exit, nor ``close()``.
``close()`` and a failed first connect end the thread and wait for it (`BlockingCalls.join`), so none is
left behind by a client that is gone; only a function still running keeps it, until the function returns (said
in the log).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any, TypeVar

from .. import errors
from ._callbacks import callback_name

__all__ = ["CONNECT_THREAD_NAME", "BlockingCalls"]

log = logging.getLogger("jetstream_sync")

T = TypeVar("T")

CONNECT_THREAD_NAME = "jetstream-sync-connect"
#: how long join() waits for a user function that is running when the client closes (one about to return)
_RUNNING_GRACE = 0.1

_Job = tuple[Callable[..., Any], tuple[Any, ...], Callable[[bool, Any], None]]


class BlockingCalls:
    """Runs the user functions a connection attempt waits for on the "jetstream-sync-connect" thread (see the
    module docstring). `run` is awaited on the IO thread; `stop` is called by close()."""

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._jobs: deque[_Job] = deque()
        self._thread: threading.Thread | None = None
        self._stopped = False
        #: the function running now and since when, for the timeout message (written by the connect thread)
        self._running: tuple[str, float] | None = None

    async def run(
        self,
        what: str,
        fn: Callable[..., T],
        *args: Any,
        timeout: float,
        on_late: Callable[[T], object] | None = None,
    ) -> T:
        """IO thread: ``fn(*args)`` on the connect thread; its value, or ConnectCallbackError when it raised or
        did not return within ``timeout`` seconds (``what`` names it, e.g. ``"token_callback"``)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()

        def settle(ok: bool, value: Any) -> None:  # connect thread
            def resolve() -> None:  # IO thread
                if future.done():  # given up on: a value came too late
                    if ok and on_late is not None:
                        _late(what, on_late, value)
                elif ok:
                    future.set_result(value)
                else:
                    future.set_exception(value)

            try:
                loop.call_soon_threadsafe(resolve)
            except RuntimeError:  # the loop is closed: the client is gone
                if ok and on_late is not None:
                    _late(what, on_late, value)

        self._submit((fn, args, settle))
        try:
            return await asyncio.wait_for(future, timeout)
        except asyncio.TimeoutError:
            raise errors.ConnectCallbackError(f"{what} did not return within {timeout:g}s{self._held()}") from None
        except errors.ConnectCallbackError:
            raise
        except Exception as exc:
            raise errors.ConnectCallbackError(f"{what} raised {type(exc).__name__}: {exc}") from exc

    def _held(self) -> str:
        running = self._running
        if running is None:
            return " (connect_timeout bounds it; the attempt failed)"
        name, since = running
        return f" ({name} has been running for {time.monotonic() - since:.1f}s on {CONNECT_THREAD_NAME})"

    def _submit(self, job: _Job) -> None:
        with self._cond:
            if self._stopped:
                job[2](False, errors.ConnectionClosedError())
                return
            self._jobs.append(job)
            if self._thread is None:
                self._thread = threading.Thread(target=self._work, name=CONNECT_THREAD_NAME, daemon=True)
                self._thread.start()
            self._cond.notify()

    def _work(self) -> None:
        """The connect thread: run the jobs in order until stopped."""
        while True:
            with self._cond:
                while not self._jobs and not self._stopped:
                    self._cond.wait()
                stopping = self._stopped
                if stopping:
                    dropped = list(self._jobs)
                    self._jobs.clear()
                else:
                    fn, args, settle = self._jobs.popleft()
                    # under the lock: join() knows whether a user function holds the thread
                    self._running = (callback_name(fn), time.monotonic())
            if stopping:
                for _fn, _args, cancelled in dropped:
                    cancelled(False, errors.ConnectionClosedError())
                return
            try:
                value = fn(*args)
            except BaseException as exc:  # SystemExit from a user function must not end the thread unseen
                settle(False, exc if isinstance(exc, Exception) else RuntimeError(repr(exc)))
            else:
                settle(True, value)
            finally:
                with self._cond:
                    self._running = None
                del fn, args, settle

    def stop(self) -> None:
        """Any thread (close): no more calls; the thread ends once the function it runs (if any) returns."""
        with self._cond:
            self._stopped = True
            self._cond.notify()

    def join(self, timeout: float) -> None:
        """Any thread, after `stop`: wait up to ``timeout`` seconds for the connect thread to end. A user
        function it still runs (one that did not return in time, already reported as ConnectCallbackError) is
        not waited for: it keeps the daemon thread until it returns, and the log says so."""
        with self._cond:
            thread, running = self._thread, self._running
        if thread is None or thread is threading.current_thread():
            return
        thread.join(timeout if running is None else min(timeout, _RUNNING_GRACE))
        if thread.is_alive():
            name = running[0] if running is not None else "a user function"
            log.warning(
                "%s still runs on %s after the client closed; the thread ends when it returns",
                name,
                CONNECT_THREAD_NAME,
            )


def _late(what: str, on_late: Callable[[Any], object], value: object) -> None:
    try:
        on_late(value)
    except Exception:
        log.debug("disposing of what %s returned too late failed", what, exc_info=True)
