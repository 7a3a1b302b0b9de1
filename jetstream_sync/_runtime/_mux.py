"""Requests and their replies: one wildcard inbox subscription answers every request by token.

A synchronous request blocks on a `ReplyWaiter`; publish_async registers its own receiver with a
deadline that the IO thread expires. See docs/ARCHITECTURE.md, "The life of a publish".
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import NamedTuple, Protocol

from .. import errors
from .._protocol import is_no_responders
from ._threads import io_thread

__all__ = ["FutureReply", "RawReply", "ReplyHandler", "ReplyWaiter", "RequestMux"]

log = logging.getLogger("jetstream_sync")


class RawReply(NamedTuple):
    """A reply as it arrived: the subject it was sent to, its payload and its header block (None without)."""

    subject: bytes
    data: bytes
    headers: bytes | None


class ReplyHandler(Protocol):
    """A pending request's receiver: ``resolve`` with the reply or ``fail`` with an error. IO thread."""

    def resolve(self, subject: bytes, data: bytes, headers: bytes | None) -> None: ...

    def fail(self, exc: BaseException) -> None: ...


class RequestMux:
    """One wildcard inbox subscription answers every request, publish ack and double ack by token."""

    def __init__(self, inbox_prefix: str, token: str) -> None:
        self.prefix = f"{inbox_prefix}.{token}."
        self._prefix_b = self.prefix.encode()
        self._plen = len(self._prefix_b)
        self._pending: dict[bytes, ReplyHandler] = {}
        self._counter = itertools.count(1)
        # timeout -> (deadline, token) in submission order: one FIFO per distinct timeout keeps it O(1)
        self._deadlines: dict[float, deque[tuple[float, bytes]]] = {}
        self._deadlines_lock = threading.Lock()

    @property
    def subject(self) -> str:
        return self.prefix + "*"

    def __len__(self) -> int:
        return len(self._pending)

    def register(self, reply: ReplyHandler, timeout: float | None = None) -> bytes:
        """Any thread: a fresh reply subject for ``reply``; with ``timeout`` the IO thread expires it."""
        token = b"%x" % next(self._counter)
        self._pending[token] = reply
        if timeout is not None:
            queue = self._deadlines.get(timeout)
            if queue is None:
                with self._deadlines_lock:
                    queue = self._deadlines.setdefault(timeout, deque())
            queue.append((time.monotonic() + timeout, token))  # deque.append is atomic; only the IO thread pops
        return self._prefix_b + token

    def forget(self, reply_subject: bytes) -> None:
        self._pending.pop(reply_subject[self._plen :], None)

    @io_thread
    def handle(self, subject: bytes, reply: bytes, data: bytes, headers: bytes | None) -> None:
        """IO thread: the fast handler of the inbox subscription."""
        entry = self._pending.pop(subject[self._plen :], None)
        if entry is None:
            return
        if is_no_responders(headers):
            # the reply inbox is all the mux knows; a waiting request names its subject instead (Runtime.request)
            entry.fail(errors.NoRespondersError(f"no responders (the reply came on {subject.decode()!r})"))
            return
        try:
            entry.resolve(subject, data, headers)
        except Exception as exc:  # the entry is popped: unless it fails now, its waiter or future waits for good
            log.exception("reading a reply failed on the IO thread")
            entry.fail(errors.ProtocolError(f"the reply could not be read ({type(exc).__name__}: {exc})"))

    @io_thread
    def expire(self, now: float) -> None:
        """IO thread: fail entries whose deadline passed."""
        expired: list[bytes] = []
        with self._deadlines_lock:
            queues = list(self._deadlines.values())
        for queue in queues:
            while queue and queue[0][0] <= now:
                expired.append(queue.popleft()[1])
        for token in expired:
            entry = self._pending.pop(token, None)
            if entry is not None:
                _fail(entry, errors.TimeoutError("no reply within the timeout"))

    def fail_all(self, exc_factory: Callable[[], BaseException]) -> None:
        """IO thread: fail every pending entry (disconnect, close); or the closing thread once the IO thread ended."""
        pending, self._pending = self._pending, {}
        with self._deadlines_lock:
            for queue in self._deadlines.values():
                queue.clear()
        for entry in pending.values():
            _fail(entry, exc_factory())


def _fail(entry: ReplyHandler, exc: BaseException) -> None:
    """IO thread (or `RequestMux.fail_all`'s closing thread): fail one entry; a failure in doing so is logged and the
    others still fail (a sweep or a disconnect that stopped at one broken entry would leave every later waiter or
    future pending)."""
    try:
        entry.fail(exc)
    except Exception:
        log.exception("failing a pending reply raised on the IO thread")


class ReplyWaiter:
    """One synchronous request's reply: a pre-acquired lock is the cheapest one-shot wake-up between threads
    (a concurrent.futures.Future costs a Condition per call, and js.publish pays it on every message)."""

    __slots__ = ("_lock", "done", "error", "reply")

    def __init__(self) -> None:
        self.reply: RawReply | None = None
        self.error: BaseException | None = None
        self.done = False
        self._lock = threading.Lock()
        self._lock.acquire()

    def resolve(self, subject: bytes, data: bytes, headers: bytes | None) -> None:
        if not self.done:
            self.reply = RawReply(subject, data, headers)
            self.done = True
            self._lock.release()

    def fail(self, exc: BaseException) -> None:
        if not self.done:
            self.error = exc
            self.done = True
            self._lock.release()

    def wait(self, timeout: float, what: str, waited: float | None = None) -> RawReply:
        """The reply within ``timeout``; the TimeoutError names ``waited`` (the caller's whole timeout, of which
        sending the request may have used a little) when given."""
        if not self._lock.acquire(timeout=timeout):
            raise errors.TimeoutError(f"{what} did not complete within {timeout if waited is None else waited:g}s")
        if self.error is not None:
            raise self.error
        assert self.reply is not None
        return self.reply


class FutureReply:
    """A `ReplyHandler` resolving an asyncio future (`Runtime.request_async`); called on the IO thread (but for
    `RequestMux.fail_all` on a closing thread once the IO thread ended)."""

    __slots__ = ("future", "timeout", "what")

    def __init__(self, future: asyncio.Future[RawReply], what: str, timeout: float) -> None:
        self.future = future
        self.what = what
        self.timeout = timeout

    def resolve(self, subject: bytes, data: bytes, headers: bytes | None) -> None:
        if not self.future.done():
            self.future.set_result(RawReply(subject, data, headers))

    def fail(self, exc: BaseException) -> None:
        if not self.future.done():
            if isinstance(exc, errors.TimeoutError):
                exc = errors.TimeoutError(f"{self.what} did not complete within {self.timeout:g}s")
            self.future.set_exception(exc)
