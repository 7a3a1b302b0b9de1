"""Wire helpers: PUB/HPUB encoding, statuses, ack payloads, pull requests, nanoseconds."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest

from jetstream_sync import _protocol as p
from jetstream_sync import errors


def test_pub_and_hpub_encoding():
    assert p.encode_pub(b"a.b", b"", None, b"hi") == b"PUB a.b 2\r\nhi\r\n"
    assert p.encode_pub(b"a.b", b"_INBOX.1", None, b"hi") == b"PUB a.b _INBOX.1 2\r\nhi\r\n"
    block = b"NATS/1.0\r\nK: v\r\n\r\n"
    assert p.encode_pub(b"a", b"r", block, b"xy") == b"HPUB a r %d %d\r\n%bxy\r\n" % (len(block), len(block) + 2, block)


def test_large_payloads_are_sent_as_parts_without_a_copy():
    payload = b"x" * (p.LARGE_PAYLOAD + 1)
    parts = p.encode_pub_parts(b"a", b"r", None, payload)
    assert isinstance(parts, tuple) and parts[1] is payload
    assert b"".join(parts) == p.encode_pub(b"a", b"r", None, payload)
    block = b"NATS/1.0\r\nK: v\r\n\r\n"
    assert b"".join(p.encode_pub_parts(b"a", b"", block, payload)) == p.encode_pub(b"a", b"", block, payload)
    assert p.encode_pub_parts(b"a", b"", None, b"small") == p.encode_pub(b"a", b"", None, b"small")


def test_statuses():
    assert p.status_of(b"NATS/1.0 408 Request Timeout\r\n\r\n") == (408, "Request Timeout")
    assert p.status_of(b"NATS/1.0\r\nK: v\r\n\r\n") == (None, "")
    assert p.status_of(None) == (None, "")
    assert p.is_no_responders(b"NATS/1.0 503\r\n\r\n")
    assert not p.is_no_responders(b"NATS/1.0 408\r\n\r\n") and not p.is_no_responders(None)
    block = b"NATS/1.0 408 Request Timeout\r\nNats-Pending-Messages: 7\r\nNats-Pending-Bytes: 900\r\n\r\n"
    assert p.pending_counts(block) == (7, 900)
    assert p.pending_counts(b"NATS/1.0 100 Idle Heartbeat\r\n\r\n") == (0, 0)


def test_pull_request_json_uses_nanoseconds_and_leaves_out_zeros():
    assert json.loads(p.pull_request(10, 30.0, heartbeat=15.0)) == {
        "batch": 10,
        "expires": 30_000_000_000,
        "idle_heartbeat": 15_000_000_000,
    }
    assert json.loads(p.pull_request(5, 0.0, no_wait=True)) == {"batch": 5, "no_wait": True}
    assert json.loads(p.pull_request(1_000_000, 1.5, max_bytes=1024)) == {
        "batch": 1_000_000,
        "expires": 1_500_000_000,
        "max_bytes": 1024,
    }


def test_ack_payloads():
    assert p.nak_payload(None) == b"-NAK"
    assert json.loads(p.nak_payload(2_000_000_000)[5:]) == {"delay": 2_000_000_000}
    assert p.term_payload(None) == b"+TERM"
    assert p.term_payload("bad data") == b"+TERM bad data"


def test_nanoseconds():
    assert p.nanos(1.5) == 1_500_000_000
    assert p.nanos(10**12) == 10**21  # large whole values stay exact
    assert p.seconds(2_500_000_000) == 2.5
    assert p.datetime_from_nanos(1_700_000_000_123_456_789) == datetime(
        2023, 11, 14, 22, 13, 20, 123456, tzinfo=timezone.utc
    )


def test_datetime_from_nanos_truncates_toward_the_past_like_fromtimestamp():
    """The epoch-plus-timedelta form equals fromtimestamp(seconds) with the microseconds truncated, negative
    times (before 1970) included."""
    for ns in (0, 1, 999, 1000, -1, -1000, -1001, 1_763_870_000_123_456_789, -86_400_000_000_123):
        whole, rest = divmod(ns, 1_000_000_000)
        expected = datetime.fromtimestamp(whole, tz=timezone.utc).replace(microsecond=rest // 1000)
        assert p.datetime_from_nanos(ns) == expected, ns


def test_stream_position_reads_v1_and_v2_ack_subjects():
    v1 = "$JS.ACK.KV_b.c.1.42.7.1763870000123456789.3"
    v2 = "$JS.ACK.hub.ACCHASH.KV_b.c.1.42.7.1763870000123456789.3.rnd"
    when = p.datetime_from_nanos(1763870000123456789)
    assert p.stream_position(v1) == (42, when, 3)
    assert p.stream_position(v2) == (42, when, 3)
    assert p.ack_fields(v2) == ("hub", ["KV_b", "c", "1", "42", "7", "1763870000123456789", "3"])
    assert p.ack_fields("$JS.ACK._.H.S.C.1.2.3.4.5")[0] is None


@pytest.mark.parametrize("reply", ["_INBOX.x.y", "$JS.ACK.a.b.c", "$JS.ACK.KV_b.c.1.x.7.1763870000123456789.3"])
def test_stream_position_refuses_what_is_not_an_ack_subject(reply):
    with pytest.raises(errors.InvalidAckSubjectError):
        p.stream_position(reply)
