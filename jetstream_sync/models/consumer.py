"""Consumer types: the deliver, ack and replay policies, [`ConsumerConfig`][jetstream_sync.models.ConsumerConfig], and
the [`ConsumerInfo`][jetstream_sync.models.ConsumerInfo] the server reports with its
[`SequenceInfo`][jetstream_sync.models.SequenceInfo] positions.

The converters and validators for rules that only [`ConsumerConfig`][jetstream_sync.models.ConsumerConfig] has (the
policy enums, ``backoff``, ``sample_freq``, ``max_deliver``) live here beside it; the field-generic ones come from
``_base``.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

import attrs

from .._validate import check_int
from ..errors import InvalidArgumentError, InvalidTypeError
from ._base import (
    _DURATION,
    _OMITEMPTY,
    _as_list,
    _check_bool,
    _check_deliver_subject,
    _check_duration,
    _check_durations,
    _check_filter,
    _check_int,
    _check_name,
    _check_queue,
    _check_str,
    _check_str_dict,
    _check_subjects,
    _check_time,
    _meta,
    _Model,
    _to_enum,
    _to_seconds,
)
from .cluster import ClusterInfo

__all__ = [
    "AckPolicy",
    "ConsumerConfig",
    "ConsumerInfo",
    "ConsumerPauseRequest",
    "ConsumerPauseState",
    "DeliverPolicy",
    "PriorityGroupState",
    "PriorityPolicy",
    "ReplayPolicy",
    "SequenceInfo",
]


# --- enums ---------------------------------------------------------------------------------------------------


class DeliverPolicy(enum.Enum):
    """Where a consumer starts: every message, the last, only new ones, a start sequence or time, or the last per
    subject."""

    ALL = "all"
    LAST = "last"
    NEW = "new"
    BY_START_SEQUENCE = "by_start_sequence"
    BY_START_TIME = "by_start_time"
    LAST_PER_SUBJECT = "last_per_subject"


class AckPolicy(enum.Enum):
    """How a consumer's messages are acknowledged: each one (explicit), all up to one (all), or not at all (none).

    FLOW_CONTROL (nats-server 2.14+, ADR-60) is for the consumer a stream sources or mirrors through
    ([`StreamConsumerSource`][jetstream_sync.models.StreamConsumerSource]): the sourcing server's answers to flow
    control acknowledge everything it stored up to then, as ALL would. It needs a push consumer (``deliver_subject``)
    and no ``ack_wait``, ``backoff`` or ``max_deliver``; the server turns on flow control and a 1 s heartbeat.
    nats.go's ``AckFlowControlPolicy``.
    """

    EXPLICIT = "explicit"
    ALL = "all"
    NONE = "none"
    FLOW_CONTROL = "flow_control"


class ReplayPolicy(enum.Enum):
    """How fast messages are delivered: as fast as possible (instant) or at the pace they were stored (original)."""

    INSTANT = "instant"
    ORIGINAL = "original"


class PriorityPolicy(enum.Enum):
    """How a pull consumer with priority groups (ADR-42) chooses among the clients pulling from a group.

    OVERFLOW (2.11+): a pull with ``min_pending`` / ``min_ack_pending`` gets messages only while the consumer is
    that far behind; PINNED_CLIENT (2.11+): one client at a time gets everything, until it stops pulling for
    ``priority_timeout``; PRIORITIZED (2.12+): pulls with a lower ``priority`` (0-9) are served first.
    """

    NONE = "none"
    OVERFLOW = "overflow"
    PINNED_CLIENT = "pinned_client"
    PRIORITIZED = "prioritized"


# --- converters and validators -------------------------------------------------------------------------------


def to_deliver_policy(value: DeliverPolicy | str) -> DeliverPolicy:
    """The converter of a ``deliver_policy`` field (a member or its value), shared with the consumers' options."""
    return _to_enum(DeliverPolicy, "deliver_policy", value)


def _ack_policy(value: AckPolicy | str) -> AckPolicy:
    return _to_enum(AckPolicy, "ack_policy", value)


def to_replay_policy(value: ReplayPolicy | str) -> ReplayPolicy:
    """The converter of a ``replay_policy`` field (a member or its value), shared with the consumers' options."""
    return _to_enum(ReplayPolicy, "replay_policy", value)


def _priority_policy(value: PriorityPolicy | str | None) -> PriorityPolicy | None:
    return None if value is None else _to_enum(PriorityPolicy, "priority_policy", value)


#: a priority group's name, as the server requires it
PRIORITY_GROUP = re.compile(r"[a-zA-Z0-9/_=-]{1,16}")


def check_priority_group(field: str, value: object) -> str:
    """A priority group name: 1-16 letters, digits or ``/_=-``."""
    if not isinstance(value, str):
        raise InvalidTypeError(field, f"must be a str, got {type(value).__name__}")
    if not PRIORITY_GROUP.fullmatch(value):
        raise InvalidArgumentError(field, f"{value!r} is not a priority group name: 1-16 of A-Z a-z 0-9 / _ = -")
    return value


def _check_priority_groups(_inst: object, attr: attrs.Attribute[Any], value: object) -> None:
    if value is None:
        return
    if not isinstance(value, list):
        raise InvalidTypeError(attr.name, f"must be a list of group names, got {type(value).__name__}")
    for item in value:
        check_priority_group(attr.name, item)


def _backoff(value: Iterable[float | timedelta] | None) -> list[float] | None:
    if value is None:
        return None
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise InvalidTypeError("backoff", f"must be a list of durations, got {type(value).__name__}")
    return [_to_seconds(item) for item in value]


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


# --- consumers -----------------------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class ConsumerConfig(_Model):
    """A consumer's configuration. Unset (None) fields are not sent, so the server applies its defaults."""

    name: str | None = attrs.field(default=None, validator=_check_name)
    durable_name: str | None = attrs.field(default=None, validator=_check_name)
    description: str | None = attrs.field(default=None, validator=_check_str)
    deliver_policy: DeliverPolicy | str = attrs.field(
        default=DeliverPolicy.ALL, converter=to_deliver_policy, metadata=_meta("enum", enum_type=DeliverPolicy)
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
        default=ReplayPolicy.INSTANT, converter=to_replay_policy, metadata=_meta("enum", enum_type=ReplayPolicy)
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
    #: priority groups (ADR-42, nats-server 2.11+): the groups pulls name, and how the server picks among them
    priority_groups: list[str] | None = attrs.field(
        default=None, converter=attrs.converters.optional(_as_list), validator=_check_priority_groups
    )
    priority_policy: PriorityPolicy | None = attrs.field(
        default=None,
        converter=_priority_policy,
        metadata=_meta("enum", enum_type=PriorityPolicy, omitempty=True),
    )
    #: PINNED_CLIENT: how long a pinned client may go without pulling before the pin moves (server default 120 s)
    priority_timeout: float | None = attrs.field(
        default=None,
        converter=attrs.converters.optional(_to_seconds),
        validator=_check_duration,
        metadata=_meta("duration", omitempty=True),
    )

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
        self._check_priority()
        if self.ack_policy is AckPolicy.FLOW_CONTROL:
            self._check_flow_control_acks()
        if self.backoff and self.max_deliver is not None and 0 < self.max_deliver <= len(self.backoff):
            raise InvalidArgumentError(
                "max_deliver",
                f"must be greater than the number of backoff steps ({len(self.backoff)}), got {self.max_deliver}",
            )

    def _check_priority(self) -> None:
        """The server's rules for priority groups (its error codes 10159, 10196, 10197, 10178)."""
        policy = self.priority_policy
        if policy is None or policy is PriorityPolicy.NONE:
            if self.priority_groups:
                raise InvalidArgumentError(
                    "priority_groups", "need a priority_policy (OVERFLOW, PINNED_CLIENT or PRIORITIZED)"
                )
            if self.priority_timeout:
                raise InvalidArgumentError("priority_timeout", "is for priority_policy=PriorityPolicy.PINNED_CLIENT")
            return
        if not self.priority_groups:
            raise InvalidArgumentError("priority_groups", f"{policy} needs at least one group, e.g. ['jobs']")
        if self.deliver_subject is not None:
            raise InvalidArgumentError("priority_policy", "priority groups are for pull consumers (no deliver_subject)")

    def _check_flow_control_acks(self) -> None:
        """The server's rules for AckPolicy.FLOW_CONTROL (10218-10222); it would also quietly replace a
        ``flow_control`` or ``idle_heartbeat`` of its own choosing, which is refused here instead."""
        unset = "must be unset with AckPolicy.FLOW_CONTROL (the sourcing server's flow control acknowledges)"
        if self.deliver_subject is None:
            raise InvalidArgumentError(
                "deliver_subject", "AckPolicy.FLOW_CONTROL needs a push consumer: set the deliver_subject"
            )
        if self.flow_control is False:
            raise InvalidArgumentError("flow_control", "AckPolicy.FLOW_CONTROL acknowledges through flow control")
        if self.idle_heartbeat not in (None, 1.0):
            raise InvalidArgumentError("idle_heartbeat", "is 1 second with AckPolicy.FLOW_CONTROL; leave it unset")
        for field in ("ack_wait", "backoff"):
            if getattr(self, field):
                raise InvalidArgumentError(field, unset)
        if self.max_deliver is not None and self.max_deliver > 0:
            raise InvalidArgumentError("max_deliver", unset + "; a message is delivered until it is stored")
        if self.max_ack_pending == -1:
            raise InvalidArgumentError(
                "max_ack_pending", "must be a count with AckPolicy.FLOW_CONTROL (unset: the server's 1,000)"
            )

    @property
    def is_durable(self) -> bool:
        """Durable consumers survive inactivity; a consumer with only ``name`` is ephemeral on the server."""
        return self.durable_name is not None


@attrs.frozen(kw_only=True)
class SequenceInfo(_Model):
    """A consumer's position as a pair of sequences (consumer and stream) and when it last moved."""

    consumer_seq: int = 0
    stream_seq: int = 0
    last_active: datetime | None = attrs.field(default=None, metadata=_meta("datetime"))


def _unset_time(value: datetime | None) -> datetime | None:
    """Go's zero time (year 1), which the server sends for "never", as None."""
    return None if value is None or value.year <= 1 else value


@attrs.frozen(kw_only=True)
class PriorityGroupState(_Model):
    """A priority group of a consumer as the server reports it: which client id holds its pin, and since when
    (None when nobody is pinned; the server reports the zero time then)."""

    group: str
    pinned_client_id: str | None = None
    pinned_ts: datetime | None = attrs.field(default=None, converter=_unset_time, metadata=_meta("datetime"))

    @property
    def pinned(self) -> bool:
        """A client is pinned to this group now."""
        return bool(self.pinned_client_id)


@attrs.frozen(kw_only=True)
class ConsumerInfo(_Model):
    """A consumer as the server reports it: its config, delivered and ack-floor positions, pending and
    redelivered counts, the servers behind it (``cluster``), and its pause and priority-group state."""

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
    #: the servers behind the consumer; a consumer of a non-clustered server has none
    cluster: ClusterInfo | None = attrs.field(default=None, metadata=_meta("model", model=ClusterInfo))
    push_bound: bool = False
    #: paused (nats-server 2.11+): no messages are delivered until ``config.pause_until``
    paused: bool = False
    #: seconds left of the pause (None when not paused)
    pause_remaining: float | None = attrs.field(default=None, metadata=_meta("duration"))
    ts: datetime | None = attrs.field(default=None, metadata=_meta("datetime"))
    #: in the answer to a reset (nats-server 2.14+): the stream sequence the consumer delivers next
    reset_seq: int | None = None
    #: with priority groups (2.11+): the state of the first group (the server reports only that one)
    priority_groups: list[PriorityGroupState] | None = attrs.field(
        default=None, metadata=_meta("models", model=PriorityGroupState)
    )


@attrs.frozen(kw_only=True)
class ConsumerPauseRequest(_Model):
    """The body of a pause (``pause_until`` set) or resume (unset) request: nats.go's field and omitempty."""

    pause_until: datetime | None = attrs.field(
        default=None, validator=_check_time, metadata=_meta("datetime", omitempty=True)
    )


@attrs.frozen(kw_only=True)
class ConsumerPauseState(_Model):
    """The server's answer to a pause or resume: ``paused``, until when, and the seconds left of it."""

    paused: bool = False
    pause_until: datetime | None = attrs.field(default=None, metadata=_meta("datetime"))
    pause_remaining: float | None = attrs.field(default=None, metadata=_meta("duration"))
