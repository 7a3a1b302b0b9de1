"""PublishOptions: the stream-side checks of a publish, defined once, sent as Nats-* headers."""

from __future__ import annotations

import pytest

from jetstream_sync import PublishOptions, errors


def test_no_options_send_no_headers():
    assert PublishOptions().headers() == []


def test_each_check_becomes_its_header():
    opts = PublishOptions(
        msg_id="m1",
        expected_stream="S",
        expected_last_sequence=0,
        expected_last_subject_sequence=7,
        expected_last_msg_id="m0",
    )
    assert dict(opts.headers()) == {
        b"Nats-Msg-Id": b"m1",
        b"Nats-Expected-Stream": b"S",
        b"Nats-Expected-Last-Msg-Id": b"m0",
        b"Nats-Expected-Last-Sequence": b"0",
        b"Nats-Expected-Last-Subject-Sequence": b"7",
    }


@pytest.mark.parametrize(
    ("kwargs", "error", "field"),
    [
        ({"msg_id": ""}, errors.InvalidArgumentError, "msg_id"),
        ({"msg_id": "a\r\nb"}, errors.InvalidArgumentError, "msg_id"),
        ({"msg_id": 5}, errors.InvalidTypeError, "msg_id"),
        ({"expected_stream": "x\ny"}, errors.InvalidArgumentError, "expected_stream"),
        ({"expected_last_sequence": -1}, errors.InvalidArgumentError, "expected_last_sequence"),
        ({"expected_last_subject_sequence": "3"}, errors.InvalidTypeError, "expected_last_subject_sequence"),
        ({"expected_last_msg_id": b"id"}, errors.InvalidTypeError, "expected_last_msg_id"),
    ],
)
def test_bad_checks_raise_typed_errors(kwargs, error, field):
    with pytest.raises(error) as info:
        PublishOptions(**kwargs)
    assert info.value.field == field


def test_a_trace_destination_is_its_header():
    assert PublishOptions(trace_dest="trace.orders").headers() == [(b"Nats-Trace-Dest", b"trace.orders")]


@pytest.mark.parametrize(
    ("value", "error"),
    [("trace.*", errors.InvalidArgumentError), ("", errors.InvalidArgumentError), (b"t", errors.InvalidTypeError)],
)
def test_a_trace_destination_is_one_subject(value, error):
    with pytest.raises(error) as info:
        PublishOptions(trace_dest=value)
    assert info.value.field == "trace_dest"
