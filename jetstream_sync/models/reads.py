"""FetchOptions and ConsumeOptions: the ADR-37 options of one pull and of a continuous pull, defined once.

``fetch(10, expires=5)`` and ``fetch(options=FetchOptions(max_messages=10, expires=5))`` build the same
object; every constraint (ranges, exclusive options, heartbeat against expiry) is checked on construction, so
bad options fail before anything is sent, naming the option. The engines read the resolved values
([`PullPlan`][jetstream_sync.PullPlan], defaults filled in) rather than the options as given.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, Literal

import attrs

from .. import errors
from .._validate import check_int, check_name, check_subject, to_seconds
from .consumer import (  # the enum converters and the group name rule, defined once
    ConsumerConfig,
    DeliverPolicy,
    PriorityPolicy,
    ReplayPolicy,
    check_priority_group,
    to_deliver_policy,
    to_replay_policy,
)

__all__ = [
    "BATCH_FOR_MAX_BYTES",
    "DEFAULT_INACTIVE_THRESHOLD",
    "OrderedConsumerConfig",
    "DEFAULT_EXPIRES",
    "DEFAULT_MAX_MESSAGES",
    "ConsumeOptions",
    "FetchOptions",
    "PullPlan",
    "PullPriority",
    "check_priority",
    "require_group",
]

# A pull limited by bytes asks for this many messages, so the server does not stop at one (ADR-37).
BATCH_FOR_MAX_BYTES = 1_000_000
DEFAULT_EXPIRES = 30.0
DEFAULT_MAX_MESSAGES = 500
MIN_EXPIRES = 1.0
MIN_HEARTBEAT = 0.5
MAX_HEARTBEAT = 30.0
# fetch: heartbeats are on by default for pulls this long or longer (as nats.go), at this interval
FETCH_HEARTBEAT_FROM = 10.0
FETCH_HEARTBEAT = 5.0


def _positive_or_none(_inst: object, attr: attrs.Attribute[Any], value: object) -> None:
    if value is not None:
        check_int(attr.name, value, minimum=1)


def _non_negative_or_none(_inst: object, attr: attrs.Attribute[Any], value: object) -> None:
    if value is not None:
        check_int(attr.name, value, minimum=0)


def _bool(_inst: object, attr: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, bool):
        raise errors.InvalidTypeError(attr.name, f"must be a bool, got {type(value).__name__}")


def _expires(value: float | timedelta) -> float:
    return to_seconds("expires", value)


def _heartbeat(value: float | timedelta | None) -> float | None:
    return None if value is None else to_seconds("idle_heartbeat", value)


def _check_half_of_expires(heartbeat: float, expires: float) -> None:
    if heartbeat * 2 > expires:
        raise errors.InvalidArgumentError(
            "idle_heartbeat", f"must be at most half of expires ({expires / 2:g}s), got {heartbeat:g}s"
        )


@attrs.frozen(kw_only=True)
class PullPriority:
    """What a pull says to a consumer with priority groups (ADR-42): its group, and the policy's conditions."""

    group: str
    min_pending: int | None = None
    min_ack_pending: int | None = None
    priority: int | None = None

    def fields(self) -> dict[str, object]:
        """The pull request's members (the pin id is added by the engine that sends it)."""
        out: dict[str, object] = {"group": self.group}
        for key in ("min_pending", "min_ack_pending", "priority"):
            value = getattr(self, key)
            if value:  # the server treats 0 as unset
                out[key] = value
        return out

    def check_against(self, config: ConsumerConfig, label: str) -> None:
        """Refuse before sending what the consumer's configuration will not take (the server's 400s)."""
        require_group("priority_group", self.group, config, label)
        policy = config.priority_policy
        if (self.min_pending or self.min_ack_pending) and policy is not PriorityPolicy.OVERFLOW:
            raise errors.InvalidArgumentError(
                "min_pending", f"min_pending and min_ack_pending need an OVERFLOW consumer; {label} is {policy}"
            )
        if self.priority is not None and policy is not PriorityPolicy.PRIORITIZED:
            raise errors.InvalidArgumentError("priority", f"needs a PRIORITIZED consumer; {label} is {policy}")


def require_group(field: str, group: str, config: ConsumerConfig, label: str) -> None:
    """InvalidArgumentError unless ``group`` is one of the consumer's priority groups."""
    groups = config.priority_groups or []
    if group not in groups:
        have = f"its groups are {groups}" if groups else "it has no priority groups"
        raise errors.InvalidArgumentError(field, f"{group!r} is not a group of {label}: {have}")


def check_priority(priority: PullPriority | None, config: ConsumerConfig, label: str) -> None:
    """A pull on a consumer with priority groups must name one; one without them must not."""
    if priority is not None:
        priority.check_against(config, label)
    elif config.priority_groups and config.priority_policy not in (None, PriorityPolicy.NONE):
        raise errors.InvalidArgumentError(
            "priority_group",
            f"{label} has priority groups {config.priority_groups}; name one, e.g. "
            f"priority_group={config.priority_groups[0]!r}",
        )


def _group_or_none(_inst: object, attr: attrs.Attribute[Any], value: object) -> None:
    if value is not None:
        check_priority_group(attr.name, value)


def _priority_value(_inst: object, attr: attrs.Attribute[Any], value: object) -> None:
    if value is not None and check_int(attr.name, value, minimum=0) > 9:
        raise errors.InvalidArgumentError(attr.name, f"must be 0 (served first) to 9, got {value}")


class _PriorityFields:
    """The ADR-42 keywords FetchOptions and ConsumeOptions share; ``pull_priority`` is what the engines read."""

    priority_group: str | None
    min_pending: int | None
    min_ack_pending: int | None
    priority: int | None

    def _check_priority_fields(self) -> None:
        if self.priority_group is None:
            for name in ("min_pending", "min_ack_pending", "priority"):
                if getattr(self, name) is not None:
                    raise errors.InvalidArgumentError(name, "is a priority group option: give priority_group too")

    @property
    def pull_priority(self) -> PullPriority | None:
        """The priority group fields as the pull engines send them; None without ``priority_group``."""
        if self.priority_group is None:
            return None
        return PullPriority(
            group=self.priority_group,
            min_pending=self.min_pending,
            min_ack_pending=self.min_ack_pending,
            priority=self.priority,
        )


@attrs.frozen(kw_only=True)
class PullPlan:
    """Resolved options of a continuous pull: what the engine asks for and when it asks again."""

    max_messages: int
    max_bytes: int  # 0: not limited by bytes
    expires: float
    idle_heartbeat: float
    threshold_messages: int
    threshold_bytes: int
    priority: PullPriority | None = None

    @property
    def by_bytes(self) -> bool:
        """Pulls are sized in bytes (``max_bytes`` set) rather than in messages."""
        return self.max_bytes > 0


@attrs.frozen(kw_only=True)
class ConsumeOptions(_PriorityFields):
    """Options of ``messages()`` and ``consume()`` (ADR-37 "Consume"); None means the default.

    Defaults: max_messages 500 (or, with ``max_bytes``, as many as fit), expires 30 s, idle_heartbeat
    expires/2 clamped to 0.5-30 s, thresholds half of the limits. ``max_messages`` and ``max_bytes`` are
    exclusive; ``threshold_bytes`` needs ``max_bytes``.
    """

    max_messages: int | None = attrs.field(default=None, validator=_positive_or_none)
    max_bytes: int | None = attrs.field(default=None, validator=_positive_or_none)
    expires: float = attrs.field(default=DEFAULT_EXPIRES, converter=_expires)
    idle_heartbeat: float | None = attrs.field(default=None, converter=_heartbeat)
    threshold_messages: int | None = attrs.field(default=None, validator=_non_negative_or_none)
    threshold_bytes: int | None = attrs.field(default=None, validator=_non_negative_or_none)
    priority_group: str | None = attrs.field(default=None, validator=_group_or_none)
    min_pending: int | None = attrs.field(default=None, validator=_positive_or_none)
    min_ack_pending: int | None = attrs.field(default=None, validator=_positive_or_none)
    priority: int | None = attrs.field(default=None, validator=_priority_value)

    def __attrs_post_init__(self) -> None:
        self._check_priority_fields()
        self.plan()  # every cross-field constraint is checked here, on construction

    def plan(self) -> PullPlan:
        """The resolved values; raises InvalidArgumentError for a combination ADR-37 does not allow."""
        if self.max_messages is not None and self.max_bytes is not None:
            raise errors.InvalidArgumentError("max_bytes", "max_messages and max_bytes are exclusive; set only one")
        expires = self.expires
        if expires < MIN_EXPIRES:
            raise errors.InvalidArgumentError("expires", f"must be at least {MIN_EXPIRES:g}s, got {expires:g}s")
        heartbeat = self.idle_heartbeat
        if heartbeat is None:
            heartbeat = max(MIN_HEARTBEAT, min(expires / 2, MAX_HEARTBEAT))
        elif not MIN_HEARTBEAT <= heartbeat <= MAX_HEARTBEAT:
            raise errors.InvalidArgumentError(
                "idle_heartbeat", f"must be between {MIN_HEARTBEAT:g}s and {MAX_HEARTBEAT:g}s, got {heartbeat:g}s"
            )
        _check_half_of_expires(heartbeat, expires)
        limit_bytes = self.max_bytes or 0
        if limit_bytes:
            limit_msgs = BATCH_FOR_MAX_BYTES
        else:
            limit_msgs = DEFAULT_MAX_MESSAGES if self.max_messages is None else self.max_messages
        thr_msgs = limit_msgs // 2 if self.threshold_messages is None else self.threshold_messages
        if thr_msgs > limit_msgs:
            raise errors.InvalidArgumentError(
                "threshold_messages", f"cannot exceed max_messages ({limit_msgs}), got {thr_msgs}"
            )
        if self.threshold_bytes is None:
            thr_bytes = limit_bytes // 2
        else:
            if not limit_bytes:
                raise errors.InvalidArgumentError("threshold_bytes", "needs max_bytes")
            thr_bytes = self.threshold_bytes
            if thr_bytes > limit_bytes:
                raise errors.InvalidArgumentError(
                    "threshold_bytes", f"cannot exceed max_bytes ({limit_bytes}), got {thr_bytes}"
                )
        return PullPlan(
            max_messages=limit_msgs,
            max_bytes=limit_bytes,
            expires=expires,
            idle_heartbeat=heartbeat,
            threshold_messages=thr_msgs,
            threshold_bytes=thr_bytes,
            priority=self.pull_priority,
        )


_MAX_FETCH_GRACE = 1.0


@attrs.frozen(kw_only=True)
class FetchOptions(_PriorityFields):
    """Options of one pull (``fetch``, ``fetch_bytes``, ``fetch_no_wait``, ``next``).

    At least one of ``max_messages`` and ``max_bytes``; with only ``max_bytes`` the pull asks for as many
    messages as fit. Heartbeats default to 5 s for pulls of 10 s or longer and must be at most half of
    ``expires``. ``no_wait`` returns what is available now (``expires`` and heartbeats do not apply).
    """

    max_messages: int | None = attrs.field(default=None, validator=_positive_or_none)
    max_bytes: int | None = attrs.field(default=None, validator=_positive_or_none)
    expires: float = attrs.field(default=DEFAULT_EXPIRES, converter=_expires)
    idle_heartbeat: float | None = attrs.field(default=None, converter=_heartbeat)
    no_wait: bool = attrs.field(default=False, validator=_bool)
    priority_group: str | None = attrs.field(default=None, validator=_group_or_none)
    min_pending: int | None = attrs.field(default=None, validator=_positive_or_none)
    min_ack_pending: int | None = attrs.field(default=None, validator=_positive_or_none)
    priority: int | None = attrs.field(default=None, validator=_priority_value)

    def __attrs_post_init__(self) -> None:
        self._check_priority_fields()
        if self.max_messages is None and self.max_bytes is None:
            raise errors.InvalidArgumentError("max_messages", "a fetch needs max_messages, max_bytes or both")
        if self.idle_heartbeat is not None and not self.no_wait:
            _check_half_of_expires(self.idle_heartbeat, self.expires)

    @property
    def batch(self) -> int:
        """How many messages the pull asks for."""
        return BATCH_FOR_MAX_BYTES if self.max_messages is None else self.max_messages

    @property
    def heartbeat(self) -> float:
        """The idle heartbeat the pull asks for (0: none)."""
        if self.no_wait:
            return 0.0
        if self.idle_heartbeat is None:
            return FETCH_HEARTBEAT if self.expires >= FETCH_HEARTBEAT_FROM else 0.0
        return self.idle_heartbeat

    @property
    def pull_expires(self) -> float:
        """The server-side expiry of the pull (0 for no_wait)."""
        return 0.0 if self.no_wait else self.expires

    @property
    def grace(self) -> float:
        """How long the client waits past ``expires`` for the server's own "expired" to end the pull.

        A tenth of ``expires`` plus 50 ms, at most 1 s: long enough for the server's answer to arrive on a slow
        link, short enough that ``next(timeout=0.1)`` on a dead link ends soon after its timeout.
        """
        return min(_MAX_FETCH_GRACE, 0.05 + self.expires / 10)


# -- ordered consumers ----------------------------------------------------------------------------------------
DEFAULT_INACTIVE_THRESHOLD = 300.0


def _filters(value: object) -> list[str] | None:
    if value is None:
        return None
    if isinstance(value, str):
        raise errors.InvalidTypeError("filter_subjects", "must be a list of subjects; wrap one subject: [subject]")
    try:
        subjects = list(value)  # type: ignore[call-overload]
    except TypeError:
        raise errors.InvalidTypeError(
            "filter_subjects", f"must be a list of subjects, got {type(value).__name__}"
        ) from None
    for subject in subjects:
        check_subject("filter_subjects", subject, wildcards=True)
    return subjects or None


def _inactive(value: float | timedelta) -> float:
    return to_seconds("inactive_threshold", value)


def _attempts(_inst: object, attr: attrs.Attribute[Any], value: object) -> None:
    if value is not None:
        check_int(attr.name, value, minimum=1)


def _on_stream_replaced(_inst: object, attr: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, str):
        raise errors.InvalidTypeError(attr.name, f"must be 'restart' or 'error', got {type(value).__name__}")
    if value not in ("restart", "error"):
        raise errors.InvalidArgumentError(attr.name, f"must be 'restart' or 'error', got {value!r}")


def _prefix(_inst: object, attr: attrs.Attribute[Any], value: object) -> None:
    if value is not None:
        check_name(attr.name, value)


@attrs.frozen(kw_only=True)
class OrderedConsumerConfig:
    """What an ordered consumer reads (as nats.go's ``OrderedConsumerConfig``).

    The client creates and replaces the server-side consumers itself: ephemeral, AckNone, max_deliver 1, R1,
    memory storage, named ``<name_prefix>_<n>``. ``deliver_policy`` (with ``opt_start_seq`` /
    ``opt_start_time``) only places the first one; later ones start after the last message delivered.
    ``max_reset_attempts`` bounds how many times in a row recreating may fail (None: never give up) before
    OrderedConsumerResetError ends the read. ``inactive_threshold`` (5 min) is how long the server keeps a
    consumer nobody reads.

    ``on_stream_replaced``: what a reset does when it finds the stream deleted and created anew under its name
    (a memory bucket lost in a server restart and made again by another client, say): ``"restart"`` (the
    default) reads the new stream from its beginning, per ``deliver_policy``, and reports
    [`StreamReplacedError`][jetstream_sync.errors.StreamReplacedError] to the error handler as an event; ``"error"``
    ends the read with it. Restart is the default because nothing of the new stream was read yet, so starting over
    loses and repeats nothing of it, and a watcher that stopped would be the silent failure this exists to
    prevent; choose ``"error"`` where stream sequences are your own positions (a pipeline's offsets).
    """

    filter_subjects: list[str] | None = attrs.field(default=None, converter=_filters)
    deliver_policy: DeliverPolicy = attrs.field(default=DeliverPolicy.ALL, converter=to_deliver_policy)
    opt_start_seq: int | None = attrs.field(default=None)
    opt_start_time: datetime | None = attrs.field(default=None)
    replay_policy: ReplayPolicy = attrs.field(default=ReplayPolicy.INSTANT, converter=to_replay_policy)
    inactive_threshold: float = attrs.field(default=DEFAULT_INACTIVE_THRESHOLD, converter=_inactive)
    headers_only: bool = attrs.field(default=False, validator=_bool)
    max_reset_attempts: int | None = attrs.field(default=None, validator=_attempts)
    metadata: dict[str, str] | None = attrs.field(default=None)
    name_prefix: str | None = attrs.field(default=None, validator=_prefix)
    on_stream_replaced: Literal["restart", "error"] = attrs.field(default="restart", validator=_on_stream_replaced)

    def __attrs_post_init__(self) -> None:
        # The cross-field rules (start sequence and time against the deliver policy, metadata types) are the
        # server config's: building one checks them now, naming the field to fix.
        self.first_config()
        if self.deliver_policy is DeliverPolicy.LAST_PER_SUBJECT and not self.filter_subjects:
            raise errors.InvalidArgumentError(
                "filter_subjects",
                "deliver_policy LAST_PER_SUBJECT needs filter_subjects (the server refuses it without; use '>' "
                "for every subject)",
            )

    def first_config(self) -> ConsumerConfig:
        """The configuration the first server-side consumer gets (before any message was delivered)."""
        return ConsumerConfig(
            deliver_policy=self.deliver_policy,
            opt_start_seq=self.opt_start_seq,
            opt_start_time=self.opt_start_time,
            metadata=self.metadata,
            replay_policy=self.replay_policy,
        )
