"""The ADR-15 binding rules of ``js.subscribe`` and ``js.pull_subscribe``: find the stream a subject belongs to,
look the consumer up, check that a subscription may bind to it, and create it when it is missing.

Apart from ``subscribe.py``, which checks a call's arguments and opens the subscription: these rules are about
the server-side consumer alone, and each is a function of what the server answered (or asks it once more).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import attrs

from .. import errors
from ..models import ConsumerConfig, ConsumerInfo

if TYPE_CHECKING:
    from .context import JetStream

__all__ = [
    "check_drift",
    "check_filter",
    "check_pull_binding",
    "check_push_binding",
    "create_if_absent",
    "find_stream",
    "lookup",
    "settle_unbound",
]

# Fields of a ConsumerConfig that are about binding, not the consumer's behaviour (never "drift").
# Checked by their own ADR-15 rules (or naming the consumer); deliver_subject is compared like the rest: a
# config asking for delivery to one subject must not silently bind to a consumer delivering to another.
_BINDING_FIELDS = frozenset({"name", "durable_name", "deliver_group", "filter_subject", "filter_subjects", "metadata"})
_DEFAULTS = {f.name: f.default for f in attrs.fields(ConsumerConfig)}
# How long a subscribe waits for the server to drop a previous subscriber's binding, and its first pause
# between asking (doubled each time): about 7 requests when the binding is real.
_UNBIND_GRACE = 1.0
_UNBIND_FIRST_PAUSE = 0.01


# -- the ADR-15 checks --------------------------------------------------------------------------------------
def find_stream(js: JetStream, subject: str) -> str:
    """The one stream capturing ``subject`` (ADR-15 "Stream name"); an error for none or several."""
    names = list(js.stream_names(subject))
    if not names:
        raise errors.StreamNotFoundError(
            404,
            10059,
            f"no stream captures subject {subject!r}; create one whose subjects include it (js.create_stream("
            f"StreamConfig(name=..., subjects=[{subject!r}]))) or pass stream=",
        )
    if len(names) > 1:
        raise errors.SubscribeError(
            f"subject {subject!r} is captured by several streams ({', '.join(sorted(names))}); pass stream="
        )
    return str(names[0])


def check_drift(given: ConsumerConfig, existing: ConsumerConfig) -> None:
    """ADR-15: a configuration that differs from the existing consumer's is an error (subscribe never updates
    a consumer). Only fields the caller set (different from the default) are compared."""
    drifted = []
    for field in attrs.fields(ConsumerConfig):
        if field.name in _BINDING_FIELDS:
            continue
        mine = getattr(given, field.name)
        if mine is None or mine == _DEFAULTS[field.name]:
            continue
        if mine != getattr(existing, field.name):
            drifted.append(f"{field.name}={mine!r} (the consumer has {getattr(existing, field.name)!r})")
    if drifted:
        raise errors.ConsumerConfigMismatchError(
            "the configuration given differs from the existing consumer's: " + "; ".join(drifted) + ". Subscribe does"
            " not change consumers: update it with js.update_consumer, or drop the differing options"
        )


def check_filter(info: ConsumerInfo, subject: str | None) -> None:
    config = info.config
    filters = [config.filter_subject] if config.filter_subject else list(config.filter_subjects or [])
    if subject and filters and subject not in filters:
        raise errors.SubjectMismatchError(
            f"consumer {info.name!r} filters {', '.join(filters)}, not {subject!r}; subscribe to its subject or use "
            "another consumer"
        )


def check_push_binding(info: ConsumerInfo, queue: str | None, subject: str | None) -> None:
    """Every ADR-15 check of binding a push subscription to an existing consumer."""
    config = info.config
    if not config.deliver_subject:
        raise errors.PullSubscribeRequiredError(
            f"consumer {info.name!r} is a pull consumer (no deliver_subject); use js.pull_subscribe"
        )
    check_filter(info, subject)
    group = config.deliver_group
    if queue is None:
        if group:
            raise errors.ConsumerIsQueueBoundError(
                f"consumer {info.name!r} was created for queue group {group!r}; subscribe with queue={group!r}"
            )
        if info.push_bound:
            raise errors.DuplicateSubscriptionError(
                f"consumer {info.name!r} is already bound to a subscriber and has no deliver group; a second "
                "subscriber would receive every message again"
            )
        return
    if not group:
        raise errors.ConsumerNotQueueError(
            f"consumer {info.name!r} was created without a deliver group; it cannot serve queue {queue!r}"
        )
    if group != queue:
        raise errors.DeliverGroupMismatchError(f"consumer {info.name!r} serves queue group {group!r}, not {queue!r}")
    if config.flow_control:
        raise errors.QueueFlowControlError(f"consumer {info.name!r} has flow control, which queue groups cannot use")
    if config.idle_heartbeat:
        raise errors.QueueHeartbeatError(f"consumer {info.name!r} has idle heartbeats, which queue groups cannot use")


def check_pull_binding(info: ConsumerInfo, subject: str | None) -> None:
    if info.config.deliver_subject:
        raise errors.PullSubscribeToPushConsumerError(
            f"consumer {info.name!r} is a push consumer (deliver_subject {info.config.deliver_subject!r}); use "
            "js.subscribe"
        )
    check_filter(info, subject)


def lookup(js: JetStream, stream: str, name: str) -> ConsumerInfo | None:
    try:
        return js.consumer_info(stream, name)
    except errors.ConsumerNotFoundError:
        return None


def settle_unbound(js: JetStream, info: ConsumerInfo, queue: str | None) -> ConsumerInfo | None:
    """Give the server a moment to see that a previous subscriber of this consumer went away.

    The server clears ``push_bound`` when it notices the deliver subject lost its interest, which happens
    asynchronously after the UNSUB: a subscribe right after an unsubscribe (nats.go #1269) would otherwise
    see the old binding and fail with DuplicateSubscriptionError. A genuine second subscriber still fails,
    ``_UNBIND_GRACE`` later.
    """
    if queue is not None or info.config.deliver_group or not info.push_bound:
        return info
    deadline = time.monotonic() + _UNBIND_GRACE
    pause = _UNBIND_FIRST_PAUSE
    current: ConsumerInfo | None = info
    while current is not None and current.push_bound and (remaining := deadline - time.monotonic()) > 0:
        time.sleep(min(pause, remaining))
        pause *= 2
        current = lookup(js, info.stream_name, info.name)
    return current


def create_if_absent(js: JetStream, stream: str, config: ConsumerConfig) -> ConsumerInfo | None:
    """Create the consumer; None when it appeared meanwhile (the "already exists" race)."""
    try:
        return js._consumer_request(stream, config, "create")
    except errors.ConsumerExistsError:
        return None
