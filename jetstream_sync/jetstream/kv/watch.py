"""KeyWatcher: a bucket's changes as an iterator of entries, on an ordered consumer.

The ordered consumer makes the watcher survive what kills watchers elsewhere (a server restart, a reconnect,
a deleted consumer): it carries on after the last revision it handed out, with nothing skipped or repeated.
The watcher adds the KV conventions on top: which revisions to start from, turning messages into entries,
and one ``None`` when the values that existed at the start have all been delivered (nats-py's and nats.go's
"initial values done" signal).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from ... import errors
from ...message import Msg
from ...models import DeliverPolicy
from ...models.kv import KeyValueEntry, KeyValueOp
from .._watcher import BucketWatcher

if TYPE_CHECKING:
    from .bucket import KeyValue

__all__ = ["KeyWatcher", "WatchOptions"]


def _bool(_inst: object, attr: attrs.Attribute[bool], value: object) -> None:
    if not isinstance(value, bool):
        raise errors.InvalidTypeError(attr.name, f"must be True or False, got {type(value).__name__}")


def _revision(_inst: object, attr: attrs.Attribute[int | None], value: object) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise errors.InvalidTypeError(attr.name, f"must be a revision (int), got {type(value).__name__}")
    if value < 1:
        raise errors.InvalidArgumentError(attr.name, f"must be >= 1, got {value}")


@attrs.frozen(kw_only=True)
class WatchOptions:
    """What a watcher starts from and what it leaves out; conflicting choices fail here, before anything is sent."""

    include_history: bool = attrs.field(default=False, validator=_bool)
    ignore_deletes: bool = attrs.field(default=False, validator=_bool)
    meta_only: bool = attrs.field(default=False, validator=_bool)
    updates_only: bool = attrs.field(default=False, validator=_bool)
    resume_from_revision: int | None = attrs.field(default=None, validator=_revision)

    def __attrs_post_init__(self) -> None:
        starts = [
            name
            for name, chosen in (
                ("include_history", self.include_history),
                ("updates_only", self.updates_only),
                ("resume_from_revision", self.resume_from_revision is not None),
            )
            if chosen
        ]
        if len(starts) > 1:
            raise errors.InvalidArgumentError(starts[1], f"cannot be combined with {starts[0]}; choose one start")

    def deliver_policy(self) -> DeliverPolicy:
        """Where the watch starts: the last value per key, everything, or new changes only."""
        if self.resume_from_revision is not None:
            return DeliverPolicy.BY_START_SEQUENCE
        if self.include_history:
            return DeliverPolicy.ALL
        if self.updates_only:
            return DeliverPolicy.NEW
        return DeliverPolicy.LAST_PER_SUBJECT


class KeyWatcher(BucketWatcher[KeyValueEntry]):
    """Iterate it for [`KeyValueEntry`][jetstream_sync.models.KeyValueEntry] objects, and one ``None`` when the initial
    values are done; ``next(timeout)`` waits at most that long. Use it as a context manager (or call ``stop()``): that
    deletes its server-side consumer at once.
    """

    def __init__(self, kv: KeyValue, subjects: list[str], options: WatchOptions) -> None:
        self.options = options
        self._kv = kv
        self._cut = len(kv.prefix)
        consumer = kv.ordered_consumer(
            subjects,
            options.deliver_policy(),
            headers_only=options.meta_only,
            start_revision=options.resume_from_revision,
        )
        super().__init__(kv.bucket, f"bucket {kv.bucket!r}", consumer, updates_only=options.updates_only)

    def _convert(self, msg: Msg) -> tuple[KeyValueEntry | None, int]:
        entry = self._kv.entry_of(msg, self._cut)
        if self.options.ignore_deletes and entry.operation is not KeyValueOp.PUT:
            return None, entry.delta
        return entry, entry.delta

    @property
    def revision(self) -> int:
        """The revision of the last entry handed out (0 before the first): resume a later watch after it."""
        return self._consumer.stream_sequence
