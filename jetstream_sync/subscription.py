"""Core NATS subscriptions with blocking reads."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from . import errors
from ._validate import check_timeout
from .buffer import BufferFinished, MessageBuffer
from .message import Msg

if TYPE_CHECKING:
    from .client import Client

log = logging.getLogger("jetstream_sync")


class Subscription:
    """A subscription whose messages wait in a bounded buffer until a thread reads them.

    When more than ``max_pending`` messages wait, new ones are dropped and a SlowConsumerError reaches the
    error callback (once per episode), so a stalled reader can never exhaust memory.
    """

    def __init__(self, client: Client, subject: str, queue: str | None, max_pending: int) -> None:
        self.subject = subject
        self.queue = queue
        self._client = client
        self._max_pending = max_pending
        self._buffer: MessageBuffer[Msg] = MessageBuffer(client._io.notify_later)
        self._nats_sub: Any = None
        self._slow = False
        self.dropped = 0

    def __repr__(self) -> str:
        return f"Subscription(subject={self.subject!r}, queue={self.queue!r}, pending={len(self._buffer)})"

    # -- IO thread --------------------------------------------------------------------------------------
    def _on_message(self, subject: bytes, reply: bytes, data: bytes, headers: bytes | None) -> None:
        buffer = self._buffer
        if len(buffer) >= self._max_pending:
            self.dropped += 1
            if not self._slow:
                self._slow = True
                self._client._report_error(
                    errors.SlowConsumerError(
                        f"subscription on {self.subject!r} holds {self._max_pending} unread messages; "
                        "dropping new ones until it is read (raise max_pending or read faster)"
                    )
                )
            return
        self._slow = False
        buffer.put(Msg(subject.decode(), reply.decode(), data, headers, self._client))

    # -- user threads -----------------------------------------------------------------------------------
    @property
    def pending(self) -> int:
        """Messages received and not yet read."""
        return len(self._buffer)

    @property
    def is_active(self) -> bool:
        return not self._buffer.ended

    def next_msg(self, timeout: float | None = 1.0) -> Msg:
        """The next message, waiting at most ``timeout`` seconds (None waits until one comes or the end)."""
        self._client._check_usable()
        wait = None if timeout is None else check_timeout(timeout, 1.0)
        try:
            return self._buffer.get(wait)
        except BufferFinished:
            raise errors.SubscriptionClosedError(
                f"subscription on {self.subject!r} was unsubscribed and has no more messages"
            ) from None

    def __iter__(self) -> Iterator[Msg]:
        """Messages as they come; ends after unsubscribe() or drain(), raises ConnectionClosedError on close."""
        while True:
            try:
                yield self._buffer.get(None)
            except BufferFinished:
                return

    def unsubscribe(self, timeout: float | None = None) -> None:
        """Stop receiving. Messages already buffered can still be read; then iteration ends."""
        if self._buffer.ended:
            return
        client = self._client
        client._check_usable()
        seconds = check_timeout(timeout, client.default_timeout)
        try:
            client._io.call(client._nc.fast_unsubscribe(self._nats_sub), seconds, "unsubscribe")
        finally:
            self._buffer.finish()
            client._forget(self)

    def _client_closed(self, exc: BaseException) -> None:
        if not self._buffer.ended:  # a drained subscription ends quietly once read
            self._buffer.abort(exc)

    def _drained(self) -> None:
        self._buffer.finish()
