"""OpenTelemetry for jetstream_sync: traces and metrics that follow the messaging semantic conventions.

Install the ``otel`` extra and switch it on once per process, after configuring the SDK::

    from jetstream_sync.integrations import otel
    otel.instrument()                      # the global tracer and meter providers, or pass your own

Then every JetStream publish is a PRODUCER span (``publish <subject>``) whose trace context travels in the
message's ``traceparent``/``tracestate`` headers; every message a ``consume()`` handler processes is a CONSUMER
span (``process <subject>``) whose parent is that context, so one trace runs from the code that published (a
Flask request, say) into the worker that handled the message; every JetStream API request is a CLIENT span
(``JetStream API <request>``). Metrics: messages published and consumed, publish and processing durations (the
publish duration is the ack latency), the messages each consume holds pending for its handler, reconnects and
missed heartbeats; and gauges of lag and health (``_otel_gauges.py``): each consumer's pending, ack pending and
redelivered counts as the server reports them, and every client's traffic, round trip, acks awaiting the server and
consume buffers.

Without [`instrument`][jetstream_sync.integrations.otel.instrument], nothing here is imported by the client and the hot
paths pay one attribute read (see ``jetstream_sync._telemetry``). Instrumentation covers every client of the process,
those made before [`instrument`][jetstream_sync.integrations.otel.instrument] too;
[`uninstrument`][jetstream_sync.integrations.otel.uninstrument] switches it off.
"""

from __future__ import annotations

import concurrent.futures
import time
import weakref
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from opentelemetry import context as otel_context
from opentelemetry import metrics, propagate, trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from .. import _telemetry
from .._telemetry import TraceHeaders
from ..errors import InvalidAckSubjectError
from ..jetstream.consumers.delivery import ConsumeContext
from ..message import Msg, MsgMetadata
from ..models import PubAck
from ._otel_gauges import HealthGauges, LagSource, observe

__all__ = ["LagSource", "instrument", "is_instrumented", "observe_lag", "uninstrument"]

_NAME = "jetstream_sync"
_SYSTEM = "nats"
T = TypeVar("T")


def instrument(
    *,
    tracer_provider: trace.TracerProvider | None = None,
    meter_provider: metrics.MeterProvider | None = None,
) -> None:
    """Trace and measure every client of this process, with the given providers (default: the global ones).
    Calling it again replaces the providers."""
    _telemetry.activate(_OpenTelemetry(tracer_provider, meter_provider))


def uninstrument() -> None:
    """Stop tracing and measuring; calls already under way finish their spans."""
    _telemetry.deactivate()


def is_instrumented() -> bool:
    """Whether [`instrument`][jetstream_sync.integrations.otel.instrument] is in effect."""
    return isinstance(_telemetry.ACTIVE, _OpenTelemetry)


def observe_lag(*consumers: LagSource) -> None:
    """Report the lag of these consumer handles (``Consumer``, ``PushConsumer``, ordered ones) in the
    ``jetstream_sync.consumer.*`` gauges too, for as long as the process runs: for a process that watches
    consumers it does not read (the consumers a running ``consume()`` of this process reads are reported without
    it). May be called before [`instrument`][jetstream_sync.integrations.otel.instrument]; each collection asks
    the server for each consumer's info once."""
    observe(consumers)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("jetstream-sync")
    except PackageNotFoundError:
        return "0"


class _OpenTelemetry:
    """The `jetstream_sync._telemetry.Telemetry` of OpenTelemetry: spans, propagation and instruments."""

    def __init__(
        self, tracer_provider: trace.TracerProvider | None, meter_provider: metrics.MeterProvider | None
    ) -> None:
        self._tracer = trace.get_tracer(_NAME, _version(), tracer_provider)
        meter = metrics.get_meter(_NAME, _version(), meter_provider)
        self._sent = meter.create_counter(
            "messaging.client.sent.messages", unit="{message}", description="Messages published to JetStream"
        )
        self._consumed = meter.create_counter(
            "messaging.client.consumed.messages", unit="{message}", description="Messages handed to consume handlers"
        )
        self._duration = meter.create_histogram(
            "messaging.client.operation.duration",
            unit="s",
            description="Publishes until their ack (the ack latency), and JetStream API requests",
        )
        self._process_duration = meter.create_histogram(
            "messaging.process.duration", unit="s", description="Time consume handlers spent on a message"
        )
        self._reconnects = meter.create_counter(
            "jetstream_sync.client.reconnects", unit="{reconnect}", description="Connections re-established"
        )
        self._consumes: weakref.WeakSet[ConsumeContext] = weakref.WeakSet()
        self._health = HealthGauges(meter, self._consumes)  # consumer lag and client health (_otel_gauges.py)
        meter.create_observable_gauge(
            "messaging.client.consume.pending",
            callbacks=[self._pending],
            unit="{message}",
            description="Messages a running consume holds in the client, received and not yet handed to its handler",
        )
        self._missed = meter.create_counter(
            "jetstream_sync.consume.heartbeats_missed",
            unit="{heartbeat}",
            description="Times a consume heard nothing from the server for two idle heartbeats",
        )

    # -- publishing ---------------------------------------------------------------------------------------
    def _start_publish(self, subject: str, size: int, msg_id: str | None) -> tuple[trace.Span, TraceHeaders]:
        attributes: dict[str, Any] = {
            "messaging.system": _SYSTEM,
            "messaging.operation.name": "publish",
            "messaging.operation.type": "send",
            "messaging.destination.name": subject,
            "messaging.message.body.size": size,
        }
        if msg_id is not None:
            attributes["messaging.message.id"] = msg_id
        span = self._tracer.start_span(f"publish {subject}", kind=SpanKind.PRODUCER, attributes=attributes)
        carrier: dict[str, str] = {}
        propagate.inject(carrier, context=trace.set_span_in_context(span))
        return span, [(key.encode(), value.encode()) for key, value in carrier.items()]

    def _end_publish(self, span: trace.Span, subject: str, started: float, ack: PubAck | None, exc: object) -> None:
        attributes = {"messaging.system": _SYSTEM, "messaging.destination.name": subject}
        if ack is not None:
            span.set_attribute("messaging.nats.stream", ack.stream)
            span.set_attribute("messaging.nats.sequence", ack.seq)
            if ack.duplicate:
                span.set_attribute("messaging.nats.duplicate", True)
            self._sent.add(1, attributes)
        elif isinstance(exc, BaseException):
            span.record_exception(exc)
            span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
            attributes["error.type"] = type(exc).__name__
        self._duration.record(time.monotonic() - started, {**attributes, "messaging.operation.name": "publish"})
        span.end()

    def publish(self, subject: str, size: int, msg_id: str | None, send: Callable[[TraceHeaders], PubAck]) -> PubAck:
        started = time.monotonic()
        span, headers = self._start_publish(subject, size, msg_id)
        try:
            ack = send(headers)
        except BaseException as exc:
            self._end_publish(span, subject, started, None, exc)
            raise
        self._end_publish(span, subject, started, ack, None)
        return ack

    def publish_async(
        self,
        subject: str,
        size: int,
        msg_id: str | None,
        send: Callable[[TraceHeaders], concurrent.futures.Future[PubAck]],
    ) -> concurrent.futures.Future[PubAck]:
        started = time.monotonic()
        span, headers = self._start_publish(subject, size, msg_id)
        try:
            future = send(headers)
        except BaseException as exc:
            self._end_publish(span, subject, started, None, exc)
            raise

        def done(resolved: concurrent.futures.Future[PubAck]) -> None:
            exc = resolved.exception()
            self._end_publish(span, subject, started, None if exc else resolved.result(), exc)

        future.add_done_callback(done)
        return future

    # -- API requests ---------------------------------------------------------------------------------------
    def request(self, subject: str, send: Callable[[], T]) -> T:
        verb = _api_verb(subject)
        started = time.monotonic()
        with self._tracer.start_as_current_span(
            f"JetStream API {verb}",
            kind=SpanKind.CLIENT,
            attributes={"messaging.system": _SYSTEM, "messaging.nats.api": subject},
        ) as span:
            try:
                return send()
            except BaseException as exc:
                span.set_attribute("error.type", type(exc).__name__)
                raise
            finally:
                self._duration.record(
                    time.monotonic() - started,
                    {"messaging.system": _SYSTEM, "messaging.operation.name": f"api {verb}"},
                )

    # -- consuming ------------------------------------------------------------------------------------------
    def handler(self, handler: Callable[[Msg], object]) -> Callable[[Msg], object]:
        tracer = self._tracer

        def traced(msg: Msg) -> object:
            parent = propagate.extract(msg.headers) if msg.headers else otel_context.get_current()
            attributes: dict[str, Any] = {
                "messaging.system": _SYSTEM,
                "messaging.operation.name": "process",
                "messaging.operation.type": "process",
                "messaging.destination.name": msg.subject,
                "messaging.message.body.size": len(msg.data),
            }
            metadata = _metadata(msg)
            if metadata is not None:
                attributes["messaging.nats.stream"] = metadata.stream
                attributes["messaging.consumer.group.name"] = metadata.consumer
                attributes["messaging.nats.sequence"] = metadata.sequence.stream
                attributes["messaging.nats.delivered"] = metadata.num_delivered
            started = time.monotonic()
            with tracer.start_as_current_span(
                f"process {msg.subject}", context=parent, kind=SpanKind.CONSUMER, attributes=attributes
            ):
                try:
                    return handler(msg)
                finally:
                    measured = {"messaging.system": _SYSTEM, "messaging.destination.name": msg.subject}
                    self._consumed.add(1, measured)
                    self._process_duration.record(time.monotonic() - started, measured)

        return traced

    # -- connection and consume events ------------------------------------------------------------------------
    def consume_started(self, context: ConsumeContext) -> None:
        self._consumes.add(context)

    def _pending(self, _options: metrics.CallbackOptions) -> Iterable[metrics.Observation]:
        """The pending gauge: one observation per running consume (the WeakSet forgets the ones gone)."""
        for context in list(self._consumes):
            if context.closed.is_set():
                self._consumes.discard(context)
                continue
            attributes = {"messaging.system": _SYSTEM, "jetstream_sync.consume": context.label}
            yield metrics.Observation(context.stats().buffered, attributes)

    def reconnected(self) -> None:
        self._reconnects.add(1, {"messaging.system": _SYSTEM})

    def heartbeat_missed(self, label: str) -> None:
        self._missed.add(1, {"messaging.system": _SYSTEM, "jetstream_sync.consume": label})


def _api_verb(subject: str) -> str:
    """``STREAM.INFO`` of ``STREAM.INFO.orders``: the request without the names in it (a span name must not
    carry high-cardinality values)."""
    parts = subject.split(".")
    for length in (3, 2):
        verb = ".".join(parts[:length])
        if verb in _VERBS:
            return verb
    return parts[0]


_VERBS = frozenset(
    {
        "STREAM.CREATE", "STREAM.UPDATE", "STREAM.INFO", "STREAM.DELETE", "STREAM.PURGE", "STREAM.NAMES",
        "STREAM.LIST", "STREAM.MSG.GET", "STREAM.MSG.DELETE", "STREAM.LEADER.STEPDOWN", "CONSUMER.CREATE",
        "CONSUMER.DURABLE.CREATE", "CONSUMER.INFO", "CONSUMER.DELETE", "CONSUMER.NAMES", "CONSUMER.LIST",
        "CONSUMER.PAUSE", "CONSUMER.UNPIN", "CONSUMER.RESET", "CONSUMER.LEADER.STEPDOWN",
    }
)  # fmt: skip


def _metadata(msg: Msg) -> MsgMetadata | None:
    """The JetStream metadata of a consumed message, or None for one without an ack subject."""
    try:
        return msg.metadata
    except InvalidAckSubjectError:  # an ordered or push message without a $JS.ACK reply: no stream attributes
        return None
