"""Stream types: the retention, discard, storage and compression policies,
[`StreamConfig`][jetstream_sync.models.StreamConfig] (with its [`RePublish`][jetstream_sync.models.RePublish] and
[`StreamConsumerLimits`][jetstream_sync.models.StreamConsumerLimits]), the
[`StreamInfo`][jetstream_sync.models.StreamInfo] and [`StreamState`][jetstream_sync.models.StreamState] the server
reports, and [`StoredMsg`][jetstream_sync.models.StoredMsg]; and what mirrors and sources are made of:
[`StreamSource`][jetstream_sync.models.StreamSource] (with [`SubjectTransform`][jetstream_sync.models.SubjectTransform],
[`ExternalStream`][jetstream_sync.models.ExternalStream] and, for durable sourcing,
[`StreamConsumerSource`][jetstream_sync.models.StreamConsumerSource]) in a config,
[`StreamSourceInfo`][jetstream_sync.models.StreamSourceInfo] in an info.

[`StoredMsg`][jetstream_sync.models.StoredMsg] is here because it is a message read back out of a stream
(``$JS.API.STREAM.MSG.GET`` and direct get), not a publish result. [`Placement`][jetstream_sync.models.Placement] and
[`ClusterInfo`][jetstream_sync.models.ClusterInfo] live in ``cluster``, as consumers report a cluster too.

``placement``, ``mirror``, ``sources``, ``subject_transform``, ``republish`` and ``consumer_limits`` are typed,
and each also takes a dict in the server's JSON shape (what callers passed before the types existed), decoded
and then checked like the model (so a dict's durations are nanoseconds, as on the wire). nats.go's
``StreamSource.Domain`` is not a field: it is never sent (nats.go turns it into ``external``), so a config read
back from the server could not hold it and would differ from the one given;
[`ExternalStream.for_domain`][jetstream_sync.models.ExternalStream.for_domain] makes that ``external`` instead.
The enum converters sit beside their enums because only [`StreamConfig`][jetstream_sync.models.StreamConfig] uses them.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import attrs

from .._validate import check_name, check_subject
from ..errors import APIError, InvalidArgumentError, InvalidTypeError, api_error
from ..headers import Headers
from ._base import (
    _DURATION,
    _OMITEMPTY,
    _as_list,
    _check_bool,
    _check_deliver_subject,
    _check_duration,
    _check_filter,
    _check_int,
    _check_name,
    _check_str,
    _check_str_dict,
    _check_subjects,
    _check_time,
    _meta,
    _Model,
    _to_enum,
    _to_model,
    _to_models,
    _to_seconds,
    from_wire,
)
from .cluster import ClusterInfo, Placement, to_placement

__all__ = [
    "DiscardPolicy",
    "ExternalStream",
    "PersistMode",
    "RePublish",
    "RetentionPolicy",
    "StorageType",
    "StoreCompression",
    "StoredMsg",
    "StreamConfig",
    "StreamConsumerLimits",
    "StreamConsumerSource",
    "StreamInfo",
    "StreamSource",
    "StreamSourceInfo",
    "StreamState",
    "SubjectTransform",
]


# --- enums ---------------------------------------------------------------------------------------------------


class RetentionPolicy(enum.Enum):
    """When a stream drops messages: at its limits, once every consumer acked them (interest), or once one did
    (work queue)."""

    LIMITS = "limits"
    INTEREST = "interest"
    WORK_QUEUE = "workqueue"


class DiscardPolicy(enum.Enum):
    """What a full stream does: drop its oldest messages (old) or refuse new ones (new)."""

    OLD = "old"
    NEW = "new"


class StorageType(enum.Enum):
    """Where a stream keeps its messages: on disk (file) or in memory."""

    FILE = "file"
    MEMORY = "memory"


class StoreCompression(enum.Enum):
    """How a file-stored stream compresses its blocks: not at all, or with S2."""

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


# --- mirrors and sources -------------------------------------------------------------------------------------


def _check_transform_src(_inst: object, attr: attrs.Attribute[Any], value: object) -> None:
    """A subject filter; the server takes an empty ``src`` as every subject."""
    if not isinstance(value, str):
        raise InvalidTypeError(attr.name, f"must be a str, got {type(value).__name__}")
    if value:
        check_subject(attr.name, value, wildcards=True)


def _check_transform_dest(_inst: object, attr: attrs.Attribute[Any], value: object) -> None:
    """Only the type: a destination may hold mapping functions ({{wildcard(1)}}, {{partition(3,1)}}) that only
    the server parses, and its error names the mapping."""
    if not isinstance(value, str):
        raise InvalidTypeError(attr.name, f"must be a str, got {type(value).__name__}")


def _check_literal(_inst: object, attr: attrs.Attribute[Any], value: object) -> None:
    """A subject without wildcards, required (None is refused too)."""
    check_subject(attr.name, value)


@attrs.frozen(kw_only=True)
class SubjectTransform(_Model):
    """Messages on subjects matching ``src`` get the subject ``dest`` (whose ``{{wildcard(1)}}`` or ``$1`` is
    the text src's first wildcard matched). A stream's ``subject_transform`` rewrites what it stores; in a
    [`StreamSource`][jetstream_sync.models.StreamSource] the transforms are also the filter: only messages matching some
    ``src`` are taken."""

    src: str = attrs.field(validator=_check_transform_src)
    dest: str = attrs.field(validator=_check_transform_dest)


@attrs.frozen(kw_only=True)
class ExternalStream(_Model):
    """A source or mirror in another account or JetStream domain: ``api`` is the prefix under which that
    JetStream API is reached from here (``$JS.<domain>.API`` for a domain, or an account's imported prefix),
    ``deliver`` the prefix of the subjects the messages are delivered on (cross-account setups import it)."""

    api: str = attrs.field(validator=_check_literal)
    deliver: str | None = attrs.field(default=None, validator=_check_deliver_subject)

    @classmethod
    def for_domain(cls, domain: str) -> ExternalStream:
        """The stream of another JetStream domain (the API prefix ``$JS.<domain>.API``): what nats.go's
        ``StreamSource.Domain`` stands for."""
        return cls(api=f"$JS.{check_name('domain', domain)}.API")

    @property
    def domain(self) -> str | None:
        """The domain when ``api`` is ``$JS.<domain>.API``; None for another prefix (an account's import)."""
        tokens = self.api.split(".")
        if len(tokens) == 3 and tokens[0] == "$JS" and tokens[2] == "API" and tokens[1]:
            return tokens[1]
        return None


@attrs.frozen(kw_only=True)
class StreamConsumerSource(_Model):
    """Durable sourcing (ADR-60, nats-server 2.14+): the source or mirror reads through a consumer made
    beforehand on the stream it reads, instead of one the server makes and deletes by itself.

    That consumer is a durable push consumer named ``name``, delivering to ``deliver_subject``, with
    ``ack_policy=AckPolicy.FLOW_CONTROL``: the sourcing server acknowledges what it stored through flow control,
    so a work-queue or interest stream loses nothing while the link is down, and the consumer can be watched,
    paused and resumed like any other. Where to start and which subjects to take are that consumer's
    (``deliver_policy``, ``opt_start_seq``, ``filter_subject``), not the source's. nats.go's
    ``StreamConsumerSource``.
    """

    name: str = attrs.field(validator=_check_name)
    deliver_subject: str = attrs.field(validator=_check_literal)


def _consumer_source(value: StreamConsumerSource | Mapping[str, Any] | None) -> StreamConsumerSource | None:
    return None if value is None else _to_model(StreamConsumerSource, "consumer", value)


def _transforms(value: Sequence[SubjectTransform | Mapping[str, Any]] | None) -> list[SubjectTransform] | None:
    return None if value is None else _to_models(SubjectTransform, "subject_transforms", value)


def _external(value: ExternalStream | Mapping[str, Any] | None) -> ExternalStream | None:
    return None if value is None else _to_model(ExternalStream, "external", value)


@attrs.frozen(kw_only=True)
class StreamSource(_Model):
    """A stream a mirror copies, or one of the streams a stream sources from.

    ``name`` is that stream (in another account or domain with ``external``); it is read from its start, or from
    ``opt_start_seq`` or ``opt_start_time`` (one of them). Which messages: all, those on ``filter_subject``, or
    those matching a ``subject_transforms`` source, renamed to its destination (one of the two). With
    ``consumer`` (nats-server 2.14+) it is read through that durable consumer (see
    [`StreamConsumerSource`][jetstream_sync.models.StreamConsumerSource]), which then decides where to start and what to
    filter.
    """

    name: str = attrs.field(validator=_check_name)
    opt_start_seq: int | None = attrs.field(default=None, validator=_check_int(1))
    opt_start_time: datetime | None = attrs.field(default=None, validator=_check_time, metadata=_meta("datetime"))
    filter_subject: str | None = attrs.field(default=None, validator=_check_filter)
    subject_transforms: list[SubjectTransform] | None = attrs.field(
        default=None, converter=_transforms, metadata=_meta("models", model=SubjectTransform)
    )
    external: ExternalStream | None = attrs.field(
        default=None, converter=_external, metadata=_meta("model", model=ExternalStream)
    )
    #: durable sourcing through a consumer made beforehand (ADR-60, nats-server 2.14+)
    consumer: StreamConsumerSource | None = attrs.field(
        default=None, converter=_consumer_source, metadata=_meta("model", model=StreamConsumerSource)
    )

    def __attrs_post_init__(self) -> None:
        """The server refuses both filters (10144, 10150). Given both starts it now quietly takes the sequence
        (older servers refused that for a mirror, 10032): one of them is asked for instead. With a ``consumer``
        the start and the filter are the consumer's (10213, 10215)."""
        if self.consumer is not None:
            for field in ("opt_start_seq", "opt_start_time", "filter_subject"):
                if getattr(self, field) is not None:
                    raise InvalidArgumentError(
                        field, "is the consumer's to set when sourcing through a consumer; set it on that consumer"
                    )
        if self.opt_start_seq is not None and self.opt_start_time is not None:
            raise InvalidArgumentError(
                "opt_start_time", "cannot be combined with opt_start_seq; start from a sequence or from a time"
            )
        if self.filter_subject is not None and self.subject_transforms:
            raise InvalidArgumentError(
                "subject_transforms",
                "cannot be combined with filter_subject; use filter_subject alone, or only subject_transforms "
                "(each one's src filters too)",
            )


@attrs.frozen(kw_only=True)
class StreamSourceInfo(_Model):
    """How a mirror or a source is doing, as the server reports it.

    ``lag`` is how many messages it is behind (reliable only while it is active); ``active`` the seconds since it
    last heard from the stream it reads, None when it never has; ``error`` the server's error object when it
    cannot read that stream (``api_error`` is it as an [`APIError`][jetstream_sync.errors.APIError]). The filter,
    transforms and ``external`` are the ones configured.
    """

    name: str
    external: ExternalStream | None = attrs.field(default=None, metadata=_meta("model", model=ExternalStream))
    lag: int = 0
    active: float | None = attrs.field(default=None, metadata=_meta("elapsed"))
    error: dict[str, Any] | None = None
    filter_subject: str | None = None
    subject_transforms: list[SubjectTransform] | None = attrs.field(
        default=None, metadata=_meta("models", model=SubjectTransform)
    )

    @property
    def api_error(self) -> APIError | None:
        """``error`` as the most specific APIError (e.g. StreamNotFoundError for a missing stream), or None."""
        if not self.error:
            return None
        error = self.error
        code, err_code = int(error.get("code") or 0), int(error.get("err_code") or 0)
        return api_error(code, err_code, str(error.get("description", "")))


# The converters of fields the key-value config has too: public to the sibling modules, not in __all__.


def to_mirror(value: StreamSource | Mapping[str, Any] | None) -> StreamSource | None:
    """A ``mirror`` field's value: a StreamSource, or a dict in the server's JSON shape."""
    return None if value is None else _to_model(StreamSource, "mirror", value)


def to_sources(value: Sequence[StreamSource | Mapping[str, Any]] | None) -> list[StreamSource] | None:
    """A ``sources`` field's value: a list of StreamSource, or of dicts in the server's JSON shape."""
    return None if value is None else _to_models(StreamSource, "sources", value)


def _subject_transform(value: SubjectTransform | Mapping[str, Any] | None) -> SubjectTransform | None:
    return None if value is None else _to_model(SubjectTransform, "subject_transform", value)


# --- streams -------------------------------------------------------------------------------------------------


def _check_republish_dest(_inst: object, attr: attrs.Attribute[Any], value: object) -> None:
    """Required; otherwise only the type, as for a transform's destination (mapping functions are the server's)."""
    _check_transform_dest(_inst, attr, value)
    if not value:
        raise InvalidArgumentError(attr.name, "is required: the subject (or subject mapping) to republish to")


@attrs.frozen(kw_only=True)
class RePublish(_Model):
    """What a stream republishes (nats.go's ``RePublish``): every message it stores on a subject matching ``src``
    (``>``, every subject, by default) is published again on core NATS to ``dest``, a subject or a mapping of
    ``src``'s wildcards (``$1``, ``{{wildcard(1)}}``), with headers naming the stream, its sequence and the
    previous sequence on that subject; ``headers_only`` sends the headers and the payload's size
    (``Nats-Msg-Size``) without the payload. Subscribers get every stored message without a consumer, and
    nothing that was not stored.

    ``dest`` must not overlap the stream's own subjects (a republished message would be stored again): the
    stream config refuses that before sending, as the server does.
    """

    src: str = attrs.field(default=">", validator=_check_transform_src)
    dest: str = attrs.field(validator=_check_republish_dest)
    headers_only: bool = attrs.field(default=False, validator=_check_bool, metadata=_OMITEMPTY)


def to_republish(value: RePublish | Mapping[str, Any] | None) -> RePublish | None:
    """A ``republish`` field's value (the key-value config has one too): a RePublish, or a dict in the server's
    JSON shape."""
    return None if value is None else _to_model(RePublish, "republish", value)


@attrs.frozen(kw_only=True)
class StreamConsumerLimits(_Model):
    """Limits every consumer of the stream gets (nats.go's ``StreamConsumerLimits``): a consumer that does not
    set ``inactive_threshold`` (seconds) or ``max_ack_pending`` takes these, and one that asks for more is
    refused (the server's ``ConsumerConfigError``). None leaves that limit unset."""

    inactive_threshold: float | None = attrs.field(
        default=None,
        converter=attrs.converters.optional(_to_seconds),
        validator=_check_duration,
        metadata=_meta("duration", omitempty=True, allow_zero=False),
    )
    max_ack_pending: int | None = attrs.field(default=None, validator=_check_int(1), metadata=_OMITEMPTY)


def _consumer_limits(value: StreamConsumerLimits | Mapping[str, Any] | None) -> StreamConsumerLimits | None:
    """No limits at all is None: what the server reports (``{}``) for a stream without them."""
    limits = None if value is None else _to_model(StreamConsumerLimits, "consumer_limits", value)
    if limits is None or (limits.inactive_threshold is None and limits.max_ack_pending is None):
        return None
    return limits


def subjects_collide(first: str, second: str) -> bool:
    """Whether some subject matches both ``first`` and ``second`` (either may hold wildcards); a token that is
    not a wildcard, such as a mapping function, is compared as written, as the server compares it."""
    a, b = first.split("."), second.split(".")
    for i in range(max(len(a), len(b))):
        x = a[i] if i < len(a) else None
        y = b[i] if i < len(b) else None
        if x == ">" or y == ">":
            return x is not None and y is not None
        if x is None or y is None or (x != y and "*" not in (x, y)):
            return False
    return True


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
    placement: Placement | None = attrs.field(
        default=None, converter=to_placement, metadata=_meta("model", model=Placement)
    )
    mirror: StreamSource | None = attrs.field(
        default=None, converter=to_mirror, metadata=_meta("model", model=StreamSource)
    )
    sources: list[StreamSource] | None = attrs.field(
        default=None, converter=to_sources, metadata=_meta("models", model=StreamSource)
    )
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
    subject_transform: SubjectTransform | None = attrs.field(
        default=None, converter=_subject_transform, metadata=_meta("model", model=SubjectTransform)
    )
    republish: RePublish | None = attrs.field(
        default=None, converter=to_republish, metadata=_meta("model", model=RePublish)
    )
    metadata: dict[str, str] | None = attrs.field(default=None, validator=_check_str_dict)
    allow_msg_ttl: bool = attrs.field(default=False, validator=_check_bool)
    subject_delete_marker_ttl: float | None = attrs.field(
        default=None,
        converter=attrs.converters.optional(_to_seconds),
        validator=_check_duration,
        metadata=_DURATION,
    )
    consumer_limits: StreamConsumerLimits | None = attrs.field(
        default=None, converter=_consumer_limits, metadata=_meta("model", model=StreamConsumerLimits)
    )
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
        if self.placement is not None and self.placement.preferred is not None:
            raise InvalidArgumentError(
                "placement", "preferred is for leader step-down requests; a stream's placement cannot name one"
            )
        self._check_republish()
        self._check_mirror()
        self._check_source_consumers()

    def _check_republish(self) -> None:
        """A destination overlapping the stream's subjects would store every message again (the server's "forms
        a cycle", 10052); except the server's one exception: ``>`` to ``>`` on a stream of one subject that its
        ``subject_transform`` renames republishes the renamed subjects."""
        republish = self.republish
        if republish is None:
            return
        transform = self.subject_transform
        if (
            republish.src in ("", ">")
            and republish.dest == ">"
            and transform is not None
            and self.subjects == [transform.src]
        ):
            return
        for subject in self.subjects:
            if subjects_collide(republish.dest, subject):
                raise InvalidArgumentError(
                    "republish",
                    f"dest {republish.dest!r} overlaps the stream's subject {subject!r}: what is republished would "
                    "be stored again; republish to subjects outside the stream",
                )

    def _check_source_consumers(self) -> None:
        """Two sources of one stream cannot share a consumer (10216): it delivers each message once."""
        seen: set[tuple[str, str | None, str]] = set()
        for source in self.sources or []:
            if source.consumer is None:
                continue
            key = (source.name, source.external.api if source.external else None, source.consumer.name)
            if key in seen:
                raise InvalidArgumentError(
                    "sources",
                    f"two sources of stream {source.name!r} read through consumer {key[2]!r}; give each its own",
                )
            seen.add(key)

    def _check_mirror(self) -> None:
        """The server's rules for a mirror (its error codes 10034, 10031, 10143, 10173, 10198, 10209, 10186, and
        10052 for markers; 10187 for sources with schedules): a mirror holds exactly what its origin holds, so it
        takes no messages of its own and numbers none itself."""
        if self.mirror is None:
            if self.sources and self.allow_msg_schedules:
                raise InvalidArgumentError("allow_msg_schedules", "cannot be used on a stream with sources")
            return
        if self.subjects:
            raise InvalidArgumentError("subjects", "a mirror takes no subjects (it stores its origin's); drop them")
        if self.sources:
            raise InvalidArgumentError(
                "sources", "a mirror cannot also have sources; make a stream with sources instead of a mirror"
            )
        if self.first_seq:
            raise InvalidArgumentError("first_seq", "a mirror keeps its origin's sequences; drop first_seq")
        if self.subject_delete_marker_ttl is not None:
            raise InvalidArgumentError(
                "subject_delete_marker_ttl", "a mirror cannot add markers (they would take sequences); drop it"
            )
        for switch in ("allow_msg_counter", "allow_atomic_publish", "allow_batched", "allow_msg_schedules"):
            if getattr(self, switch):
                raise InvalidArgumentError(switch, "a mirror takes no publishes of its own; set it on the origin")


@attrs.frozen(kw_only=True)
class StreamState(_Model):
    """What a stream holds: message and byte counts, first and last sequences and times, consumer count, deleted
    sequences and, when asked for, per-subject counts."""

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
    """A stream as the server reports it: its config and state, the servers behind it (``cluster``), and how
    its ``mirror`` or ``sources`` are doing."""

    config: StreamConfig = attrs.field(metadata=_meta("model", model=StreamConfig))
    created: datetime = attrs.field(metadata=_meta("datetime"))
    state: StreamState = attrs.field(metadata=_meta("model", model=StreamState))
    cluster: ClusterInfo | None = attrs.field(default=None, metadata=_meta("model", model=ClusterInfo))
    mirror: StreamSourceInfo | None = attrs.field(default=None, metadata=_meta("model", model=StreamSourceInfo))
    sources: list[StreamSourceInfo] | None = attrs.field(default=None, metadata=_meta("models", model=StreamSourceInfo))
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
