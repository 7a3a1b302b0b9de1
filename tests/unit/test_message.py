"""Messages without a server: ADR-15 metadata parsing, the size the server counts, acks refused where impossible."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from jetstream_sync import Msg, MsgMetadata, SequencePair, errors

TS = 1_700_000_000_123_456_789


def test_v1_ack_subject():
    meta = MsgMetadata.parse(f"$JS.ACK.ORDERS.dispatch.2.10.5.{TS}.7")
    assert meta == MsgMetadata(
        stream="ORDERS",
        consumer="dispatch",
        num_delivered=2,
        sequence=SequencePair(consumer=5, stream=10),
        timestamp=datetime(2023, 11, 14, 22, 13, 20, 123456, tzinfo=timezone.utc),
        num_pending=7,
        domain=None,
    )
    # the field names of nats-py's Metadata; the flat names of earlier releases stay as aliases
    assert (meta.sequence.stream, meta.sequence.consumer) == (10, 5)
    assert (meta.stream_sequence, meta.consumer_sequence) == (10, 5)


@pytest.mark.parametrize(("domain_token", "domain"), [("_", None), ("hub", "hub")])
def test_v2_ack_subject_with_extra_tokens(domain_token, domain):
    meta = MsgMetadata.parse(f"$JS.ACK.{domain_token}.ACCHASH.ORDERS.dispatch.1.3.2.{TS}.0.random.future")
    assert (meta.domain, meta.stream, meta.consumer, meta.sequence.stream, meta.sequence.consumer) == (
        domain,
        "ORDERS",
        "dispatch",
        3,
        2,
    )


@pytest.mark.parametrize(
    "reply",
    [
        "",
        "_INBOX.abc",
        "$JS.ACK.ORDERS.dispatch.1.2.3",  # too few tokens
        "$JS.ACK.a.b.ORDERS.dispatch.1.2.3.4",  # 10 tokens
        "$JS.ACK.ORDERS.dispatch.x.2.3.4.5",  # non-numeric
    ],
)
def test_malformed_ack_subjects_raise(reply):
    with pytest.raises(errors.InvalidAckSubjectError):
        MsgMetadata.parse(reply)
    msg = Msg("s", reply, b"", None, None)
    with pytest.raises(errors.InvalidAckSubjectError):
        msg.ack()


def test_size_follows_the_server_formula():
    hdr = b"NATS/1.0\r\nA: b\r\n\r\n"
    msg = Msg("orders.new", "$JS.ACK.S.C.1.1.1.1.0", b"12345", hdr, None)
    assert msg.size == len("orders.new") + len("$JS.ACK.S.C.1.1.1.1.0") + len(hdr) + 5
