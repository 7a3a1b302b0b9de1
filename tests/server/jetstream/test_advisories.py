"""js.advisories(): typed events from $JS.EVENT, narrowed by stream, consumer and kind."""

from __future__ import annotations

import pytest

from jetstream_sync import (
    ConsumerAckMetric,
    ConsumerAction,
    ConsumerConfig,
    MaxDeliveriesExceeded,
    MessageNaked,
    MessageTerminated,
    StreamAction,
    StreamConfig,
    UnknownAdvisory,
    errors,
)
from jetstream_sync.models.advisory import parse_advisory


def _first(events, cls, timeout=3.0):
    while True:
        ev = events.next(timeout)
        if isinstance(ev, cls):
            return ev


def test_ack_metric_nak_term_and_max_deliver(js, stream, name):
    cons = stream.create_consumer(ConsumerConfig(durable_name="c", sample_freq="100%", max_deliver=1, ack_wait=0.5))
    with js.advisories(stream=stream.name) as events:
        for i in range(3):
            js.publish(f"{name}.a", b"%d" % i)
        first, second, third = list(cons.fetch(3, expires=1))
        first.ack()
        second.term("bad input")
        third.nak()
        metric = _first(events, ConsumerAckMetric)
        assert (metric.stream, metric.consumer, metric.stream_seq, metric.deliveries) == (stream.name, "c", 1, 1)
        assert metric.ack_time >= 0
        terminated = _first(events, MessageTerminated)
        assert (terminated.stream_seq, terminated.reason) == (2, "bad input")
    with js.advisories(stream=stream.name, kinds=["max_deliver", "nak"]) as events:
        js.publish(f"{name}.a", b"x")
        (msg,) = list(cons.fetch(1, expires=1))
        msg.nak()
        naked = _first(events, MessageNaked)
        assert naked.stream_seq == 4
        # max_deliver=1: the nak'ed message is not delivered again, the server says so
        list(cons.fetch(1, expires=1))
        exceeded = _first(events, MaxDeliveriesExceeded)
        assert exceeded.consumer == "c"


def test_stream_and_consumer_actions_and_narrowing(js, name):
    with js.advisories(stream=name, kinds=["stream_action", "consumer_action"]) as events:
        other = js.create_stream(StreamConfig(name=name + "X", subjects=[f"{name}x.>"]))
        stream = js.create_stream(StreamConfig(name=name, subjects=[f"{name}.>"]))
        created = _first(events, StreamAction)
        assert (created.stream, created.action) == (name, "create")  # the other stream's event did not come
        stream.create_consumer(ConsumerConfig(durable_name="d"))
        consumer_created = _first(events, ConsumerAction)
        assert (consumer_created.consumer, consumer_created.action) == ("d", "create")
        stream.delete_consumer("d")
        consumer_deleted = _first(events, ConsumerAction)
        assert (consumer_deleted.consumer, consumer_deleted.action) == ("d", "delete")
        js.delete_stream(other.name)


def test_bad_arguments_are_refused_before_subscribing(js):
    with pytest.raises(errors.InvalidArgumentError):
        js.advisories(kinds=["no_such_kind"])
    with pytest.raises(errors.InvalidTypeError):
        js.advisories(kinds="nak")
    with pytest.raises(errors.InvalidArgumentError):
        js.advisories(stream="a.b")


def test_unknown_kinds_and_bad_json_become_unknown_events(client, js):
    assert isinstance(parse_advisory("x", {"type": "io.nats.jetstream.advisory.v9.new_thing"}), UnknownAdvisory)
    with js.advisories() as events:
        client.publish("$JS.EVENT.ADVISORY.FUTURE.THING.S", b"not json")
        ev = events.next(3)
        assert isinstance(ev, UnknownAdvisory)
        assert ev.subject == "$JS.EVENT.ADVISORY.FUTURE.THING.S"
