"""The typed err_codes as a real nats-server sends them: the refusal a caller meets arrives as its class.

The table itself is checked against the server's errors.json in tests/unit/test_api_codes.py; here, one refusal
of each new kind is provoked for real, so a code the server stopped sending (or sends for something else) shows.
"""

from __future__ import annotations

import pytest

from jetstream_sync import AckPolicy, ConsumerConfig, PublishOptions, RetentionPolicy, StreamConfig, errors


def test_a_publish_to_another_stream_than_expected_is_an_expected_stream_mismatch(js, stream):
    with pytest.raises(errors.ExpectedStreamMismatchError) as caught:
        js.publish(f"{stream.name}.a", b"x", expected_stream="OTHER")
    assert caught.value.err_code == 10060
    assert stream.info().state.messages == 0


def test_a_sealed_stream_refuses_writes_with_stream_sealed_and_still_reads(js, name):
    js.create_stream(StreamConfig(name=name, subjects=[f"{name}.>"]))
    js.publish(f"{name}.a", b"kept")
    js.update_stream(StreamConfig(name=name, subjects=[f"{name}.>"], sealed=True))
    sealed = js.stream(name)
    for write in (lambda: js.publish(f"{name}.a", b"x"), lambda: sealed.delete_msg(1), sealed.purge):
        with pytest.raises(errors.StreamSealedError) as caught:
            write()
        assert caught.value.err_code == 10109
    assert sealed.get_msg(1).data == b"kept"


def test_a_ttl_on_a_stream_without_allow_msg_ttl_is_a_message_ttl_error(js, stream):
    with pytest.raises(errors.MessageTTLError) as caught:
        js.publish(f"{stream.name}.a", b"x", options=PublishOptions(ttl=60))
    assert caught.value.err_code == 10166


def test_counter_refusals_are_counter_errors(js, name):
    js.create_stream(StreamConfig(name=name, subjects=[f"{name}.>"], allow_msg_counter=True))
    with pytest.raises(errors.CounterError) as caught:  # a plain publish to a counter stream
        js.publish(f"{name}.hits", b"1")
    assert caught.value.err_code == 10169
    js.create_stream(StreamConfig(name=f"{name}_PLAIN", subjects=[f"{name}_plain.>"]))
    with pytest.raises(errors.CounterError) as caught:  # an increment to a stream without counters
        js.publish(f"{name}_plain.hits", b"", headers={"Nats-Incr": "+1"})
    assert caught.value.err_code == 10168
    assert js.counter(name).add(f"{name}.hits", 2) == 2  # the counter itself still works


def test_deleting_a_message_deleted_already_is_message_not_found(stream, js):
    for _ in range(3):
        js.publish(f"{stream.name}.a", b"x")
    stream.delete_msg(2)
    with pytest.raises(errors.MessageNotFoundError) as caught:
        stream.delete_msg(2)
    assert caught.value.err_code == 10043  # "sequence 2 not found"
    # Below the first sequence or past the last, a file store answers 10057 ("no message found", "stream store
    # EOF"), the code of any failed delete, store failures included: left a plain APIError.
    with pytest.raises(errors.APIError) as caught:
        stream.delete_msg(99)
    assert type(caught.value) is errors.APIError and caught.value.err_code == 10057


def test_a_consumer_the_stream_cannot_take_is_a_consumer_config_error(js, name):
    js.create_stream(StreamConfig(name=name, subjects=[f"{name}.>"], retention=RetentionPolicy.WORK_QUEUE))
    js.create_consumer(name, ConsumerConfig(durable_name="first", ack_policy=AckPolicy.EXPLICIT))
    with pytest.raises(errors.ConsumerConfigError) as caught:
        js.create_consumer(name, ConsumerConfig(durable_name="second", ack_policy=AckPolicy.EXPLICIT))
    assert caught.value.err_code == 10099  # multiple non-filtered consumers not allowed on workqueue stream


def test_a_stream_that_overlaps_another_is_a_stream_config_error(js, stream, name):
    with pytest.raises(errors.StreamConfigError) as caught:
        js.create_stream(StreamConfig(name=f"{name}_2", subjects=[f"{stream.name}.a"]))
    assert caught.value.err_code == 10065


def test_a_consumer_past_the_streams_max_consumers_is_a_resource_limit_error(js, name):
    js.create_stream(StreamConfig(name=name, subjects=[f"{name}.>"], max_consumers=1))
    js.create_consumer(name, ConsumerConfig(durable_name="one"))
    with pytest.raises(errors.ResourceLimitError) as caught:
        js.create_consumer(name, ConsumerConfig(durable_name="two"))
    assert caught.value.err_code == 10026
