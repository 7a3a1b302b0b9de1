"""KeyWatcher: a bucket's changes as an iterator of entries, on an ordered consumer.

The ordered consumer makes the watcher survive what kills watchers elsewhere (a server restart, a reconnect,
a deleted consumer): it carries on after the last revision it handed out, with nothing skipped or repeated.
The watcher adds the KV conventions on top: which revisions to start from, turning messages into entries,
and one ``None`` when the values that existed at the start have all been delivered (nats-py's and nats.go's
"initial values done" signal).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from datetime import timedelta
from types import TracebackType
from typing import TYPE_CHECKING

import attrs

from ... import errors
from ..._validate import check_timeout
from ...models import DeliverPolicy
from ...models.kv import KeyValueEntry, KeyValueOp
from .._bucket import WATCH_EXPIRES, raise_for_bucket
from ..consumers import MessagesIterator, OrderedConsumer
from ..consumers._ordered import CATCH_UP_CHECK

if TYPE_CHECKING:
    from .bucket import KeyValue

__all__ = ["KeyWatcher", "WatchOptions"]

log = logging.getLogger("jetstream_sync")


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
        if self.resume_from_revision is not None:
            return DeliverPolicy.BY_START_SEQUENCE
        if self.include_history:
            return DeliverPolicy.ALL
        if self.updates_only:
            return DeliverPolicy.NEW
        return DeliverPolicy.LAST_PER_SUBJECT


class KeyWatcher:
    """Iterate it for :class:`~jetstream_sync.KeyValueEntry` objects, and one ``None`` when the initial values
    are done; ``next(timeout)`` waits at most that long. Use it as a context manager (or call ``stop()``): that
    deletes its server-side consumer at once.
    """

    def __init__(self, kv: KeyValue, subjects: list[str], options: WatchOptions) -> None:
        self.bucket = kv.bucket
        self.options = options
        self._kv = kv
        self._cut = len(kv.prefix)
        self._consumer: OrderedConsumer = kv.ordered_consumer(
            subjects,
            options.deliver_policy(),
            headers_only=options.meta_only,
            start_revision=options.resume_from_revision,
        )
        # Nothing to wait for: updates only, or nothing matched when the consumer was made.
        self._initial_done = options.updates_only or self._consumer.cached_info.num_pending == 0
        self._marker_due = not options.updates_only and self._initial_done
        try:
            self._messages: MessagesIterator = self._consumer.messages(
                expires=WATCH_EXPIRES, error_handler=self._on_error
            )
        except BaseException:
            self._consumer.close()
            raise

    def __repr__(self) -> str:
        return f"<KeyWatcher {self.bucket!r} {'stopped' if self._messages.closed else 'running'}>"

    def __enter__(self) -> KeyWatcher:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def __iter__(self) -> Iterator[KeyValueEntry | None]:
        while True:
            try:
                yield self._next(None)
            except errors.IteratorClosedError:
                return

    def next(self, timeout: float | timedelta | None = None) -> KeyValueEntry | None:
        """The next entry (or the one ``None``) within ``timeout`` seconds (None: wait until one comes).

        TimeoutError when nothing came; IteratorClosedError once the watcher was stopped.
        """
        return self._next(None if timeout is None else check_timeout(timeout, 0.0))

    def _on_error(self, exc: BaseException) -> None:
        """Watchdog thread: recreating the consumer failed (it retries; a deleted bucket ends the watch, and
        the next read raises BucketNotFoundError)."""
        log.debug("watcher on bucket %r: %s", self.bucket, exc)

    def _next(self, timeout: float | None) -> KeyValueEntry | None:
        if self._marker_due:
            self._marker_due = False
            return None
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise errors.TimeoutError(f"no change in bucket {self.bucket!r} within the timeout")
            if not self._initial_done:
                # while the initial values come, wake up now and then: the last of them may vanish before
                # delivery (a TTL, a purge), and then only the consumer can tell they are done
                left = CATCH_UP_CHECK / 2 if left is None else min(left, CATCH_UP_CHECK / 2)
            try:
                msg = self._messages.next(left)
            except (errors.StreamNotFoundError, errors.OrderedConsumerResetError) as exc:
                raise_for_bucket(self.bucket, exc)
            except errors.TimeoutError:
                if not self._initial_done and self._consumer.caught_up:
                    self._initial_done = True
                    return None
                if deadline is None or time.monotonic() < deadline:
                    continue
                raise errors.TimeoutError(f"no change in bucket {self.bucket!r} within the timeout") from None
            entry = self._kv.entry_of(msg, self._cut)
            if not self._initial_done and entry.delta == 0:
                self._initial_done = True
                self._marker_due = True
            if self.options.ignore_deletes and entry.operation is not KeyValueOp.PUT:
                if self._marker_due:
                    self._marker_due = False
                    return None
                continue
            return entry

    @property
    def initial_done(self) -> bool:
        """True once every value that existed when the watch began has been delivered."""
        return self._initial_done

    @property
    def revision(self) -> int:
        """The revision of the last entry handed out (0 before the first): resume a later watch after it."""
        return self._consumer.stream_sequence

    def stop(self) -> None:
        """End the watch now and delete its server-side consumer; iteration ends."""
        self._messages.stop()
        self._consumer.close()
