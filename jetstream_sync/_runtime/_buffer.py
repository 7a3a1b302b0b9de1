"""MessageBuffer: the hand-off from the IO thread to user threads.

The IO thread appends without taking the lock and asks for one notification per burst; readers take
whatever is buffered under a single lock acquisition (docs/ARCHITECTURE.md, "Rules: batched hand-offs").
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from typing import Generic, TypeVar

from .. import errors
from ._wait import warn_if_in_event_loop

T = TypeVar("T")


class BufferFinished(Exception):
    """Internal: the buffer was finished cleanly (unsubscribe, drain, stop) and is empty."""


class MessageBuffer(Generic[T]):
    """A deque written by one producer (the IO thread) and read by any number of threads.

    ``finish(exc)`` lets readers take what is left, then raises ``exc`` (BufferFinished when None);
    ``abort(exc)`` drops what is left and raises ``exc`` at once.

    A reader that takes a burst to hand out one item at a time (an iterator, a consume's thread) keeps it in a
    deque filled by `get_many_into` and registers a *hold* (`hold`) that gives it up: ``abort``
    returns what the holds give up with what is buffered, so a client closed while a reader holds a burst
    gives those items back to the server too, instead of leaving them to their ack wait.
    """

    def __init__(self, schedule_notify: Callable[[Callable[[], None]], None]) -> None:
        self._items: deque[T] = deque()
        self._cond = threading.Condition(threading.Lock())
        self._schedule_notify = schedule_notify
        self._notify_pending = False
        self._end: BaseException | None = None
        self._ended = False
        self._aborted = False
        self._holds: list[Callable[[], Iterable[T]]] = []  # readers' bursts, surrendered by abort()

    def __len__(self) -> int:
        return len(self._items)

    @property
    def ended(self) -> bool:
        return self._ended

    # -- producer side (IO thread) ------------------------------------------------------------------------
    def put(self, item: T) -> bool:
        """Append ``item``; False when the buffer was aborted and ``item`` was not taken (the caller gives it
        back to the server). Checked after the append, without the lock: `abort` (another thread) sets
        the flag before it takes the items, so an item appended meanwhile is either taken by its loop or
        found again here, never left behind."""
        items = self._items
        items.append(item)
        if self._aborted:
            try:
                items.remove(item)
            except ValueError:
                return True  # abort took it, and gives it back with the rest
            return False
        if not self._notify_pending:
            self._notify_pending = True
            self._schedule_notify(self._notify)
        return True

    def put_many(self, items: list[T]) -> list[T]:
        """Append ``items`` in order; those the buffer did not take (it was aborted meanwhile), for the caller to
        give back, as `put`'s False says of one."""
        queue = self._items
        queue.extend(items)
        if self._aborted:
            refused = []
            for item in items:
                try:
                    queue.remove(item)
                except ValueError:
                    continue  # abort took it, and gives it back with the rest
                refused.append(item)
            return refused
        if not self._notify_pending:
            self._notify_pending = True
            self._schedule_notify(self._notify)
        return []

    def _notify(self) -> None:
        self._notify_pending = False
        with self._cond:
            self._cond.notify_all()

    def finish(self, exc: BaseException | None = None) -> None:
        """No more input; readers drain what is buffered, then get ``exc``. Any thread may call it."""
        with self._cond:
            if not self._ended:
                self._ended = True
                self._end = exc
            self._cond.notify_all()

    def abort(self, exc: BaseException) -> list[T]:
        """End at once: readers get ``exc``; returns the items dropped (nothing on a second call). Idempotent.

        Items are taken one ``popleft`` at a time, as a reader's lock-free fast path takes them, so each item
        is either handed to a reader or returned here, never both (the caller gives them back to the server).
        """
        dropped: list[T] = []
        with self._cond:
            self._ended = True
            self._aborted = True
            self._end = exc
            items = self._items
            while True:
                try:
                    dropped.append(items.popleft())
                except IndexError:
                    break
            for surrender in self._holds:
                dropped.extend(surrender())
            self._cond.notify_all()
        return dropped

    def hold(self, surrender: Callable[[], Iterable[T]]) -> None:
        """Any thread: register a reader's hold, a callable that gives up what the reader took from this buffer
        and has not handed out (its burst, a worker pool's queue). `abort` calls it under the buffer's
        lock and returns what it gives with the buffered items; it must not block nor take this buffer's lock
        (the reader may hold its own lock while it waits here)."""
        with self._cond:
            self._holds.append(surrender)

    def snapshot(self) -> list[T]:
        """A copy of what is buffered now."""
        return list(self._items)

    # -- consumer side (user threads) ---------------------------------------------------------------------
    def _raise_end(self) -> None:
        exc = self._end
        if exc is None:
            raise BufferFinished()
        raise exc

    def get(self, timeout: float | None) -> T:
        """The next item, waiting at most ``timeout`` seconds (None: forever)."""
        items = self._items
        if items and not self._aborted:
            try:
                return items.popleft()
            except IndexError:
                pass  # another reader or an abort took the last item meanwhile: wait under the lock below
        deadline = self._deadline(timeout)
        with self._cond:
            self._await_items(timeout, deadline)
            return items.popleft()

    def get_many_into(self, into: deque[T], limit: int, timeout: float | None) -> None:
        """Move up to ``limit`` items into ``into`` (a reader's burst, given up by its `hold`), waiting for
        the first one at most ``timeout`` seconds. The move is made under the buffer's lock, the lock
        `abort` takes, so an aborting thread finds each item either here or in ``into``."""
        items = self._items
        deadline = self._deadline(timeout)
        with self._cond:
            self._await_items(timeout, deadline)
            moved = 0
            while items and moved < limit:
                into.append(items.popleft())
                moved += 1

    def _deadline(self, timeout: float | None) -> float | None:
        if timeout != 0:
            warn_if_in_event_loop("reading messages (next, fetch, messages, a subscription)")
        return None if timeout is None else time.monotonic() + timeout

    def _await_items(self, timeout: float | None, deadline: float | None) -> None:
        """``_cond`` held: return once an item is buffered; raise the end (aborted at once, finished once empty)
        or TimeoutError past ``deadline``."""
        items = self._items
        while True:
            if self._aborted:
                self._raise_end()
            if items:
                return
            if self._ended:
                self._raise_end()
            if deadline is None:
                self._cond.wait()
            else:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise errors.TimeoutError(f"no message within {timeout:g}s")
                self._cond.wait(remaining)

    def get_many(self, limit: int, timeout: float | None) -> list[T]:
        """Up to ``limit`` items, waiting for the first one at most ``timeout`` seconds; one lock for all."""
        first = self.get(timeout)
        out = [first]
        items = self._items
        with self._cond:
            while items and len(out) < limit and not self._aborted:
                out.append(items.popleft())
        return out
