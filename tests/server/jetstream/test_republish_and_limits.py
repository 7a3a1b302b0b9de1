"""A stream's RePublish and StreamConsumerLimits against a real server: what is republished (and with which
headers), what a consumer inherits or is refused, the cycle rule checked before sending, and both types read and
written by nats-py (the other Python client) on the same server."""

from __future__ import annotations

import pytest

from jetstream_sync import (
    ConsumerConfig,
    RePublish,
    StreamConfig,
    StreamConsumerLimits,
    errors,
)
from tests.server.jetstream.kv.kvhelpers import with_nats_py


def test_stored_messages_are_republished(client, js, name):
    js.create_stream(
        StreamConfig(
            name=name, subjects=[f"{name}.>"], republish=RePublish(src=f"{name}.orders.>", dest=f"out.{name}.>")
        )
    )
    sub = client.subscribe(f"out.{name}.>")
    client.flush()
    js.publish(f"{name}.orders.eu", b"first")
    js.publish(f"{name}.other", b"not matching src")
    js.publish(f"{name}.orders.eu", b"second")
    first, second = sub.next_msg(5), sub.next_msg(5)
    assert (first.subject, first.data, second.data) == (f"out.{name}.eu", b"first", b"second")  # src mapped
    assert first.headers["Nats-Stream"] == name
    assert (first.headers["Nats-Sequence"], second.headers["Nats-Sequence"]) == ("1", "3")
    assert second.headers["Nats-Last-Sequence"] == "1"  # the previous message on that subject
    with pytest.raises(errors.TimeoutError):
        sub.next_msg(0.2)  # nothing else: the other subject is not republished


def test_headers_only_republishes_the_size_not_the_payload(client, js, name):
    stream = js.create_stream(StreamConfig(name=name, subjects=[f"{name}.>"]))
    updated = js.update_stream(
        StreamConfig(name=name, subjects=[f"{name}.>"], republish=RePublish(dest=f"out.{name}.>", headers_only=True))
    )
    assert updated.cached_info.config.republish == RePublish(src=">", dest=f"out.{name}.>", headers_only=True)
    sub = client.subscribe(f"out.{name}.>")
    client.flush()
    js.publish(f"{name}.big", b"x" * 1000)
    msg = sub.next_msg(5)
    assert (msg.data, msg.headers["Nats-Msg-Size"]) == (b"", "1000")
    assert stream.info().config.republish == updated.cached_info.config.republish


def test_a_republish_into_the_streams_own_subjects_is_refused_before_sending(js, name):
    with pytest.raises(errors.InvalidArgumentError, match="overlaps the stream's subject") as info:
        StreamConfig(name=name, subjects=[f"{name}.>"], republish=RePublish(dest=f"{name}.copy.>"))
    assert info.value.field == "republish"
    # the rule is the server's: the same config sent past the check is refused there
    body = {"name": name, "subjects": [f"{name}.>"], "republish": {"src": ">", "dest": f"{name}.copy.>"}}
    with pytest.raises(errors.StreamConfigError, match="cycle"):
        js.api.request(f"STREAM.CREATE.{name}", body)
    assert list(js.stream_names(f"{name}.>")) == []


def test_consumers_take_the_streams_limits(js, name):
    limits = StreamConsumerLimits(inactive_threshold=30, max_ack_pending=5)
    stream = js.create_stream(StreamConfig(name=name, subjects=[f"{name}.>"], consumer_limits=limits))
    assert stream.cached_info.config.consumer_limits == limits
    inherited = stream.create_consumer(ConsumerConfig(durable_name="plain")).cached_info.config
    assert (inherited.max_ack_pending, inherited.inactive_threshold) == (5, 30.0)
    smaller = stream.create_consumer(ConsumerConfig(name="small", max_ack_pending=2, inactive_threshold=10))
    assert smaller.cached_info.config.max_ack_pending == 2
    with pytest.raises(errors.ConsumerConfigError):
        stream.create_consumer(ConsumerConfig(durable_name="greedy", max_ack_pending=10))
    with pytest.raises(errors.ConsumerConfigError):
        stream.create_consumer(ConsumerConfig(name="lazy", inactive_threshold=60))
    assert sorted(stream.consumer_names()) == ["plain", "small"]


def test_nats_py_reads_ours_and_we_read_theirs(nats_server, js, name):
    from nats.js.api import RePublish as TheirRePublish
    from nats.js.api import StreamConfig as TheirStreamConfig
    from nats.js.api import StreamConsumerLimits as TheirLimits

    ours = js.create_stream(
        StreamConfig(
            name=name,
            subjects=[f"{name}.>"],
            republish=RePublish(src=f"{name}.a.*", dest=f"out.{name}.$1", headers_only=True),
            consumer_limits=StreamConsumerLimits(inactive_threshold=30, max_ack_pending=50),
        )
    )

    async def both(_nc, njs):
        read = (await njs.stream_info(name)).config
        await njs.add_stream(
            TheirStreamConfig(
                name=name + "PY",
                subjects=[f"{name}py.>"],
                republish=TheirRePublish(src=f"{name}py.>", dest=f"outpy.{name}.>"),
                consumer_limits=TheirLimits(inactive_threshold=5.0, max_ack_pending=7),
            )
        )
        return read.republish, read.consumer_limits

    their_republish, their_limits = with_nats_py(nats_server.url, both)
    assert their_republish == TheirRePublish(src=f"{name}.a.*", dest=f"out.{name}.$1", headers_only=True)
    assert their_limits == TheirLimits(inactive_threshold=30.0, max_ack_pending=50)
    theirs = js.stream_info(name + "PY").config
    assert theirs.republish == RePublish(src=f"{name}py.>", dest=f"outpy.{name}.>")
    assert theirs.consumer_limits == StreamConsumerLimits(inactive_threshold=5.0, max_ack_pending=7)
    # and ours goes back to the server unchanged
    assert js.update_stream(ours.cached_info.config).cached_info.config == ours.cached_info.config
