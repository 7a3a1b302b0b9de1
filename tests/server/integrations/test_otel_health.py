"""OpenTelemetry gauges of consumer lag and client health (issue 33), read with the SDK's in-memory metric reader
against a real nats-server: the lag of the consumers running consumes read and of observed handles, exactly as the
server reports it; the clients' traffic, round trip and consume buffers."""

from __future__ import annotations

import threading

import pytest

import jetstream_sync
from jetstream_sync import ConsumerConfig, StreamConfig
from jetstream_sync.integrations import _otel_gauges, otel
from tests.helpers import wait_until


@pytest.fixture(autouse=True)
def forget_observed():
    """observe_lag() is process state: each test's handles are forgotten after it (their client closes)."""
    yield
    _otel_gauges.OBSERVED.clear()


@pytest.fixture
def nc(nats_server):
    with jetstream_sync.connect(nats_server.url, name="otel-health") as client:
        yield client


@pytest.fixture
def stream(nc, request):
    name = "OTELH" + str(abs(hash(request.node.name)) % 10**8)
    js = nc.jetstream()
    js.create_stream(StreamConfig(name=name, subjects=[f"{name.lower()}.>"]))
    for i in range(500):
        js.publish_async(f"{name.lower()}.a", b"%03d" % i)
    js.publish_async_complete(timeout=20)
    yield js, name
    js.delete_stream(name)


def by_consumer(points: list, stream: str) -> dict[str, int]:
    return {
        p.attributes["messaging.consumer.group.name"]: p.value
        for p in points
        if p.attributes["messaging.destination.name"] == stream and p.attributes["messaging.system"] == "nats"
    }


def test_the_lag_of_a_running_consumes_consumer_is_the_servers(exported, stream):
    js, name = stream
    cons = js.create_consumer(name, ConsumerConfig(durable_name="work", ack_wait=60))
    release = threading.Event()
    with cons.consume(lambda msg: release.wait(10), max_messages=100, deferred_ack=True) as context:
        wait_until(lambda: context.stats().buffered == 99)  # the server delivered 100: one in hand, 99 held
        assert by_consumer(exported.metric("jetstream_sync.consumer.pending"), name) == {"work": 400}
        assert by_consumer(exported.metric("jetstream_sync.consumer.ack_pending"), name) == {"work": 100}
        assert by_consumer(exported.metric("jetstream_sync.consumer.redelivered"), name) == {"work": 0}
        (usage,) = [
            p
            for p in exported.metric("jetstream_sync.consume.buffer.usage")
            if p.attributes["jetstream_sync.consume"] == context.label
        ]
        assert usage.value == pytest.approx(0.99)
        assert usage.attributes["jetstream_sync.client.name"] == "otel-health"
        release.set()


def test_observed_consumers_report_their_lag_without_being_read_here(exported, stream):
    js, name = stream
    cons = js.create_consumer(name, ConsumerConfig(durable_name="watched", ack_wait=60))
    fetched = list(cons.fetch(200, expires=5))
    for msg in fetched[:50]:
        msg.ack_sync()
    otel.observe_lag(cons)
    assert by_consumer(exported.metric("jetstream_sync.consumer.pending"), name) == {"watched": 300}
    assert by_consumer(exported.metric("jetstream_sync.consumer.ack_pending"), name) == {"watched": 150}


def test_a_consumer_that_cannot_answer_is_left_out_and_said_once(exported, stream, caplog):
    caplog.set_level("WARNING", logger="jetstream_sync")  # whatever level an earlier test left on the root logger
    js, name = stream
    cons = js.create_consumer(name, ConsumerConfig(durable_name="gone"))
    otel.observe_lag(cons)
    cons.delete()
    assert by_consumer(exported.metric("jetstream_sync.consumer.pending"), name) == {}
    assert len([r for r in caplog.records if "no lag for" in r.getMessage()]) == 1


def test_client_traffic_and_round_trip_are_observed(exported, nc):
    sub = nc.subscribe("otelh.io")
    for _ in range(100):
        nc.publish("otelh.io", b"x" * 10)
    nc.flush()
    for _ in range(100):
        sub.next_msg(5)
    stats = nc.stats_snapshot()
    points = {
        p.attributes["network.io.direction"]: p.value
        for p in exported.metric("jetstream_sync.client.io.messages")
        if p.attributes["jetstream_sync.client.name"] == "otel-health"
    }
    assert points == {"receive": stats.in_msgs, "transmit": stats.out_msgs}
    assert stats.in_msgs >= 100 and stats.out_msgs >= 100

    def rtt() -> list:
        return [
            p
            for p in exported.metric("jetstream_sync.client.rtt")
            if p.attributes["jetstream_sync.client.name"] == "otel-health"
        ]

    wait_until(rtt)  # the first collection sends the PING, a later one reports its PONG
    assert 0 < rtt()[0].value < 1.0
