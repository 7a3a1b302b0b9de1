"""Which nats-server a call needs, checked against the connected server's INFO before anything is sent.

An older server answers a newer API with a timeout or a generic error, or takes a config field it does not know
and quietly drops it; this says what is missing instead. A server whose version cannot be read is left to
answer for itself.

The JetStream API level (ADR-44) is the server's own count of what its API knows: 1 in nats-server 2.11, 2 in
2.12, 4 in 2.14, 5 in 2.15. A server of 2.12 or later advertises its level in INFO (``api_lvl``) and in the
account info (``api.level``), and refuses a request whose ``Nats-Required-Api-Level`` header asks for more
(err_code 10185, [`RequiredApiLevelError`][jetstream_sync.errors.RequiredApiLevelError]). That header is checked by the
server that *answers* (in a cluster, the meta leader or the stream's leader), which may be older than the one this
client is connected to: so a stream or consumer whose config uses a newer feature is sent with the level that
feature needs (`stream_features`, `consumer_features`), and an older server in the path refuses it
rather than creating it without the feature.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, NamedTuple

from .. import errors
from ..models import AckPolicy, ConsumerConfig, PersistMode, PriorityPolicy, StreamConfig

__all__ = [
    "API_LEVEL_HEADER",
    "Feature",
    "consumer_features",
    "require_api_level",
    "require_features",
    "require_server",
    "server_api_level",
    "server_version",
    "stream_features",
]

_VERSION = re.compile(r"v?(\d+)\.(\d+)\.(\d+)")

#: the request header asserting the JetStream API level the answering server must have (ADR-44)
API_LEVEL_HEADER = b"Nats-Required-Api-Level"

# The first release of each JetStream API level (level 3 only ever existed in 2.14's development builds).
_LEVEL_SINCE: dict[int, tuple[int, int, int]] = {
    1: (2, 11, 0),
    2: (2, 12, 0),
    3: (2, 14, 0),
    4: (2, 14, 0),
    5: (2, 15, 0),
}


class Feature(NamedTuple):
    """A feature a request uses: its name (for the error), the nats-server release that brought it, and that
    release's JetStream API level."""

    what: str
    version: tuple[int, int, int]
    level: int


def server_version(info: Mapping[str, Any]) -> tuple[int, int, int] | None:
    """The server's version from its INFO ("2.11.0-RC.2" is 2.11.0), or None when it does not say."""
    match = _VERSION.match(str(info.get("version", "")))
    if match is None:
        return None
    return int(match[1]), int(match[2]), int(match[3])


def server_api_level(info: Mapping[str, Any]) -> int:
    """The JetStream API level the server advertises in its INFO (``api_lvl``, nats-server 2.12+); 0 when it
    does not say (an older server, or JetStream off)."""
    level = info.get("api_lvl")
    return level if isinstance(level, int) and not isinstance(level, bool) and level > 0 else 0


def require_server(info: Mapping[str, Any], feature: str, needed: tuple[int, int, int]) -> None:
    """Raise FeatureNotSupportedError when the server is older than ``needed``."""
    version = server_version(info)
    if version is not None and version < needed:
        raise errors.FeatureNotSupportedError(feature, ".".join(map(str, needed)), str(info.get("version")))


def require_api_level(info: Mapping[str, Any], level: int, feature: str) -> None:
    """Raise FeatureNotSupportedError when the connected server's JetStream API level is below ``level``: the
    level it advertises, or, from a server that advertises none (older than 2.12), its version."""
    since = _LEVEL_SINCE.get(level)
    needed = ".".join(map(str, since)) if since else f"a release of JetStream API level {level}"
    advertised = server_api_level(info)
    if advertised:
        if advertised < level:
            raise errors.FeatureNotSupportedError(
                feature, needed, f"{info.get('version')} (JetStream API level {advertised})"
            )
        return
    if since is not None:
        require_server(info, feature, since)


def stream_features(config: StreamConfig) -> list[Feature]:
    """The features of nats-server 2.11 and later a stream config uses."""
    found = []
    if config.allow_msg_ttl or config.subject_delete_marker_ttl is not None:
        found.append(Feature("per-message TTLs", (2, 11, 0), 1))
    for switch, what in (
        ("allow_msg_counter", "counters"),
        ("allow_atomic_publish", "atomic batch publish"),
        ("allow_msg_schedules", "message schedules"),
    ):
        if getattr(config, switch):
            found.append(Feature(what, (2, 12, 0), 2))
    if config.persist_mode is PersistMode.ASYNC:
        found.append(Feature("asynchronous persistence", (2, 12, 0), 2))
    if config.allow_batched:
        found.append(Feature("fast-ingest batches (allow_batched)", (2, 14, 0), 4))
    sources = [config.mirror, *(config.sources or [])]
    if any(source is not None and source.consumer is not None for source in sources):
        found.append(Feature("durable sourcing (StreamSource.consumer)", (2, 14, 0), 4))
    return found


def consumer_features(config: ConsumerConfig) -> list[Feature]:
    """The features of nats-server 2.11 and later a consumer config uses."""
    found = []
    if config.pause_until is not None:
        found.append(Feature("pausing a consumer", (2, 11, 0), 1))
    if config.priority_policy is PriorityPolicy.PRIORITIZED:
        found.append(Feature("the PRIORITIZED priority policy", (2, 12, 0), 2))
    elif config.priority_policy is not None and config.priority_policy is not PriorityPolicy.NONE:
        found.append(Feature("priority groups", (2, 11, 0), 1))
    if config.ack_policy is AckPolicy.FLOW_CONTROL:
        found.append(Feature("the flow-control ack policy (AckPolicy.FLOW_CONTROL)", (2, 14, 0), 4))
    return found


def require_features(info: Mapping[str, Any], features: list[Feature]) -> int | None:
    """Check the connected server for each feature (FeatureNotSupportedError naming the first it lacks); the API
    level the request must assert, or None when it uses none of them."""
    for feature in features:
        require_server(info, feature.what, feature.version)
    return max((feature.level for feature in features), default=None)
