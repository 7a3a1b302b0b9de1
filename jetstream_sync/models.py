"""JetStream configuration and info models, and their mapping to and from the server's JSON.

Every model is a frozen attrs class whose field names are the server's JSON names, so the mapping is mostly
identity. Fields that need translation say so in their metadata (``kind``: duration, datetime, enum, model...),
and one generic pair, :func:`to_wire` / :func:`from_wire`, does all the work; there is no per-class JSON code.

In Python, durations are float seconds and times are timezone-aware datetimes; on the wire they are integer
nanoseconds and RFC 3339 strings. Keys the server sends that we do not model land in ``extra`` and are written
back by :func:`to_wire`, so updating a config fetched from a newer server keeps what we do not know about.

Decoding trusts the server: :func:`from_wire` builds instances with ``object.__new__`` and sets the slots
directly, so no converter, validator or ``__attrs_post_init__`` runs. A value the server accepted can therefore
never be rejected by a client-side rule, an enum value from a newer server stays a plain ``str``, and nothing
global is switched off (``attrs.validators.set_disabled`` is process-wide and would race with other threads).
Validation runs only when user code calls ``__init__`` (or ``attrs.evolve``).

Info fields that Go omits when zero default to the Go zero value, because that is what an absent key means.
"""

from __future__ import annotations

import base64
import binascii
import enum
import logging
import re
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime, timedelta, timezone
from typing import Any, NamedTuple, TypeVar, cast

import attrs

from ._validate import check_int, check_name, check_queue, check_str_or_none, check_subject, to_seconds
from .errors import InvalidArgumentError, InvalidTypeError, JetStreamError
from .headers import Headers, encode_headers, parse_header_block

__all__ = [
    "APIStats",
    "AccountInfo",
    "AccountLimits",
    "AckPolicy",
    "ConsumerConfig",
    "ConsumerInfo",
    "DeliverPolicy",
    "DiscardPolicy",
    "PubAck",
    "ReplayPolicy",
    "RetentionPolicy",
    "SequenceInfo",
    "StorageType",
    "StoreCompression",
    "StoredMsg",
    "StreamConfig",
    "StreamInfo",
    "StreamState",
    "from_wire",
    "nanos",
    "parse_time",
    "seconds",
    "to_wire",
]

_log = logging.getLogger("jetstream_sync")

_NS_PER_SECOND = 1_000_000_000


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


class DeliverPolicy(enum.Enum):
    ALL = "all"
    LAST = "last"
    NEW = "new"
    BY_START_SEQUENCE = "by_start_sequence"
    BY_START_TIME = "by_start_time"
    LAST_PER_SUBJECT = "last_per_subject"


class AckPolicy(enum.Enum):
    EXPLICIT = "explicit"
    ALL = "all"
    NONE = "none"


class ReplayPolicy(enum.Enum):
    INSTANT = "instant"
    ORIGINAL = "original"


class StoreCompression(enum.Enum):
    NONE = "none"
    S2 = "s2"


# --- durations, times, headers -------------------------------------------------------------------------------


def nanos(seconds: float) -> int:
    """Float seconds to integer nanoseconds; the whole seconds are converted exactly, so large values stay exact."""
    if isinstance(seconds, int):
        return seconds * _NS_PER_SECOND
    whole = int(seconds)
    return whole * _NS_PER_SECOND + round((seconds - whole) * _NS_PER_SECOND)


def seconds(ns: int) -> float:
    """Integer nanoseconds to float seconds (int / int is correctly rounded, unlike ns * 1e-9)."""
    return ns / _NS_PER_SECOND


_RFC3339 = re.compile(
    r"(\d{4,})-(\d\d)-(\d\d)[Tt ](\d\d):(\d\d):(\d\d)(?:[.,](\d+))?\s*(?:([Zz])|([+-])(\d\d):?(\d\d))?"
    r"(?:\s+[A-Z]{1,5})?"  # Go's time.String() appends the zone name: "... +0000 UTC"
)


def parse_time(text: str) -> datetime | None:
    """RFC 3339 from Go, which sends nanoseconds: the fraction is truncated to microseconds.

    Go's zero time ("0001-01-01T00:00:00Z") means "never" and becomes None. An unparsable value is logged
    and dropped rather than failing the whole response over a timestamp.
    """
    match = _RFC3339.fullmatch(text.strip()) if isinstance(text, str) else None
    if match is None:
        _log.debug("cannot parse the server time %r; treating it as unset", text)
        return None
    year, month, day, hour, minute, second = (int(match.group(i)) for i in range(1, 7))
    micros = int((match.group(7) or "0")[:6].ljust(6, "0"))
    if (year, month, day, hour, minute, second, micros) == (1, 1, 1, 0, 0, 0, 0):
        return None
    tz = timezone.utc
    if match.group(9):
        offset = timedelta(hours=int(match.group(10)), minutes=int(match.group(11)))
        tz = timezone(-offset if match.group(9) == "-" else offset)
    try:
        return datetime(year, month, day, hour, minute, second, micros, tzinfo=tz)
    except ValueError:
        _log.debug("the server time %r is out of range; treating it as unset", text)
        return None


def _format_time(value: datetime) -> str:
    """RFC 3339 in UTC; a naive datetime is taken to be UTC already."""
    if value.tzinfo is not None:
        value = value.astimezone(timezone.utc)
    text = f"{value.year:04d}-{value.month:02d}-{value.day:02d}T{value.hour:02d}:{value.minute:02d}:{value.second:02d}"
    if value.microsecond:
        text += f".{value.microsecond:06d}"
    return text + "Z"


# --- the generic mapping layer -------------------------------------------------------------------------------

# Field metadata keys. "kind" says how a value crosses the wire; "wire" overrides the JSON name;
# "omitempty" drops a falsy value, mirroring the nats.go tags so our requests match its requests.
_KIND = "kind"
_WIRE = "wire"


def _meta(
    kind: str = "plain",
    *,
    wire: str | None = None,
    model: type[_Model] | None = None,
    enum_type: type[enum.Enum] | None = None,
    omitempty: bool = False,
    allow_zero: bool = True,
) -> dict[str, Any]:
    """Field metadata for the mapping layer (and allow_zero for the duration validators)."""
    meta: dict[str, Any] = {_KIND: kind, "omitempty": omitempty, "allow_zero": allow_zero}
    if wire is not None:
        meta[_WIRE] = wire
    if model is not None:
        meta["model"] = model
    if enum_type is not None:
        meta["enum"] = enum_type
    return meta


class _Spec(NamedTuple):
    name: str
    wire: str
    kind: str
    meta: Mapping[str, Any]
    default: Any  # attrs.NOTHING when required


_PLANS: dict[type[Any], tuple[_Spec, ...]] = {}


def _plan(cls: type[_Model]) -> tuple[_Spec, ...]:
    """Per-class field table, built once: from_wire runs on every publish ack. A racing rebuild is harmless."""
    plan = _PLANS.get(cls)
    if plan is None:
        plan = _PLANS[cls] = tuple(
            _Spec(f.name, f.metadata.get(_WIRE, f.name), f.metadata.get(_KIND, "plain"), f.metadata, f.default)
            for f in attrs.fields(cls)
            if f.name != "extra"
        )
    return plan


def _encode(kind: str, value: Any) -> Any:
    if kind == "duration":
        return nanos(value)
    if kind == "durations":
        return [nanos(v) for v in value]
    if kind == "datetime":
        return _format_time(value)
    if kind == "enum":
        return value.value if isinstance(value, enum.Enum) else value
    if kind == "model":
        return to_wire(value)
    if kind == "models":
        return [to_wire(v) for v in value]
    if kind == "base64":
        return base64.b64encode(value).decode("ascii")
    if kind == "headers":
        return base64.b64encode(encode_headers(value) or b"NATS/1.0\r\n\r\n").decode("ascii")
    if isinstance(value, dict):
        return dict(value)
    if isinstance(value, (list, tuple)):
        return list(value)
    return value


def _decode(owner: type[_Model], spec: _Spec, raw: Any) -> Any:
    kind = spec.kind
    if kind == "duration":
        return seconds(raw)
    if kind == "durations":
        return [seconds(v) for v in raw]
    if kind == "datetime":
        return parse_time(raw)
    if kind == "enum":
        enum_type: type[enum.Enum] = spec.meta["enum"]
        try:
            return enum_type(raw)
        except ValueError:
            # A newer server may add values; keep the string rather than fail the whole response.
            _log.debug("%s.%s: unknown %s value %r from the server", owner.__name__, spec.name, enum_type.__name__, raw)
            return raw
    if kind == "model":
        return from_wire(spec.meta["model"], raw)
    if kind == "models":
        return [from_wire(spec.meta["model"], item) for item in raw]
    if kind in ("base64", "headers"):
        try:
            data = base64.b64decode(raw, validate=True)
        except (binascii.Error, TypeError, ValueError) as exc:
            raise JetStreamError(f"{owner.__name__}.{spec.name}: the server sent invalid base64") from exc
        if kind == "base64":
            return data
        return parse_header_block(data)[2]
    if isinstance(raw, dict):
        return dict(raw)
    if isinstance(raw, list):
        return list(raw)
    return raw


def _default(spec: _Spec) -> Any:
    factory = getattr(spec.default, "factory", None)
    return factory() if factory is not None else spec.default


def to_wire(obj: _Model) -> dict[str, Any]:
    """The JSON object the server expects: None and empty lists/dicts are left out, ``extra`` is written back.

    A modeled field wins over an ``extra`` key of the same name.
    """
    out: dict[str, Any] = {}
    for spec in _plan(type(obj)):
        value = getattr(obj, spec.name)
        if value is None or (not value and (spec.meta.get("omitempty") or isinstance(value, (list, dict, tuple)))):
            continue
        out[spec.wire] = _encode(spec.kind, value)
    for key, value in obj.extra.items():
        out.setdefault(key, value)
    return out


_M = TypeVar("_M", bound="_Model")


def from_wire(cls: type[_M], data: Mapping[str, Any]) -> _M:
    """Build ``cls`` from server JSON without running validation (see the module docstring for why).

    Unknown keys go to ``extra``. A missing, null or empty ([] / {}) key takes the field default, the mirror of
    to_wire leaving those out, so decoding what we encoded gives back an equal object.
    """
    if not isinstance(data, Mapping):
        raise InvalidTypeError(cls.__name__, f"expected a JSON object, got {type(data).__name__}")
    obj = object.__new__(cls)
    extra = dict(data)
    for spec in _plan(cls):
        raw = extra.pop(spec.wire, None)
        if raw is not None and (raw or not isinstance(raw, (list, dict))):
            value = _decode(cls, spec, raw)
        elif spec.default is attrs.NOTHING:
            raise JetStreamError(f"{cls.__name__}: the server response lacks the required field {spec.wire!r}")
        else:
            value = _default(spec)
        object.__setattr__(obj, spec.name, value)
    object.__setattr__(obj, "extra", extra)
    return obj


@attrs.frozen(kw_only=True)
class _Model:
    """Base of every model: the ``extra`` bag and the JSON entry points."""

    extra: dict[str, Any] = attrs.field(factory=dict, repr=False, eq=False)

    @classmethod
    def from_json(cls: type[_M], data: Mapping[str, Any]) -> _M:
        return from_wire(cls, data)

    def to_json(self) -> dict[str, Any]:
        return to_wire(self)


# --- converters (named functions, so mypy's attrs plugin can type __init__) and validators --------------------

_E = TypeVar("_E", bound=enum.Enum)


def _to_enum(enum_type: type[_E], field: str, value: object) -> _E:
    if isinstance(value, enum_type):
        return value
    valid = ", ".join(repr(member.value) for member in enum_type)
    if not isinstance(value, str):
        raise InvalidTypeError(field, f"must be a {enum_type.__name__} or one of {valid}, got {type(value).__name__}")
    try:
        return enum_type(value)
    except ValueError:
        raise InvalidArgumentError(field, f"{value!r} is not valid; use one of {valid}") from None


def _retention(value: RetentionPolicy | str) -> RetentionPolicy:
    return _to_enum(RetentionPolicy, "retention", value)


def _discard(value: DiscardPolicy | str) -> DiscardPolicy:
    return _to_enum(DiscardPolicy, "discard", value)


def _storage(value: StorageType | str) -> StorageType:
    return _to_enum(StorageType, "storage", value)


def _compression(value: StoreCompression | str) -> StoreCompression:
    return _to_enum(StoreCompression, "compression", value)


def _deliver_policy(value: DeliverPolicy | str) -> DeliverPolicy:
    return _to_enum(DeliverPolicy, "deliver_policy", value)


def _ack_policy(value: AckPolicy | str) -> AckPolicy:
    return _to_enum(AckPolicy, "ack_policy", value)


def _replay_policy(value: ReplayPolicy | str) -> ReplayPolicy:
    return _to_enum(ReplayPolicy, "replay_policy", value)


def _to_seconds(value: float | timedelta) -> float:
    """Normalises a duration; anything else passes through to _check_duration, which knows the field name."""
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


def _backoff(value: Iterable[float | timedelta] | None) -> list[float] | None:
    if value is None:
        return None
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise InvalidTypeError("backoff", f"must be a list of durations, got {type(value).__name__}")
    return [_to_seconds(item) for item in value]


def _as_list(value: Iterable[str]) -> list[str]:
    """Copies, so later changes to the caller's list cannot reach a frozen config."""
    if isinstance(value, str):
        return cast("list[str]", value)  # rejected, with the field's name, by _check_subjects
    try:
        return list(value)
    except TypeError:
        return cast("list[str]", value)


def _may_be_none(attr: attrs.Attribute[Any], value: object) -> bool:
    """None is accepted exactly where it is the default, so one validator serves both required and optional."""
    return value is None and attr.default is None


def _check_name(_inst: object, attr: attrs.Attribute[Any], value: object) -> None:
    if not _may_be_none(attr, value):
        check_name(attr.name, value)


def _check_str(_inst: object, attr: attrs.Attribute[Any], value: object) -> None:
    check_str_or_none(attr.name, value)


def _check_bool(_inst: object, attr: attrs.Attribute[Any], value: object) -> None:
    if not _may_be_none(attr, value) and not isinstance(value, bool):
        raise InvalidTypeError(attr.name, f"must be True or False, got {type(value).__name__}")


def _check_int(minimum: int, maximum: int | None = None) -> Callable[[object, attrs.Attribute[Any], object], None]:
    def check(_inst: object, attr: attrs.Attribute[Any], value: object) -> None:
        if _may_be_none(attr, value):
            return
        number = check_int(attr.name, value, minimum=minimum)
        if maximum is not None and number > maximum:
            raise InvalidArgumentError(attr.name, f"must be between {minimum} and {maximum}, got {number}")

    return check


def _check_duration(_inst: object, attr: attrs.Attribute[Any], value: object) -> None:
    if not _may_be_none(attr, value):
        to_seconds(attr.name, value, allow_zero=attr.metadata.get("allow_zero", True))


def _check_durations(_inst: object, attr: attrs.Attribute[Any], value: object) -> None:
    if isinstance(value, list):
        for item in value:
            to_seconds(attr.name, item, allow_zero=attr.metadata.get("allow_zero", True))


def _check_time(_inst: object, attr: attrs.Attribute[Any], value: object) -> None:
    if _may_be_none(attr, value):
        return
    if not isinstance(value, datetime):
        raise InvalidTypeError(attr.name, f"must be a datetime, got {type(value).__name__}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise InvalidArgumentError(
            attr.name, "must be timezone-aware; use e.g. datetime.now(timezone.utc) or dt.replace(tzinfo=...)"
        )


def _check_subjects(_inst: object, attr: attrs.Attribute[Any], value: object) -> None:
    if _may_be_none(attr, value):
        return
    if not isinstance(value, list):
        raise InvalidTypeError(attr.name, f"must be a list of subjects, got {type(value).__name__}; wrap it: [value]")
    for item in value:
        check_subject(attr.name, item, wildcards=True)


def _check_filter(_inst: object, attr: attrs.Attribute[Any], value: object) -> None:
    if value is not None:
        check_subject(attr.name, value, wildcards=True)


def _check_deliver_subject(_inst: object, attr: attrs.Attribute[Any], value: object) -> None:
    if value is not None:
        check_subject(attr.name, value)


def _check_queue(_inst: object, attr: attrs.Attribute[Any], value: object) -> None:
    if value is not None:
        check_queue(attr.name, value)


def _check_dict(_inst: object, attr: attrs.Attribute[Any], value: object) -> None:
    if value is not None and not isinstance(value, Mapping):
        raise InvalidTypeError(attr.name, f"must be a dict, got {type(value).__name__}")


def _check_dict_list(_inst: object, attr: attrs.Attribute[Any], value: object) -> None:
    if value is None:
        return
    if not isinstance(value, list) or not all(isinstance(item, Mapping) for item in value):
        raise InvalidTypeError(attr.name, "must be a list of dicts")


def _check_str_dict(_inst: object, attr: attrs.Attribute[Any], value: object) -> None:
    if value is None:
        return
    if not isinstance(value, Mapping) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise InvalidTypeError(attr.name, "must be a dict of str to str")


_SAMPLE_FREQ = re.compile(r"(\d{1,3})%?")


def _check_sample_freq(_inst: object, attr: attrs.Attribute[Any], value: object) -> None:
    if value is None:
        return
    if not isinstance(value, str):
        raise InvalidTypeError(attr.name, f"must be a str such as '30%', got {type(value).__name__}")
    match = _SAMPLE_FREQ.fullmatch(value.strip())
    if match is None or int(match.group(1)) > 100:
        raise InvalidArgumentError(attr.name, f"{value!r} must be a percentage from 0 to 100, such as '30%' or '30'")


def _check_max_deliver(_inst: object, attr: attrs.Attribute[Any], value: object) -> None:
    if value is None:
        return
    number = check_int(attr.name, value, minimum=-1)
    if number == 0:
        raise InvalidArgumentError(attr.name, "0 is not allowed; use -1 for unlimited or a positive count")


# --- streams -------------------------------------------------------------------------------------------------

_DURATION = _meta("duration")
_OMITEMPTY = _meta(omitempty=True)


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
    consumer_limits: dict[str, Any] | None = attrs.field(default=None, validator=_check_dict)

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


# --- consumers -----------------------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class ConsumerConfig(_Model):
    """A consumer's configuration. Unset (None) fields are not sent, so the server applies its defaults."""

    name: str | None = attrs.field(default=None, validator=_check_name)
    durable_name: str | None = attrs.field(default=None, validator=_check_name)
    description: str | None = attrs.field(default=None, validator=_check_str)
    deliver_policy: DeliverPolicy | str = attrs.field(
        default=DeliverPolicy.ALL, converter=_deliver_policy, metadata=_meta("enum", enum_type=DeliverPolicy)
    )
    opt_start_seq: int | None = attrs.field(default=None, validator=_check_int(1))
    opt_start_time: datetime | None = attrs.field(default=None, validator=_check_time, metadata=_meta("datetime"))
    ack_policy: AckPolicy | str = attrs.field(
        default=AckPolicy.EXPLICIT, converter=_ack_policy, metadata=_meta("enum", enum_type=AckPolicy)
    )
    ack_wait: float | None = attrs.field(
        default=None,
        converter=attrs.converters.optional(_to_seconds),
        validator=_check_duration,
        metadata=_meta("duration", allow_zero=False),
    )
    max_deliver: int | None = attrs.field(default=None, validator=_check_max_deliver)
    backoff: list[float] | None = attrs.field(
        default=None, converter=_backoff, validator=_check_durations, metadata=_meta("durations", allow_zero=False)
    )
    filter_subject: str | None = attrs.field(default=None, validator=_check_filter)
    filter_subjects: list[str] | None = attrs.field(
        default=None,
        converter=attrs.converters.optional(_as_list),
        validator=_check_subjects,
    )
    replay_policy: ReplayPolicy | str = attrs.field(
        default=ReplayPolicy.INSTANT, converter=_replay_policy, metadata=_meta("enum", enum_type=ReplayPolicy)
    )
    rate_limit_bps: int | None = attrs.field(default=None, validator=_check_int(0))
    sample_freq: str | None = attrs.field(default=None, validator=_check_sample_freq)
    max_waiting: int | None = attrs.field(default=None, validator=_check_int(0))
    max_ack_pending: int | None = attrs.field(default=None, validator=_check_int(-1))
    flow_control: bool | None = attrs.field(default=None, validator=_check_bool, metadata=_OMITEMPTY)
    idle_heartbeat: float | None = attrs.field(
        default=None, converter=attrs.converters.optional(_to_seconds), validator=_check_duration, metadata=_DURATION
    )
    headers_only: bool | None = attrs.field(default=None, validator=_check_bool, metadata=_OMITEMPTY)
    max_batch: int | None = attrs.field(default=None, validator=_check_int(0))
    max_expires: float | None = attrs.field(
        default=None, converter=attrs.converters.optional(_to_seconds), validator=_check_duration, metadata=_DURATION
    )
    max_bytes: int | None = attrs.field(default=None, validator=_check_int(0))
    inactive_threshold: float | None = attrs.field(
        default=None, converter=attrs.converters.optional(_to_seconds), validator=_check_duration, metadata=_DURATION
    )
    num_replicas: int | None = attrs.field(default=None, validator=_check_int(0, 5))
    mem_storage: bool | None = attrs.field(default=None, validator=_check_bool, metadata=_OMITEMPTY)
    metadata: dict[str, str] | None = attrs.field(default=None, validator=_check_str_dict)
    deliver_subject: str | None = attrs.field(default=None, validator=_check_deliver_subject)
    deliver_group: str | None = attrs.field(default=None, validator=_check_queue)
    pause_until: datetime | None = attrs.field(default=None, validator=_check_time, metadata=_meta("datetime"))

    def __attrs_post_init__(self) -> None:
        """Rules that span fields, checked here so the error names the field to fix."""
        if self.name is not None and self.durable_name is not None and self.name != self.durable_name:
            raise InvalidArgumentError(
                "durable_name", f"{self.durable_name!r} differs from name {self.name!r}; set one, or both the same"
            )
        by_seq = self.deliver_policy is DeliverPolicy.BY_START_SEQUENCE
        if by_seq and self.opt_start_seq is None:
            raise InvalidArgumentError("opt_start_seq", "is required when deliver_policy is BY_START_SEQUENCE")
        if not by_seq and self.opt_start_seq is not None:
            raise InvalidArgumentError(
                "opt_start_seq", "is only used with deliver_policy=DeliverPolicy.BY_START_SEQUENCE; set that or drop it"
            )
        by_time = self.deliver_policy is DeliverPolicy.BY_START_TIME
        if by_time and self.opt_start_time is None:
            raise InvalidArgumentError("opt_start_time", "is required when deliver_policy is BY_START_TIME")
        if not by_time and self.opt_start_time is not None:
            raise InvalidArgumentError(
                "opt_start_time", "is only used with deliver_policy=DeliverPolicy.BY_START_TIME; set that or drop it"
            )
        if self.filter_subject is not None and self.filter_subjects:
            raise InvalidArgumentError(
                "filter_subjects", "cannot be combined with filter_subject; put every subject in filter_subjects"
            )
        if self.backoff and self.max_deliver is not None and 0 < self.max_deliver <= len(self.backoff):
            raise InvalidArgumentError(
                "max_deliver",
                f"must be greater than the number of backoff steps ({len(self.backoff)}), got {self.max_deliver}",
            )

    @property
    def is_durable(self) -> bool:
        """Durable consumers survive inactivity; a consumer with only ``name`` is ephemeral on the server."""
        return self.durable_name is not None


@attrs.frozen(kw_only=True)
class SequenceInfo(_Model):
    consumer_seq: int = 0
    stream_seq: int = 0
    last_active: datetime | None = attrs.field(default=None, metadata=_meta("datetime"))


@attrs.frozen(kw_only=True)
class ConsumerInfo(_Model):
    stream_name: str
    name: str
    created: datetime = attrs.field(metadata=_meta("datetime"))
    config: ConsumerConfig = attrs.field(metadata=_meta("model", model=ConsumerConfig))
    delivered: SequenceInfo = attrs.field(factory=SequenceInfo, metadata=_meta("model", model=SequenceInfo))
    ack_floor: SequenceInfo = attrs.field(factory=SequenceInfo, metadata=_meta("model", model=SequenceInfo))
    num_ack_pending: int = 0
    num_redelivered: int = 0
    num_waiting: int = 0
    num_pending: int = 0
    cluster: dict[str, Any] | None = None
    push_bound: bool = False
    paused: bool = False
    ts: datetime | None = attrs.field(default=None, metadata=_meta("datetime"))


# --- account -------------------------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class AccountLimits(_Model):
    """-1 means unlimited."""

    max_memory: int = 0
    max_storage: int = 0
    max_streams: int = 0
    max_consumers: int = 0
    max_ack_pending: int = 0
    memory_max_stream_bytes: int = 0
    storage_max_stream_bytes: int = 0
    max_bytes_required: bool = False


@attrs.frozen(kw_only=True)
class APIStats(_Model):
    total: int = 0
    errors: int = 0


@attrs.frozen(kw_only=True)
class AccountInfo(_Model):
    memory: int = 0
    storage: int = 0
    reserved_memory: int = 0
    reserved_storage: int = 0
    streams: int = 0
    consumers: int = 0
    limits: AccountLimits = attrs.field(factory=AccountLimits, metadata=_meta("model", model=AccountLimits))
    domain: str | None = None
    api: APIStats = attrs.field(factory=APIStats, metadata=_meta("model", model=APIStats))
    tiers: dict[str, Any] | None = None


# --- messages ------------------------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class PubAck(_Model):
    """The server's acknowledgement of a JetStream publish."""

    stream: str
    seq: int
    duplicate: bool = attrs.field(default=False, metadata=_OMITEMPTY)
    domain: str | None = None


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
