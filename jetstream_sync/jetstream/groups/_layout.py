"""Where a partitioned consumer group lives on the server, as orbit.go's ``pcgroups`` lays it out: the KV buckets
and keys of the configs, the elastic group's work-queue stream and its partitioning transform, the consumers'
names, priority group and timers, and which partitions (as consumer filters) each member reads.

Everything here is a pure function of a config and a few names, so a Python member and a Go member derive the
same layout from the same stored config; tests/unit/jetstream/test_group_layout.py checks it against fixtures
taken from the orbit sources.
"""

from __future__ import annotations

from collections.abc import Sequence

from .config import ElasticGroupConfig, MemberMapping, PartitioningFilter, StaticGroupConfig

__all__ = [
    "DEFAULT_ACK_WAIT",
    "ELASTIC_BUCKET",
    "PRIORITY_GROUP",
    "STATIC_BUCKET",
    "config_key",
    "elastic_filters",
    "elastic_transforms",
    "partition_filters",
    "partitions_of",
    "pinned_ttl",
    "pull_expiry",
    "static_consumer_name",
    "static_filters",
    "work_stream_name",
]

STATIC_BUCKET = "static-consumer-groups"
ELASTIC_BUCKET = "elastic-consumer-groups"
#: the consumers' single priority group; pinned-client policy: one instance of a member reads at a time
PRIORITY_GROUP = "PCG"
#: the ack wait a member uses when none is given; the pin timeout and the pull expiry derive from it
DEFAULT_ACK_WAIT = 5.0
_MIN_PIN_OR_EXPIRY = 1.0


def config_key(stream: str, group: str) -> str:
    """The group's key in its bucket: ``<stream>.<group>``."""
    return f"{stream}.{group}"


def work_stream_name(stream: str, group: str) -> str:
    """An elastic group's work-queue stream: ``<stream>-<group>``."""
    return f"{stream}-{group}"


def static_consumer_name(group: str, member: str) -> str:
    """A static group member's durable consumer on the stream: ``<group>-<member>``. (An elastic member's
    consumer on the work-queue stream is named after the member alone.)"""
    return f"{group}-{member}"


def pinned_ttl(ack_wait: float) -> float:
    """How long a member instance keeps its pin without pulling: the ack wait, at least 1 s."""
    return max(ack_wait, _MIN_PIN_OR_EXPIRY)


def pull_expiry(ack_wait: float) -> float:
    """How long each pull waits: half the ack wait, at least 1 s (well inside the pin timeout)."""
    return max(ack_wait / 2, _MIN_PIN_OR_EXPIRY)


def partitions_of(
    members: Sequence[str] | None, max_members: int, mappings: Sequence[MemberMapping] | None, member: str
) -> list[int]:
    """The partitions ``member`` reads. With ``members``: deduplicated, sorted (by code point, as Go sorts
    UTF-8 bytes), cut to ``max_members``, and given contiguous runs of ``max_members // n`` partitions, the
    remainder dealt out one each from the first member; with mappings: what its mapping lists."""
    if members:
        ordered = sorted(dict.fromkeys(members))[:max_members]
        count = len(ordered)
        per = max_members // count
        mine = []
        for partition in range(max_members):
            if partition < count * per:
                owner = ordered[(partition // per) % count]
            else:
                owner = ordered[(partition - count * per) % count]
            if owner == member:
                mine.append(partition)
        return mine
    for mapping in mappings or ():
        if mapping.member == member:
            return list(mapping.partitions or ())
    return []


def partition_filters(
    members: Sequence[str] | None,
    max_members: int,
    mappings: Sequence[MemberMapping] | None,
    member: str,
    subject_filter: str,
) -> list[str]:
    """``member``'s consumer filters for one filter: ``<partition>.<filter>`` per partition it reads; with
    member mappings orbit uses ``<partition>.>`` whatever the filter."""
    partitions = partitions_of(members, max_members, mappings, member)
    suffix = subject_filter if members else ">"
    return [f"{partition}.{suffix}" for partition in partitions]


def _filters_over(
    subject_filters: Sequence[str],
    members: Sequence[str] | None,
    max_members: int,
    mappings: Sequence[MemberMapping] | None,
    member: str,
) -> list[str]:
    out: list[str] = []
    for subject_filter in subject_filters or [">"]:
        out.extend(partition_filters(members, max_members, mappings, member, subject_filter))
    # orbit repeats the mapped "<partition>.>" filters once per group filter; the server refuses duplicates
    return list(dict.fromkeys(out))


def static_filters(config: StaticGroupConfig, member: str) -> list[str]:
    """A static member's consumer filters (empty: the member reads nothing)."""
    return _filters_over(config.filters or [], config.members, config.max_members, config.member_mappings, member)


def elastic_filters(config: ElasticGroupConfig, member: str) -> list[str]:
    """An elastic member's consumer filters on the work-queue stream (empty: not a member)."""
    subject_filters = [f.filter for f in config.partitioning_filters or ()]
    return _filters_over(subject_filters, config.members, config.max_members, config.member_mappings, member)


def _transform_dest(partitioning_filter: PartitioningFilter, max_members: int) -> str:
    """``{{Partition(n[,i,j])}}.`` before the filter, each ``*`` of it rewritten to ``{{Wildcard(k)}}``."""
    tokens = partitioning_filter.filter.split(".")
    star = 0
    for index, token in enumerate(tokens):
        if token == "*":
            star += 1
            tokens[index] = f"{{{{Wildcard({star})}}}}"
    wildcards = partitioning_filter.partitioning_wildcards or []
    args = ",".join([str(max_members), *(str(w) for w in wildcards)])
    return f"{{{{Partition({args})}}}}.{'.'.join(tokens)}"


def elastic_transforms(config: ElasticGroupConfig) -> list[tuple[str, str]]:
    """The (source, destination) subject transforms of the work-queue stream's source: one per partitioning
    filter, or ``>`` partitioned on the whole subject when there is none."""
    filters = config.partitioning_filters or [PartitioningFilter(filter=">", partitioning_wildcards=[])]
    return [(f.filter, _transform_dest(f, config.max_members)) for f in filters]
