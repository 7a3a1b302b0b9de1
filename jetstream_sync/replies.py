"""``Client.request_many``: one request, every reply (scatter-gather), as nats.js's ``requestMany``.

The request goes out at once, with a fresh inbox as its reply subject; the replies wait in a bounded buffer (the
IO thread fills it) and `Replies` yields them as they arrive. It ends at the first of:

- ``max_replies`` replies received (nats.js's "count" strategy);
- ``timeout`` seconds after the request (the whole wait; "timer");
- ``stall`` seconds without a reply once the first came ("stall": the responders have all answered);
- with ``sentinel=True``, an empty reply without headers ("sentinel": a responder saying "that was all"), which
  is not yielded.

None of these is an error: scatter-gather takes what comes. A request nobody subscribes to raises
NoRespondersError (the server says so at once). Leaving early (``break``, ``close()``, a ``with`` block) ends the
subscription; so does garbage collection.
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Iterator
from types import TracebackType

from . import errors
from ._protocol import Command, is_no_responders
from ._runtime import BufferFinished, MessageBuffer, NatsSubscription, Runtime, io_thread
from .message import Msg

__all__ = ["Replies"]


class Replies:
    """The replies of one [`Client.request_many`][jetstream_sync.Client.request_many] (see the module docstring);
    iterate it, or ``list()`` it.

    ``received`` counts the replies yielded so far. Any thread may iterate it, one at a time.
    """

    def __init__(
        self,
        runtime: Runtime,
        subject: str,
        *,
        max_replies: int | None,
        timeout: float,
        stall: float | None,
        sentinel: bool,
        max_pending: int = 65536,
    ) -> None:
        self._runtime = runtime
        self._subject = subject
        self._max_replies = max_replies
        self._stall = stall
        self._sentinel = sentinel
        self._max_pending = max_pending
        self._buffer: MessageBuffer[Msg] = runtime.new_buffer()
        self._sub: NatsSubscription | None = None
        self._deadline = 0.0
        self._last_reply = 0.0
        self._ended = False
        self._timeout = timeout
        self.inbox = runtime.new_inbox()
        #: replies yielded so far
        self.received = 0
        self._finalizer: weakref.finalize[..., Replies] | None = None

    def send(self, request: Command) -> Replies:
        """Subscribe to the inbox, then publish ``request`` (which carries it as its reply subject)."""
        runtime = self._runtime
        self._sub = runtime.subscribe(self.inbox, "", self._on_reply, self._timeout)
        self._finalizer = weakref.finalize(self, _unsubscribe, runtime, self._sub, self.inbox)
        self._finalizer.atexit = False
        started = time.monotonic()
        self._deadline = started + self._timeout
        try:
            runtime.send(request)
        except BaseException:
            self.close()
            raise
        return self

    # -- IO thread --------------------------------------------------------------------------------------
    @io_thread
    def _on_reply(self, subject: bytes, reply: bytes, data: bytes, headers: bytes | None) -> None:
        if len(self._buffer) < self._max_pending:  # bounded: past it replies are dropped (and not counted)
            self._buffer.put(Msg(subject.decode(), reply.decode(), data, headers, self._runtime))

    # -- the reading thread ---------------------------------------------------------------------------------
    def __iter__(self) -> Iterator[Msg]:
        return self

    def __next__(self) -> Msg:
        self._runtime.fork_guard.check()
        while not self._ended:
            now = time.monotonic()
            until = self._deadline
            if self._stall is not None and self.received:
                until = min(until, self._last_reply + self._stall)
            try:
                msg = self._buffer.get(max(0.0, until - now))
            except (errors.TimeoutError, BufferFinished):  # the time or the stall ran out, or the request ended
                break
            if is_no_responders(msg.raw_headers):
                if self.received:
                    continue  # a late status after replies came: the replies stand
                self.close()
                raise errors.NoRespondersError(
                    f"no responders for the request on {self._subject!r}: nobody subscribes to its subject"
                )
            if self._sentinel and not msg.data and msg.raw_headers is None:
                break
            self.received += 1
            self._last_reply = time.monotonic()
            if self._max_replies is not None and self.received >= self._max_replies:
                self.close()
            return msg
        self.close()
        raise StopIteration

    def close(self) -> None:
        """Stop waiting for replies: the inbox is unsubscribed. Idempotent."""
        self._ended = True
        if self._finalizer is not None:
            self._finalizer()

    def __enter__(self) -> Replies:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Replies to {self._subject!r} received={self.received}{' ended' if self._ended else ''}>"


def _unsubscribe(runtime: Runtime, sub: NatsSubscription, inbox: str) -> None:
    """Any thread (a garbage collector's too): end the inbox's subscription on the IO thread."""
    if not runtime.fork_guard.inherited:
        runtime.post_if_open(lambda: runtime.unsubscribe_soon(sub, inbox))
