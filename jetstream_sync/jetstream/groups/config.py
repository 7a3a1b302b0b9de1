"""What a partitioned consumer group is: its configuration as it is stored in the groups' KV bucket, and the
checks it must pass before anything is sent.

The JSON is the one orbit.go's ``pcgroups`` reads and writes (same field names, same order, same fields left out
when empty), so a group made here can be joined by a Go member and a group made by orbit's ``cg`` tool can be
joined from Python. Whether a list was stored as ``null`` or ``[]`` is kept as read: orbit compares configs with
Go's ``reflect.DeepEqual``, to which a nil list and an empty one differ, so rewriting one as the other would look
like a change to the Go members and stop them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

import attrs

from ... import errors
from ..._validate import check_name

__all__ = [
    "ElasticGroupConfig",
    "MemberMapping",
    "PartitioningFilter",
    "StaticGroupConfig",
    "check_group_names",
    "check_member_name",
]


def check_member_name(field: str, value: object) -> str:
    """A member name: it becomes a consumer name (elastic groups) or part of one (static groups), so it obeys
    the same rules: non-empty, no whitespace, '.', '*', '>' or path separators."""
    return check_name(field, value)


def check_group_names(stream: object, group: object) -> tuple[str, str]:
    """The stream and group names: both become parts of the config key ``<stream>.<group>``, of a stream name
    (``<stream>-<group>``) and of consumer names (``<group>-<member>``), so both follow the name rules."""
    return check_name("stream", stream), check_name("group", group)


def _list_of(field: str, value: object, kind: type[Any], noun: str) -> list[Any] | None:
    """A list whose items are all ``kind`` (a bool is no int), or None."""
    if value is None:
        return None
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise errors.InvalidTypeError(field, f"must be a list of {noun}, got {type(value).__name__}")
    out = list(value)
    for item in out:
        if isinstance(item, bool) or not isinstance(item, kind):
            raise errors.InvalidTypeError(field, f"must hold {noun}, got {item!r}")
    return out


def _int_list(field: str, value: object) -> list[int] | None:
    return _list_of(field, value, int, "ints")


def _str_list(field: str, value: object) -> list[str] | None:
    return _list_of(field, value, str, "str")


@attrs.frozen(kw_only=True)
class MemberMapping:
    """One member and the partitions given to it, when a group assigns partitions by hand rather than by
    spreading them evenly over ``members``."""

    member: str
    partitions: list[int] | None = attrs.field(factory=list)

    def __attrs_post_init__(self) -> None:
        check_member_name("member_mappings.member", self.member)
        object.__setattr__(self, "partitions", _int_list("member_mappings.partitions", self.partitions))

    def to_json(self) -> dict[str, Any]:
        """The JSON object orbit stores (``partitions`` is never left out, as in orbit)."""
        return {"member": self.member, "partitions": self.partitions}

    @classmethod
    def from_json(cls, data: object) -> MemberMapping:
        """From the stored JSON object."""
        if not isinstance(data, dict):
            raise errors.InvalidTypeError("member_mappings", f"each mapping must be an object, got {data!r}")
        return cls(member=data.get("member", ""), partitions=data.get("partitions"))


@attrs.frozen(kw_only=True)
class PartitioningFilter:
    """An elastic group's filter on its stream, and which of its ``*`` wildcards (numbered from 1) make the
    partitioning key: ``PartitioningFilter("orders.*.*", [1])`` sends every message of one customer (the
    first ``*``) to the same partition. No wildcards listed: the whole subject is the key."""

    filter: str
    partitioning_wildcards: list[int] | None = attrs.field(factory=list)

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.filter, str):
            raise errors.InvalidTypeError("partitioning_filters.filter", f"must be a str, got {self.filter!r}")
        wildcards = _int_list("partitioning_filters.partitioning_wildcards", self.partitioning_wildcards)
        object.__setattr__(self, "partitioning_wildcards", wildcards)

    def to_json(self) -> dict[str, Any]:
        """The JSON object orbit stores."""
        return {"filter": self.filter, "partitioning_wildcards": self.partitioning_wildcards}

    @classmethod
    def from_json(cls, data: object) -> PartitioningFilter:
        """From the stored JSON object."""
        if not isinstance(data, dict):
            raise errors.InvalidTypeError("partitioning_filters", f"each filter must be an object, got {data!r}")
        return cls(filter=data.get("filter", ""), partitioning_wildcards=data.get("partitioning_wildcards"))

    def check(self) -> None:
        """orbit's rules: a filter with at least one ``*`` or ending in ``>``, and partitioning wildcards that
        are distinct indexes of its ``*`` tokens."""
        field = "partitioning_filters"
        if not self.filter:
            raise errors.InvalidArgumentError(field, "a partitioning filter must not be empty")
        tokens = self.filter.split(".")
        stars = sum(1 for token in tokens if token == "*")
        if stars == 0 and tokens[-1] != ">":
            raise errors.InvalidArgumentError(
                field, f"{self.filter!r} must hold at least one '*' wildcard or end with '>'"
            )
        indexes = self.partitioning_wildcards or []
        if len(indexes) > stars:
            raise errors.InvalidArgumentError(
                field, f"{self.filter!r} has {stars} '*' wildcard(s), fewer than the {len(indexes)} indexes given"
            )
        if len(set(indexes)) != len(indexes):
            raise errors.InvalidArgumentError(field, f"partitioning wildcard indexes must be unique, got {indexes}")
        for index in indexes:
            if not 1 <= index <= stars:
                raise errors.InvalidArgumentError(
                    field, f"partitioning wildcard index {index} is not between 1 and {stars} for {self.filter!r}"
                )


def _check_max_members(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise errors.InvalidTypeError("max_members", f"must be an int, got {type(value).__name__}")
    if value < 1:
        raise errors.InvalidArgumentError("max_members", f"the number of partitions must be >= 1, got {value}")
    return value


def _check_membership(
    max_members: int, members: Sequence[str] | None, mappings: Sequence[MemberMapping] | None
) -> None:
    """orbit's membership rules, plus valid member names: members or mappings, not both; mappings name each
    member once and give every partition 0..max_members-1 to exactly one member."""
    if members and mappings:
        raise errors.InvalidArgumentError("members", "give either members or member_mappings, not both")
    for member in members or ():
        check_member_name("members", member)
    if not mappings:
        return
    if len(mappings) > max_members:
        raise errors.InvalidArgumentError(
            "member_mappings", f"{len(mappings)} mappings for {max_members} partitions: at most one member each"
        )
    seen_members: set[str] = set()
    owner: dict[int, str] = {}
    for mapping in mappings:
        if mapping.member in seen_members:
            raise errors.InvalidArgumentError("member_mappings", f"member {mapping.member!r} is mapped twice")
        seen_members.add(mapping.member)
        for partition in mapping.partitions or ():
            if not 0 <= partition < max_members:
                raise errors.InvalidArgumentError(
                    "member_mappings", f"partition {partition} is not between 0 and {max_members - 1}"
                )
            if partition in owner:
                raise errors.InvalidArgumentError(
                    "member_mappings",
                    f"partition {partition} is given to both {owner[partition]!r} and {mapping.member!r}",
                )
            owner[partition] = mapping.member
    missing = [p for p in range(max_members) if p not in owner]
    if missing:
        raise errors.InvalidArgumentError(
            "member_mappings", f"the mappings must cover every partition 0..{max_members - 1}; missing {missing}"
        )


def _mappings(value: object) -> list[MemberMapping] | None:
    if value is None:
        return None
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise errors.InvalidTypeError("member_mappings", f"must be a list of MemberMapping, got {value!r}")
    out = []
    for item in value:
        if not isinstance(item, MemberMapping):
            raise errors.InvalidTypeError("member_mappings", f"must hold MemberMapping, got {item!r}")
        out.append(item)
    return out


def _loads(raw: bytes, what: str) -> dict[str, Any]:
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise errors.ConsumerGroupError(f"{what}: the stored config is not JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise errors.ConsumerGroupError(f"{what}: the stored config is not a JSON object: {raw[:200]!r}")
    return data


def _dumps(data: dict[str, Any]) -> bytes:
    # Go's encoding/json: no spaces, fields in struct order, non-ASCII kept as UTF-8
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode()


@attrs.frozen(kw_only=True)
class StaticGroupConfig:
    """A static group: ``max_members`` partitions, already numbered by the stream itself (the first token of
    every subject is the partition, put there by the stream's subject transform); ``filters`` narrow what the
    members read (default: everything); ``members`` share the partitions evenly, or ``member_mappings`` assign
    them. It cannot change once created: delete it and create it again."""

    max_members: int
    filters: list[str] | None = None
    members: list[str] | None = None
    member_mappings: list[MemberMapping] | None = None

    def __attrs_post_init__(self) -> None:
        object.__setattr__(self, "filters", _str_list("filters", self.filters))
        object.__setattr__(self, "members", _str_list("members", self.members))
        object.__setattr__(self, "member_mappings", _mappings(self.member_mappings))

    def check(self) -> None:
        """Raise InvalidArgumentError for what orbit would refuse (and for member names no consumer can have)."""
        max_members = _check_max_members(self.max_members)
        for subject_filter in self.filters or ():
            if not subject_filter:
                raise errors.InvalidArgumentError("filters", "a filter must not be empty")
        _check_membership(max_members, self.members, self.member_mappings)

    def is_member(self, name: str) -> bool:
        """``name`` is one of the group's members (in ``members`` or in a mapping)."""
        return name in (self.members or ()) or any(m.member == name for m in self.member_mappings or ())

    def to_json(self) -> bytes:
        """The stored value, byte for byte what orbit's ``json.Marshal`` writes."""
        data: dict[str, Any] = {"max_members": self.max_members}
        if self.filters:
            data["filters"] = self.filters
        if self.members:
            data["members"] = self.members
        if self.member_mappings:
            data["member_mappings"] = [m.to_json() for m in self.member_mappings]
        return _dumps(data)

    @classmethod
    def from_json(cls, raw: bytes, what: str = "static group") -> StaticGroupConfig:
        """Read and check a stored value; ConsumerGroupError when it is not a valid group config."""
        data = _loads(raw, what)
        try:
            config = cls(
                max_members=data.get("max_members", 0),
                filters=data.get("filters"),
                members=data.get("members"),
                member_mappings=[MemberMapping.from_json(m) for m in data.get("member_mappings") or ()] or None,
            )
            config.check()
        except (errors.InvalidArgumentError, errors.InvalidTypeError, TypeError) as exc:
            raise errors.ConsumerGroupError(f"{what}: the stored config is not valid: {exc}") from exc
        return config


@attrs.frozen(kw_only=True)
class ElasticGroupConfig:
    """An elastic group: the group's own work-queue stream takes the messages of ``partitioning_filters`` from
    the stream (all of them when there are none) and numbers them into ``max_members`` partitions by a hash of
    the partitioning wildcards. Members can be added and removed at any time (``members``, spread evenly) or
    partitions assigned by hand (``member_mappings``). ``max_buffered_msgs`` / ``max_buffered_bytes`` bound the
    work-queue stream (0: unbounded); ``revision`` is the KV revision it was read at (not stored)."""

    max_members: int
    partitioning_filters: list[PartitioningFilter] | None = None
    max_buffered_msgs: int = 0
    max_buffered_bytes: int = 0
    members: list[str] | None = None
    member_mappings: list[MemberMapping] | None = None
    revision: int = attrs.field(default=0, eq=False)

    def __attrs_post_init__(self) -> None:
        filters: object = self.partitioning_filters
        if filters is not None:
            if isinstance(filters, (str, bytes)) or not isinstance(filters, Iterable):
                raise errors.InvalidTypeError("partitioning_filters", f"must be a list, got {filters!r}")
            filters = list(filters)
            for item in filters:
                if not isinstance(item, PartitioningFilter):
                    raise errors.InvalidTypeError("partitioning_filters", f"must hold PartitioningFilter, got {item!r}")
        object.__setattr__(self, "partitioning_filters", filters)
        object.__setattr__(self, "members", _str_list("members", self.members))
        object.__setattr__(self, "member_mappings", _mappings(self.member_mappings))

    def check(self) -> None:
        """Raise InvalidArgumentError for what orbit would refuse (and for member names no consumer can have)."""
        max_members = _check_max_members(self.max_members)
        for field in ("max_buffered_msgs", "max_buffered_bytes"):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise errors.InvalidArgumentError(field, f"must be an int >= 0 (0: no limit), got {value!r}")
        for partitioning_filter in self.partitioning_filters or ():
            partitioning_filter.check()
        _check_membership(max_members, self.members, self.member_mappings)

    def is_member(self, name: str) -> bool:
        """``name`` is one of the group's members (in ``members`` or in a mapping)."""
        return name in (self.members or ()) or any(m.member == name for m in self.member_mappings or ())

    def same_layout(self, other: ElasticGroupConfig) -> bool:
        """What a running group cannot change (orbit stops its members when it does): partitions, filters,
        buffer limits. Membership may change."""
        return (
            self.max_members == other.max_members
            and self.partitioning_filters == other.partitioning_filters
            and self.max_buffered_msgs == other.max_buffered_msgs
            and self.max_buffered_bytes == other.max_buffered_bytes
        )

    def to_json(self) -> bytes:
        """The stored value, byte for byte what orbit's ``json.Marshal`` writes (note orbit's field name
        ``max_buffered_msg``, singular)."""
        filters = self.partitioning_filters
        data: dict[str, Any] = {
            "max_members": self.max_members,
            "partitioning_filters": None if filters is None else [f.to_json() for f in filters],
        }
        if self.max_buffered_msgs:
            data["max_buffered_msg"] = self.max_buffered_msgs
        if self.max_buffered_bytes:
            data["max_buffered_bytes"] = self.max_buffered_bytes
        if self.members:
            data["members"] = self.members
        if self.member_mappings:
            data["member_mappings"] = [m.to_json() for m in self.member_mappings]
        return _dumps(data)

    @classmethod
    def from_json(cls, raw: bytes, revision: int = 0, what: str = "elastic group") -> ElasticGroupConfig:
        """Read and check a stored value; ConsumerGroupError when it is not a valid group config."""
        data = _loads(raw, what)
        filters = data.get("partitioning_filters")
        try:
            config = cls(
                max_members=data.get("max_members", 0),
                partitioning_filters=None if filters is None else [PartitioningFilter.from_json(f) for f in filters],
                max_buffered_msgs=data.get("max_buffered_msg", 0),
                max_buffered_bytes=data.get("max_buffered_bytes", 0),
                members=data.get("members"),
                member_mappings=[MemberMapping.from_json(m) for m in data.get("member_mappings") or ()] or None,
                revision=revision,
            )
            config.check()
        except (errors.InvalidArgumentError, errors.InvalidTypeError, TypeError) as exc:
            raise errors.ConsumerGroupError(f"{what}: the stored config is not valid: {exc}") from exc
        return config
