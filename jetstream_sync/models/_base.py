"""What every model shares: the attrs base class, the generic JSON mapping, time and duration conversions, and
the field converters and validators.

It is kept apart from the models so each API area module holds only its own types, and a new area (key-value,
object store) is a new module that reuses this instead of a change to it. Nothing here imports a model module,
so the area modules import from here and never from each other's internals, and there is no import cycle.

Decoding trusts the server: [`from_wire`][jetstream_sync.models.from_wire] builds instances with ``object.__new__`` and
sets the slots directly, so no converter, validator or ``__attrs_post_init__`` runs. A value the server accepted can
therefore never be rejected by a client-side rule, an enum value from a newer server stays a plain ``str``, and nothing
global is switched off (``attrs.validators.set_disabled`` is process-wide and would race with other threads).
Validation runs only when user code calls ``__init__`` (or ``attrs.evolve``).
Trusting the server's *values* is not trusting its *shapes*: a field whose JSON type is wrong (``"max_age":
"x"``, ``"seq": "abc"``, an int past 64 bits, an object where a list goes) is a broken or hostile server, and
[`from_wire`][jetstream_sync.models.from_wire] refuses it with [`ProtocolError`][jetstream_sync.errors.ProtocolError]
naming the field, rather than handing on a value that breaks later, far from its cause, as a builtin error. A dict a
caller gives where a nested model goes (``StreamConfig(mirror={...})``) is the exception that proves it: `_to_model`
decodes it like a server answer and then builds it again through ``__init__``, so it meets the model's checks.

The converters and validators here are the ones that depend only on the field they check (its name, default
and metadata), so any model can use them; a rule that belongs to one field of one model lives beside that
model. They are named functions, not lambdas, so mypy's attrs plugin can type the generated ``__init__``.
"""

from __future__ import annotations

import base64
import binascii
import enum
import logging
import math
import re
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime, timedelta, timezone
from typing import Any, NamedTuple, TypeVar, cast

import attrs

from .._protocol import nanos, seconds
from .._validate import check_int, check_name, check_queue, check_str_or_none, check_subject, to_seconds
from ..errors import InvalidArgumentError, InvalidTypeError, JetStreamError, ProtocolError
from ..headers import encode_headers, parse_header_block

# The underscore helpers (_Model, _meta, the converters and validators) are for the sibling modules and are
# deliberately left out: this is the package's public surface of this module.
__all__ = ["from_wire", "nanos", "parse_time", "seconds", "to_wire"]

# The package logger rather than __name__: it is the logger the rest of the client uses, so configuration and
# log filters set up for "jetstream_sync" keep catching the decode messages logged here.
_log = logging.getLogger("jetstream_sync")

# --- durations, times, headers -------------------------------------------------------------------------------
# nanos() and seconds() are the wire's duration conversions, defined once in _protocol and re-exported here.


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
    json_types: tuple[type, ...] | None  # what the JSON value may be (None: anything)


_PLANS: dict[type[Any], tuple[_Spec, ...]] = {}

# The JSON types each mapping kind decodes from; "plain" fields take theirs from the field's annotation.
_KIND_JSON: dict[str, tuple[type, ...] | None] = {
    "duration": (int, float),
    "elapsed": (int, float),
    "durations": (list,),
    "datetime": (str,),
    "enum": (str, int),
    "model": (dict,),
    "models": (list,),
    "base64": (str,),
    "headers": (str,),
}

# JSON numbers the server sends are Go's int64/uint64: anything wider is not a server's
_INT_MIN, _INT_MAX = -(2**63), 2**64 - 1


def _json_types(annotation: Any) -> tuple[type, ...] | None:
    """The JSON types a plain field's annotation admits (``int | None`` -> int), or None where it says nothing
    checkable (Any, a type alias the mapping does not know)."""
    origin = typing.get_origin(annotation)
    if origin is typing.Union or origin is types.UnionType:
        found: list[type] = []
        for arg in typing.get_args(annotation):
            if arg is type(None):
                continue
            admitted = _json_types(arg)
            if admitted is None:
                return None
            found.extend(admitted)
        return tuple(found) or None
    if origin is not None:
        annotation = origin
    if annotation is float:
        return (int, float)
    if annotation in (int, str, bool):
        return (annotation,)
    if annotation in (list, tuple):
        return (list,)
    if annotation is dict or (isinstance(annotation, type) and issubclass(annotation, Mapping)):
        return (dict,)
    return None


def _plan(cls: type[_Model]) -> tuple[_Spec, ...]:
    """Per-class field table, built once: from_wire runs on every publish ack. A racing rebuild is harmless."""
    plan = _PLANS.get(cls)
    if plan is None:
        try:
            hints = typing.get_type_hints(cls)
        except Exception:  # an annotation that cannot be resolved here: its fields are not type-checked
            hints = {}
        specs = []
        for f in attrs.fields(cls):
            if f.name == "extra":
                continue
            kind = f.metadata.get(_KIND, "plain")
            json_types = _json_types(hints.get(f.name, Any)) if kind == "plain" else _KIND_JSON.get(kind)
            specs.append(_Spec(f.name, f.metadata.get(_WIRE, f.name), kind, f.metadata, f.default, json_types))
        plan = _PLANS[cls] = tuple(specs)
    return plan


def _json_fits(raw: Any, admitted: tuple[type, ...]) -> bool:
    """Whether a decoded JSON value is of an admitted type: JSON true is no number (though Python's bool is an
    int), an integer must fit 64 bits and a float be finite (``1e400`` decodes to infinity)."""
    if isinstance(raw, bool):
        return bool in admitted
    if not isinstance(raw, admitted):
        return False
    if isinstance(raw, int):
        return _INT_MIN <= raw <= _INT_MAX
    return not isinstance(raw, float) or math.isfinite(raw)


def _check_json(owner: type[_Model], spec: _Spec, raw: Any) -> None:
    """Refuse a value whose JSON type the field cannot take (see the module docstring)."""
    admitted = spec.json_types
    if admitted is None or _json_fits(raw, admitted):
        return
    raise ProtocolError(
        f"{owner.__name__}.{spec.name} is {raw!r:.60} ({type(raw).__name__}) where the JSON must be "
        f"{' or '.join(t.__name__ for t in admitted)}"
    )


def _encode(kind: str, value: Any) -> Any:
    if kind in ("duration", "elapsed"):
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
    if kind == "elapsed":
        # How long ago something last happened; the server sends -1 for "never" (nothing to measure from).
        return None if raw < 0 else seconds(raw)
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


def from_wire(cls: type[_M], data: Mapping[str, Any], *, shapes: bool = True) -> _M:
    """Build ``cls`` from server JSON without running validation (see the module docstring for why).

    Unknown keys go to ``extra``. A missing, null or empty ([] / {}) key takes the field default, the mirror of
    to_wire leaving those out, so decoding what we encoded gives back an equal object. ``shapes``: refuse a value
    whose JSON type the field cannot take (a server's answer); off for a caller's dict, which ``__init__``'s
    validators check with messages of their own (`_to_model`).
    """
    if not isinstance(data, Mapping):
        raise InvalidTypeError(cls.__name__, f"expected a JSON object, got {type(data).__name__}")
    obj = object.__new__(cls)
    extra = dict(data)
    for spec in _plan(cls):
        raw = extra.pop(spec.wire, None)
        if raw is not None and (raw or not isinstance(raw, (list, dict))):
            if shapes:
                _check_json(cls, spec, raw)
            try:
                value = _decode(cls, spec, raw)
            except (TypeError, ValueError, AttributeError, OverflowError, KeyError) as exc:
                if isinstance(exc, JetStreamError):
                    raise
                raise ProtocolError(f"{cls.__name__}.{spec.name} is {raw!r:.60}, which it cannot hold: {exc}") from exc
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
        """The model the server's JSON describes, built by [`from_wire`][jetstream_sync.models.from_wire]."""
        return from_wire(cls, data)

    def to_json(self) -> dict[str, Any]:
        """The JSON object the server expects, written by [`to_wire`][jetstream_sync.models.to_wire]."""
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


def _to_seconds(value: float | timedelta) -> float:
    """Normalises a duration; anything else passes through to _check_duration, which knows the field name."""
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


def _as_list(value: Iterable[str]) -> list[str]:
    """Copies, so later changes to the caller's list cannot reach a frozen config."""
    if isinstance(value, str):
        return cast("list[str]", value)  # rejected, with the field's name, by _check_subjects
    try:
        return list(value)
    except TypeError:
        return cast("list[str]", value)


def _to_model(cls: type[_M], field: str, value: object, where: str = "") -> _M:
    """A nested model given as itself, or as a dict in the server's JSON shape (what callers passed before the
    model existed, and what the key-value code builds).

    The dict is decoded the way a server answer is, its own nested dicts in turn by this function, and the
    result built again through ``cls.__init__`` (``attrs.evolve``), so both spellings meet the same rules. A
    mistake is reported under ``field``, its message saying where inside it (``where`` is the item of a list,
    e.g. ``[1]``). A datetime in the dict is taken as its RFC 3339 text.
    """
    if isinstance(value, cls):
        return value
    if not isinstance(value, Mapping):
        article = "an" if cls.__name__[0] in "AEIOU" else "a"
        shape = f"{article} {cls.__name__} or a dict in the server's JSON shape"
        raise InvalidTypeError(field, f"{where + ' ' if where else ''}must be {shape}, got {type(value).__name__}")
    try:
        flat = {key: _wire_time(key, item) for key, item in value.items()}
        nested: dict[str, Any] = {}
        for spec in _plan(cls):
            raw = flat.get(spec.wire)
            if raw is None:
                if spec.default is attrs.NOTHING:
                    raise InvalidArgumentError(spec.wire, "is required")
            elif spec.kind == "model":
                nested[spec.name] = _to_model(spec.meta["model"], spec.wire, flat.pop(spec.wire))
            elif spec.kind == "models":
                nested[spec.name] = _to_models(spec.meta["model"], spec.wire, flat.pop(spec.wire))
        return attrs.evolve(from_wire(cls, flat, shapes=False), **nested)
    except (InvalidArgumentError, InvalidTypeError) as exc:
        raise _under(exc, field, f"{where}." if where else "") from None
    except ProtocolError as exc:  # from_wire's shape check, meeting the caller's dict rather than a server's
        raise InvalidTypeError(field, f"{where + ' ' if where else ''}{exc}") from None


def _to_models(cls: type[_M], field: str, value: object) -> list[_M]:
    """A list of nested models, each given as the model or as a dict (see `_to_model`)."""
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable):
        shape = f"a list of {cls.__name__} (or of dicts in the server's JSON shape)"
        raise InvalidTypeError(field, f"must be {shape}, got {type(value).__name__}")
    return [_to_model(cls, field, item, f"[{i}]") for i, item in enumerate(value)]


def _wire_time(key: str, value: object) -> object:
    if not isinstance(value, datetime):
        return value
    if value.tzinfo is None or value.utcoffset() is None:
        raise InvalidArgumentError(key, "must be timezone-aware; use e.g. datetime.now(timezone.utc)")
    return _format_time(value)


def _under(
    exc: InvalidArgumentError | InvalidTypeError, field: str, path: str = ""
) -> InvalidArgumentError | InvalidTypeError:
    """The same error reported under the enclosing ``field``; its message starts with the path inside it."""
    message = str(exc)[len(exc.field) + 2 :]
    joint = "" if message.startswith("[") else ": "  # an item of a list field: "sources[1]..."
    return type(exc)(field, f"{path}{exc.field}{joint}{message}")


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


# Field metadata that several models use.
_DURATION = _meta("duration")
_OMITEMPTY = _meta(omitempty=True)
