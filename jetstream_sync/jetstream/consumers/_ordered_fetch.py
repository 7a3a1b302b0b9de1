"""An ordered consumer's fetch: order checked on the reading thread, the link replaced mid-fetch when needed.

A fetch of an [`OrderedConsumer`][jetstream_sync.OrderedConsumer] is a plain `FetchPull` on the live link;
`OrderedBatch` (a [`BatchSource`][jetstream_sync.BatchSource]) checks each message's consumer sequence as the
reader takes it, and on a gap, a deleted consumer, "no responders" or a missed heartbeat renews the pull on a new
link for what is left of the fetch. User-thread code: the continuous reads check order on the IO thread instead
(``_delivery/_ordered.py``).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from ... import errors
from ..._delivery import FetchPull
from ..._runtime import BufferFinished
from ...message import Msg

__all__ = ["OrderedBatch", "OrderedFetchState"]


#: what ends an ordered fetch's pull but not the fetch: the link is replaced and the fetch goes on
_RESET_ERRORS = (
    errors.ConsumerDeletedError,
    errors.ConsumerNotFoundError,
    errors.StreamNotFoundError,  # a pull whose consumer info said the stream is gone: the renewal says how
    errors.MissedHeartbeatError,
)

#: renew(messages_left, bytes_left) -> a started pull on a new link, or None when the fetch should end
Renew = Callable[[int, int], "FetchPull | None"]


class OrderedBatch:
    """One fetch of an ordered consumer (a [`BatchSource`][jetstream_sync.BatchSource]), checking order on the reading
    thread.

    A message out of order, a deleted consumer, "no responders" or a missed heartbeat replace the link
    (through ``renew``) and the fetch goes on for what is left of its count and time; when it cannot, it ends
    quietly and the next read replaces the link.
    """

    def __init__(self, owner: OrderedFetchState, pull: FetchPull, renew: Renew, deadline: float) -> None:
        self.owner = owner
        self.pull = pull
        #: the fetch's client-side deadline (a renewed pull gets what is left of it)
        self.deadline = deadline
        self.superseded = False
        self.ended = False  # the reader gave up (deadline, error): no longer in progress, whatever the IO thread
        self.renewing = False
        self._renew = renew
        self._consumer = pull.target.consumer
        self._taken = 0
        self._taken_bytes = 0
        self._received_before = 0

    @property
    def in_progress(self) -> bool:
        return not self.ended and (self.renewing or not self.pull.done)

    @property
    def label(self) -> str:
        return self.pull.label

    @property
    def received(self) -> int:
        return self._received_before + self.pull.received

    def _replace_link(self, why: str) -> bool:
        """Reader thread: move to a new link for the rest of the fetch; False when the fetch must end."""
        self.owner.needs_reset = why
        self.pull.cancel()
        options = self.pull.options
        left = options.batch - self._taken
        left_bytes = options.max_bytes - self._taken_bytes if options.max_bytes else 0
        if left <= 0 or (options.max_bytes and left_bytes <= 0) or self.superseded:
            return False
        self.renewing = True
        try:
            pull = self._renew(left, left_bytes)
        finally:
            self.renewing = False
        if pull is None:
            return False
        self._received_before += self.pull.received
        self.pull = pull
        self._consumer = pull.target.consumer
        return True

    def take(self, timeout: float) -> Msg:
        owner = self.owner
        deadline = time.monotonic() + timeout
        while True:
            if self.superseded:
                raise BufferFinished()
            try:
                msg = self.pull.take(max(0.0, deadline - time.monotonic()))
            except _RESET_ERRORS as exc:
                if self._replace_link(type(exc).__name__):
                    continue
                raise BufferFinished() from None
            except errors.MessageExceedsMaxBytesError:
                if self._taken:  # a renewed pull asks for what is left of the budget: here, the fetch is full
                    raise BufferFinished() from None
                raise
            meta = msg.metadata
            if meta.consumer != self._consumer:
                continue
            if meta.sequence.consumer != owner.consumer_seq + 1:
                if self._replace_link("gap"):
                    continue
                raise BufferFinished()
            owner.consumer_seq = meta.sequence.consumer
            owner.stream_seq = meta.sequence.stream
            self._taken += 1
            self._taken_bytes += msg.size
            return msg

    def cancel(self) -> None:
        self.ended = True
        self.pull.cancel()


class OrderedFetchState:
    """The cursor a handle's fetches share: the last message returned, and whether the link must be replaced."""

    def __init__(self) -> None:
        self.stream_seq = 0
        self.consumer_seq = 0
        self.needs_reset: str | None = None
