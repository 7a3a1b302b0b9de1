"""``PartitionedGroups``: create, inspect, edit, delete and join partitioned consumer groups.

The facade over the private modules: ``config.py`` (what a group is), ``_layout.py`` (where it lives),
``_store.py`` (its KV config) and ``member.py`` (a running member). Layout and semantics follow orbit.go's
``pcgroups`` so that Python and Go members can share a group.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Hashable, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import attrs

from ... import errors
from ..._validate import check_callable, check_int, check_name, to_seconds
from ...codecs._payload import check_codec
from ...message import Msg
from ...models import (
    AckPolicy,
    ConsumerConfig,
    ConsumerInfo,
    ConsumerLag,
    DiscardPolicy,
    RetentionPolicy,
    StreamConfig,
    StreamSource,
    SubjectTransform,
)
from ..consumers import ConsumeOptions
from ._layout import (
    DEFAULT_ACK_WAIT,
    PRIORITY_GROUP,
    elastic_transforms,
    partitions_of,
    static_consumer_name,
    work_stream_name,
)
from ._store import GroupStore
from .config import (
    ElasticGroupConfig,
    MemberMapping,
    PartitioningFilter,
    StaticGroupConfig,
    check_group_names,
    check_member_name,
)
from .member import GroupMember

if TYPE_CHECKING:
    from ..context import JetStream

__all__ = ["GroupMemberStatus", "PartitionedGroups"]

log = logging.getLogger("jetstream_sync")

#: consume() options a member sets itself
_MEMBER_OWNED = ("priority_group", "expires", "options", "min_pending", "min_ack_pending", "priority")
#: consume() keywords a member passes on besides ConsumeOptions' fields
_CONSUME_KEYWORDS = ("workers", "error_handler", "auto_in_progress", "deferred_ack", "codec")


def _check_consume_options(given: dict[str, Any]) -> None:
    """The consume() options of a member, checked as consume() would before anything is sent."""
    pull_fields = set(attrs.fields_dict(ConsumeOptions))
    pull: dict[str, Any] = {}
    for name, value in given.items():
        if name in _MEMBER_OWNED:
            raise errors.InvalidArgumentError(name, "is set by the group (priority group PCG, expiry from ack_wait)")
        if name in pull_fields:
            pull[name] = value
        elif name not in _CONSUME_KEYWORDS:
            raise errors.InvalidArgumentError(name, "is not an option of a group member (consume()'s options are)")
    ConsumeOptions(**pull)
    check_int("workers", given.get("workers", 1), minimum=1)
    if given.get("error_handler") is not None:
        check_callable("error_handler", given["error_handler"])
    check_codec(given.get("codec"))


@attrs.frozen(kw_only=True)
class GroupMemberStatus:
    """One member of a group as the server sees its consumer: ``active`` when the consumer exists, ``pinned``
    when an instance holds its pin, and ``lag`` the consumer's backlog
    ([`ConsumerLag`][jetstream_sync.ConsumerLag]: messages not delivered yet, delivered and not acknowledged,
    redelivered, pulls waiting, last activity); None for a member without a consumer."""

    member: str
    consumer: str
    partitions: list[int]
    active: bool
    pinned: bool
    lag: ConsumerLag | None = None

    @classmethod
    def of(cls, member: str, consumer: str, partitions: list[int], info: ConsumerInfo | None) -> GroupMemberStatus:
        """From the member's consumer info (None: it has no consumer)."""
        if info is None:
            return cls(member=member, consumer=consumer, partitions=partitions, active=False, pinned=False)
        return cls(
            member=member,
            consumer=consumer,
            partitions=partitions,
            active=True,
            pinned=any(state.pinned for state in info.priority_groups or ()),
            lag=ConsumerLag.from_info(info),
        )


def _members_of(config: StaticGroupConfig | ElasticGroupConfig) -> list[str]:
    if config.members:
        return list(dict.fromkeys(config.members))
    return [m.member for m in config.member_mappings or ()]


class PartitionedGroups:
    """Partitioned consumer groups on one JetStream context (``PartitionedGroups(js)``), wire-compatible with
    orbit.go's ``pcgroups``: the same config buckets and keys, work-queue stream, subject transform, consumer
    names and pinning, so Python and Go members can serve one group.

    A *static* group reads a stream whose subjects already start with a partition number (a stream subject
    transform such as ``{{partition(12,1)}}.orders.{{wildcard(1)}}`` puts it there); its members are fixed at
    creation. An *elastic* group reads any stream: its own work-queue stream ``<stream>-<group>`` sources the
    stream and numbers each message's partition on the way in; members can be added and removed while it runs.
    Each member reads its partitions in order through one consumer; only one instance per member name reads at
    a time (the others wait, pinned-client priority group ``PCG``).
    """

    def __init__(self, js: JetStream) -> None:
        self.js = js
        self._static = GroupStore(js, elastic=False)
        self._elastic = GroupStore(js, elastic=True)

    def __repr__(self) -> str:
        return f"<PartitionedGroups {self.js!r}>"

    # -- create / read / list / delete --------------------------------------------------------------------
    def create_static(
        self,
        stream: str,
        group: str,
        max_members: int,
        *,
        members: Sequence[str] | None = None,
        member_mappings: Sequence[MemberMapping] | None = None,
        filters: Sequence[str] | None = None,
    ) -> StaticGroupConfig:
        """Create a static group of ``max_members`` partitions over ``members`` (spread evenly) or
        ``member_mappings``; ``filters`` narrow what it reads (after the partition token). The same call again
        returns the stored config; another config raises ConsumerGroupExistsError."""
        stream, group = check_group_names(stream, group)
        config = StaticGroupConfig(
            max_members=max_members,
            filters=None if filters is None else list(filters),
            members=None if members is None else list(members),
            member_mappings=None if member_mappings is None else list(member_mappings),
        )
        config.check()
        info = self.js.stream_info(stream)
        return self._static.create(stream, group, config, info.config.num_replicas)

    def create_elastic(
        self,
        stream: str,
        group: str,
        max_members: int,
        *,
        partitioning_filters: Sequence[PartitioningFilter] | None = None,
        max_buffered_msgs: int = 0,
        max_buffered_bytes: int = 0,
    ) -> ElasticGroupConfig:
        """Create an elastic group of ``max_members`` partitions, without members yet (add them with
        [`add_members`][jetstream_sync.PartitionedGroups.add_members], or join with ``auto_membership``), and its
        work-queue stream ``<stream>-<group>`` (the stream's replicas and storage, discard new when full). No
        ``partitioning_filters``: every message, partitioned by its whole subject."""
        stream, group = check_group_names(stream, group)
        config = ElasticGroupConfig(
            max_members=max_members,
            partitioning_filters=None if partitioning_filters is None else list(partitioning_filters),
            max_buffered_msgs=max_buffered_msgs,
            max_buffered_bytes=max_buffered_bytes,
        )
        config.check()
        info = self.js.stream_info(stream)
        stored = self._elastic.create(stream, group, config, info.config.num_replicas)
        transforms = [SubjectTransform(src=src, dest=dest) for src, dest in elastic_transforms(stored)]
        self.js.create_or_update_stream(
            StreamConfig(
                name=work_stream_name(stream, group),
                retention=RetentionPolicy.WORK_QUEUE,
                num_replicas=info.config.num_replicas,
                storage=info.config.storage,
                max_msgs=stored.max_buffered_msgs or -1,
                max_bytes=stored.max_buffered_bytes or -1,
                discard=DiscardPolicy.NEW,
                sources=[StreamSource(name=stream, subject_transforms=transforms)],
                allow_direct=True,
            )
        )
        return stored

    def static_config(self, stream: str, group: str) -> StaticGroupConfig:
        """The static group's stored config; ConsumerGroupNotFoundError when there is none."""
        config, _revision = self._static.read(*check_group_names(stream, group))
        assert isinstance(config, StaticGroupConfig)
        return config

    def elastic_config(self, stream: str, group: str) -> ElasticGroupConfig:
        """The elastic group's stored config (with its KV ``revision``); ConsumerGroupNotFoundError when none."""
        config, _revision = self._elastic.read(*check_group_names(stream, group))
        assert isinstance(config, ElasticGroupConfig)
        return config

    def static_groups(self, stream: str) -> list[str]:
        """The static groups on ``stream``, by name."""
        return self._static.groups(check_name("stream", stream))

    def elastic_groups(self, stream: str) -> list[str]:
        """The elastic groups on ``stream``, by name."""
        return self._elastic.groups(check_name("stream", stream))

    def delete_static(self, stream: str, group: str) -> None:
        """Delete the group's config (its running members stop and delete their consumers) and every consumer
        of the stream named ``<group>-...``, as orbit does."""
        stream, group = check_group_names(stream, group)
        self._static.delete(stream, group)
        for name in list(self.js.consumer_names(stream)):
            if name.startswith(group + "-"):
                with contextlib.suppress(errors.ConsumerNotFoundError):
                    self.js.delete_consumer(stream, name)

    def delete_elastic(self, stream: str, group: str) -> None:
        """Delete the group's config (its running members stop) and its work-queue stream."""
        stream, group = check_group_names(stream, group)
        self._elastic.delete(stream, group)
        with contextlib.suppress(errors.StreamNotFoundError):
            self.js.delete_stream(work_stream_name(stream, group))

    # -- membership (elastic) -----------------------------------------------------------------------------
    def add_members(self, stream: str, group: str, members: Sequence[str]) -> list[str]:
        """Add members to an elastic group (running members move partitions to them); the new member list."""
        stream, group = check_group_names(stream, group)
        names = _names("members", members)

        def add(config: ElasticGroupConfig) -> ElasticGroupConfig | None:
            _refuse_mapped(config, stream, group)
            merged = list(dict.fromkeys([*(config.members or []), *names]))
            return None if merged == (config.members or []) else attrs.evolve(config, members=merged)

        return list(self._elastic.edit(stream, group, add).members or [])

    def remove_members(self, stream: str, group: str, members: Sequence[str]) -> list[str]:
        """Remove members from an elastic group (their partitions move to the others); the new member list."""
        stream, group = check_group_names(stream, group)
        names = set(_names("members", members))

        def remove(config: ElasticGroupConfig) -> ElasticGroupConfig | None:
            _refuse_mapped(config, stream, group)
            kept = [m for m in config.members or [] if m not in names]
            return None if kept == (config.members or []) else attrs.evolve(config, members=kept or None)

        return list(self._elastic.edit(stream, group, remove).members or [])

    def set_member_mappings(self, stream: str, group: str, mappings: Sequence[MemberMapping]) -> ElasticGroupConfig:
        """Assign an elastic group's partitions by hand (replacing its members list); every partition must be
        given to exactly one member."""
        stream, group = check_group_names(stream, group)
        wanted = list(mappings)
        if not wanted:
            raise errors.InvalidArgumentError("mappings", "give at least one MemberMapping")
        current = self.elastic_config(stream, group)
        attrs.evolve(current, members=None, member_mappings=wanted).check()  # refused before anything is sent
        return self._elastic.edit(stream, group, lambda c: attrs.evolve(c, members=None, member_mappings=wanted))

    def delete_member_mappings(self, stream: str, group: str) -> ElasticGroupConfig:
        """Drop an elastic group's mappings (it has no members until some are added)."""
        stream, group = check_group_names(stream, group)
        return self._elastic.edit(
            stream, group, lambda c: attrs.evolve(c, member_mappings=None) if c.member_mappings else None
        )

    # -- inspecting ---------------------------------------------------------------------------------------
    def member_status(self, stream: str, group: str, *, elastic: bool) -> list[GroupMemberStatus]:
        """Each member of the group: its partitions, whether an instance runs (``active``, ``pinned``), and its
        consumer's lag (``lag.pending`` not delivered yet, ``lag.ack_pending`` in hand, ``lag.redelivered``...)."""
        stream, group = check_group_names(stream, group)
        config = self.elastic_config(stream, group) if elastic else self.static_config(stream, group)
        on = work_stream_name(stream, group) if elastic else stream
        infos = {info.name: info for info in self.js.consumers(on)}
        out = []
        for member in _members_of(config):
            name = member if elastic else static_consumer_name(group, member)
            partitions = partitions_of(config.members, config.max_members, config.member_mappings, member)
            out.append(GroupMemberStatus.of(member, name, partitions, infos.get(name)))
        return out

    def active_members(self, stream: str, group: str, *, elastic: bool) -> list[str]:
        """The members with a running instance: (elastic) a consumer on the work-queue stream, (static) a
        consumer with pulls waiting, as orbit's ``cg`` reports them."""
        statuses = self.member_status(stream, group, elastic=elastic)
        return [s.member for s in statuses if s.lag is not None and (elastic or s.lag.waiting)]

    def step_down(self, stream: str, group: str, member: str, *, elastic: bool) -> None:
        """Move the member's pin to another of its instances (the current one's next pull is refused)."""
        stream, group = check_group_names(stream, group)
        check_member_name("member", member)
        if elastic:
            self.js.unpin_consumer(work_stream_name(stream, group), member, PRIORITY_GROUP)
        else:
            self.js.unpin_consumer(stream, static_consumer_name(group, member), PRIORITY_GROUP)

    # -- joining ------------------------------------------------------------------------------------------
    def join_static(
        self,
        stream: str,
        group: str,
        member: str,
        handler: Callable[[Msg], object],
        *,
        ack_wait: float | timedelta = DEFAULT_ACK_WAIT,
        consumer_config: ConsumerConfig | None = None,
        ordered_by: Callable[[Msg], Hashable] | None = None,
        **consume_options: Any,
    ) -> GroupMember:
        """Run ``handler`` on the messages of ``member``'s partitions of a static group, as ``consume()`` does
        (takes its options: ``workers``, ``error_handler``, ``auto_in_progress``, ``codec``, ``max_messages``...).
        ``consumer_config`` is a template (``max_ack_pending``, ``max_deliver``...): names, filters and priority
        settings are the group's. ``ack_wait`` also sets the pin timeout (at least 1 s) and the pull expiry."""
        return self._join(
            False, stream, group, member, handler, ack_wait, consumer_config, ordered_by, False, consume_options
        )

    def join_elastic(
        self,
        stream: str,
        group: str,
        member: str,
        handler: Callable[[Msg], object],
        *,
        ack_wait: float | timedelta = DEFAULT_ACK_WAIT,
        consumer_config: ConsumerConfig | None = None,
        ordered_by: Callable[[Msg], Hashable] | None = None,
        auto_membership: bool = False,
        **consume_options: Any,
    ) -> GroupMember:
        """As [`join_static`][jetstream_sync.PartitionedGroups.join_static] for an elastic group (acks must be
        explicit). The member reads nothing until it is in the membership; with ``auto_membership`` it adds
        itself, removes itself when stopped, and removes members killed without leaving (see ``GroupMember``)."""
        return self._join(
            True,
            stream,
            group,
            member,
            handler,
            ack_wait,
            consumer_config,
            ordered_by,
            auto_membership,
            consume_options,
        )

    def _join(
        self,
        elastic: bool,
        stream: str,
        group: str,
        member: str,
        handler: Callable[[Msg], object],
        ack_wait: float | timedelta,
        consumer_config: ConsumerConfig | None,
        ordered_by: Callable[[Msg], Hashable] | None,
        auto_membership: bool,
        consume_options: dict[str, Any],
    ) -> GroupMember:
        stream, group = check_group_names(stream, group)
        check_member_name("member", member)
        check_callable("handler", handler)
        if ordered_by is not None:
            check_callable("ordered_by", ordered_by)
        seconds = to_seconds("ack_wait", ack_wait)
        _check_consume_options(consume_options)
        template = consumer_config or ConsumerConfig(ack_policy=AckPolicy.EXPLICIT)
        if not isinstance(template, ConsumerConfig):
            raise errors.InvalidTypeError("consumer_config", f"must be a ConsumerConfig, got {type(template).__name__}")
        if elastic and template.ack_policy is not AckPolicy.EXPLICIT:
            raise errors.InvalidArgumentError("consumer_config", "an elastic group's consumers ack explicitly")
        if auto_membership and not elastic:
            raise errors.InvalidArgumentError("auto_membership", "only elastic groups change membership")
        template = attrs.evolve(template, ack_wait=seconds)
        return GroupMember(
            self.js,
            elastic=elastic,
            stream=stream,
            group=group,
            member=member,
            handler=handler,
            template=template,
            consume_options=consume_options,
            ordered_by=ordered_by,
            auto_membership=auto_membership,
        ).start()


def _names(field: str, members: Sequence[str]) -> list[str]:
    if isinstance(members, str):
        raise errors.InvalidTypeError(field, "must be a list of member names, not one str")
    names = [check_member_name(field, m) for m in members]
    if not names:
        raise errors.InvalidArgumentError(field, "give at least one member name")
    return names


def _refuse_mapped(config: ElasticGroupConfig, stream: str, group: str) -> None:
    if config.member_mappings:
        raise errors.ConsumerGroupError(
            f"consumer group {stream}.{group} maps partitions by hand: edit its mappings (set_member_mappings) or "
            "delete them (delete_member_mappings) before adding or removing members"
        )
