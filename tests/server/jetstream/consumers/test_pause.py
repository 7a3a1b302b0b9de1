"""Pausing and resuming a consumer (nats-server 2.11+): nothing is delivered while paused, delivery resumes on
request or at the deadline, and the state shows in ConsumerInfo."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from jetstream_sync import ConsumerConfig, ConsumerPauseState, StreamConfig, errors


@pytest.fixture
def consumer(js, name):
    stream = js.create_stream(StreamConfig(name=name, subjects=[f"{name}.>"]))
    js.publish(f"{name}.a", b"waiting")
    return stream.create_consumer(ConsumerConfig(durable_name="worker"))


def test_a_paused_consumer_delivers_nothing_until_resumed(consumer):
    until = datetime.now(timezone.utc) + timedelta(minutes=5)
    state = consumer.pause(until)
    assert isinstance(state, ConsumerPauseState)
    assert state.paused and state.pause_until is not None
    assert abs((state.pause_until - until).total_seconds()) < 0.001
    assert 200 < state.pause_remaining <= 300
    info = consumer.info()
    assert info.paused and info.pause_remaining is not None and info.config.pause_until is not None
    with pytest.raises(errors.TimeoutError):
        consumer.next(timeout=0.5)  # the message is there, the consumer holds it back
    assert consumer.resume().paused is False
    assert consumer.info().paused is False
    assert consumer.next(timeout=5).data == b"waiting"


def test_a_pause_ends_by_itself_at_its_deadline(consumer):
    consumer.pause(datetime.now(timezone.utc) + timedelta(seconds=1))
    assert consumer.next(timeout=5).data == b"waiting"  # the server resumed it
    assert consumer.info().paused is False


def test_a_deadline_in_the_past_leaves_the_consumer_running(consumer, js):
    state = js.pause_consumer(consumer.stream_name, consumer.name, datetime.now(timezone.utc) - timedelta(hours=1))
    assert state.paused is False
    assert consumer.next(timeout=5).data == b"waiting"


def test_bad_pause_arguments_are_refused_before_sending(consumer, js, client):
    client.flush()
    sent = client.stats["out_msgs"]
    with pytest.raises(errors.InvalidArgumentError, match="timezone-aware"):
        consumer.pause(datetime.now() + timedelta(minutes=1))
    with pytest.raises(errors.InvalidTypeError, match="until"):
        consumer.pause("in five minutes")
    with pytest.raises(errors.InvalidArgumentError, match="name"):
        js.pause_consumer(consumer.stream_name, "a.b", datetime.now(timezone.utc))
    client.flush()
    assert client.stats["out_msgs"] == sent
    with pytest.raises(errors.ConsumerNotFoundError):
        js.resume_consumer(consumer.stream_name, "nobody")


def test_reset_goes_back_to_the_ack_floor_or_to_a_sequence(js, name):
    """nats-server 2.14+: without a sequence, what was delivered and not acked comes again; with one, delivery
    starts there."""
    stream = js.create_stream(StreamConfig(name=name, subjects=[f"{name}.>"]))
    for i in range(1, 6):
        js.publish(f"{name}.a", b"%d" % i)
    consumer = stream.create_consumer(ConsumerConfig(durable_name="worker", ack_wait=30))
    batch = list(consumer.fetch(3, expires=2))
    batch[0].ack_sync()  # 1 acked; 2 and 3 delivered and pending
    info = consumer.reset()
    assert info.reset_seq == 2 and consumer.cached_info is info
    assert [m.data for m in consumer.fetch(5, expires=1)] == [b"2", b"3", b"4", b"5"]
    assert consumer.reset(sequence=4).reset_seq == 4
    assert [m.data for m in consumer.fetch(5, expires=1)] == [b"4", b"5"]
    with pytest.raises(errors.InvalidArgumentError, match="sequence"):
        consumer.reset(sequence=0)
    with pytest.raises(errors.ConsumerNotFoundError):  # the server does not answer this one: we ask after 1 s
        js.client.jetstream(timeout=1).reset_consumer(name, "nobody")
