"""The pull engines behind the delivery protocols: options objects, a retargeted source, the heartbeat monitor."""

from __future__ import annotations

import pytest

import jetstream_sync
from jetstream_sync import AckPolicy, ConsumeOptions, ConsumerConfig, FetchOptions, StreamConfig, errors
from jetstream_sync._delivery._pull import PullTarget
from tests.helpers import wait_until


@pytest.fixture
def cons(stream):
    return stream.create_consumer(ConsumerConfig(durable_name="c", filter_subject=f"{stream.name}.a"))


def publish(js, subject: str, count: int) -> None:
    for i in range(count):
        js.publish(subject, b"%d" % i)


def test_fetch_and_messages_take_options_objects(js, stream, cons):
    publish(js, f"{stream.name}.a", 5)
    assert len(list(cons.fetch(options=FetchOptions(max_messages=3, expires=2)))) == 3
    with cons.messages(options=ConsumeOptions(max_messages=10, expires=2)) as it:
        assert [it.next(5).data for _ in range(2)] == [b"3", b"4"]


def test_unknown_keywords_name_the_known_ones(cons):
    with pytest.raises(errors.InvalidArgumentError, match="is not a consume option") as info:
        cons.messages(max_msgs=10)
    assert info.value.field == "max_msgs"
    with pytest.raises(errors.InvalidArgumentError, match="is not a fetch option"):
        cons.fetch(1, timeout=3)
    with pytest.raises(errors.InvalidArgumentError) as both:
        cons.fetch(1, options=FetchOptions(max_messages=2))
    assert both.value.field == "max_messages"


def test_a_running_source_can_be_retargeted_to_another_consumer(js, stream, cons):
    """The plug point of an ordered consumer: the same iterator, buffer and readers, another server consumer."""
    other = stream.create_consumer(ConsumerConfig(durable_name="other", filter_subject=f"{stream.name}.b"))
    publish(js, f"{stream.name}.a", 3)
    with cons.messages(max_messages=10, expires=2) as it:
        assert [it.next(5).data for _ in range(3)] == [b"0", b"1", b"2"]
        source = it._source
        target = PullTarget(
            stream=stream.name,
            consumer=other.name,
            next_subject=f"$JS.API.CONSUMER.MSG.NEXT.{stream.name}.{other.name}".encode(),
            ack_none=False,
        )
        js.client.runtime.post(source.retarget, target)
        publish(js, f"{stream.name}.b", 4)
        got = [it.next(5) for _ in range(4)]
        assert [m.data for m in got] == [b"0", b"1", b"2", b"3"]
        assert {m.metadata.consumer for m in got} == {"other"}
        for m in got:
            m.ack()
    wait_until(lambda: other.info().num_ack_pending == 0)


def test_fetch_ends_with_missed_heartbeat_when_the_server_goes_quiet(fault_proxy):
    """The watchdog's heartbeat monitor ends a fetch whose server stopped talking (nothing, not even 408)."""
    with jetstream_sync.connect(fault_proxy.url, timeout=2) as nc:
        js = nc.jetstream()
        js.create_stream(StreamConfig(name="HB", subjects=["hb.>"]))
        cons = js.create_consumer("HB", ConsumerConfig(durable_name="c"))
        batch = cons.fetch(1, expires=8, idle_heartbeat=1)
        wait_until(lambda: cons.info().num_waiting == 1)  # the pull is on the server
        fault_proxy.stall("downstream")
        with pytest.raises(errors.MissedHeartbeatError, match="twice the idle heartbeat"):
            list(batch)
        assert isinstance(batch.error, errors.MissedHeartbeatError)
        fault_proxy.resume()


def publish_many(js, subject: str, count: int) -> None:
    for i in range(count):
        js.publish_async(subject, b"%d" % i)
    js.publish_async_complete()


def read_batches(it, expect: int) -> list[list[bytes]]:
    batches: list[list[bytes]] = []
    for batch in it.batches(limit=64):
        assert 1 <= len(batch) <= 64
        batches.append([msg.data for msg in batch])
        if sum(map(len, batches)) >= expect:
            break
    return batches


def test_batches_keep_a_pull_consumer_flowing(js, stream, cons):
    """A list counts as handed out when yielded: with 20-message pulls, 1000 messages need ~50 re-pulls, which
    only come if the batch accounting reaches the pull engine."""
    publish_many(js, f"{stream.name}.a", 1000)
    with cons.messages(max_messages=20) as it:
        batches = read_batches(it, 1000)
        stats = it.stats()
    assert [d for batch in batches for d in batch] == [b"%d" % i for i in range(1000)]
    assert stats.messages_delivered == 1000
    assert stats.pulls_sent >= 50


def test_batches_on_an_ordered_consumer_and_until_drained(js, stream):
    publish_many(js, f"{stream.name}.a", 500)
    consumer = js.ordered_consumer(stream.name)
    with consumer.messages(until_drained=True, max_messages=30) as it:
        got = [d for batch in it.batches() for d in (m.data for m in batch)]
    assert got == [b"%d" % i for i in range(500)]


def test_batches_answer_push_flow_control(js, stream, name):
    """Push flow control is answered as batches are handed out: 3000 messages of 1 KiB, the server waiting
    for each flow-control reply before it sends more."""
    config = ConsumerConfig(
        durable_name="p",
        deliver_subject=f"_deliver.{name}",
        flow_control=True,
        idle_heartbeat=1.0,
        ack_policy=AckPolicy.NONE,
    )
    push = stream.create_or_update_push_consumer(config)
    for _ in range(3000):
        js.publish_async(f"{stream.name}.a", b"x" * 1024)
    js.publish_async_complete()
    with push.messages() as it:
        batches = read_batches(it, 3000)
        assert it.stats().flow_control_answered > 0
    assert sum(map(len, batches)) == 3000


def test_batches_and_next_share_the_buffer_without_loss(js, stream, cons):
    publish_many(js, f"{stream.name}.a", 300)
    with cons.messages(max_messages=50) as it:
        first = [it.next(5).data for _ in range(3)]
        rest = read_batches(it, 297)
    assert first + [d for batch in rest for d in batch] == [b"%d" % i for i in range(300)]


def test_batches_end_after_stop(js, stream, cons):
    publish_many(js, f"{stream.name}.a", 100)
    with cons.messages(max_messages=10) as it:
        batches = it.batches()
        assert next(batches)
        it.stop()
        assert list(batches) == []


@pytest.mark.parametrize(("limit", "error"), [(0, errors.InvalidArgumentError), ("5", errors.InvalidTypeError)])
def test_batches_limit_is_checked_when_called(cons, limit, error):
    with cons.messages() as it, pytest.raises(error) as info:
        it.batches(limit=limit)
    assert info.value.field == "limit"
