"""Core NATS subscriptions with blocking reads."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator

from . import errors
from ._runtime import BufferFinished, MessageBuffer, NatsSubscription, Runtime
from ._validate import check_timeout
from .message import Msg

__all__ = ["DEFAULT_MAX_PENDING_BYTES", "Subscription"]

#: a core subscription's default bound on the bytes it buffers unread (nats.go's default too)
DEFAULT_MAX_PENDING_BYTES = 64 * 1024 * 1024

log = logging.getLogger("jetstream_sync")


class Subscription:
    """A subscription whose messages wait in a bounded buffer until a thread reads them.

    When more than ``max_pending`` messages, or more than ``max_pending_bytes`` bytes of payload and headers,
    wait, new ones are dropped and a SlowConsumerError reaches the error callback (once per episode), so a
    stalled reader can never exhaust memory.
    """

    def __init__(
        self, runtime: Runtime, subject: str, queue: str | None, max_pending: int, max_pending_bytes: int
    ) -> None:
        self.subject = subject
        self.queue = queue
        self._runtime = runtime
        self._max_pending = max_pending
        self._max_pending_bytes = max_pending_bytes
        self._buffer: MessageBuffer[Msg] = runtime.new_buffer()
        self._nats_sub: NatsSubscription | None = None
        self._slow = False
        self.dropped = 0
        # bytes buffered = what the IO thread put in (only it writes _bytes_in) - what readers took out (under
        # the lock: several threads may read)
        self._bytes_in = 0
        self._bytes_out = 0
        self._bytes_lock = threading.Lock()

    @classmethod
    def open(
        cls,
        runtime: Runtime,
        subject: str,
        queue: str | None,
        max_pending: int,
        timeout: float,
        max_pending_bytes: int = DEFAULT_MAX_PENDING_BYTES,
    ) -> Subscription:
        """Subscribe on the server (arguments already validated) and return the live subscription."""
        sub = cls(runtime, subject, queue, max_pending, max_pending_bytes)
        sub._nats_sub = runtime.subscribe(subject, queue or "", sub._on_message, timeout)
        runtime.track(sub)
        return sub

    def __repr__(self) -> str:
        return f"Subscription(subject={self.subject!r}, queue={self.queue!r}, pending={len(self._buffer)})"

    # -- IO thread --------------------------------------------------------------------------------------
    def _on_message(self, subject: bytes, reply: bytes, data: bytes, headers: bytes | None) -> None:
        buffer = self._buffer
        size = len(data) + (len(headers) if headers else 0)
        full = len(buffer) >= self._max_pending
        if full or (self._bytes_in - self._bytes_out + size > self._max_pending_bytes and len(buffer)):
            self.dropped += 1
            if not self._slow:
                self._slow = True
                held = f"{self._max_pending} unread messages" if full else f"over {self._max_pending_bytes} bytes"
                self._runtime.report_error(
                    errors.SlowConsumerError(
                        f"subscription on {self.subject!r} holds {held}; dropping new ones until it is read "
                        "(raise max_pending / max_pending_bytes, or read faster)"
                    )
                )
            return
        self._slow = False
        self._bytes_in += size
        buffer.put(Msg(subject.decode(), reply.decode(), data, headers, self._runtime))

    # -- user threads -----------------------------------------------------------------------------------
    @property
    def pending(self) -> int:
        """Messages received and not yet read."""
        return len(self._buffer)

    @property
    def pending_bytes(self) -> int:
        """Bytes (payload and headers) of the messages received and not yet read."""
        return self._bytes_in - self._bytes_out

    @property
    def is_active(self) -> bool:
        """Subscribed and not yet drained, unsubscribed or closed."""
        return not self._buffer.ended

    def _taken(self, msg: Msg) -> Msg:
        """A reader took ``msg`` from the buffer: its bytes no longer count against max_pending_bytes."""
        size = len(msg.data) + len(msg.raw_headers or b"")
        with self._bytes_lock:
            self._bytes_out += size
        return msg

    def next_msg(self, timeout: float | None = 1.0) -> Msg:
        """The next message, waiting at most ``timeout`` seconds (None waits until one comes or the end)."""
        self._runtime.check_usable()
        wait = None if timeout is None else check_timeout(timeout, 1.0)
        try:
            return self._taken(self._buffer.get(wait))
        except BufferFinished:
            raise errors.SubscriptionClosedError(
                f"subscription on {self.subject!r} was unsubscribed and has no more messages"
            ) from None

    def __iter__(self) -> Iterator[Msg]:
        """Messages as they come; ends after unsubscribe() or drain(), raises ConnectionClosedError on close."""
        self._runtime.fork_guard.check()
        while True:
            try:
                yield self._taken(self._buffer.get(None))
            except BufferFinished:
                return

    def unsubscribe(self, timeout: float | None = None) -> None:
        """Stop receiving. Messages already buffered can still be read; then iteration ends."""
        if self._buffer.ended:
            return
        runtime = self._runtime
        runtime.check_usable()
        self.stop_receiving(check_timeout(timeout, runtime.default_timeout))

    def stop_receiving(self, timeout: float) -> None:
        """Unsubscribe on the server; readers take what is buffered, then iteration ends (also client.drain)."""
        try:
            if self._nats_sub is not None:
                self._runtime.unsubscribe(self._nats_sub, timeout)
        finally:
            self._buffer.finish()
            self._runtime.untrack(self)

    def on_client_closed(self, exc: BaseException) -> None:
        """The client closed: wake every reader (called by the client)."""
        if not self._buffer.ended:  # a drained subscription ends quietly once read
            self._buffer.abort(exc)
