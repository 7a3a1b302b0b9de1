"""Where a stream lives in clustered JetStream: the [`Placement`][jetstream_sync.models.Placement] a stream asks for,
and the [`ClusterInfo`][jetstream_sync.models.ClusterInfo] (with a [`PeerInfo`][jetstream_sync.models.PeerInfo] per
follower) the server reports in stream and consumer info.

They are a module of their own because streams and consumers both report a
[`ClusterInfo`][jetstream_sync.models.ClusterInfo], and advisories report the same
[`PeerInfo`][jetstream_sync.models.PeerInfo]; the stream and consumer modules import them from here.

What a server reports differs with how it runs, so `clustered_leader` reads it in one place: a stream of
a clustered server names its cluster and (once elected) its leader; a stream of a single, non-clustered server
names that server as leader but no cluster; a consumer of a non-clustered server reports no cluster at all.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

import attrs

from ..errors import InvalidTypeError
from ._base import _DURATION, _as_list, _check_str, _meta, _Model, _to_model

__all__ = ["ClusterInfo", "PeerInfo", "Placement", "clustered_leader"]


def _check_tags(_inst: object, attr: attrs.Attribute[Any], value: object) -> None:
    if value is None:
        return
    if not isinstance(value, list) or not all(isinstance(tag, str) for tag in value):
        raise InvalidTypeError(attr.name, "must be a list of str, e.g. ['ssd', 'region:east']")


@attrs.frozen(kw_only=True)
class Placement(_Model):
    """Where the server may put a stream's replicas: in ``cluster`` (by name), on servers carrying every one of
    ``tags`` (their ``server_tags``). Either may be left out.

    ``preferred`` (nats-server 2.11+) names the server to lead after a leader step-down; the server refuses it in
    a stream's configuration ([`StreamConfig`][jetstream_sync.models.StreamConfig] says so before sending), and it is
    here because it is part of the server's placement object.
    """

    cluster: str | None = attrs.field(default=None, validator=_check_str)
    tags: list[str] | None = attrs.field(
        default=None, converter=attrs.converters.optional(_as_list), validator=_check_tags
    )
    preferred: str | None = attrs.field(default=None, validator=_check_str)


def to_placement(value: Placement | Mapping[str, Any] | None) -> Placement | None:
    """A ``placement`` field's value (stream, key-value and object store configs): a Placement, or a dict in the
    server's JSON shape. Public to the sibling modules, not in ``__all__``."""
    return None if value is None else _to_model(Placement, "placement", value)


@attrs.frozen(kw_only=True)
class PeerInfo(_Model):
    """A replica of a stream or consumer as its leader sees it (the leader itself is not listed).

    ``current``: caught up with the leader; ``offline``: not heard from; ``active``: seconds since the leader
    last heard from it; ``lag``: operations it is behind; ``peer``: its Raft peer id; ``pending``: chosen for the
    group, but not a member of it yet (a move or scale-up in progress).
    """

    name: str = ""
    current: bool = False
    offline: bool = False
    active: float = attrs.field(default=0.0, metadata=_DURATION)
    lag: int = 0
    peer: str | None = None
    pending: bool = False


@attrs.frozen(kw_only=True)
class ClusterInfo(_Model):
    """The servers behind a stream or consumer, as the server reports them.

    ``name`` is the cluster's name (absent on a non-clustered server); ``leader`` the name of the server leading
    it (absent during an election); ``raft_group`` the Raft group replicating it (a replicated stream or consumer
    only); ``replicas`` the followers. ``system_account`` and ``traffic_account`` say which account carries the
    replication traffic. What a newer server adds (such as 2.15's ``desired``, a move in progress) is in
    ``extra``.
    """

    name: str | None = None
    raft_group: str | None = None
    leader: str | None = None
    leader_since: datetime | None = attrs.field(default=None, metadata=_meta("datetime"))
    system_account: bool = False
    traffic_account: str | None = None
    replicas: list[PeerInfo] = attrs.field(factory=list, metadata=_meta("models", model=PeerInfo))


def clustered_leader(cluster: ClusterInfo | None) -> str | None:
    """The name of the server leading a stream or consumer, as its info's ``cluster`` reports it; None when
    JetStream is not clustered, or while no leader is elected.

    A non-clustered server reports itself as the leader of a stream but no cluster for a consumer; both read as
    None here, so a caller's "is this clustered" never depends on which one it asked about. The report names no
    cluster exactly when the server is not in one.
    """
    if cluster is None or not cluster.name:
        return None
    return cluster.leader or None
