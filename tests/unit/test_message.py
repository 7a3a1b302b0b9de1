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


ACK_REPLY = f"$JS.ACK.ORDERS.dispatch.1.10.5.{TS}.7"


class _Acks:
    """An AckSender that records what it is asked to send (what the protocol says tests may pass)."""

    default_timeout = 3.0

    def __init__(self) -> None:
        self.sent: list[tuple[str, bytes]] = []

    def send_ack(self, subject: str, payload: bytes) -> None:
        self.sent.append((subject, payload))

    def request_ack(self, subject: str, payload: bytes, timeout: float) -> None:
        self.sent.append((subject, payload))


class _PullingAcks(_Acks):
    """An AckNextSender: records the pull ack_next asks it to build, and refuses one when told to."""

    def __init__(self, refuse: bool = False) -> None:
        super().__init__()
        self.refuse = refuse
        self.built: list[tuple[Msg, int, float, int | None, bool]] = []
        self.started = 0

    def ack_next(self, msg: Msg, batch: int, expires: float, max_bytes: int | None, plain: bool) -> object:
        if self.refuse:
            raise errors.InvalidArgumentError("max_messages", "refused by the test")
        self.built.append((msg, batch, expires, max_bytes, plain))

        def send() -> str:
            self.started += 1
            return "the batch"

        return send


def test_ack_next_needs_a_sender_that_can_start_a_pull():
    acks = _Acks()
    msg = Msg("orders.new", ACK_REPLY, b"", None, acks)
    with pytest.raises(errors.InvalidAckSubjectError, match="this client's consumers"):
        msg.ack_next()
    assert not msg.is_acked and acks.sent == []  # refused before anything was sent: it can still be acked
    msg.ack()
    assert acks.sent == [(ACK_REPLY, b"+ACK")]


def test_ack_next_goes_through_the_ack_sender_and_marks_the_message_acked_once_sent():
    acks = _PullingAcks()
    msg = Msg("orders.new", ACK_REPLY, b"", None, acks)
    assert msg.ack_next(3, expires=2, max_bytes=1024) == "the batch"
    assert acks.built == [(msg, 3, 2.0, 1024, False)] and acks.started == 1
    assert msg.is_acked
    with pytest.raises(errors.InvalidAckSubjectError, match="already acknowledged"):
        msg.ack_next()

    plain = Msg("orders.new", ACK_REPLY, b"", None, acks)
    plain.ack_next(expires=None)
    assert acks.built[-1][1:] == (1, acks.default_timeout, None, True)  # +NXT <batch>: the client's timeout


def test_ack_next_refused_while_building_leaves_the_message_unacked():
    acks = _PullingAcks(refuse=True)
    msg = Msg("orders.new", ACK_REPLY, b"", None, acks)
    with pytest.raises(errors.InvalidArgumentError, match="refused by the test"):
        msg.ack_next()
    with pytest.raises(errors.InvalidAckSubjectError, match="max_bytes needs the JSON form"):
        msg.ack_next(expires=None, max_bytes=10)
    assert not msg.is_acked and acks.started == 0
