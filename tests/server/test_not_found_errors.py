"""Not-found errors name what was not found and say how to create it: the server says only "stream not found"
(err_code 10059) or "consumer not found" (10014); the client knows the name it asked for. The classes and their
attributes (code, err_code, description) stay what users catch; the names are new attributes."""

from __future__ import annotations

import pickle
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import jetstream_sync
from jetstream_sync import errors
from jetstream_sync.models import ConsumerConfig, StreamConfig


@pytest.fixture(scope="module")
def js(nats_server) -> Iterator[Any]:
    with jetstream_sync.connect(nats_server.url) as nc:
        js = nc.jetstream()
        js.create_or_update_stream(StreamConfig(name="HERE", subjects=["here.>"]))
        yield js


MISSING_STREAM: dict[str, Callable[[Any], object]] = {
    "stream": lambda js: js.stream("ORDERS"),
    "stream_info": lambda js: js.stream_info("ORDERS"),
    "update_stream": lambda js: js.update_stream(StreamConfig(name="ORDERS", subjects=["orders.>"])),
    "delete_stream": lambda js: js.delete_stream("ORDERS"),
    "consumer": lambda js: js.consumer("ORDERS", "worker"),
    "create_consumer": lambda js: js.create_consumer("ORDERS", ConsumerConfig(durable_name="worker")),
}


@pytest.mark.parametrize("call", list(MISSING_STREAM))
def test_a_missing_stream_is_named_with_how_to_create_it(js, call):
    with pytest.raises(errors.StreamNotFoundError) as info:
        MISSING_STREAM[call](js)
    error = info.value
    assert type(error) is errors.StreamNotFoundError
    assert (error.stream, error.code, error.err_code, error.description) == ("ORDERS", 404, 10059, "stream not found")
    assert str(error).startswith(
        "stream 'ORDERS' not found; create it with js.create_stream(StreamConfig(name='ORDERS', subjects=[...]))"
    ), str(error)
    copy = pickle.loads(pickle.dumps(error))
    assert (str(copy), copy.stream) == (str(error), error.stream)


MISSING_CONSUMER: dict[str, Callable[[Any], object]] = {
    "js.consumer": lambda js: js.consumer("HERE", "worker"),
    "stream.consumer": lambda js: js.stream("HERE").consumer("worker"),
    "consumer_info": lambda js: js.consumer_info("HERE", "worker"),
    "delete_consumer": lambda js: js.delete_consumer("HERE", "worker"),
    "update_consumer": lambda js: js.update_consumer("HERE", ConsumerConfig(durable_name="worker")),
    "push_consumer": lambda js: js.push_consumer("HERE", "worker"),
    "pull_subscribe bind": lambda js: js.pull_subscribe("here.>", durable="worker", bind=True, stream="HERE"),
    "subscribe bind": lambda js: js.subscribe("here.>", durable="worker", bind=True, stream="HERE"),
}


#: what binds to a push consumer says how to create one (a consumer made as the pull hint says would then fail
#: with PushSubscribeRequiredError)
PUSH_CALLS = {"push_consumer", "subscribe bind"}


@pytest.mark.parametrize("call", list(MISSING_CONSUMER))
def test_a_missing_consumer_is_named_with_how_to_create_it(js, call):
    with pytest.raises(errors.ConsumerNotFoundError) as info:
        MISSING_CONSUMER[call](js)
    error = info.value
    assert (error.stream, error.consumer, error.err_code in (10014, 10149)) == ("HERE", "worker", True)
    how = (
        "js.create_push_consumer('HERE', ConsumerConfig(durable_name='worker', deliver_subject=...))"
        if call in PUSH_CALLS
        else "js.create_consumer('HERE', ConsumerConfig(durable_name='worker'))"
    )
    assert str(error).startswith(f"consumer 'worker' not found on stream 'HERE'; create it with {how}"), str(error)
    copy = pickle.loads(pickle.dumps(error))
    assert (str(copy), copy.stream, copy.consumer) == (str(error), "HERE", "worker")


def test_a_consume_whose_consumer_is_deleted_ends_naming_it(js):
    consumer = js.create_consumer("HERE", ConsumerConfig(durable_name="gone"))
    js.delete_consumer("HERE", "gone")
    with pytest.raises(errors.ConsumerNotFoundError) as info:
        consumer.next(timeout=2)
    assert (info.value.stream, info.value.consumer) == ("HERE", "gone"), str(info.value)
    assert "create it with js.create_consumer('HERE'" in str(info.value)


BUCKETS: dict[str, tuple[Callable[[Any], object], str]] = {
    "key_value": (lambda js: js.key_value("settings"), "js.create_key_value(KeyValueConfig(bucket='settings'))"),
    "delete_key_value": (
        lambda js: js.delete_key_value("settings"),
        "js.create_key_value(KeyValueConfig(bucket='settings'))",
    ),
    "object_store": (
        lambda js: js.object_store("settings"),
        "js.create_object_store(ObjectStoreConfig(bucket='settings'))",
    ),
    "delete_object_store": (
        lambda js: js.delete_object_store("settings"),
        "js.create_object_store(ObjectStoreConfig(bucket='settings'))",
    ),
}


@pytest.mark.parametrize("call", list(BUCKETS))
def test_a_missing_bucket_is_named_with_the_call_of_its_store(js, call):
    do, how = BUCKETS[call]
    with pytest.raises(errors.BucketNotFoundError) as info:
        do(js)
    error = info.value
    assert isinstance(error, (errors.KeyValueError, errors.StreamNotFoundError, errors.ObjectStoreError))
    assert error.bucket == "settings" and error.stream in ("KV_settings", "OBJ_settings")
    assert str(error).startswith(f"bucket 'settings' not found; create it with {how}"), str(error)
    copy = pickle.loads(pickle.dumps(error))
    assert (str(copy), copy.bucket) == (str(error), "settings")


def test_a_deleted_bucket_is_named_by_the_handle_that_held_it(js):
    from jetstream_sync.models import KeyValueConfig

    kv = js.create_key_value(KeyValueConfig(bucket="shortlived"))
    js.delete_key_value("shortlived")
    with pytest.raises(errors.BucketNotFoundError) as info:
        kv.put("k", b"v")
    assert info.value.bucket == "shortlived", str(info.value)
    assert "js.create_key_value(KeyValueConfig(bucket='shortlived'))" in str(info.value)


def test_a_subject_no_stream_captures_says_to_make_one(js):
    with pytest.raises(errors.StreamNotFoundError) as info:
        js.find_stream_name("nowhere.1")
    assert info.value.stream is None
    assert "no stream captures subject 'nowhere.1'" in str(info.value)
    assert "subjects=['nowhere.1']" in str(info.value)


MISSING_MESSAGE: dict[str, tuple[Callable[[Any], object], str, int | None, str | None]] = {
    "by sequence": (lambda s: s.get_msg(99), "at sequence 99", 99, None),
    "by subject from a sequence": (
        lambda s: s.get_msg(2, subject="here.none"),
        "on subject 'here.none' at or after sequence 2",
        2,
        "here.none",
    ),
    "last on a subject": (lambda s: s.get_last_msg("here.none"), "on subject 'here.none'", None, "here.none"),
}


@pytest.mark.parametrize("direct", [False, True], ids=["leader", "direct"])
@pytest.mark.parametrize("case", list(MISSING_MESSAGE))
def test_a_missing_message_names_the_stream_and_what_was_asked(js, case, direct):
    # The server says only "no message found"; the reader of a log line needs the stream and the sequence.
    js.create_or_update_stream(StreamConfig(name="HERE", subjects=["here.>"], allow_direct=direct))
    js.publish("here.one", b"1")
    read, what, sequence, subject = MISSING_MESSAGE[case]
    with pytest.raises(errors.MessageNotFoundError) as info:
        read(js.stream("HERE"))
    error = info.value
    assert str(error).startswith(f"no message in stream 'HERE' {what} (")
    assert (error.stream, error.sequence, error.subject) == ("HERE", sequence, subject)
    assert error.code == 404
    copy = pickle.loads(pickle.dumps(error))
    assert (str(copy), copy.sequence, copy.subject) == (str(error), sequence, subject)
