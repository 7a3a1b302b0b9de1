"""The IO thread: a private asyncio loop, and the two ways user threads reach it (``call`` and ``post``).

Nothing else crosses between user threads and the loop (docs/ARCHITECTURE.md, "Rules: one loop owner").
"""

from __future__ import annotations

import asyncio
import builtins
import concurrent.futures
import contextlib
import logging
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from .. import errors
from ._fork import ForkGuard
from ._threads import io_thread, mark_io_thread
from ._wait import warn_if_in_event_loop

T = TypeVar("T")

log = logging.getLogger("jetstream_sync")

IO_THREAD_NAME = "jetstream-sync-io"


def wait_future(fut: concurrent.futures.Future[T], timeout: float, what: str) -> T:
    """Block on a future; our TimeoutError when time runs out, ConnectionClosedError when it was cancelled.

    On Python 3.11+ the futures TimeoutError is the builtin one, which the awaited work may raise too, so
    the two are told apart by whether the future finished.
    """
    try:
        return fut.result(timeout)
    except concurrent.futures.CancelledError:
        raise errors.ConnectionClosedError() from None
    except (builtins.TimeoutError, concurrent.futures.TimeoutError) as exc:  # distinct classes on Python 3.10
        if fut.done():
            if isinstance(exc, errors.TimeoutError):
                raise
            raise errors.TimeoutError(f"{what}: {exc or 'timed out'}") from exc
        fut.cancel()
        raise errors.TimeoutError(f"{what} did not complete within {timeout:g}s") from None


class IOLoop:
    """Owns the event loop thread. ``call`` blocks a user thread on a coroutine; ``post`` fires and forgets."""

    def __init__(self) -> None:
        #: the loop and its thread exist only in the process that made them: in a forked child, crossing into
        #: the loop (a wake-up written to the self-pipe the parent shares) raises ForkedClientError instead
        self.fork_guard = ForkGuard()
        self.loop = asyncio.new_event_loop()
        self._calls: set[concurrent.futures.Future[Any]] = set()
        self._closed = False
        self._dirty: list[Callable[[], None]] = []
        self._flush_scheduled = False
        started = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(started,), name=IO_THREAD_NAME, daemon=True)
        self.thread.start()
        started.wait()

    def _run(self, started: threading.Event) -> None:
        mark_io_thread()  # what the IO-thread check (``_threads.py``) recognises
        asyncio.set_event_loop(self.loop)
        self.loop.call_soon(started.set)
        try:
            self.loop.run_forever()
        finally:
            self._shutdown_loop()

    def _shutdown_loop(self) -> None:
        loop = self.loop
        try:
            tasks = [t for t in asyncio.all_tasks(loop) if not t.done()]
            for task in tasks:
                task.cancel()
            if tasks:
                loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
            loop.run_until_complete(loop.shutdown_asyncgens())
        except Exception:  # pragma: no cover - best effort at teardown
            log.debug("error while shutting down the IO loop", exc_info=True)
        finally:
            loop.close()

    @property
    def in_io_thread(self) -> bool:
        return threading.current_thread() is self.thread

    @property
    def closed(self) -> bool:
        return self._closed

    def call(self, coro: Coroutine[Any, Any, T], timeout: float, what: str) -> T:
        """Run ``coro`` on the loop and wait for it; cancel it when the timeout passes."""
        if self.fork_guard.inherited:
            coro.close()
            raise errors.ForkedClientError()
        if self._closed:
            coro.close()
            raise errors.ConnectionClosedError()
        if self.in_io_thread:
            coro.close()
            raise RuntimeError("blocking jetstream_sync calls cannot be made from the IO thread")
        warn_if_in_event_loop(what)
        fut = asyncio.run_coroutine_threadsafe(coro, self.loop)
        self._calls.add(fut)
        try:
            return wait_future(fut, timeout, what)
        finally:
            self._calls.discard(fut)

    def post(self, fn: Callable[..., object], *args: Any) -> None:
        """Schedule ``fn(*args)`` on the loop without waiting."""
        self.fork_guard.check()
        if self._closed:
            raise errors.ConnectionClosedError()
        try:
            self.loop.call_soon_threadsafe(fn, *args)
        except RuntimeError:
            raise errors.ConnectionClosedError() from None

    @io_thread
    def notify_later(self, notify: Callable[[], None]) -> None:
        """IO thread only: run ``notify`` once the current burst of input is parsed (one wake-up per burst)."""
        self._dirty.append(notify)
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self.loop.call_soon(self._flush_notifications)

    @io_thread
    def _flush_notifications(self) -> None:
        self._flush_scheduled = False
        dirty, self._dirty = self._dirty, []
        for notify in dirty:
            notify()

    def cancel_calls(self) -> None:
        """Refuse new calls and wake every thread blocked in ``call``; they raise ConnectionClosedError."""
        self._closed = True
        self.wake_callers()

    def wake_callers(self) -> None:
        """Wake every thread blocked in ``call`` now (they raise ConnectionClosedError); new calls still run."""
        for fut in list(self._calls):
            fut.cancel()

    def stop(self, timeout: float) -> None:
        """Stop the loop and join its thread (after ``cancel_calls``)."""
        self._closed = True
        if self.thread.is_alive():
            with contextlib.suppress(RuntimeError):
                self.loop.call_soon_threadsafe(self.loop.stop)
            if not self.in_io_thread:
                self.thread.join(timeout)
