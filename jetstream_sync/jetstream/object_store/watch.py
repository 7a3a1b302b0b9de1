"""ObjectWatcher: a bucket's object changes as an iterator of ObjectInfo, on an ordered consumer.

The metadata subjects are read by an ordered consumer, so a watcher survives server restarts, reconnects and
a deleted consumer without skipping or repeating a change. As for key-value watchers (and nats.go's object
watcher), one ``None`` marks the moment the objects that existed at the start have all been delivered; it
comes also when the last of them vanish before delivery (aged out, purged): the ordered consumer then finds
out from the server (``CatchUpProbe``), and the watcher asks it while it waits for the initial values.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from datetime import timedelta
from types import TracebackType
from typing import TYPE_CHECKING

from ... import errors
from ..._validate import check_timeout
from ...models import DeliverPolicy
from ...models.object_store import ObjectInfo
from .._bucket import WATCH_EXPIRES, raise_for_bucket
from ..consumers import MessagesIterator, OrderedConsumer
from ..consumers._ordered import CATCH_UP_CHECK

if TYPE_CHECKING:
    from .store import ObjectStore

__all__ = ["ObjectWatcher"]

log = logging.getLogger("jetstream_sync")


def _flag(field: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise errors.InvalidTypeError(field, f"must be True or False, got {type(value).__name__}")
    return value


class ObjectWatcher:
    """Iterate it for :class:`~jetstream_sync.ObjectInfo` objects, and one ``None`` when the initial ones are
    done; ``next(timeout)`` waits at most that long. Use it as a context manager (or call ``stop()``): that
    deletes its server-side consumer at once.
    """

    def __init__(self, store: ObjectStore, *, include_history: bool, ignore_deletes: bool, updates_only: bool) -> None:
        _flag("include_history", include_history)
        _flag("updates_only", updates_only)
        self.ignore_deletes = _flag("ignore_deletes", ignore_deletes)
        if include_history and updates_only:
            raise errors.InvalidArgumentError("updates_only", "cannot be combined with include_history")
        self.bucket = store.bucket
        self._store = store
        policy = DeliverPolicy.LAST_PER_SUBJECT
        if include_history:
            policy = DeliverPolicy.ALL
        elif updates_only:
            policy = DeliverPolicy.NEW
        self._consumer: OrderedConsumer = store._ordered_consumer([f"$O.{store.bucket}.M.>"], policy)
        self._initial_done = updates_only or self._consumer.cached_info.num_pending == 0
        self._marker_due = not updates_only and self._initial_done
        try:
            self._messages: MessagesIterator = self._consumer.messages(
                expires=WATCH_EXPIRES, error_handler=self._on_error
            )
        except BaseException:
            self._consumer.close()
            raise

    def __repr__(self) -> str:
        return f"<ObjectWatcher {self.bucket!r} {'stopped' if self._messages.closed else 'running'}>"

    def __enter__(self) -> ObjectWatcher:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def __iter__(self) -> Iterator[ObjectInfo | None]:
        while True:
            try:
                yield self._next(None)
            except errors.IteratorClosedError:
                return

    def next(self, timeout: float | timedelta | None = None) -> ObjectInfo | None:
        """The next change (or the one ``None``) within ``timeout`` seconds (None: wait until one comes).

        TimeoutError when nothing came; IteratorClosedError once the watcher was stopped.
        """
        return self._next(None if timeout is None else check_timeout(timeout, 0.0))

    @property
    def initial_done(self) -> bool:
        """True once every object that existed when the watch began has been delivered."""
        return self._initial_done

    def _on_error(self, exc: BaseException) -> None:
        """Watchdog thread: recreating the consumer failed (it retries; a deleted bucket ends the watch, and
        the next read raises BucketNotFoundError)."""
        log.debug("object watcher on bucket %r: %s", self.bucket, exc)

    def _next(self, timeout: float | None) -> ObjectInfo | None:
        if self._marker_due:
            self._marker_due = False
            return None
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise errors.TimeoutError(f"no change in object store {self.bucket!r} within the timeout")
            wait = left
            if not self._initial_done:
                # while the initial values come, wake up now and then: the last of them may vanish before
                # delivery (a purge by a replace or delete), and then only the consumer can tell they are done
                wait = CATCH_UP_CHECK / 2 if left is None else min(left, CATCH_UP_CHECK / 2)
            try:
                msg = self._messages.next(wait)
            except (errors.StreamNotFoundError, errors.OrderedConsumerResetError) as exc:
                raise_for_bucket(self.bucket, exc)
            except errors.TimeoutError:
                if not self._initial_done and self._consumer.caught_up:
                    self._initial_done = True  # what was pending vanished before it was delivered
                    return None
                continue
            metadata = msg.metadata
            if not self._initial_done and metadata.num_pending == 0:
                self._initial_done = True
                self._marker_due = True
            info = self._store._info_of(msg.data, metadata.timestamp)
            if info is None or (self.ignore_deletes and info.deleted):
                if self._marker_due:
                    self._marker_due = False
                    return None
                continue
            return info

    def stop(self) -> None:
        """End the watch now and delete its server-side consumer; iteration ends."""
        self._messages.stop()
        self._consumer.close()
