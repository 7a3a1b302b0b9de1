"""ObjectWatcher: a bucket's object changes as an iterator of ObjectInfo, on an ordered consumer.

The metadata subjects are read by an ordered consumer, so a watcher survives server restarts, reconnects and
a deleted consumer without skipping or repeating a change. As for key-value watchers (and nats.go's object
watcher), one ``None`` marks the moment the objects that existed at the start have all been delivered; it
comes also when the last of them vanish before delivery (aged out, purged): the ordered consumer then finds
out from the server (``CatchUpProbe``), and the watcher asks it while it waits for the initial values.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ... import errors
from ...message import Msg
from ...models import DeliverPolicy
from ...models.object_store import ObjectInfo
from .._watcher import BucketWatcher

if TYPE_CHECKING:
    from .store import ObjectStore

__all__ = ["ObjectWatcher"]


def _flag(field: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise errors.InvalidTypeError(field, f"must be True or False, got {type(value).__name__}")
    return value


class ObjectWatcher(BucketWatcher[ObjectInfo]):
    """Iterate it for [`ObjectInfo`][jetstream_sync.models.ObjectInfo] objects, and one ``None`` when the initial ones
    are done; ``next(timeout)`` waits at most that long. Use it as a context manager (or call ``stop()``): that
    deletes its server-side consumer at once.
    """

    def __init__(self, store: ObjectStore, *, include_history: bool, ignore_deletes: bool, updates_only: bool) -> None:
        _flag("include_history", include_history)
        _flag("updates_only", updates_only)
        self.ignore_deletes = _flag("ignore_deletes", ignore_deletes)
        if include_history and updates_only:
            raise errors.InvalidArgumentError("updates_only", "cannot be combined with include_history")
        self._store = store
        policy = DeliverPolicy.LAST_PER_SUBJECT
        if include_history:
            policy = DeliverPolicy.ALL
        elif updates_only:
            policy = DeliverPolicy.NEW
        consumer = store._ordered_consumer([f"$O.{store.bucket}.M.>"], policy)
        super().__init__(store.bucket, f"object store {store.bucket!r}", consumer, updates_only=updates_only)

    def _convert(self, msg: Msg) -> tuple[ObjectInfo | None, int]:
        metadata = msg.metadata
        info = self._store._info_of(msg.data, metadata.timestamp)
        if info is None or (self.ignore_deletes and info.deleted):
            return None, metadata.num_pending
        return info, metadata.num_pending
