"""What a key-value watcher and an object-store watcher share: an ordered consumer read as changes, with one
``None`` when the initial values are done.

Both read their bucket's subjects through an ordered consumer, so they survive server restarts, reconnects and
a deleted consumer without skipping or repeating a change. The initial values are done when a delivered
message has nothing pending after it, or, when the last of them vanish before delivery (aged out, purged,
replaced), when the consumer finds out from the server (``CatchUpProbe``); the watcher asks it every half
`CATCH_UP_CHECK` while it waits for them. A subclass says how a message becomes an item and which items
to leave out.
"""

from __future__ import annotations

import logging
import time
from abc import ABC, abstractmethod
from collections.abc import Iterator
from datetime import timedelta
from types import TracebackType
from typing import Any, Generic, TypeVar

from .. import errors
from .._delivery import CATCH_UP_CHECK
from .._runtime import ForkGuard, ProcessLocal
from .._validate import check_timeout
from ..message import Msg
from ._bucket import WATCH_EXPIRES, raise_for_bucket
from .consumers import MessagesIterator, OrderedConsumer

__all__ = ["BucketWatcher"]

log = logging.getLogger("jetstream_sync")

Item = TypeVar("Item")
Watcher = TypeVar("Watcher", bound="BucketWatcher[Any]")


class BucketWatcher(ProcessLocal, ABC, Generic[Item]):
    """The iteration, timeouts, initial-values marker and lifetime of a watcher over ``consumer``.

    ``what`` names the bucket in messages ("bucket 'flags'", "object store 'reports'"). With ``updates_only``
    no marker comes (nothing initial is delivered).
    """

    def __init__(self, bucket: str, what: str, consumer: OrderedConsumer, *, updates_only: bool) -> None:
        self.bucket = bucket
        self._what = what
        self._consumer = consumer
        self._fork_guard = ForkGuard()
        # nothing to wait for: updates only, or nothing matched when the consumer was made
        self._initial_done = updates_only or consumer.cached_info.num_pending == 0
        self._marker_due = not updates_only and self._initial_done
        try:
            self._messages: MessagesIterator = consumer.messages(expires=WATCH_EXPIRES, error_handler=self._on_error)
        except BaseException:
            consumer.close()
            raise

    @abstractmethod
    def _convert(self, msg: Msg) -> tuple[Item | None, int]:
        """The item ``msg`` stands for (None: leave it out) and how many messages are pending after it."""

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.bucket!r} {'stopped' if self._messages.closed else 'running'}>"

    def __enter__(self: Watcher) -> Watcher:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def __iter__(self) -> Iterator[Item | None]:
        while True:
            try:
                yield self._next(None)
            except errors.IteratorClosedError:
                return

    def next(self, timeout: float | timedelta | None = None) -> Item | None:
        """The next change (or the one ``None``) within ``timeout`` seconds (None: wait until one comes).

        TimeoutError when nothing came; IteratorClosedError once the watcher was stopped; BucketNotFoundError
        once the bucket was deleted.
        """
        return self._next(None if timeout is None else check_timeout(timeout, 0.0))

    @property
    def initial_done(self) -> bool:
        """True once everything that existed when the watch began has been delivered."""
        return self._initial_done

    def stop(self) -> None:
        """End the watch now and delete its server-side consumer; iteration ends."""
        self._messages.stop()
        self._consumer.close()

    def _on_error(self, exc: BaseException) -> None:
        """Watchdog thread: recreating the consumer failed (it retries; a deleted bucket ends the watch, and
        the next read raises BucketNotFoundError)."""
        log.debug("watcher on %s: %s", self._what, exc)

    def _next(self, timeout: float | None) -> Item | None:
        self._fork_guard.check()  # the marker too: nothing of a watch is handed out in a forked child
        if self._marker_due:
            self._marker_due = False
            return None
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise errors.TimeoutError(f"no change in {self._what} within the timeout")
            if not self._initial_done:
                # wake up now and then: the last initial values may vanish before delivery
                left = CATCH_UP_CHECK / 2 if left is None else min(left, CATCH_UP_CHECK / 2)
            try:
                msg = self._messages.next(left)
            except (errors.StreamNotFoundError, errors.OrderedConsumerResetError) as exc:
                raise_for_bucket(self.bucket, exc)
            except errors.TimeoutError:
                if not self._initial_done and self._consumer.caught_up:
                    self._initial_done = True  # what was pending vanished before it was delivered
                    return None
                continue
            item, pending = self._convert(msg)
            if not self._initial_done and pending == 0:
                self._initial_done = True
                self._marker_due = True
            if item is None:
                if self._marker_due:
                    self._marker_due = False
                    return None
                continue
            return item
