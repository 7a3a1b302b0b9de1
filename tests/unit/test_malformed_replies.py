"""Every reply the client decodes is checked where it is decoded (issue 26, items 7 and 9).

A broken or hostile server's reply is a typed :class:`ProtocolError` naming what was wrong, never a builtin
AttributeError, TypeError, OverflowError or RecursionError from deep inside, and never a value accepted as is.
"""

from __future__ import annotations

import json

import pytest

from jetstream_sync import ConsumerInfo, PubAck, StreamInfo, errors
from jetstream_sync._protocol import api_response
from jetstream_sync.jetstream.publish import parse_pub_ack

DEEP = b"[" * 100_000 + b"]" * 100_000


@pytest.mark.parametrize(
    "reply",
    [
        b'{"error":"boom"}',
        b'{"error":{"code":"abc"}}',
        b'{"error":[1]}',
        b'{"error":{"code":1e400}}',
        b'{"error":{"code":404,"err_code":true}}',
        b'{"error":{"code":404,"description":5}}',
        DEEP,
        b'{"a":' * 50_000 + b"1" + b"}" * 50_000,
        b"[]",
        b"not json",
    ],
)
def test_a_malformed_api_reply_is_a_protocol_error(reply):
    with pytest.raises(errors.ProtocolError):
        api_response(reply, "the test's reply")


def test_a_well_formed_error_is_still_the_typed_api_error():
    with pytest.raises(errors.StreamNotFoundError):
        api_response(b'{"error":{"code":404,"err_code":10059,"description":"stream not found"}}', "x")


@pytest.mark.parametrize(
    "reply",
    [
        b'{"stream":"S","seq":"abc"}',
        b'{"stream":"S","seq":-5}',
        b'{"stream":"S","seq":%d}' % 2**100,
        b'{"stream":"S","seq":1.5}',
        b'{"stream":"S","seq":true}',
        b'{"stream":5,"seq":1}',
        b'{"stream":"","seq":1}',
        b'{"stream":"S"}',
        b'{"stream":"S","seq":1,"duplicate":"yes"}',
        b'{"stream":"S","seq":1,"domain":7}',
        b'{"error":"boom"}',
        b'{"error":{"code":"abc"}}',
        DEEP,
    ],
)
def test_a_malformed_pub_ack_is_a_protocol_error(reply):
    with pytest.raises(errors.ProtocolError):
        parse_pub_ack(reply)


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        (b'{"stream":"S","seq":7}', PubAck(stream="S", seq=7)),
        (b'{"stream":"S","seq":7,"duplicate":true}', PubAck(stream="S", seq=7, duplicate=True)),
        (b'{"stream":"S","seq":18446744073709551615}', PubAck(stream="S", seq=2**64 - 1)),
        (b'{"stream":"S","seq":7,"domain":"hub"}', PubAck(stream="S", seq=7, domain="hub")),
    ],
)
def test_a_good_pub_ack_is_read(reply, expected):
    assert parse_pub_ack(reply) == expected


def stream_info(**config: object) -> dict[str, object]:
    return {
        "config": {"name": "S", "subjects": ["s.>"], **config},
        "created": "2026-11-26T00:00:00Z",
        "state": {"messages": 0, "bytes": 0, "first_seq": 0, "last_seq": 0, "consumer_count": 0},
    }


@pytest.mark.parametrize(
    ("config", "says"),
    [
        ({"max_age": "x"}, "StreamConfig.max_age"),
        ({"max_msgs": "many"}, "StreamConfig.max_msgs"),
        ({"max_msgs": 2**100}, "StreamConfig.max_msgs"),
        ({"subjects": "s.>"}, "StreamConfig.subjects"),
        ({"num_replicas": True}, "StreamConfig.num_replicas"),
        ({"placement": [1]}, "StreamConfig.placement"),
    ],
)
def test_a_stream_info_of_the_wrong_shape_names_the_field(config, says):
    with pytest.raises(errors.ProtocolError, match=says):
        StreamInfo.from_json(stream_info(**config))


def test_a_stream_info_of_the_right_shape_with_unknown_fields_is_read():
    info = StreamInfo.from_json(stream_info(max_age=10**9, some_future_field={"x": 1}))
    assert info.config.max_age == 1.0


def test_a_consumer_info_of_the_wrong_shape_names_the_field():
    reply = json.loads(
        '{"stream_name":"S","name":"C","created":"2026-11-26T00:00:00Z","config":{"ack_policy":"explicit"},'
        '"delivered":{"consumer_seq":"a","stream_seq":0},"ack_floor":{"consumer_seq":0,"stream_seq":0},'
        '"num_ack_pending":0,"num_redelivered":0,"num_waiting":0,"num_pending":0}'
    )
    with pytest.raises(errors.ProtocolError, match="consumer_seq"):
        ConsumerInfo.from_json(reply)


@pytest.mark.parametrize(
    ("err_code", "cls", "retried"),
    [
        (10226, errors.StreamReconfigureInProgressError, True),
        (10202, errors.ClusterMemberChangeError, True),
        (10225, errors.StreamIdentityMismatchError, False),
        (10219, errors.ConsumerConfigError, False),
        (10214, errors.StreamConfigError, False),
    ],
)
def test_server_2_15_error_codes_are_typed(err_code, cls, retried):
    """nats-server 2.15's new codes: typed, and the ones that pass by waiting retried like an election."""
    from jetstream_sync.jetstream.retry import is_transient_cluster_error

    exc = errors.api_error(400, err_code, "from the server")
    assert type(exc) is cls
    assert is_transient_cluster_error(exc) is retried
