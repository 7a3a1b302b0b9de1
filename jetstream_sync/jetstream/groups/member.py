"""A running member of a partitioned consumer group: a ``consume()`` on the member's consumer, kept in step with
the group's config by one control thread.

Delivery is our ``Consumer.consume()`` unchanged (the same handler, ack, ``workers=``/``ordered_by`` and drain
rules); this module only decides which consumer to consume and when. The control thread
(``jetstream-sync-group-<stream>.<group>.<member>``) watches the group's KV key and, for an elastic group, moves
partitions when the membership changes:

1. stop its consume and wait until the handler (every worker) returned: nothing of the old partitions is in a
   handler any more; what was buffered is given back (nak'd);
2. delete its consumer (when this instance holds the member's pin, or it is leaving for good);
3. create the consumer for its new partitions on the group's work-queue stream and consume again.

The work-queue stream refuses a consumer whose filters overlap another consumer's (err_code 10100), so a member
that gains a partition cannot read it until the member that lost it finished step 2: at no moment do two members
read one partition, and each partition is read in stream order. A member killed without leaving stops pulling;
its pin moves to another instance of the same member after the pin timeout (the ack wait, at least 1 s), and its
consumer is deleted by the server after ``inactive_threshold`` (the ack wait), which frees its partitions.

With ``auto_membership`` (elastic groups) the running members are the membership: a member adds itself when it
joins and removes itself when it leaves, answers presence requests on ``_PCG.<stream>.<group>.<member>`` while it
runs, and removes from the config any member that has had neither a consumer nor an instance answering for
longer than the pin timeout (one that was killed).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import random
import threading
import time
from collections.abc import Callable, Hashable
from datetime import timedelta
from types import TracebackType
from typing import TYPE_CHECKING, Any

import attrs

from ... import errors
from ..._validate import check_timeout
from ...message import Msg
from ...models import ConsumerConfig, KeyValueEntry, PriorityPolicy
from ..consumers import ConsumeContext, Consumer, ConsumeStats
from ..consumers._reads import raised_by_user_code
from ._layout import (
    PRIORITY_GROUP,
    config_key,
    elastic_filters,
    partitions_of,
    pinned_ttl,
    pull_expiry,
    static_consumer_name,
    static_filters,
    work_stream_name,
)
from ._store import GroupStore
from .config import ElasticGroupConfig, StaticGroupConfig

if TYPE_CHECKING:
    from ...subscription import Subscription
    from ..context import JetStream
    from ..kv import KeyWatcher

__all__ = ["GroupMember", "presence_subject"]

log = logging.getLogger("jetstream_sync")

_POLL = 0.1  # how often the control thread looks at its stop flag between watch updates
_JOIN_RETRY = 0.5  # how soon a refused consumer create (overlap, pin held elsewhere) is tried again
_PRESENCE_TIMEOUT = 0.5
_OVERLAP = 10100  # "filtered consumer not unique on workqueue stream"
_in_handler = threading.local()


def presence_subject(stream: str, group: str, member: str) -> str:
    """Where a running ``auto_membership`` member answers "are you there" requests."""
    return f"_PCG.{stream}.{group}.{member}"


def _strip_partition(subject: str) -> str:
    """The subject as published: without the partition number the group put in front."""
    _head, dot, rest = subject.partition(".")
    return rest if dot else subject


class GroupMember:
    """One running instance of a group member, made by
    [`PartitionedGroups.join_static`][jetstream_sync.PartitionedGroups.join_static] or
    [`join_elastic`][jetstream_sync.PartitionedGroups.join_elastic].

    The handler sees each message with the subject it was published on (the partition number removed) and
    answers it as in ``consume()``: ``ack``, ``nak``, ``term`` or ``in_progress``. ``stop()`` leaves the group:
    the message in hand finishes, the buffered ones are given back, and the member's partitions go to the
    others at once. ``closed`` is set once the member ended: stopped, the group deleted (``error`` None), or a
    config it cannot follow (``error`` a ConsumerGroupError). Use it as a context manager.
    """

    def __init__(
        self,
        js: JetStream,
        *,
        elastic: bool,
        stream: str,
        group: str,
        member: str,
        handler: Callable[[Msg], object],
        template: ConsumerConfig,
        consume_options: dict[str, Any],
        ordered_by: Callable[[Msg], Hashable] | None,
        auto_membership: bool,
    ) -> None:
        self.js = js
        self.elastic = elastic
        self.stream = stream
        self.group = group
        self.member = member
        self._store = GroupStore(js, elastic)
        self._handler = handler
        self._template = template
        ack_wait = template.ack_wait
        assert ack_wait is not None
        self._ack_wait = ack_wait
        self._pin_ttl = pinned_ttl(ack_wait)
        self._consume_options = consume_options
        self._ordered_by = ordered_by
        self.auto_membership = auto_membership
        self._consume_stream = work_stream_name(stream, group) if elastic else stream
        self._consumer_name = member if elastic else static_consumer_name(group, member)
        self._config: StaticGroupConfig | ElasticGroupConfig | None = None
        self._lock = threading.Lock()
        self._consumer: Consumer | None = None
        self._context: ConsumeContext | None = None
        self._filters: list[str] = []
        self._next_join = 0.0
        self._absent_since: dict[str, float] = {}
        self._next_prune = 0.0
        self._group_deleted = False
        self._failing = False  # the last control step failed (said once at WARNING)
        self._stopping = threading.Event()
        self.closed = threading.Event()
        #: why the member ended on its own (a ConsumerGroupError, or what the handler raised to end it); None
        #: when it was stopped or the group was deleted
        self.error: BaseException | None = None
        self._watcher: KeyWatcher | None = None
        self._presence: Subscription | None = None
        label = f"{stream}.{group}.{member}"
        self._thread = threading.Thread(target=self._run, name=f"jetstream-sync-group-{label}", daemon=True)

    # -- public -------------------------------------------------------------------------------------------
    @property
    def partitions(self) -> list[int]:
        """The partitions this member reads by the config it last saw (whether or not it reads them yet)."""
        config = self._config
        if config is None:
            return []
        return partitions_of(config.members, config.max_members, config.member_mappings, self.member)

    @property
    def consuming(self) -> bool:
        """This instance has its consumer and reads from it now (False while it waits for its partitions, for
        the pin held by another instance, or when the config does not give it any)."""
        with self._lock:
            context = self._context
        return context is not None and not context.closed.is_set()

    @property
    def consumer_name(self) -> str:
        """The member's consumer: ``<group>-<member>`` on the stream (static), ``<member>`` on the work-queue
        stream ``<stream>-<group>`` (elastic)."""
        return self._consumer_name

    def stats(self) -> ConsumeStats | None:
        """The counters of the current consume (None when not consuming)."""
        with self._lock:
            context = self._context
        return None if context is None else context.stats()

    def stop(self, timeout: float | timedelta | None = None) -> None:
        """Leave the group: stop reading, wait for the message in hand (every worker's), give back the buffered
        ones, and free the partitions (elastic: delete the consumer; with ``auto_membership`` also leave the
        membership). Waits at most ``timeout`` seconds (None: until done) unless called from the handler, where it
        only asks. TimeoutError if it is still leaving then."""
        seconds = None if timeout is None else check_timeout(timeout, 0.0)
        self._stopping.set()
        if getattr(_in_handler, "active", False) or threading.current_thread() is self._thread:
            return
        if self._thread.is_alive() and not self.closed.wait(seconds):
            raise errors.TimeoutError(f"group member {self.member!r} still leaving after {seconds:g}s")

    def wait(self, timeout: float | timedelta | None = None) -> None:
        """Block until the member ended (stopped, group deleted, or an error in ``error``); TimeoutError if it
        still runs after ``timeout`` seconds."""
        seconds = None if timeout is None else check_timeout(timeout, 0.0)
        if not self.closed.wait(seconds):
            raise errors.TimeoutError(f"group member {self.member!r} still running after {seconds:g}s")

    def __enter__(self) -> GroupMember:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "closed" if self.closed.is_set() else ("consuming" if self.consuming else "waiting")
        kind = "elastic" if self.elastic else "static"
        return f"<GroupMember {kind} {self.stream}.{self.group} member={self.member!r} {state}>"

    # -- joining (the caller's thread) --------------------------------------------------------------------
    def start(self) -> GroupMember:
        """Check the group and the membership, then start the control thread; raises what stops the join."""
        config, _revision = self._store.read(self.stream, self.group)
        key = config_key(self.stream, self.group)
        if not self.elastic and not config.is_member(self.member):
            raise errors.ConsumerGroupError(
                f"{self.member!r} is not a member of static consumer group {key}; its members are fixed when it is"
                " created"
            )
        if self.auto_membership:
            if config.member_mappings:
                raise errors.ConsumerGroupError(
                    f"consumer group {key} maps partitions to members by hand: auto_membership needs a group with a "
                    "members list (delete the mappings first)"
                )
            self._presence = self.js.client.subscribe(
                presence_subject(self.stream, self.group, self.member), handler=_answer_presence
            )
        try:
            if self.auto_membership:
                self._add_self()
            self._watcher = self._store.bucket().watch(key)
        except BaseException:
            if self._presence is not None:  # a join that failed leaves nothing behind
                self._presence.unsubscribe()
            raise
        self._thread.start()
        return self

    # -- the control thread -------------------------------------------------------------------------------
    def _run(self) -> None:
        try:
            self._loop()
        except Exception as exc:
            log.error("group member %s of %s.%s ended: %r", self.member, self.stream, self.group, exc, exc_info=exc)
            self.error = exc
        finally:
            try:
                self._leave()
            except Exception as exc:
                log.warning("group member %s: leaving %s.%s failed: %r", self.member, self.stream, self.group, exc)
            finally:
                self.closed.set()

    def _loop(self) -> None:
        watcher = self._watcher
        assert watcher is not None
        next_tick = 0.0
        while not self._stopping.is_set():
            try:
                entry = watcher.next(_POLL)
            except errors.TimeoutError:
                entry = None
            except (errors.IteratorClosedError, errors.BucketNotFoundError):
                log.info("group member %s: the consumer groups' bucket is gone; leaving", self.member)
                self._group_deleted = True
                return
            if entry is not None and not self._guarded(functools.partial(self._on_entry, entry)):
                return
            now = time.monotonic()
            if now >= next_tick and self._config is not None:
                self._guarded(functools.partial(self._tick, now))
                next_tick = now + _POLL * 2

    def _guarded(self, step: Callable[[], bool | None]) -> bool:
        """Run a step of the control loop; a failure the next attempt may not meet (a timeout, a disconnect, a
        cluster electing a leader) is logged (WARNING once, until a step succeeds again) and retried on the next
        tick instead of ending the member. False when the step says the member must end."""
        try:
            result = step()
        except (errors.ConnectionClosedError, errors.ConsumerGroupError):
            raise
        except (errors.InvalidArgumentError, errors.InvalidTypeError):
            raise  # refused input fails the same way every time: the member ends, logged with its traceback
        except errors.JetStreamError as exc:
            level = logging.DEBUG if self._failing else logging.WARNING
            log.log(level, "group member %s of %s.%s: %r; trying again", self.member, self.stream, self.group, exc)
            self._failing = True
            return True
        if self._failing:
            log.info("group member %s of %s.%s: working again", self.member, self.stream, self.group)
            self._failing = False
        return result is not False

    def _on_entry(self, entry: KeyValueEntry) -> bool:
        """A change of the group's key; False when the member must end."""
        key = config_key(self.stream, self.group)
        if GroupStore.is_deletion(entry.operation):
            log.info("group member %s: consumer group %s was deleted; leaving", self.member, key)
            self._group_deleted = True
            return False
        what = f"{'elastic' if self.elastic else 'static'} consumer group {key}"
        try:
            if self.elastic:
                config: StaticGroupConfig | ElasticGroupConfig = ElasticGroupConfig.from_json(
                    entry.value, entry.revision, what
                )
            else:
                config = StaticGroupConfig.from_json(entry.value, what)
        except errors.ConsumerGroupError as exc:
            self.error = exc
            log.error("group member %s: %s; leaving", self.member, exc)
            return False
        previous = self._config
        if previous is not None and not _compatible(previous, config):
            self.error = errors.ConsumerGroupError(
                f"{what} changed in a way its members cannot follow (partitions, filters or, for a static group, "
                f"anything): {previous.to_json().decode()} -> {config.to_json().decode()}; members must join again"
            )
            log.error("group member %s: %s", self.member, self.error)
            return False
        self._config = config
        wanted = self._wanted_filters()
        if wanted == self._filters and self.consuming:
            return True
        if self._filters or self._consumer is not None:
            self._release(leaving=False)
        self._next_join = 0.0
        self._try_join()
        return True

    def _wanted_filters(self) -> list[str]:
        config = self._config
        if isinstance(config, ElasticGroupConfig):
            return elastic_filters(config, self.member)
        if isinstance(config, StaticGroupConfig):
            return static_filters(config, self.member)
        return []

    def _tick(self, now: float) -> None:
        """Every few tenths of a second: notice a consume that ended by itself, join when due, and (auto
        membership) stay in the membership and remove members that died."""
        with self._lock:
            context = self._context
        if context is not None and context.closed.is_set():
            self._consume_ended(context)
        if self._context is None and now >= self._next_join:
            self._try_join()
        if self.auto_membership and isinstance(self._config, ElasticGroupConfig):
            if not self._config.is_member(self.member):
                self._add_self()
            if now >= self._next_prune:
                self._next_prune = now + max(0.5, self._pin_ttl / 2)
                self._prune(now)

    def _consume_ended(self, context: ConsumeContext) -> None:
        """The consume ended without being asked (its consumer deleted by the server or by another instance, a
        terminal error, or the handler raised SystemExit/KeyboardInterrupt to end it)."""
        error = context.error
        with self._lock:
            self._context = None
            self._consumer = None
            self._filters = []
        if isinstance(error, (SystemExit, KeyboardInterrupt)):
            self.error = error
            self._stopping.set()
            return
        log.info("group member %s: its consume of %s ended (%r); joining again", self.member, context.label, error)

    def _consumer_config(self, filters: list[str]) -> ConsumerConfig:
        fields: dict[str, Any] = {
            "filter_subject": None,
            "filter_subjects": filters,
            "priority_groups": [PRIORITY_GROUP],
            "priority_policy": PriorityPolicy.PINNED_CLIENT,
            "priority_timeout": self._pin_ttl,
        }
        if self.elastic:
            fields.update(name=self.member, durable_name=None, inactive_threshold=self._ack_wait)
        else:
            fields.update(durable_name=self._consumer_name, name=None)
        return attrs.evolve(self._template, **fields)

    def _try_join(self) -> None:
        """Create the member's consumer for its partitions and consume it; on a refusal that resolves itself
        (another member still holds an overlapping consumer, another instance holds the pin) try again soon."""
        if self._stopping.is_set():
            return
        filters = self._wanted_filters()
        if not filters:
            return
        self._next_join = time.monotonic() + _JOIN_RETRY * (1 + random.random())
        config = self._consumer_config(filters)
        try:
            consumer = self._create(config)
        except errors.ConsumerConfigError as exc:
            if exc.err_code != _OVERLAP:
                raise
            log.debug("group member %s: partitions still held by another member; retrying", self.member)
            return
        if consumer is None:
            return
        options = dict(self._consume_options)
        options.update(priority_group=PRIORITY_GROUP, expires=pull_expiry(self._ack_wait))
        if options.get("error_handler") is None:
            options["error_handler"] = self._report
        if self._ordered_by is not None:
            options["ordered_by"] = _key_on_published_subject(self._ordered_by)
        context = consumer.consume(self._run_handler, **options)
        with self._lock:
            self._consumer = consumer
            self._context = context
            self._filters = filters
        log.info(
            "group member %s of %s.%s reads partitions %s (consumer %s)",
            self.member,
            self.stream,
            self.group,
            self.partitions,
            self._consumer_name,
        )

    def _create(self, config: ConsumerConfig) -> Consumer | None:
        """The consumer, or None to try again later. A consumer of our name with other filters is the member's
        previous one: replaced when no other instance is pinned to it, left to its pinned instance otherwise
        (which replaces it itself, or stops pulling and loses the pin after the pin timeout)."""
        try:
            return self.js.create_consumer(self._consume_stream, config)
        except errors.ConsumerExistsError as exc:
            if not self.elastic:  # a durable holds the member's position in the stream: never replaced here
                raise errors.ConsumerGroupError(
                    f"static group member {self.member!r}: its consumer {self._consumer_name!r} on {self.stream!r} "
                    f"exists with another config (another ack_wait or consumer_config?): {exc}. Join with the same "
                    "settings as its other instances, or delete the consumer to start the member afresh"
                ) from exc
        try:
            info = self.js.consumer_info(self._consume_stream, self._consumer_name)
        except errors.ConsumerNotFoundError:
            return None  # deleted meanwhile: the next attempt creates it
        if any(state.pinned for state in info.priority_groups or ()):
            log.debug("group member %s: another instance is pinned to its old consumer; waiting", self.member)
            return None
        with contextlib.suppress(errors.ConsumerNotFoundError):
            self.js.delete_consumer(self._consume_stream, self._consumer_name)
        try:
            return self.js.create_consumer(self._consume_stream, config)
        except errors.ConsumerExistsError:
            return None

    def _report(self, exc: BaseException) -> None:
        """The callbacks thread, without an error handler of the user's: a pin taken or moved is what a group
        does (INFO); anything else is logged at WARNING, as a consume does."""
        if isinstance(exc, (errors.ConsumerPinnedEvent, errors.PinIdMismatchError)):
            log.info("group member %s: %s", self.member, exc)
        else:
            log.warning("group member %s: %s", self.member, exc, exc_info=raised_by_user_code(exc))

    def _run_handler(self, msg: Msg) -> object:
        """A consume thread (or worker): the user's handler on the message as published."""
        msg.subject = _strip_partition(msg.subject)
        _in_handler.active = True
        try:
            return self._handler(msg)
        finally:
            _in_handler.active = False

    def _release(self, *, leaving: bool) -> None:
        """Stop the consume and wait for its handlers; then free the partitions: delete the consumer when this
        instance is pinned to it (or leaves an elastic group for good), else let the pinned instance do it."""
        with self._lock:
            context, consumer = self._context, self._consumer
            self._context = None
            self._consumer = None
            self._filters = []
        if context is not None:
            context.stop()
            context.closed.wait()
        if consumer is None:
            return
        pinned = consumer.pin_id is not None
        try:
            self.js.client.flush(self.js.timeout)  # the handlers' acks reach the server before the delete
        except errors.JetStreamError as exc:
            log.debug("group member %s: flush before releasing failed: %r", self.member, exc)
        if not self.elastic:
            return  # a static member's durable consumer stays: its position is the member's, kept for the next
        # auto membership runs one instance per member: its consumer is its own (a pin is only known once a
        # message came, so an idle instance could not tell otherwise)
        if pinned or self.auto_membership:
            with contextlib.suppress(errors.ConsumerNotFoundError):
                self.js.delete_consumer(self._consume_stream, self._consumer_name)
        elif not leaving:
            time.sleep(0.4 + random.random() / 10)

    def _leave(self) -> None:
        """The control thread's last act: release, then (auto membership) leave the membership."""
        self._release(leaving=True)
        if self._group_deleted and not self.elastic:
            # orbit deletes a static member's consumer when its group is deleted
            with contextlib.suppress(errors.ConsumerNotFoundError):
                self.js.delete_consumer(self._consume_stream, self._consumer_name)
        if self._watcher is not None:
            self._watcher.stop()
        if self._presence is not None:
            self._presence.unsubscribe()
        if self.auto_membership and not self._group_deleted:
            with contextlib.suppress(errors.ConsumerGroupNotFoundError):
                self._store.edit(self.stream, self.group, lambda c: _without(c, [self.member]))

    # -- auto membership ----------------------------------------------------------------------------------
    def _add_self(self) -> None:
        def add(config: ElasticGroupConfig) -> ElasticGroupConfig | None:
            if config.is_member(self.member):
                return None
            if config.member_mappings:
                raise errors.ConsumerGroupError(
                    f"consumer group {self.stream}.{self.group} now maps partitions by hand: member "
                    f"{self.member!r} (auto_membership) cannot add itself; join without auto_membership"
                )
            return _with_members(config, [*(config.members or []), self.member])

        self._store.edit(self.stream, self.group, add)

    def _prune(self, now: float) -> None:
        """Remove members that have had no consumer and no instance answering for longer than the pin timeout
        (killed without leaving). A member that merely waits for its partitions still answers."""
        config = self._config
        assert isinstance(config, ElasticGroupConfig)
        others = [m for m in config.members or () if m != self.member]
        if not others:
            return
        with_consumer = set(self.js.consumer_names(self._consume_stream))
        dead = []
        for member in others:
            if member in with_consumer or self._answers(member):
                self._absent_since.pop(member, None)
                continue
            since = self._absent_since.setdefault(member, now)
            if now - since >= self._pin_ttl:
                dead.append(member)
        if dead:
            log.warning(
                "group member %s: removing %s from %s.%s: no consumer and no running instance for %gs",
                self.member,
                dead,
                self.stream,
                self.group,
                self._pin_ttl,
            )
            self._store.edit(self.stream, self.group, lambda c: _without(c, dead))
            for member in dead:
                self._absent_since.pop(member, None)

    def _answers(self, member: str) -> bool:
        try:
            self.js.client.request(presence_subject(self.stream, self.group, member), b"", _PRESENCE_TIMEOUT)
        except errors.NoRespondersError:
            return False
        except errors.TimeoutError:
            return True  # subscribed but slow to answer: alive
        return True


def _answer_presence(msg: Msg) -> None:
    """The presence subscription's thread: say "here"."""
    if msg.reply:
        msg.respond(b"")


def _key_on_published_subject(ordered_by: Callable[[Msg], Hashable]) -> Callable[[Msg], Hashable]:
    """The user's key function, shown the message with the subject it was published on (the handler sees the
    same; the original message keeps its subject until the handler runs)."""

    def key(msg: Msg) -> Hashable:
        view = Msg(_strip_partition(msg.subject), msg.reply, msg.data, msg.raw_headers, None)
        codec = getattr(msg, "_codec", None)  # a consume with codec=: the key may read msg.value too
        if codec is not None:
            view._codec = codec
        return ordered_by(view)

    return key


def _compatible(old: StaticGroupConfig | ElasticGroupConfig, new: StaticGroupConfig | ElasticGroupConfig) -> bool:
    if isinstance(old, ElasticGroupConfig) and isinstance(new, ElasticGroupConfig):
        return old.same_layout(new)
    return old.to_json() == new.to_json()


def _with_members(config: ElasticGroupConfig, members: list[str] | None) -> ElasticGroupConfig:
    return attrs.evolve(config, members=members)


def _without(config: ElasticGroupConfig, gone: list[str]) -> ElasticGroupConfig | None:
    members = config.members or []
    kept = [m for m in members if m not in gone]
    if len(kept) == len(members):
        return None
    return _with_members(config, kept or None)
