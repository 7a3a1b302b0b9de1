"""Object store types (ADR-20): [`ObjectStoreConfig`][jetstream_sync.models.ObjectStoreConfig] (what a bucket is made
with), [`ObjectMeta`][jetstream_sync.models.ObjectMeta] (what a caller says about an object),
[`ObjectInfo`][jetstream_sync.models.ObjectInfo] (what the bucket records about it),
[`ObjectLink`][jetstream_sync.models.ObjectLink] and [`ObjectStoreStatus`][jetstream_sync.models.ObjectStoreStatus].

A bucket is a stream: ``OBJ_<bucket>`` capturing ``$O.<bucket>.C.>`` (the chunks, one subject per stored
version of an object) and ``$O.<bucket>.M.>`` (one metadata message per object name, rolled up on every
write). [`ObjectStoreConfig.stream_config`][jetstream_sync.models.ObjectStoreConfig.stream_config] is that mapping, the
one nats.go and nats-py make, so a bucket made here is the bucket every other client expects. The metadata JSON is read
and written by ``jetstream/object_store/_meta.py``, not by the generic model mapping: its quirks (Go's zero time,
headers as lists or strings, other clients' empty ``mtime``) are the object store's own.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

import attrs

from .._validate import check_bucket_name
from ..errors import InvalidArgumentError, InvalidObjectNameError, InvalidTypeError
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
from .stream import DiscardPolicy, StorageType, StoreCompression, StreamConfig, StreamInfo

__all__ = [
    "DEFAULT_CHUNK_SIZE",
    "MAX_NAME_BYTES",
    "OBJ_STREAM_PREFIX",
    "ObjectInfo",
    "ObjectLink",
    "ObjectMeta",
    "ObjectStoreConfig",
    "ObjectStoreStatus",
    "check_object_name",
]

#: a bucket ``b`` is the stream ``OBJ_b``
OBJ_STREAM_PREFIX = "OBJ_"
#: the chunk size every client uses unless the object's meta says otherwise (128 KiB)
DEFAULT_CHUNK_SIZE = 128 * 1024
#: the longest object name, in bytes of UTF-8 (see `check_object_name`)
MAX_NAME_BYTES = 2048


def _storage(value: StorageType | str) -> StorageType:
    return _to_enum(StorageType, "storage", value)


def _check_bucket(_inst: object, attr: attrs.Attribute[Any], value: object) -> None:
    check_bucket_name(attr.name, value)


def _optional_seconds(value: float | timedelta | None) -> Any:
    return None if value is None else _to_seconds(value)


@attrs.frozen(kw_only=True)
class ObjectStoreConfig:
    """A bucket's configuration (as nats.go's ``ObjectStoreConfig``).

    ``ttl`` ends every object (its chunks and metadata) that long after it was written (None: never);
    ``max_bytes`` caps the bucket (-1: unlimited; a put that does not fit fails and leaves nothing behind).
    """

    bucket: str = attrs.field(validator=_check_bucket)
    description: str | None = attrs.field(default=None, validator=_check_str)
    ttl: float | None = attrs.field(default=None, converter=_optional_seconds, validator=_check_duration)
    max_bytes: int = attrs.field(default=-1, validator=_check_int(-1))
    storage: StorageType = attrs.field(default=StorageType.FILE, converter=_storage)
    replicas: int = attrs.field(default=1, validator=_check_int(1, 5))
    placement: Placement | None = attrs.field(default=None, converter=to_placement)
    compression: bool = attrs.field(default=False, validator=_check_bool)
    metadata: dict[str, str] | None = attrs.field(default=None, validator=_check_str_dict)

    def stream_config(self) -> StreamConfig:
        """The bucket's stream, as every client makes it: rollups allowed (each metadata write replaces the
        last), direct get on (metadata reads from any replica), new data refused once ``max_bytes`` is full."""
        return StreamConfig(
            name=OBJ_STREAM_PREFIX + self.bucket,
            description=self.description,
            subjects=[f"$O.{self.bucket}.C.>", f"$O.{self.bucket}.M.>"],
            max_age=self.ttl or 0.0,
            max_bytes=self.max_bytes if self.max_bytes != 0 else -1,
            storage=self.storage,
            num_replicas=self.replicas,
            placement=self.placement,
            discard=DiscardPolicy.NEW,
            allow_rollup_hdrs=True,
            allow_direct=True,
            compression=StoreCompression.S2 if self.compression else None,
            metadata=self.metadata,
        )

    @classmethod
    def from_stream(cls, bucket: str, config: StreamConfig) -> ObjectStoreConfig:
        """The bucket configuration a stream stands for."""
        return cls(
            bucket=bucket,
            description=config.description,
            ttl=config.max_age or None,
            max_bytes=config.max_bytes,
            storage=config.storage,
            replicas=config.num_replicas,
            placement=config.placement,
            compression=config.compression is StoreCompression.S2,
            metadata=config.metadata,
        )


def _check_headers(_inst: object, attr: attrs.Attribute[Any], value: object) -> None:
    if value is None:
        return
    if not isinstance(value, Mapping):
        raise InvalidTypeError(attr.name, f"must be a dict of str to str or list of str, got {type(value).__name__}")
    for key, item in value.items():
        if not isinstance(key, str) or not key:
            raise InvalidTypeError(attr.name, f"header names must be non-empty str, got {key!r}")
        values = [item] if isinstance(item, str) else item
        if not isinstance(values, Sequence) or not all(isinstance(v, str) for v in values):
            raise InvalidTypeError(attr.name, f"header {key!r} must be a str or a list of str")


def _headers(value: object) -> Any:
    """Headers are stored as Go's ``http.Header`` (name -> list of values): one shape, whatever was given.
    Anything else passes through to _check_headers, which names the culprit."""
    if not isinstance(value, Mapping):
        return value
    out: dict[object, object] = {}
    for key, item in value.items():
        out[key] = [item] if isinstance(item, str) else list(item) if isinstance(item, Sequence) else item
    return out


def check_object_name(field: str, value: object) -> str:
    """An object name: any non-empty str of at most `MAX_NAME_BYTES` bytes in UTF-8.

    Names are free-form (paths, spaces, any script) because they travel base64-encoded; the cap is there
    because the encoded name is part of the subjects a read and a write send, and nats-server closes a
    connection whose protocol line passes 4 KiB (measured: a 3,100-byte name took the client down).
    """
    if not isinstance(value, str):
        raise InvalidTypeError(field, f"must be a str, got {type(value).__name__}")
    if not value:
        raise InvalidObjectNameError(field, "must not be empty")
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise InvalidObjectNameError(field, f"cannot be encoded as UTF-8 ({exc.reason})") from None
    if size > MAX_NAME_BYTES:
        raise InvalidObjectNameError(field, f"is {size} bytes in UTF-8; at most {MAX_NAME_BYTES} are allowed")
    return value


def _check_name(_inst: object, attr: attrs.Attribute[Any], value: object) -> None:
    if value is not None:
        check_object_name(attr.name, value)


def _check_chunk_size(_inst: object, attr: attrs.Attribute[Any], value: object) -> None:
    if value is not None:
        _check_int(1)(_inst, attr, value)


@attrs.frozen(kw_only=True)
class ObjectMeta:
    """What a caller says about an object: for ``put`` (``name`` may be left out: the call names the object)
    and ``update_meta`` (a different ``name`` renames it).

    ``headers`` are stored as name -> list of values (a str value is a one-element list); ``metadata`` is a
    str -> str dict; ``max_chunk_size`` sets this object's chunk size (default 128 KiB) and is ignored by
    ``update_meta``, which cannot change how an object was stored.
    """

    name: str | None = attrs.field(default=None, validator=_check_name)
    description: str | None = attrs.field(default=None, validator=_check_str)
    headers: dict[str, list[str]] | None = attrs.field(default=None, converter=_headers, validator=_check_headers)
    metadata: dict[str, str] | None = attrs.field(default=None, validator=_check_str_dict)
    max_chunk_size: int | None = attrs.field(default=None, validator=_check_chunk_size)

    def __attrs_post_init__(self) -> None:
        # Checked here, not when the metadata JSON is written after the chunks: a str Python holds but UTF-8
        # cannot encode (a lone surrogate) would otherwise fail a put after its data was sent.
        for field, value in (("description", self.description), ("headers", self.headers), ("metadata", self.metadata)):
            try:
                json.dumps(value, ensure_ascii=False).encode("utf-8")
            except UnicodeEncodeError as exc:
                raise InvalidArgumentError(field, f"cannot be encoded as UTF-8 ({exc.reason})") from None


@attrs.frozen(kw_only=True)
class ObjectLink:
    """Where a link points: an object (``name``) in ``bucket``, or the whole bucket (``name`` None)."""

    bucket: str
    name: str | None = None

    @property
    def is_bucket(self) -> bool:
        """True for a link to a whole bucket (which ``get`` cannot read)."""
        return not self.name


@attrs.frozen(kw_only=True)
class ObjectInfo:
    """What the bucket records about one object (as nats.go's ``ObjectInfo``).

    ``nuid`` names the chunk subject of this version of the object (a new one every put); ``mtime`` is when
    its metadata was written (the stream's timestamp when read back); ``digest`` is ``SHA-256=`` and the
    URL-safe base64 of the data's SHA-256. A deleted object keeps a record with ``deleted`` True and no data.
    A link has ``link`` set and no data of its own.
    """

    name: str
    bucket: str
    nuid: str
    size: int = 0
    chunks: int = 0
    mtime: datetime | None = None
    digest: str | None = None
    deleted: bool = False
    description: str | None = None
    headers: dict[str, list[str]] | None = None
    metadata: dict[str, str] | None = None
    link: ObjectLink | None = None
    max_chunk_size: int | None = None
    #: keys of the stored JSON this client does not model (kept when it rewrites the metadata)
    extra: dict[str, Any] = attrs.field(factory=dict, repr=False, eq=False)

    @property
    def is_link(self) -> bool:
        """True when this entry is a link to another object or bucket."""
        return self.link is not None

    @property
    def meta(self) -> ObjectMeta:
        """The caller-given part, e.g. to put another object with the same description and headers."""
        return ObjectMeta(
            name=self.name,
            description=self.description,
            headers=self.headers,
            metadata=self.metadata,
            max_chunk_size=self.max_chunk_size,
        )


@attrs.frozen(kw_only=True)
class ObjectStoreStatus:
    """A bucket's state, from its stream's info. ``size`` is the bytes the stream holds (chunks and metadata);
    ``stream_info`` is the whole stream info, for what this summary leaves out."""

    bucket: str
    description: str | None
    ttl: float | None
    storage: StorageType | str
    replicas: int
    sealed: bool
    size: int
    is_compressed: bool
    metadata: dict[str, str] | None
    stream_info: StreamInfo
    backing_store: str = "JetStream"

    @classmethod
    def from_stream_info(cls, bucket: str, info: StreamInfo) -> ObjectStoreStatus:
        """The status of the object store whose stream info this is."""
        config = info.config
        return cls(
            bucket=bucket,
            description=config.description,
            ttl=config.max_age or None,
            storage=config.storage,
            replicas=config.num_replicas,
            sealed=config.sealed,
            size=info.state.bytes,
            is_compressed=config.compression is StoreCompression.S2,
            metadata=config.metadata,
            stream_info=info,
        )
