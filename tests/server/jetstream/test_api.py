"""The JetStream layer's public edges: js.api for raw API requests, publish options, handles' contexts."""

from __future__ import annotations

import pytest

from jetstream_sync import ConsumerConfig, PublishOptions, errors


def test_raw_api_requests_get_typed_errors(js, stream):
    info = js.api.request(f"STREAM.INFO.{stream.name}")
    assert info["config"]["name"] == stream.name
    assert js.api.subject("INFO") == "$JS.API.INFO"
    with pytest.raises(errors.StreamNotFoundError):
        js.api.request("STREAM.INFO.NOPE")


def test_publish_takes_keywords_or_an_options_object(js, stream):
    subject = f"{stream.name}.a"
    assert js.publish(subject, b"1", msg_id="one").seq == 1
    assert js.publish(subject, b"1", options=PublishOptions(msg_id="one")).duplicate
    with pytest.raises(errors.WrongLastSequenceError):
        js.publish(subject, b"2", options=PublishOptions(expected_last_sequence=5))
    assert js.publish_async(subject, b"2", options=PublishOptions(expected_last_sequence=1)).result(5).seq == 2


def test_bad_publish_options_fail_before_sending(js, stream):
    sent = js.client.stats["out_msgs"]
    with pytest.raises(errors.InvalidArgumentError, match="is not a publish option") as info:
        js.publish(f"{stream.name}.a", b"x", msgid="x")
    assert info.value.field == "msgid"
    with pytest.raises(errors.InvalidArgumentError) as both:
        js.publish(f"{stream.name}.a", b"x", options=PublishOptions(), msg_id="x")
    assert both.value.field == "msg_id"
    with pytest.raises(errors.InvalidTypeError):
        js.publish_async(f"{stream.name}.a", b"x", options={"msg_id": "x"})
    assert js.client.stats["out_msgs"] == sent


def test_handles_know_their_context(js, stream):
    cons = stream.create_consumer(ConsumerConfig(durable_name="c"))
    assert stream.jetstream is js and cons.jetstream is js


def test_raw_headers_are_the_block_as_received(js, stream):
    js.publish(f"{stream.name}.a", b"x", headers={"K": "v"})
    cons = stream.create_consumer(ConsumerConfig(durable_name="c"))
    got = cons.next(5)
    assert got.raw_headers is not None and got.raw_headers.startswith(b"NATS/1.0\r\n")
    assert got.headers["K"] == "v"
