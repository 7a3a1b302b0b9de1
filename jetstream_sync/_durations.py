"""Go durations as nats-server writes and reads them, and the message TTL rules built on them.

The server prints its limits as Go durations (a 409 ``Exceeded MaxRequestExpires of 1m30s``) and reads them in
headers (``Nats-TTL: 1500ms``) and schedules (``@every 30s``). Publishing (``jetstream/publish.py``), message schedules
(``jetstream/schedule.py``) and the consume's limit handling (``_delivery/_limits.py``) share these rules, so they live
here, apart from all three: ``schedule.py`` and ``publish.py`` used to import each other for them.
"""

from __future__ import annotations

import re
from datetime import timedelta

from . import errors
from ._validate import to_seconds

__all__ = ["go_duration", "message_ttl", "parse_go_duration", "ttl_header"]

_GO_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_GO_DURATION = re.compile(r"(?:([0-9]+(?:\.[0-9]+)?)(ns|us|µs|ms|s|m|h))+")
_GO_PART = re.compile(r"([0-9]+(?:\.[0-9]+)?)(ns|us|µs|ms|s|m|h)")


def go_duration(seconds: float) -> str:
    """Seconds as a Go duration the server parses exactly."""
    if seconds == int(seconds):
        return f"{int(seconds)}s"
    return f"{round(seconds * 1000)}ms"


def parse_go_duration(text: str) -> float | None:
    """A Go duration as the server prints one (``5s``, ``1m30s``, ``500ms``) in seconds; None if it is not one."""
    if _GO_DURATION.fullmatch(text) is None:
        return None
    return sum(float(number) * _GO_UNITS[unit] for number, unit in _GO_PART.findall(text))


def message_ttl(value: float | timedelta | str | None) -> float | str | None:
    """``ttl``: seconds (int, float or timedelta, at least 1 s, as the server requires) or ``"never"``."""
    if value is None:
        return None
    if isinstance(value, str):
        if value == "never":
            return value
        raise errors.InvalidArgumentError("ttl", f"must be seconds or 'never', got {value!r}")
    seconds = to_seconds("ttl", value)
    if seconds < 1:
        raise errors.InvalidArgumentError("ttl", f"must be at least 1 second (the server's minimum), got {seconds}")
    return seconds


def ttl_header(ttl: float | str) -> bytes:
    """The ``Nats-TTL`` value: whole milliseconds in Go duration syntax, which the server parses exactly."""
    if ttl == "never":
        return b"never"
    return b"%dms" % round(float(ttl) * 1000)
