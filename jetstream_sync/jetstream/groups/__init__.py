"""Partitioned consumer groups, wire-compatible with orbit.go's ``pcgroups``: ``config.py`` (what a group is),
``_layout.py`` (its buckets, keys, streams, transforms and consumer names), ``_store.py`` (its KV config),
``member.py`` (a running member), ``admin.py`` (the ``PartitionedGroups`` facade), ``_cli.py``
(``python -m jetstream_sync group``). The Scaling out guide (docs/guides/scaling-out.md) shows them in use.
"""

from __future__ import annotations

from .admin import GroupMemberStatus, PartitionedGroups
from .config import ElasticGroupConfig, MemberMapping, PartitioningFilter, StaticGroupConfig
from .member import GroupMember

__all__ = [
    "ElasticGroupConfig",
    "GroupMember",
    "GroupMemberStatus",
    "MemberMapping",
    "PartitionedGroups",
    "PartitioningFilter",
    "StaticGroupConfig",
]
