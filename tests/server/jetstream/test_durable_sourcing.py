"""Durable sourcing (ADR-60, nats-server 2.14+) against a real server: a stream sources or mirrors through a
consumer made beforehand with AckPolicy.FLOW_CONTROL, which then decides what is taken; a work queue is emptied
as the sourcing server acknowledges through flow control. Also what an older server is refused before anything
is sent, and StreamSource.consumer read and written by nats-py."""

from __future__ import annotations

import pytest

from jetstream_sync import (
    AckPolicy,
    ConsumerConfig,
    DeliverPolicy,
    RetentionPolicy,
    StreamConfig,
    StreamConsumerSource,
    StreamSource,
    errors,
)
from tests.helpers import wait_until
from tests.server.jetstream.kv.kvhelpers import with_nats_py


def _flow_consumer(name: str, **config: object) -> ConsumerConfig:
    return ConsumerConfig(
        durable_name="src", deliver_subject=f"deliver.{name}", ack_policy=AckPolicy.FLOW_CONTROL, **config
    )


def _messages(js, stream: str) -> int:
    return js.stream_info(stream).state.messages


def test_a_work_queue_sourced_through_its_consumer_hands_over_what_the_consumer_takes(js, name):
    wq = js.create_stream(StreamConfig(name=name, subjects=[f"{name}.>"], retention=RetentionPolicy.WORK_QUEUE))
    consumer = wq.create_push_consumer(_flow_consumer(name, filter_subject=f"{name}.keep.>"))
    assert consumer.cached_info.config.ack_policy is AckPolicy.FLOW_CONTROL
    through = StreamConsumerSource(name="src", deliver_subject=f"deliver.{name}")
    agg = js.create_stream(StreamConfig(name=name + "_AGG", sources=[StreamSource(name=name, consumer=through)]))
    assert agg.cached_info.config.sources == [StreamSource(name=name, consumer=through)]
    for subject in ("keep.1", "drop.1", "keep.2", "keep.3"):
        js.publish(f"{name}.{subject}", subject.encode())
    # what the consumer's filter takes is stored in the aggregate and acknowledged (so removed from the work
    # queue) by flow control; what it does not take stays in the work queue
    wait_until(lambda: _messages(js, agg.name) == 3 and _messages(js, name) == 1, timeout=10)
    assert [agg.get_msg(seq).data for seq in (1, 2, 3)] == [b"keep.1", b"keep.2", b"keep.3"]
    assert wq.get_msg(2).data == b"drop.1"
    wait_until(lambda: consumer.info().ack_floor.stream_seq == 4, timeout=10)
    assert agg.info().sources is not None and agg.cached_info.sources[0].error is None


def test_a_mirror_through_its_consumer_takes_the_consumers_start(js, name):
    origin = js.create_stream(StreamConfig(name=name, subjects=[f"{name}.>"]))
    for subject in ("a", "b", "a", "c", "a"):
        js.publish(f"{name}.{subject}", subject.encode())
    # only the last message of each subject, and every change after: a start no mirror could set by itself
    last = _flow_consumer(name, deliver_policy=DeliverPolicy.LAST_PER_SUBJECT, filter_subject=f"{name}.>")
    origin.create_push_consumer(last)
    through = StreamConsumerSource(name="src", deliver_subject=f"deliver.{name}")
    mirror = js.create_stream(StreamConfig(name=name + "_M", mirror=StreamSource(name=name, consumer=through)))
    wait_until(lambda: _messages(js, mirror.name) == 3, timeout=10)
    js.publish(f"{name}.b", b"b2")
    wait_until(lambda: _messages(js, mirror.name) == 4, timeout=10)
    info = mirror.info()
    assert (info.state.first_seq, info.state.last_seq) == (2, 6)  # a mirror keeps its origin's sequences
    assert mirror.get_msg(6).data == b"b2"


def test_an_older_server_is_refused_before_sending(js, name, monkeypatch):
    wq = js.create_stream(StreamConfig(name=name, subjects=[f"{name}.>"], retention=RetentionPolicy.WORK_QUEUE))
    monkeypatch.setattr(js.client.runtime, "server_info", lambda: {"version": "2.13.2", "api_lvl": 3})
    with pytest.raises(errors.FeatureNotSupportedError, match=r"flow-control ack policy.*2\.14\.0"):
        wq.create_push_consumer(_flow_consumer(name))
    through = StreamConsumerSource(name="src", deliver_subject=f"deliver.{name}")
    with pytest.raises(errors.FeatureNotSupportedError, match=r"durable sourcing.*2\.14\.0.*2\.13\.2"):
        js.create_stream(StreamConfig(name=name + "_AGG", sources=[StreamSource(name=name, consumer=through)]))
    monkeypatch.undo()
    assert list(wq.consumer_names()) == []
    assert list(js.stream_names()) == [name]


def test_nats_py_reads_ours_and_we_read_theirs(nats_server, js, name):
    import nats.js.api

    if not hasattr(nats.js.api, "StreamConsumerSource"):  # CI's lowest-nats-py run (2.15.0)
        pytest.skip("this nats-py has no StreamConsumerSource (durable sourcing came with nats-py 2.16)")
    from nats.js.api import StreamConfig as TheirStreamConfig
    from nats.js.api import StreamConsumerSource as TheirConsumerSource
    from nats.js.api import StreamSource as TheirSource

    js.create_stream(StreamConfig(name=name, subjects=[f"{name}.>"], retention=RetentionPolicy.WORK_QUEUE))
    js.create_push_consumer(name, _flow_consumer(name))
    through = StreamConsumerSource(name="src", deliver_subject=f"deliver.{name}")
    js.create_stream(StreamConfig(name=name + "_AGG", sources=[StreamSource(name=name, consumer=through)]))
    js.create_stream(StreamConfig(name=name + "2", subjects=[f"{name}2.>"]))
    js.create_push_consumer(name + "2", _flow_consumer(name + "2"))

    async def both(_nc, njs):
        read = (await njs.stream_info(name + "_AGG")).config.sources
        theirs = TheirSource(
            name=name + "2", consumer=TheirConsumerSource(name="src", deliver_subject=f"deliver.{name}2")
        )
        await njs.add_stream(TheirStreamConfig(name=name + "_PY", sources=[theirs]))
        return read

    read = with_nats_py(nats_server.url, both)
    assert read == [TheirSource(name=name, consumer=TheirConsumerSource(name="src", deliver_subject=f"deliver.{name}"))]
    assert js.stream_info(name + "_PY").config.sources == [
        StreamSource(name=name + "2", consumer=StreamConsumerSource(name="src", deliver_subject=f"deliver.{name}2"))
    ]
    js.publish(f"{name}2.x", b"through nats-py's source")
    wait_until(lambda: _messages(js, name + "_PY") == 1, timeout=10)
