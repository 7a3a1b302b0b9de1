"""Message schedules (ADR-51): a message the stream itself publishes later, once or again and again.

``js.publish("sched.report", b"", schedule=Schedule.cron("0 0 * * *", target="reports.daily"))`` stores a
*schedule message* on ``sched.report``; the server then stores a copy of it on ``target`` at each time the
schedule says, with the schedule message's payload and own headers, plus ``Nats-Scheduler`` (the schedule's
subject) and ``Nats-Schedule-Next`` (the next time, or ``purge`` after the last). The copies are stored, not
sent on core NATS: read them through a consumer or a direct get.

- ``Schedule.at(when)``: once (nats-server 2.12+); the schedule message is removed when it fires. A time in
  the past fires at once.
- ``Schedule.every(interval)``: every ``interval`` (at least 1 s), first one interval after the publish (2.14+).
- ``Schedule.cron(expression, time_zone=None)``: cron fields in UTC or ``time_zone`` (an IANA name), 2.14+.
  Six fields start with seconds (the server's form); the usual five (minute hour day month weekday) run at
  second 0. ``@hourly``, ``@daily``, ``@midnight``, ``@weekly``, ``@monthly``, ``@yearly``, ``@annually`` too.

One subject holds one schedule: publishing another schedule there replaces it (the server adds a subject
rollup). The stream needs ``allow_msg_schedules``; ``ttl`` (a TTL on each copy) also needs ``allow_msg_ttl``.
``js.cancel_schedule(subject)`` removes a schedule. Patterns, intervals, time zones and subjects are checked
here, before anything is sent; what only the stream knows (its subjects) comes back as MessageScheduleError.
"""

from __future__ import annotations

import re
import zoneinfo
from datetime import datetime, timedelta, timezone
from typing import Any

import attrs

from .. import errors
from .._durations import go_duration, message_ttl, parse_go_duration, ttl_header
from .._validate import check_subject, to_seconds

__all__ = ["PREDEFINED", "Schedule"]

#: the named patterns the server knows
PREDEFINED = frozenset({"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"})

_MONTHS = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
_DAYS = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"]
#: (name, lowest, highest, names) of the six fields the server reads: seconds first
_FIELDS = [
    ("seconds", 0, 59, None),
    ("minutes", 0, 59, None),
    ("hours", 0, 23, None),
    ("day of month", 1, 31, None),
    ("month", 1, 12, _MONTHS),
    ("day of week", 0, 6, _DAYS),
]
_ITEM = re.compile(r"(\*|\?|[0-9a-zA-Z]+(?:-[0-9a-zA-Z]+)?)(?:/([0-9]+))?")


def _cron_value(token: str, field: tuple[str, int, int, list[str] | None], expression: str) -> int:
    name, low, high, names = field
    if token.isdigit():
        value = int(token)
    elif names is not None and token.lower() in names:
        value = names.index(token.lower()) + low
    else:
        raise errors.InvalidArgumentError("cron", f"{token!r} is not a {name} value in {expression!r}")
    if not low <= value <= high:
        raise errors.InvalidArgumentError("cron", f"{name} must be {low}-{high}, got {token!r} in {expression!r}")
    return value


def _check_cron_field(text: str, field: tuple[str, int, int, list[str] | None], expression: str) -> None:
    for item in text.split(","):
        match = _ITEM.fullmatch(item)
        if match is None:
            raise errors.InvalidArgumentError("cron", f"{item!r} is not a {field[0]} item in {expression!r}")
        span, step = match[1], match[2]
        if step is not None and int(step) < 1:
            raise errors.InvalidArgumentError("cron", f"a step must be at least 1 in {expression!r}")
        if span in ("*", "?"):
            continue
        first, _, last = span.partition("-")
        low = _cron_value(first, field, expression)
        if last and _cron_value(last, field, expression) < low:
            raise errors.InvalidArgumentError("cron", f"the range {span!r} runs backwards in {expression!r}")


def cron_pattern(expression: object) -> str:
    """The server's six-field form of a cron expression (or a predefined name); InvalidArgumentError otherwise."""
    if not isinstance(expression, str):
        raise errors.InvalidTypeError("cron", f"must be a str, got {type(expression).__name__}")
    text = " ".join(expression.split())
    if text.lower() in PREDEFINED:
        return text.lower()
    fields = text.split(" ") if text else []
    if len(fields) == 5:
        fields.insert(0, "0")  # the usual five fields, at second 0
    if len(fields) != 6:
        raise errors.InvalidArgumentError(
            "cron",
            f"{expression!r} must have 5 fields (minute hour day month weekday), 6 (seconds first), or be one "
            f"of {', '.join(sorted(PREDEFINED))}",
        )
    for text_field, spec in zip(fields, _FIELDS, strict=True):
        _check_cron_field(text_field, spec, expression)
    return " ".join(fields)


def _time_zone(value: str) -> str:
    if not isinstance(value, str):
        raise errors.InvalidTypeError("time_zone", f"must be a str (an IANA name), got {type(value).__name__}")
    if value in ("UTC", "Local"):
        return value
    try:
        zoneinfo.ZoneInfo(value)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        if zoneinfo.available_timezones():  # with no time zone data here, leave the judgement to the server
            raise errors.InvalidArgumentError(
                "time_zone", f"{value!r} is not a time zone name, e.g. 'Europe/Amsterdam' or 'UTC'"
            ) from None
    return value


def _at_time(text: str) -> None:
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        when = None
    if when is None or when.tzinfo is None or "T" not in text:
        raise errors.InvalidArgumentError("schedule", f"'@at' needs an RFC 3339 time with a zone, got {text!r}")


def _every_interval(text: str) -> None:
    seconds = parse_go_duration(text)
    if seconds is None:
        raise errors.InvalidArgumentError(
            "schedule", f"'@every' needs a duration such as '30s' or '1h30m', got {text!r}"
        )
    if seconds < 1:
        raise errors.InvalidArgumentError(
            "schedule", f"'@every' must be at least 1s (the server's minimum), got {text!r}"
        )


def _pattern(value: str) -> str:
    """A ``Nats-Schedule`` value, checked; cron in the server's six-field form."""
    if not isinstance(value, str):
        raise errors.InvalidTypeError("pattern", f"must be a str, got {type(value).__name__}")
    if value.startswith("@at "):
        _at_time(value[4:])
        return value
    if value.startswith("@every "):
        _every_interval(value[7:])
        return value
    return cron_pattern(value)


def _literal(_inst: object, attr: attrs.Attribute[Any], value: object) -> None:
    if value is not None:
        check_subject(attr.name, value)


@attrs.frozen(kw_only=True)
class Schedule:
    """When, and where to, the stream publishes a schedule message (see the module docstring). Build one with
    [`at`][jetstream_sync.Schedule.at], [`every`][jetstream_sync.Schedule.every] or
    [`cron`][jetstream_sync.Schedule.cron]; pass it as ``js.publish(..., schedule=...)``."""

    #: the ``Nats-Schedule`` value: ``@at <time>``, ``@every <interval>``, six cron fields or a predefined name
    pattern: str = attrs.field(converter=_pattern)
    #: the subject the copies are stored on: a literal subject of the same stream, not the schedule's own
    target: str = attrs.field(validator=_literal)
    #: a TTL on each copy (seconds, at least 1, or "never"); the stream needs ``allow_msg_ttl``
    ttl: float | str | None = attrs.field(default=None, converter=message_ttl)
    #: the zone cron fields are read in (IANA name); UTC without one
    time_zone: str | None = attrs.field(default=None, converter=attrs.converters.optional(_time_zone))
    #: 2.14+: copy the last message on this subject (payload and headers) instead of the schedule's own
    source: str | None = attrs.field(default=None, validator=_literal)
    #: 2.14+: each copy replaces the previous one on ``target`` (a subject rollup)
    rollup: bool = attrs.field(default=False, validator=attrs.validators.instance_of(bool))

    def __attrs_post_init__(self) -> None:
        if self.time_zone is not None and self.pattern.startswith(("@at ", "@every ")):
            raise errors.InvalidArgumentError("time_zone", "is for cron schedules, not @at or @every")
        if self.source is not None and self.source == self.target:
            raise errors.InvalidArgumentError("source", "must differ from target")

    @classmethod
    def at(
        cls,
        when: datetime,
        *,
        target: str,
        ttl: float | timedelta | str | None = None,
        source: str | None = None,
        rollup: bool = False,
    ) -> Schedule:
        """Once, at ``when`` (a timezone-aware datetime)."""
        if not isinstance(when, datetime):
            raise errors.InvalidTypeError("when", f"must be a datetime, got {type(when).__name__}")
        if when.tzinfo is None or when.utcoffset() is None:
            raise errors.InvalidArgumentError(
                "when", "must be timezone-aware, e.g. datetime.now(timezone.utc) + timedelta(minutes=5)"
            )
        stamp = when.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")
        return cls(pattern=f"@at {stamp}", target=target, ttl=ttl, source=source, rollup=rollup)

    @classmethod
    def every(
        cls,
        interval: float | timedelta,
        *,
        target: str,
        ttl: float | timedelta | str | None = None,
        source: str | None = None,
        rollup: bool = False,
    ) -> Schedule:
        """Every ``interval`` seconds (at least 1)."""
        seconds = to_seconds("interval", interval)
        if seconds < 1:
            raise errors.InvalidArgumentError(
                "interval", f"must be at least 1 second (the server's minimum), got {seconds:g}"
            )
        return cls(pattern=f"@every {go_duration(seconds)}", target=target, ttl=ttl, source=source, rollup=rollup)

    @classmethod
    def cron(
        cls,
        expression: str,
        *,
        target: str,
        time_zone: str | None = None,
        ttl: float | timedelta | str | None = None,
        source: str | None = None,
        rollup: bool = False,
    ) -> Schedule:
        """At the times a cron expression names, read in ``time_zone`` (UTC without one)."""
        if isinstance(expression, str) and expression.lstrip().startswith(("@at", "@every")):
            raise errors.InvalidArgumentError("cron", "use Schedule.at or Schedule.every for those")
        return cls(pattern=expression, target=target, ttl=ttl, time_zone=time_zone, source=source, rollup=rollup)

    @property
    def needs(self) -> tuple[int, int, int]:
        """The oldest nats-server that takes this schedule."""
        if self.pattern.startswith("@at ") and not (self.time_zone or self.source or self.rollup):
            return (2, 12, 0)
        return (2, 14, 0)

    def check_for(self, subject: str) -> None:
        """Refuse what the server would refuse about this schedule on ``subject`` (its own subject)."""
        for which in ("target", "source"):
            if getattr(self, which) == subject:
                raise errors.InvalidArgumentError(which, f"must differ from the schedule's own subject {subject!r}")

    def headers(self) -> list[tuple[bytes, bytes]]:
        """The ``Nats-Schedule*`` headers of the schedule message."""
        out = [(b"Nats-Schedule", self.pattern.encode()), (b"Nats-Schedule-Target", self.target.encode())]
        if self.ttl is not None:
            out.append((b"Nats-Schedule-TTL", ttl_header(self.ttl)))
        if self.time_zone is not None:
            out.append((b"Nats-Schedule-Time-Zone", self.time_zone.encode()))
        if self.source is not None:
            out.append((b"Nats-Schedule-Source", self.source.encode()))
        if self.rollup:
            out.append((b"Nats-Schedule-Rollup", b"sub"))
        return out
