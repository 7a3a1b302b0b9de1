"""Messages: ADR-15 metadata parsing, and every ack type against a real server."""

from __future__ import annotations

import time

import pytest

from jetstream_sync import AckPolicy, ConsumerConfig, errors
from tests.helpers import pull, wait_until


@pytest.fixture
def explicit(stream):
    return stream.create_consumer(ConsumerConfig(durable_name="c", ack_wait=1.0, max_deliver=10))


def publish_n(js, stream, n):
    for i in range(n):
        js.publish(f"{stream.name}.m", b"%d" % i)


def test_metadata_of_a_delivered_message(js, client, stream, explicit):
    publish_n(js, stream, 2)
    _, second = pull(client, stream.name, "c", 2)
    meta = second.metadata
    assert (meta.stream, meta.consumer, meta.sequence.stream, meta.sequence.consumer) == (stream.name, "c", 2, 2)
    assert meta.num_delivered == 1 and meta.num_pending == 0
    assert abs(meta.timestamp.timestamp() - time.time()) < 60


def test_ack_removes_from_pending_and_repeats_do_nothing(js, client, stream, explicit):
    publish_n(js, stream, 1)
    (msg,) = pull(client, stream.name, "c", 1)
    msg.ack()
    assert msg.is_acked
    msg.ack()
    msg.nak()  # after a terminal ack nothing more is sent
    client.flush()
    wait_until(lambda: explicit.info().num_ack_pending == 0)
    assert explicit.info().num_redelivered == 0
    assert pull(client, stream.name, "c", 1, expires=1.2) == []


def test_ack_sync_waits_for_the_server(js, client, stream, explicit):
    publish_n(js, stream, 1)
    (msg,) = pull(client, stream.name, "c", 1)
    msg.ack_sync(timeout=2)
    assert explicit.info().ack_floor.stream_seq == 1


def test_nak_redelivers_and_nak_delay_waits(js, client, stream, explicit):
    publish_n(js, stream, 1)
    (msg,) = pull(client, stream.name, "c", 1)
    msg.nak()
    (again,) = pull(client, stream.name, "c", 1)
    assert again.metadata.num_delivered == 2
    started = time.monotonic()
    again.nak(delay=0.5)
    (third,) = pull(client, stream.name, "c", 1, expires=3)
    assert time.monotonic() - started >= 0.45
    assert third.metadata.num_delivered == 3
    third.ack()


def test_term_stops_redelivery(js, client, stream, explicit):
    publish_n(js, stream, 1)
    (msg,) = pull(client, stream.name, "c", 1)
    msg.term(reason="poison")
    assert pull(client, stream.name, "c", 1, expires=1.5) == []  # ack_wait is 1 s: a nak'd one would be back


def test_in_progress_extends_ack_wait(js, client, stream, explicit):
    publish_n(js, stream, 1)
    (msg,) = pull(client, stream.name, "c", 1)
    deadline = time.monotonic() + 2.0  # twice the ack wait
    while time.monotonic() < deadline:
        msg.in_progress()
        client.flush()
        assert pull(client, stream.name, "c", 1, expires=0.3) == []
    msg.ack_sync()
    assert explicit.info().num_redelivered == 0


def test_ack_all_acknowledges_earlier_messages(js, client, stream):
    cons = stream.create_consumer(ConsumerConfig(durable_name="all", ack_policy=AckPolicy.ALL))
    publish_n(js, stream, 5)
    msgs = pull(client, stream.name, "all", 5)
    msgs[-1].ack_sync()
    info = cons.info()
    assert info.num_ack_pending == 0
    assert info.ack_floor.stream_seq == 5


def test_bad_ack_arguments(js, client, stream, explicit):
    publish_n(js, stream, 1)
    (msg,) = pull(client, stream.name, "c", 1)
    with pytest.raises(ValueError):
        msg.nak(delay=-1)
    with pytest.raises(TypeError):
        msg.nak(delay="later")
    with pytest.raises(ValueError):
        msg.ack_sync(timeout=0)
    with pytest.raises(errors.InvalidTypeError, match="reason"):
        msg.term(reason=5)
    with pytest.raises(errors.InvalidArgumentError, match="reason"):
        msg.term(reason="two\r\nlines")
    with pytest.raises(errors.InvalidArgumentError, match="reason"):
        msg.term(reason="\udc80")
    assert not msg.is_acked
    msg.ack_sync()


def test_core_message_cannot_be_acked(client):
    sub = client.subscribe("plain")
    client.publish("plain", b"", reply="some.reply")
    msg = sub.next_msg(2)
    with pytest.raises(errors.InvalidAckSubjectError):
        msg.ack()
    with pytest.raises(errors.InvalidAckSubjectError):
        _ = msg.metadata


def test_an_ack_that_could_not_be_sent_leaves_the_message_unacked(nats_server, js, stream, explicit):
    """ADR-15: the terminal mark comes after a successful send; a later ack_sync then really acks."""
    import jetstream_sync

    publish_n(js, stream, 1)
    other = jetstream_sync.connect(nats_server.url)
    (msg,) = pull(other, stream.name, "c", 1)
    other.close()
    with pytest.raises(errors.ConnectionClosedError):
        msg.ack()
    assert not msg.is_acked
    with pytest.raises(errors.ConnectionClosedError):
        msg.ack_sync()  # asks, since nothing was acknowledged: and the client is closed
    assert explicit.info().num_ack_pending == 1


def test_ack_sync_after_ack_confirms_with_the_server(js, client, stream, explicit):
    publish_n(js, stream, 1)
    (msg,) = pull(client, stream.name, "c", 1)
    msg.ack()
    client.flush()
    sent = client.stats["out_msgs"]
    msg.ack_sync()  # the server answers a repeated ack
    assert client.stats["out_msgs"] == sent + 1
    msg.ack_sync()  # confirmed now: nothing more to ask
    assert client.stats["out_msgs"] == sent + 1
    assert explicit.info().num_ack_pending == 0
