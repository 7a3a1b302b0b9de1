"""Key-value types: [`KeyValueConfig`][jetstream_sync.models.KeyValueConfig] (what a bucket is made with),
[`KeyValueEntry`][jetstream_sync.models.KeyValueEntry] (one value of a key),
[`KeyValueOp`][jetstream_sync.models.KeyValueOp] and [`KeyValueStatus`][jetstream_sync.models.KeyValueStatus].

A bucket is a stream (ADR-8): ``KV_<bucket>`` capturing ``$KV.<bucket>.>``, one subject per key, history as
``max_msgs_per_subject``, the TTL as ``max_age``.
[`KeyValueConfig.stream_config`][jetstream_sync.models.KeyValueConfig.stream_config] is that mapping, the same one
nats.go and nats-py make, so a bucket created here is the bucket every other client expects.
"""

from __future__ import annotations

import enum
from datetime import datetime
from typing import Any

import attrs

from .._validate import check_bucket_name
from ..errors import InvalidArgumentError, KeyHistoryTooLargeError
from ._base import (
    _check_bool,
    _check_duration,
    _check_int,
    _check_str,
    _check_str_dict,
    _to_enum,
    _to_seconds,
)
from .cluster import Placement, to_placement
from .stream import (
    DiscardPolicy,
    RePublish,
    StorageType,
    StoreCompression,
    StreamConfig,
    StreamInfo,
    StreamSource,
    SubjectTransform,
    to_mirror,
    to_republish,
    to_sources,
)

__all__ = ["KV_STREAM_PREFIX", "KeyValueConfig", "KeyValueEntry", "KeyValueOp", "KeyValueStatus"]

#: a bucket ``b`` is the stream ``KV_b``
KV_STREAM_PREFIX = "KV_"
#: the most values per key a bucket may keep (the server's limit for KV, which every client enforces)
MAX_HISTORY = 64
# The duplicate window every client gives a bucket, unless its TTL is shorter.
_DUPLICATE_WINDOW = 120.0


class KeyValueOp(enum.Enum):
    """What an entry records: a value, a delete marker, or a purge marker (which also dropped the history)."""

    PUT = "PUT"
    DELETE = "DEL"
    PURGE = "PURGE"


def _storage(value: StorageType | str) -> StorageType:
    return _to_enum(StorageType, "storage", value)


def _check_bucket(_inst: object, attr: attrs.Attribute[Any], value: object) -> None:
    check_bucket_name(attr.name, value)


def _check_history(_inst: object, attr: attrs.Attribute[Any], value: object) -> None:
    _check_int(1)(_inst, attr, value)
    if isinstance(value, int) and value > MAX_HISTORY:
        raise KeyHistoryTooLargeError(attr.name, f"must be at most {MAX_HISTORY}, got {value}")


def _check_marker_ttl(_inst: object, attr: attrs.Attribute[Any], value: object) -> None:
    _check_duration(_inst, attr, value)
    if isinstance(value, float) and value < 1:
        raise InvalidArgumentError(attr.name, f"must be at least 1 second (the server's minimum), got {value}")


def _optional_seconds(value: float | Any) -> Any:
    return None if value is None else _to_seconds(value)


@attrs.frozen(kw_only=True)
class KeyValueConfig:
    """A bucket's configuration (as nats.go's ``KeyValueConfig``).

    ``history`` values are kept per key (1-64); ``ttl`` ends every value that long after it was written
    (None: never); ``max_value_size`` and ``max_bytes`` are -1 for unlimited. ``limit_marker_ttl``
    (nats-server 2.11+) makes the server leave a marker, kept that long, when a value ends by the bucket's TTL
    and enables per-key TTLs (``create(..., ttl=)``, ``purge(..., ttl=)``). ``mirror`` and ``sources`` are
    [`StreamSource`][jetstream_sync.models.StreamSource] values (or dicts in the server's JSON shape), ``placement`` a
    [`Placement`][jetstream_sync.models.Placement] (or dict), ``republish`` a
    [`RePublish`][jetstream_sync.models.RePublish] (or dict); a source or mirror name without ``KV_`` means that bucket,
    whose keys land under this bucket's.

    A source may also be a stream that is not a bucket (as in nats.go): give it ``subject_transforms`` that map
    its subjects into this bucket's keys, e.g. ``SubjectTransform(src="orders.*", dest="$KV.<bucket>.$1")``; a
    source whose transforms read no ``$KV.`` subject is taken by its stream name, as it is. The transforms of
    any source must map into ``$KV.<bucket>.`` (a message anywhere else would be no key of the bucket).
    """

    bucket: str = attrs.field(validator=_check_bucket)
    description: str | None = attrs.field(default=None, validator=_check_str)
    max_value_size: int = attrs.field(default=-1, validator=_check_int(-1))
    history: int = attrs.field(default=1, validator=_check_history)
    ttl: float | None = attrs.field(default=None, converter=_optional_seconds, validator=_check_duration)
    max_bytes: int = attrs.field(default=-1, validator=_check_int(-1))
    storage: StorageType = attrs.field(default=StorageType.FILE, converter=_storage)
    replicas: int = attrs.field(default=1, validator=_check_int(1, 5))
    placement: Placement | None = attrs.field(default=None, converter=to_placement)
    republish: RePublish | None = attrs.field(default=None, converter=to_republish)
    mirror: StreamSource | None = attrs.field(default=None, converter=to_mirror)
    sources: list[StreamSource] | None = attrs.field(default=None, converter=to_sources)
    compression: bool = attrs.field(default=False, validator=_check_bool)
    metadata: dict[str, str] | None = attrs.field(default=None, validator=_check_str_dict)
    limit_marker_ttl: float | None = attrs.field(default=None, converter=_optional_seconds, validator=_check_marker_ttl)

    def __attrs_post_init__(self) -> None:
        if self.mirror is not None and self.sources:
            raise InvalidArgumentError("mirror", "a bucket can mirror one bucket or take sources, not both")
        keys = f"$KV.{self.bucket}."
        for i, source in enumerate(self.sources or []):
            for transform in source.subject_transforms or []:
                if not transform.dest.startswith(keys):
                    raise InvalidArgumentError(
                        "sources",
                        f"[{i}].subject_transforms: dest {transform.dest!r} is no key of bucket {self.bucket!r}; map "
                        f"into {keys}<key>",
                    )

    def stream_config(self) -> StreamConfig:
        """The bucket's stream, as every client makes it: rollups allowed (purge), deletes denied (markers
        instead), new values refused once ``max_bytes`` is full, direct get on."""
        window = _DUPLICATE_WINDOW
        if self.ttl and self.ttl < window:
            window = self.ttl
        subjects: list[str] = []
        mirror = None
        sources = None
        if self.mirror is not None:
            mirror = attrs.evolve(self.mirror, name=_kv_stream(self.mirror.name))
        else:
            subjects = [f"$KV.{self.bucket}.>"]
        if self.sources:
            sources = [self._source(source) for source in self.sources]
        return StreamConfig(
            name=KV_STREAM_PREFIX + self.bucket,
            description=self.description,
            subjects=subjects,
            max_msgs_per_subject=self.history,
            max_bytes=self.max_bytes,
            max_age=self.ttl or 0.0,
            max_msg_size=self.max_value_size,
            storage=self.storage,
            num_replicas=self.replicas,
            placement=self.placement,
            allow_rollup_hdrs=True,
            deny_delete=True,
            duplicate_window=window,
            allow_direct=True,
            mirror_direct=mirror is not None,
            mirror=mirror,
            sources=sources,
            republish=self.republish,
            compression=StoreCompression.S2 if self.compression else None,
            discard=DiscardPolicy.NEW,
            metadata=self.metadata,
            allow_msg_ttl=self.limit_marker_ttl is not None,
            subject_delete_marker_ttl=self.limit_marker_ttl,
        )

    def _source(self, source: StreamSource) -> StreamSource:
        """A source bucket's keys land under this bucket's prefix (as nats.go maps them), unless the source
        brings its own transforms; a source whose transforms read no ``$KV.`` subject is a stream that is not a
        bucket, named as it is (nats.go takes every source with transforms by its name as given)."""
        if source.subject_transforms and not any(t.src.startswith("$KV.") for t in source.subject_transforms):
            return source
        stream = _kv_stream(source.name)
        origin = stream[len(KV_STREAM_PREFIX) :]
        transforms = source.subject_transforms
        if origin != self.bucket and not transforms:
            transforms = [SubjectTransform(src=f"$KV.{origin}.>", dest=f"$KV.{self.bucket}.>")]
        return attrs.evolve(source, name=stream, subject_transforms=transforms)

    @classmethod
    def from_stream(cls, bucket: str, config: StreamConfig) -> KeyValueConfig:
        """The bucket configuration a stream stands for (what update_key_value starts from)."""
        return cls(
            bucket=bucket,
            description=config.description,
            max_value_size=config.max_msg_size,
            history=max(1, min(config.max_msgs_per_subject, MAX_HISTORY)),
            ttl=config.max_age or None,
            max_bytes=config.max_bytes,
            storage=config.storage,
            replicas=config.num_replicas,
            placement=config.placement,
            republish=config.republish,
            mirror=config.mirror,
            sources=config.sources,
            compression=config.compression is StoreCompression.S2,
            metadata=config.metadata,
            limit_marker_ttl=config.subject_delete_marker_ttl,
        )


def _kv_stream(name: str) -> str:
    return name if name.startswith(KV_STREAM_PREFIX) else KV_STREAM_PREFIX + name


@attrs.frozen(kw_only=True)
class KeyValueEntry:
    """One value of a key as the bucket stored it.

    ``revision`` is its stream sequence (what ``update(last=)`` compares); ``delta`` how many newer entries
    matched the read when it was delivered (0 for the newest; always 0 from ``get``); ``operation`` says
    whether it is a value or a delete/purge marker (``value`` is then empty).
    """

    bucket: str
    key: str
    value: bytes
    revision: int
    created: datetime
    delta: int = 0
    operation: KeyValueOp = KeyValueOp.PUT


@attrs.frozen(kw_only=True)
class KeyValueStatus:
    """A bucket's state, from its stream's info.

    ``values`` counts every stored entry (markers and history too), ``bytes`` their size. ``stream_info`` is
    the whole stream info, for what this summary leaves out.
    """

    bucket: str
    values: int
    history: int
    ttl: float | None
    bytes: int
    is_compressed: bool
    limit_marker_ttl: float | None
    metadata: dict[str, str] | None
    stream_info: StreamInfo
    backing_store: str = "JetStream"

    @classmethod
    def from_stream_info(cls, bucket: str, info: StreamInfo) -> KeyValueStatus:
        """The status of the bucket whose stream info this is."""
        config = info.config
        return cls(
            bucket=bucket,
            values=info.state.messages,
            history=config.max_msgs_per_subject,
            ttl=config.max_age or None,
            bytes=info.state.bytes,
            is_compressed=config.compression is StoreCompression.S2,
            limit_marker_ttl=config.subject_delete_marker_ttl,
            metadata=config.metadata,
            stream_info=info,
        )
