"""Stream types: the retention, discard, storage and compression policies, :class:`StreamConfig`, the
:class:`StreamInfo` and :class:`StreamState` the server reports, and :class:`StoredMsg`.

:class:`StoredMsg` is here because it is a message read back out of a stream (``$JS.API.STREAM.MSG.GET`` and
direct get), not a publish result. ``placement``, ``mirror``, ``sources``, ``subject_transform``, ``republish``
and ``consumer_limits`` are plain dicts in the server's JSON shape; typed models for them would belong here.
The enum converters sit beside their enums because only :class:`StreamConfig` uses them.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from datetime import datetime
from typing import Any

import attrs

from ..errors import InvalidArgumentError
from ..headers import Headers
from ._base import (
    _DURATION,
    _OMITEMPTY,
    _as_list,
    _check_bool,
    _check_dict,
    _check_dict_list,
    _check_duration,
    _check_int,
    _check_name,
    _check_str,
    _check_str_dict,
    _check_subjects,
    _meta,
    _Model,
    _to_enum,
    _to_seconds,
    from_wire,
)

__all__ = [
    "DiscardPolicy",
    "PersistMode",
    "RetentionPolicy",
    "StorageType",
    "StoreCompression",
    "StoredMsg",
    "StreamConfig",
    "StreamInfo",
    "StreamState",
]


# --- enums ---------------------------------------------------------------------------------------------------


class RetentionPolicy(enum.Enum):
    LIMITS = "limits"
    INTEREST = "interest"
    WORK_QUEUE = "workqueue"


class DiscardPolicy(enum.Enum):
    OLD = "old"
    NEW = "new"


class StorageType(enum.Enum):
    FILE = "file"
    MEMORY = "memory"


class StoreCompression(enum.Enum):
    NONE = "none"
    S2 = "s2"


class PersistMode(enum.Enum):
    """How a file stream writes (nats-server 2.12+): DEFAULT syncs as configured, ASYNC acknowledges before the
    write reaches the disk (faster; a crash can lose the last acknowledged messages)."""

    DEFAULT = "default"
    ASYNC = "async"


# --- converters ----------------------------------------------------------------------------------------------


def _retention(value: RetentionPolicy | str) -> RetentionPolicy:
    return _to_enum(RetentionPolicy, "retention", value)


def _discard(value: DiscardPolicy | str) -> DiscardPolicy:
    return _to_enum(DiscardPolicy, "discard", value)


def _storage(value: StorageType | str) -> StorageType:
    return _to_enum(StorageType, "storage", value)


def _compression(value: StoreCompression | str) -> StoreCompression:
    return _to_enum(StoreCompression, "compression", value)


def _persist_mode(value: PersistMode | str) -> PersistMode:
    return _to_enum(PersistMode, "persist_mode", value)


# --- streams -------------------------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class StreamConfig(_Model):
    """A stream's configuration. Integer limits default to -1 (unlimited) and are always sent, as nats.go does."""

    name: str = attrs.field(validator=_check_name)
    description: str | None = attrs.field(default=None, validator=_check_str)
    subjects: list[str] = attrs.field(factory=list, converter=_as_list, validator=_check_subjects)
    retention: RetentionPolicy | str = attrs.field(
        default=RetentionPolicy.LIMITS, converter=_retention, metadata=_meta("enum", enum_type=RetentionPolicy)
    )
    max_consumers: int = attrs.field(default=-1, validator=_check_int(-1))
    max_msgs: int = attrs.field(default=-1, validator=_check_int(-1))
    max_bytes: int = attrs.field(default=-1, validator=_check_int(-1))
    max_age: float = attrs.field(default=0.0, converter=_to_seconds, validator=_check_duration, metadata=_DURATION)
    max_msgs_per_subject: int = attrs.field(default=-1, validator=_check_int(-1))
    max_msg_size: int = attrs.field(default=-1, validator=_check_int(-1))
    discard: DiscardPolicy | str = attrs.field(
        default=DiscardPolicy.OLD, converter=_discard, metadata=_meta("enum", enum_type=DiscardPolicy)
    )
    storage: StorageType | str = attrs.field(
        default=StorageType.FILE, converter=_storage, metadata=_meta("enum", enum_type=StorageType)
    )
    num_replicas: int = attrs.field(default=1, validator=_check_int(1, 5))
    duplicate_window: float | None = attrs.field(
        default=None,
        converter=attrs.converters.optional(_to_seconds),
        validator=_check_duration,
        metadata=_DURATION,
    )
    no_ack: bool = attrs.field(default=False, validator=_check_bool, metadata=_OMITEMPTY)
    placement: dict[str, Any] | None = attrs.field(default=None, validator=_check_dict)
    mirror: dict[str, Any] | None = attrs.field(default=None, validator=_check_dict)
    sources: list[dict[str, Any]] | None = attrs.field(default=None, validator=_check_dict_list)
    sealed: bool = attrs.field(default=False, validator=_check_bool, metadata=_OMITEMPTY)
    deny_delete: bool = attrs.field(default=False, validator=_check_bool, metadata=_OMITEMPTY)
    deny_purge: bool = attrs.field(default=False, validator=_check_bool, metadata=_OMITEMPTY)
    allow_rollup_hdrs: bool = attrs.field(default=False, validator=_check_bool, metadata=_OMITEMPTY)
    allow_direct: bool = attrs.field(default=False, validator=_check_bool)
    mirror_direct: bool = attrs.field(default=False, validator=_check_bool)
    discard_new_per_subject: bool = attrs.field(default=False, validator=_check_bool, metadata=_OMITEMPTY)
    compression: StoreCompression | str | None = attrs.field(
        default=None,
        converter=attrs.converters.optional(_compression),
        metadata=_meta("enum", enum_type=StoreCompression),
    )
    first_seq: int | None = attrs.field(default=None, validator=_check_int(0))
    subject_transform: dict[str, Any] | None = attrs.field(default=None, validator=_check_dict)
    republish: dict[str, Any] | None = attrs.field(default=None, validator=_check_dict)
    metadata: dict[str, str] | None = attrs.field(default=None, validator=_check_str_dict)
    allow_msg_ttl: bool = attrs.field(default=False, validator=_check_bool)
    subject_delete_marker_ttl: float | None = attrs.field(
        default=None,
        converter=attrs.converters.optional(_to_seconds),
        validator=_check_duration,
        metadata=_DURATION,
    )
    consumer_limits: dict[str, Any] | None = attrs.field(default=None, validator=_check_dict)
    # nats-server 2.12+ (2.14+ for allow_batched). Left out of the request unless set: the server refuses a field
    # it does not know, so an older server still takes a config that does not use them.
    #: counters (ADR-49): each message adds to the subject's running total
    allow_msg_counter: bool = attrs.field(default=False, validator=_check_bool, metadata=_OMITEMPTY)
    #: atomic batch publish (ADR-50)
    allow_atomic_publish: bool = attrs.field(
        default=False, validator=_check_bool, metadata=_meta(wire="allow_atomic", omitempty=True)
    )
    #: message schedules (ADR-51)
    allow_msg_schedules: bool = attrs.field(default=False, validator=_check_bool, metadata=_OMITEMPTY)
    #: fast ingest batches (nats-server 2.14+)
    allow_batched: bool = attrs.field(default=False, validator=_check_bool, metadata=_OMITEMPTY)
    persist_mode: PersistMode | str | None = attrs.field(
        default=None,
        converter=attrs.converters.optional(_persist_mode),
        metadata=_meta("enum", enum_type=PersistMode, omitempty=True),
    )

    def __attrs_post_init__(self) -> None:
        """Rules that span fields; the server would reject these too, but with a less helpful message."""
        if self.duplicate_window is not None and 0 < self.max_age < self.duplicate_window:
            raise InvalidArgumentError(
                "duplicate_window",
                f"{self.duplicate_window}s exceeds max_age ({self.max_age}s); shorten it or raise max_age",
            )
        if self.discard_new_per_subject:
            if self.discard is not DiscardPolicy.NEW:
                raise InvalidArgumentError("discard_new_per_subject", "requires discard=DiscardPolicy.NEW")
            if self.max_msgs_per_subject <= 0:
                raise InvalidArgumentError("discard_new_per_subject", "requires max_msgs_per_subject > 0")
        if self.subject_delete_marker_ttl is not None:
            # nats-server 2.11+: a marker left when max_age removes a subject's last message; it is itself a
            # message with a TTL, so the stream must allow per-message TTLs.
            if self.subject_delete_marker_ttl < 1:
                raise InvalidArgumentError("subject_delete_marker_ttl", "must be at least 1 second")
            if not self.allow_msg_ttl:
                raise InvalidArgumentError("subject_delete_marker_ttl", "requires allow_msg_ttl=True")


@attrs.frozen(kw_only=True)
class StreamState(_Model):
    messages: int = 0
    bytes: int = 0
    first_seq: int = 0
    first_ts: datetime | None = attrs.field(default=None, metadata=_meta("datetime"))
    last_seq: int = 0
    last_ts: datetime | None = attrs.field(default=None, metadata=_meta("datetime"))
    consumer_count: int = 0
    deleted: list[int] | None = None
    num_deleted: int = 0
    num_subjects: int = 0
    subjects: dict[str, int] | None = None
    lost: dict[str, Any] | None = None


@attrs.frozen(kw_only=True)
class StreamInfo(_Model):
    """A stream as the server reports it. ``mirror`` and ``sources`` are the server's source-info objects."""

    config: StreamConfig = attrs.field(metadata=_meta("model", model=StreamConfig))
    created: datetime = attrs.field(metadata=_meta("datetime"))
    state: StreamState = attrs.field(metadata=_meta("model", model=StreamState))
    cluster: dict[str, Any] | None = None
    mirror: dict[str, Any] | None = None
    sources: list[dict[str, Any]] | None = None
    ts: datetime | None = attrs.field(default=None, metadata=_meta("datetime"))


# --- messages ------------------------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class StoredMsg(_Model):
    """A message read back with ``$JS.API.STREAM.MSG.GET``; on the wire data and headers are base64."""

    subject: str
    seq: int
    data: bytes = attrs.field(default=b"", metadata=_meta("base64", omitempty=True))
    headers: Headers = attrs.field(factory=Headers, metadata=_meta("headers", wire="hdrs", omitempty=True))
    time: datetime = attrs.field(metadata=_meta("datetime"))

    @classmethod
    def from_api(cls, message: Mapping[str, Any]) -> StoredMsg:
        """Decode the ``message`` object of a MSG.GET response; the whole response is accepted too."""
        inner = message.get("message")
        if isinstance(inner, Mapping) and "seq" not in message:
            message = inner
        return from_wire(cls, message)
