"""OpenTelemetry: spans and metrics exported in memory by the real SDK, against a real nats-server.

A publish is a PRODUCER span whose context travels in the message's headers; the consume handler runs inside a
CONSUMER span that continues that trace (also for a message nats-py published with a traceparent); API requests
are CLIENT spans; the instruments count what happened. Without instrument() nothing is traced and no header is
added.
"""

from __future__ import annotations

import asyncio
import threading

import nats
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

import jetstream_sync
from jetstream_sync import ConsumerConfig, StreamConfig, errors
from jetstream_sync.integrations import otel
from tests.helpers import wait_until


@pytest.fixture
def js(nats_server, request):
    name = "OTEL" + str(abs(hash(request.node.name)) % 10**8)
    with jetstream_sync.connect(nats_server.url) as nc:
        js = nc.jetstream()
        js.create_stream(StreamConfig(name=name, subjects=[f"{name.lower()}.>"]))
        js.create_consumer(name, ConsumerConfig(durable_name="work"))
        yield js, name
        js.delete_stream(name)


class Handled:
    """A consume handler that records the span it ran in."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.spans: list[trace.Span] = []

    def __call__(self, msg: jetstream_sync.Msg) -> None:
        with self.lock:
            self.spans.append(trace.get_current_span())
        msg.ack()

    def count(self) -> int:
        with self.lock:
            return len(self.spans)


def test_a_trace_runs_from_the_publisher_into_the_handler(exported, js):
    js, name = js
    subject = f"{name.lower()}.new"
    tracer = exported.tracer_provider.get_tracer("app")
    with tracer.start_as_current_span("GET /orders") as request_span:
        ack = js.publish(subject, b"order", msg_id="o-1")
    handled = Handled()
    with js.consumer(name, "work").consume(handled):
        wait_until(lambda: handled.count() == 1 and exported.named(f"process {subject}"))
    (publish,) = exported.named(f"publish {subject}")
    (process,) = exported.named(f"process {subject}")
    trace_id = request_span.get_span_context().trace_id
    assert publish.kind is SpanKind.PRODUCER and publish.parent.span_id == request_span.get_span_context().span_id
    assert process.kind is SpanKind.CONSUMER and process.parent.span_id == publish.context.span_id
    assert publish.context.trace_id == process.context.trace_id == trace_id  # one trace: request, publish, handler
    assert handled.spans[0].get_span_context().span_id == process.context.span_id  # the handler ran inside it
    assert publish.attributes["messaging.system"] == "nats"
    assert publish.attributes["messaging.destination.name"] == subject
    assert publish.attributes["messaging.message.id"] == "o-1"
    assert (publish.attributes["messaging.nats.stream"], publish.attributes["messaging.nats.sequence"]) == (
        name,
        ack.seq,
    )
    assert process.attributes["messaging.consumer.group.name"] == "work"
    assert process.attributes["messaging.nats.delivered"] == 1
    stored = js.stream(name).get_msg(ack.seq)
    assert stored.headers["traceparent"].split("-")[1] == f"{trace_id:032x}"


def test_publish_async_ends_its_span_when_the_ack_comes(exported, js):
    js, name = js
    futures = [js.publish_async(f"{name.lower()}.a", b"%d" % i) for i in range(5)]
    acks = [f.result(timeout=5) for f in futures]
    wait_until(lambda: len(exported.named(f"publish {name.lower()}.a")) == 5)
    seqs = sorted(s.attributes["messaging.nats.sequence"] for s in exported.named(f"publish {name.lower()}.a"))
    assert seqs == sorted(a.seq for a in acks)
    (sent,) = exported.metric("messaging.client.sent.messages")
    assert sent.value == 5


def test_a_failed_publish_is_an_error_span(exported, js):
    js, _name = js
    with pytest.raises(errors.NoStreamResponseError):
        js.publish("otel.nowhere", b"x", timeout=1)
    (span,) = exported.named("publish otel.nowhere")
    assert span.status.status_code is StatusCode.ERROR
    assert span.events[0].name == "exception"
    assert exported.metric("messaging.client.sent.messages") == []  # nothing was stored


def test_api_requests_are_client_spans_named_without_the_stream(exported, js):
    js, name = js
    js.stream_info(name)
    with pytest.raises(errors.StreamNotFoundError):
        js.stream_info("NO_SUCH_STREAM")
    spans = exported.named("JetStream API STREAM.INFO")
    assert len(spans) == 2 and all(s.kind is SpanKind.CLIENT for s in spans)
    assert spans[0].attributes["messaging.nats.api"] == f"STREAM.INFO.{name}"
    assert spans[1].attributes["error.type"] == "StreamNotFoundError"


def test_a_message_nats_py_published_with_a_traceparent_continues_its_trace(exported, js, nats_server):
    js, name = js
    trace_id = 0x0AF7651916CD43DD8448EB211C80319C
    parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"

    async def publish() -> None:
        nc = await nats.connect(nats_server.url)
        await nc.jetstream().publish(f"{name.lower()}.py", b"from nats-py", headers={"traceparent": parent})
        await nc.close()

    asyncio.run(publish())
    handled = Handled()
    with js.consumer(name, "work").consume(handled):
        wait_until(lambda: handled.count() == 1 and exported.named(f"process {name.lower()}.py"))
    (process,) = exported.named(f"process {name.lower()}.py")
    assert process.context.trace_id == trace_id
    assert process.parent.span_id == 0xB7AD6B7169203331


def test_consumed_messages_and_durations_are_measured(exported, js):
    js, name = js
    for i in range(3):
        js.publish(f"{name.lower()}.m", b"%d" % i)
    handled = Handled()
    with js.consumer(name, "work").consume(handled):
        wait_until(lambda: handled.count() == 3)
    wait_until(lambda: exported.metric("messaging.client.consumed.messages"))
    (consumed,) = exported.metric("messaging.client.consumed.messages")
    assert consumed.value == 3
    (processing,) = exported.metric("messaging.process.duration")
    assert processing.count == 3
    publishes = [
        p
        for p in exported.metric("messaging.client.operation.duration")
        if p.attributes.get("messaging.operation.name") == "publish"
    ]
    assert sum(p.count for p in publishes) == 3


def test_a_reconnect_is_counted(exported, nats_server_function):
    with jetstream_sync.connect(nats_server_function.url, reconnect_wait=0.1) as nc:
        nats_server_function.restart()
        wait_until(lambda: nc.reconnects == 1, timeout=10)
    (reconnects,) = exported.metric("jetstream_sync.client.reconnects")
    assert reconnects.value == 1


def test_without_instrument_nothing_is_traced_and_no_header_added(js):
    js, name = js
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    otel.instrument(tracer_provider=provider)
    otel.uninstrument()
    assert not otel.is_instrumented()
    ack = js.publish(f"{name.lower()}.plain", b"x")
    assert "traceparent" not in js.stream(name).get_msg(ack.seq).headers
    assert exporter.get_finished_spans() == ()


def test_a_consume_reports_what_it_holds_pending_for_its_handler(exported, js):
    js, name = js
    for i in range(10):
        js.publish(f"{name.lower()}.p", b"%d" % i)
    release = threading.Event()
    handled = Handled()

    def slow(msg: jetstream_sync.Msg) -> None:
        release.wait(10)
        handled(msg)

    with js.consumer(name, "work").consume(slow) as context:
        wait_until(lambda: context.stats().buffered == 9)  # one in the handler, nine waiting
        (pending,) = exported.metric("messaging.client.consume.pending")
        assert pending.value == 9 and pending.attributes["jetstream_sync.consume"] == context.label
        release.set()
        wait_until(lambda: handled.count() == 10)
    assert exported.metric("messaging.client.consume.pending") == []  # a stopped consume is no longer observed
