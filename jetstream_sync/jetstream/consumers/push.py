"""Push consumers in the ADR-37 style (as nats.go's PushConsumer), and ordered push consumers.

A push consumer has a ``deliver_subject``: the server sends to it without being asked. ``consume(handler)``
and ``messages()`` read it with ADR-15's automatic status management (heartbeat alarms, flow control,
gap detection, error statuses); the buffer is bounded by [`PushOptions`][jetstream_sync.PushOptions]. For the nats-py
style ``js.subscribe`` see ``jetstream/subscribe.py``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import attrs

from ... import errors
from ..._delivery import OrderedPush, PushEngine, PushLimits
from ..._runtime import Runtime
from ..._validate import check_int, to_seconds
from ...models import AckPolicy, ConsumerConfig, ConsumerInfo, ConsumerLag
from ...models.reads import OrderedConsumerConfig
from ._chain import ConsumerChain
from ._reads import PushReads, ServerConsumerHandle, reporter
from .delivery import ErrorHandler

if TYPE_CHECKING:
    from ..context import JetStream

__all__ = ["OrderedPushConsumer", "PushConsumer", "PushOptions", "check_push_config"]


DEFAULT_PENDING_MSGS = 65_536
DEFAULT_PENDING_BYTES = 64 * 1024 * 1024
DEFAULT_ORDERED_HEARTBEAT = 5.0


def _positive(_inst: object, attr: attrs.Attribute[Any], value: object) -> None:
    check_int(attr.name, value, minimum=1)


def _alarm(value: float | timedelta | None) -> float | None:
    return None if value is None else to_seconds("heartbeat_alarm", value)


@attrs.frozen(kw_only=True)
class PushOptions:
    """Options of a push consumer's ``messages()`` / ``consume()``.

    ``pending_msgs_limit`` / ``pending_bytes_limit`` bound what waits unread (65,536 messages, 64 MiB): past
    them new messages are dropped and a SlowConsumerError is reported (with flow control the server slows
    down before that). ``heartbeat_alarm`` is the silence, in seconds, reported as MissedHeartbeatError;
    the default is three times the consumer's idle_heartbeat (ADR-15).
    """

    pending_msgs_limit: int = attrs.field(default=DEFAULT_PENDING_MSGS, validator=_positive)
    pending_bytes_limit: int = attrs.field(default=DEFAULT_PENDING_BYTES, validator=_positive)
    heartbeat_alarm: float | None = attrs.field(default=None, converter=_alarm)

    def limits(self) -> PushLimits:
        """The buffer bounds and heartbeat alarm these options give the push engine."""
        return PushLimits(
            max_messages=self.pending_msgs_limit, max_bytes=self.pending_bytes_limit, alarm_after=self.heartbeat_alarm
        )


def check_push_config(config: ConsumerConfig) -> None:
    """The checks of a push consumer's config that the client can make before anything is sent."""
    if not isinstance(config, ConsumerConfig):
        raise errors.InvalidTypeError("config", f"must be a ConsumerConfig, got {type(config).__name__}")
    if not config.deliver_subject:
        raise errors.InvalidArgumentError(
            "config.deliver_subject", "a push consumer needs a deliver_subject; for a pull consumer use create_consumer"
        )
    if config.deliver_group:
        if config.flow_control:
            raise errors.QueueFlowControlError(
                "flow_control cannot be used with a deliver_group: the server would send flow control to a random "
                "member of the queue group; drop one of them"
            )
        if config.idle_heartbeat:
            raise errors.QueueHeartbeatError(
                "idle_heartbeat cannot be used with a deliver_group: the server would send heartbeats to a random "
                "member of the queue group; drop one of them"
            )
    if config.flow_control and not config.idle_heartbeat:
        raise errors.InvalidArgumentError(
            "config.idle_heartbeat",
            "flow_control needs idle heartbeats (a lost flow-control reply is recovered "
            "through them); set idle_heartbeat, e.g. 5 seconds",
        )


class _OneAtATime:
    """A handle's single running delivery: starting a second one while the first runs raises ``busy()``."""

    def __init__(self, busy: Callable[[], errors.JetStreamError]) -> None:
        self._busy = busy
        self._lock = threading.Lock()
        self.current: PushEngine | None = None

    def begin(self, start: Callable[[], PushEngine]) -> PushEngine:
        with self._lock:
            running = self.current
            if running is not None and not running.finished:
                raise self._busy()
            engine = start()
            self.current = engine
            return engine


class PushConsumer(ServerConsumerHandle, PushReads):
    """A handle on one push consumer. ``cached_info`` is what the last call saw; ``info()`` asks the server."""

    def __init__(self, js: JetStream, info: ConsumerInfo) -> None:
        super().__init__(js, info)
        self._running = _OneAtATime(
            lambda: errors.DuplicateSubscriptionError(
                f"push consumer {self.stream_name}/{self.name} is already read by messages()/consume() of this "
                "handle; stop that one first (several readers share a push consumer through its deliver_group)"
            )
        )

    def _ack_config(self) -> ConsumerConfig:
        return self.cached_info.config

    def _engine(self, options: PushOptions, error_handler: ErrorHandler | None) -> PushEngine:
        runtime = self._runtime
        config = self.cached_info.config
        if not config.deliver_subject:
            raise errors.PullSubscribeRequiredError(
                f"{self.stream_name}/{self.name} is a pull consumer (no deliver_subject); use js.consumer() and fetch"
            )
        label = f"{self.stream_name}/{self.name}"

        def start() -> PushEngine:
            assert config.deliver_subject is not None
            engine = PushEngine(
                runtime,
                label=label,
                deliver_subject=config.deliver_subject,
                queue=config.deliver_group or "",
                ack_none=config.ack_policy == AckPolicy.NONE,
                heartbeat=config.idle_heartbeat or 0.0,
                limits=options.limits(),
                gap_detection=not config.deliver_group,
                report=reporter(label, error_handler, runtime),
            )
            engine.start(self.jetstream.timeout)
            return engine

        return self._running.begin(start)


class OrderedPushConsumer(PushReads):
    """An ordered read of a stream over push delivery (flow control and heartbeats, no acks), recreated after
    any fault as the pull-based [`OrderedConsumer`][jetstream_sync.OrderedConsumer]; one read at a time."""

    def __init__(
        self,
        js: JetStream,
        stream: str,
        config: OrderedConsumerConfig,
        idle_heartbeat: float = DEFAULT_ORDERED_HEARTBEAT,
    ) -> None:
        if not isinstance(config, OrderedConsumerConfig):
            raise errors.InvalidTypeError("config", f"must be an OrderedConsumerConfig, got {type(config).__name__}")
        self.jetstream = js
        self.stream_name = stream
        self.config = config
        self.idle_heartbeat = to_seconds("idle_heartbeat", idle_heartbeat)
        self._runtime: Runtime = js.runtime
        self._chain = ConsumerChain(js.api, stream, config, push=True)
        self._running = _OneAtATime(
            lambda: errors.OrderedConsumerInUseError(
                f"ordered push consumer on {stream!r} is already read by messages()/consume(); stop that one first"
            )
        )
        self._stream_seq = 0

    def __repr__(self) -> str:
        return f"<OrderedPushConsumer {self.stream_name!r}>"

    @property
    def name(self) -> str | None:
        """The live server-side consumer's name (it changes with every reset)."""
        return self._chain.current

    def info(self) -> ConsumerInfo:
        """The live server-side consumer's info (ConsumerNotFoundError between a reset and the next read)."""
        name = self._chain.current
        if name is None:
            raise errors.ConsumerNotFoundError(
                404, 10014, "the ordered push consumer has no live server-side consumer now"
            )
        return self.jetstream.consumer_info(self.stream_name, name)

    def lag(self) -> ConsumerLag:
        """How far behind the live server-side consumer is (from a fresh
        [`info`][jetstream_sync.OrderedPushConsumer.info]); ConsumerNotFoundError between a reset and the next
        read."""
        return ConsumerLag.from_info(self.info())

    def _engine(self, options: PushOptions, error_handler: ErrorHandler | None) -> PushEngine:
        runtime = self._runtime
        previous = self._running.current

        def start() -> PushEngine:
            if isinstance(previous, OrderedPush):
                self._stream_seq = previous.next_start(self._stream_seq + 1) - 1
            engine = OrderedPush(
                runtime,
                self._chain,
                start_seq=self._stream_seq + 1 if self._stream_seq else 0,
                heartbeat=self.idle_heartbeat,
                limits=options.limits(),
                report=reporter(f"ordered push {self.stream_name}", error_handler, runtime),
            )
            engine.start(self.jetstream.timeout)
            return engine

        return self._running.begin(start)
