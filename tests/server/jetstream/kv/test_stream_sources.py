"""A bucket whose sources are streams that are not buckets, against a real server: their messages, renamed by
the source's transforms, become the bucket's keys; nats-py reads that bucket and its stream config as we made
them. Also a bucket fed through a durable consumer (ADR-60)."""

from __future__ import annotations

import pytest

from jetstream_sync import (
    AckPolicy,
    ConsumerConfig,
    KeyValueOp,
    RetentionPolicy,
    StreamConfig,
    StreamConsumerSource,
    StreamSource,
    SubjectTransform,
    errors,
)
from tests.helpers import wait_until
from tests.server.jetstream.kv.kvhelpers import bucket, readable, with_nats_py


def _orders_source(name: str, bucket_name: str) -> StreamSource:
    """The stream ``name`` (orders.<id>.status), each order's status a key ``<id>`` of the bucket."""
    transform = SubjectTransform(src=f"{name}.orders.*.status", dest=f"$KV.{bucket_name}.{{{{wildcard(1)}}}}")
    return StreamSource(name=name, subject_transforms=[transform])


def test_a_stream_that_is_not_a_bucket_feeds_the_buckets_keys(nats_server, js, name):
    js.create_stream(StreamConfig(name=name, subjects=[f"{name}.orders.>"]))
    js.publish(f"{name}.orders.1.status", b"new")
    js.publish(f"{name}.orders.2.status", b"new")
    js.publish(f"{name}.orders.1.lines", b"not a status: not taken")
    kv = bucket(js, name.lower(), history=5, sources=[_orders_source(name, name.lower())])
    sources = js.stream_info(kv.stream_name).config.sources
    assert sources == [_orders_source(name, name.lower())]  # by its own name, not KV_<name>
    wait_until(lambda: readable(kv, "1", b"new") and readable(kv, "2", b"new"), timeout=10)
    js.publish(f"{name}.orders.1.status", b"shipped")  # later changes follow
    wait_until(lambda: readable(kv, "1", b"shipped"), timeout=10)
    assert sorted(kv.keys()) == ["1", "2"]
    assert [(e.value, e.operation) for e in kv.history("1")] == [(b"new", KeyValueOp.PUT), (b"shipped", KeyValueOp.PUT)]
    kv.put("3", b"own")  # the bucket takes its own writes too
    assert sorted(kv.keys()) == ["1", "2", "3"]

    async def read(_nc, njs):
        theirs = await njs.key_value(name.lower())
        entry = await theirs.get("1")
        info = await njs.stream_info(kv.stream_name)
        return entry.value, info.config.sources

    value, their_sources = with_nats_py(nats_server.url, read)
    assert value == b"shipped"
    assert [(s.name, [(t.src, t.dest) for t in s.subject_transforms]) for s in their_sources] == [
        (name, [(f"{name}.orders.*.status", f"$KV.{name.lower()}.{{{{wildcard(1)}}}}")])
    ]


def test_a_transform_outside_the_buckets_keys_is_refused_before_sending(js, name):
    wrong = StreamSource(name=name, subject_transforms=[SubjectTransform(src=f"{name}.>", dest=f"elsewhere.{name}.>")])
    with pytest.raises(errors.InvalidArgumentError, match="no key of bucket") as info:
        bucket(js, name.lower(), sources=[wrong])
    assert info.value.field == "sources"
    assert list(js.key_value_store_names()) == []


def test_a_bucket_fed_through_a_durable_consumer(js, name):
    """A work queue of key updates, drained into the bucket by the server through a consumer made for it."""
    wq = js.create_stream(StreamConfig(name=name, subjects=[f"{name}.set.>"], retention=RetentionPolicy.WORK_QUEUE))
    wq.create_push_consumer(
        ConsumerConfig(durable_name="kv", deliver_subject=f"deliver.{name}", ack_policy=AckPolicy.FLOW_CONTROL)
    )
    source = StreamSource(
        name=name,
        consumer=StreamConsumerSource(name="kv", deliver_subject=f"deliver.{name}"),
        subject_transforms=[SubjectTransform(src=f"{name}.set.>", dest=f"$KV.{name.lower()}.>")],
    )
    kv = bucket(js, name.lower(), sources=[source])
    js.publish(f"{name}.set.color", b"blue")
    wait_until(lambda: readable(kv, "color", b"blue"), timeout=10)
    wait_until(lambda: wq.info().state.messages == 0, timeout=10)  # acknowledged through flow control
