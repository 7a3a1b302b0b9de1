"""Client-side checks of names, subjects, payloads and timeouts, so bad input fails before anything is sent."""

from __future__ import annotations

import inspect
import math
import threading
from collections.abc import Sequence
from datetime import timedelta
from functools import lru_cache
from typing import Any, TypeVar

import attrs

from .errors import InvalidArgumentError, InvalidBucketNameError, InvalidTypeError, MaxPayloadError
from .headers import HeadersInput, encode_headers

_NAME_FORBIDDEN = frozenset(" \t\r\n\f\v.*>/\\")


def check_name(field: str, value: object) -> str:
    """A stream or consumer name: non-empty text without whitespace, '.', '*', '>' or path separators."""
    if not isinstance(value, str):
        raise InvalidTypeError(field, f"must be a str, got {type(value).__name__}")
    if not value:
        raise InvalidArgumentError(field, "must not be empty")
    bad = sorted(set(value) & _NAME_FORBIDDEN)
    if bad:
        shown = ", ".join(repr(c) for c in bad)
        raise InvalidArgumentError(
            field, f"{value!r} contains {shown}; names cannot hold whitespace, '.', '*', '>', '/' or '\\'"
        )
    if not value.isprintable():
        raise InvalidArgumentError(field, f"{value!r} contains control characters")
    too_long = _too_long(value, MAX_SUBJECT_BYTES)
    if too_long is not None:
        raise InvalidArgumentError(field, too_long)
    return value


_BUCKET_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")


def check_bucket_name(field: str, value: object) -> str:
    """A key-value or object store bucket: letters, digits, ``_`` and ``-`` only (it becomes part of a stream
    name and of every subject in the bucket, as in every other client)."""
    if not isinstance(value, str):
        raise InvalidTypeError(field, f"must be a str, got {type(value).__name__}")
    if not value:
        raise InvalidBucketNameError(field, "must not be empty")
    bad = sorted(set(value) - _BUCKET_CHARS)
    if bad:
        shown = ", ".join(repr(c) for c in bad)
        raise InvalidBucketNameError(
            field, f"{value!r} contains {shown}; bucket names may hold only letters, digits, '_' and '-'"
        )
    return value


#: The longest protocol line the server reads (its ``max_control_line`` default, 4 KiB; INFO does not announce
#: it). A longer one is a protocol error after which the server drops the connection.
MAX_CONTROL_LINE = 4096
#: The longest subject, name or queue group: room is left on the line for the verb, our reply inbox (its prefix
#: is at most MAX_INBOX_PREFIX) and the two lengths.
MAX_SUBJECT_BYTES = 3584
MAX_INBOX_PREFIX = 256
# what a control line holds besides its subject-like parts: "HPUB ", the spaces, two lengths and the sid
_LINE_OVERHEAD = 48


def _too_long(value: str, limit: int) -> str | None:
    """The problem with ``value`` when its UTF-8 form is longer than ``limit`` bytes (quoted short)."""
    if len(value) * 4 <= limit:  # UTF-8 takes at most 4 bytes a character: no need to encode
        return None
    size = len(value.encode("utf-8", "surrogatepass"))
    if size <= limit:
        return None
    return (
        f"{value[:32]!r}... is {size} bytes; at most {limit} fit the server's {MAX_CONTROL_LINE}-byte protocol "
        "line (a longer one makes the server drop the connection)"
    )


def check_control_line(field: str, *parts: str) -> None:
    """Subject-like parts that go on one protocol line together (a subject and a reply, or a subject and a
    queue group): refused when the line would pass the server's limit."""
    size = sum(len(part.encode("utf-8", "surrogatepass")) for part in parts) + _LINE_OVERHEAD
    if size > MAX_CONTROL_LINE:
        raise InvalidArgumentError(
            field,
            f"with the rest of its protocol line it is {size} bytes; the server reads at most {MAX_CONTROL_LINE} "
            "(shorten it, or what goes with it)",
        )


@lru_cache(maxsize=4096)
def _subject_problem(subject: str, wildcards: bool) -> str | None:
    if not subject:
        return "must not be empty"
    too_long = _too_long(subject, MAX_SUBJECT_BYTES)
    if too_long is not None:
        return too_long
    for ch in subject:
        if ch.isspace():
            return f"{subject!r} contains whitespace"
        if "\ud800" <= ch <= "\udfff":
            return f"{subject!r} is not valid Unicode text (a lone surrogate)"
    tokens = subject.split(".")
    last = len(tokens) - 1
    for i, token in enumerate(tokens):
        if not token:
            return f"{subject!r} has an empty token (leading, trailing or double '.')"
        if token in {"*", ">"}:
            if not wildcards:
                return f"{subject!r} contains the wildcard {token!r}; publish to a concrete subject"
            if token == ">" and i != last:
                return f"{subject!r}: '>' must be the last token"
    return None


def check_subject(field: str, value: object, *, wildcards: bool = False) -> str:
    """A subject; wildcards only where subscribing or filtering allows them. Cached: hot paths repeat subjects."""
    if not isinstance(value, str):
        raise InvalidTypeError(field, f"must be a str, got {type(value).__name__}")
    problem = _subject_problem(value, wildcards)
    if problem is not None:
        raise InvalidArgumentError(field, problem)
    return value


def check_line(field: str, value: object) -> bytes:
    """One line of text for the wire, encoded: a str without CR or LF that UTF-8 can encode (no lone
    surrogates, which a str may hold but no byte string can carry)."""
    if not isinstance(value, str):
        raise InvalidTypeError(field, f"must be a str, got {type(value).__name__}")
    if "\r" in value or "\n" in value:
        raise InvalidArgumentError(field, f"{value!r} must be one line (no CR or LF)")
    try:
        return value.encode()
    except UnicodeEncodeError as exc:
        raise InvalidArgumentError(field, f"{value!r} is not valid Unicode text ({exc.reason})") from None


def check_queue(field: str, value: object) -> str:
    if not isinstance(value, str):
        raise InvalidTypeError(field, f"must be a str, got {type(value).__name__}")
    if not value or any(ch.isspace() for ch in value):
        raise InvalidArgumentError(field, f"{value!r} must be non-empty and free of whitespace")
    too_long = _too_long(value, MAX_SUBJECT_BYTES)
    if too_long is not None:
        raise InvalidArgumentError(field, too_long)
    return value


def check_payload(field: str, value: object) -> bytes:
    """Payloads are bytes-like; str is refused so no one ships an accidental encoding."""
    if isinstance(value, bytes):
        return value
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, str):
        raise InvalidTypeError(field, "must be bytes, got str; encode it first, e.g. data.encode()")
    raise InvalidTypeError(field, f"must be bytes, got {type(value).__name__}")


#: The longest duration accepted anywhere: what nanoseconds fit in an int64 on the wire (292 years), which is
#: also within what a thread can wait for (``threading.TIMEOUT_MAX``); longer ones would overflow mid-call.
MAX_SECONDS = min(float((2**63 - 1) // 1_000_000_000), threading.TIMEOUT_MAX)


def to_seconds(field: str, value: object, *, allow_zero: bool = False) -> float:
    """Seconds as float from a number or timedelta; positive (or zero when allowed), at most MAX_SECONDS."""
    if type(value) is float and 0.0 < value <= MAX_SECONDS:  # the common case, checked per message by readers
        return value
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidTypeError(field, f"must be seconds (int, float or timedelta), got {type(value).__name__}")
    else:
        seconds = float(value)
    if math.isnan(seconds) or math.isinf(seconds):
        raise InvalidArgumentError(field, f"must be a finite number of seconds, got {value!r}")
    if seconds < 0 or (seconds == 0 and not allow_zero):
        raise InvalidArgumentError(field, f"must be {'>= 0' if allow_zero else '> 0'} seconds, got {value!r}")
    if seconds > MAX_SECONDS:
        raise InvalidArgumentError(field, f"must be at most {MAX_SECONDS:.0f} seconds (292 years), got {value!r}")
    return seconds


def check_timeout(value: object, default: float, field: str = "timeout") -> float:
    if value is None:
        return default
    return to_seconds(field, value)


#: The largest integer the server reads (a Go int64): larger ones would be sent and refused there.
MAX_INT = 2**63 - 1


def check_int(field: str, value: object, *, minimum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidTypeError(field, f"must be an int, got {type(value).__name__}")
    if minimum is not None and value < minimum:
        raise InvalidArgumentError(field, f"must be >= {minimum}, got {value}")
    if value > MAX_INT:
        raise InvalidArgumentError(field, f"must be at most {MAX_INT} (what the server reads), got {value}")
    return value


def check_callable(field: str, fn: object) -> None:
    """A handler or callback: a plain callable (user code never runs on the IO loop, so no coroutines)."""
    if not callable(fn):
        raise InvalidTypeError(field, "must be callable")
    if inspect.iscoroutinefunction(fn):
        raise InvalidTypeError(field, "must be a plain function; jetstream_sync runs no user coroutines")


def check_str_or_none(field: str, value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise InvalidTypeError(field, f"must be a str or None, got {type(value).__name__}")


_Options = TypeVar("_Options")


def options_from(cls: type[_Options], given: object, keywords: dict[str, Any], what: str) -> _Options:
    """One options object from either ``options=`` or keywords: the way every call that takes an attrs
    options type (connect, publish, fetch, consume) accepts it. Unknown keywords name the known ones."""
    if given is not None:
        if not isinstance(given, cls):
            raise InvalidTypeError("options", f"must be a {cls.__name__}, got {type(given).__name__}")
        if keywords:
            first = next(iter(keywords))
            raise InvalidArgumentError(first, f"give the {what} options either as options= or as keywords")
        return given
    known = {field.name for field in attrs.fields(cls)}  # type: ignore[arg-type]  # an attrs class
    unknown = sorted(set(keywords) - known)
    if unknown:
        raise InvalidArgumentError(unknown[0], f"is not a {what} option; the options are {', '.join(sorted(known))}")
    return cls(**keywords)


#: (subject, header block or None, payload) of a message that passed validation
PreparedMessage = tuple[bytes, "bytes | None", bytes]


@lru_cache(maxsize=4096)
def _publish_subject(subject: str) -> bytes:
    return check_subject("subject", subject).encode()


def subject_bytes(subject: object, field: str = "subject") -> bytes:
    """Validate and encode a publish subject; cached, because hot loops publish to few subjects."""
    if type(subject) is not str:
        check_subject(field, subject)  # raises the typed error
    try:
        return _publish_subject(subject)
    except InvalidArgumentError as exc:
        raise InvalidArgumentError(field, str(exc).partition(": ")[2]) from None


def prepare_message(
    subject: str,
    data: bytes,
    headers: HeadersInput | None,
    max_payload: int,
    extra: Sequence[tuple[bytes, bytes]] = (),
) -> PreparedMessage:
    """The validated (subject, header block, payload) of a message; raises before anything is sent.

    Every publish goes through here, core and JetStream alike: the subject, the payload's type, header keys
    and values, and the server's max_payload are checked the same way.
    """
    subj = subject_bytes(subject)
    payload = data if type(data) is bytes else check_payload("data", data)
    hdr = encode_headers(headers, extra) if (headers or extra) else None
    size = len(payload) + (len(hdr) if hdr else 0)
    if size > max_payload:
        raise MaxPayloadError(
            "data", f"message of {size} bytes exceeds the server's max_payload of {max_payload} bytes"
        )
    return subj, hdr, payload
