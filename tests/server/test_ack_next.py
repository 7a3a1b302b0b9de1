"""AckNext (+NXT, the deep dive's pull-mode ack): ack one message and receive the next ones on a private inbox."""

from __future__ import annotations

import pytest

from jetstream_sync import ConsumerConfig, errors
from tests.helpers import wait_until


def _setup(js, stream, count):
    for i in range(count):
        js.publish(f"{stream.name}.a", b"%d" % i)
    return stream.create_consumer(ConsumerConfig(durable_name="nxt", ack_wait=30))


def test_ack_next_json_form_acks_and_delivers_the_next_batch(js, stream):
    cons = _setup(js, stream, 10)
    first = cons.next(timeout=2)
    batch = list(first.ack_next(batch=3, expires=2))
    assert [m.data for m in batch] == [b"1", b"2", b"3"]
    assert first.is_acked
    # the first message's ack reached the server with the +NXT: only the three handed out are pending acks
    wait_until(lambda: cons.info().ack_floor.stream_seq == 1, timeout=3)
    assert cons.info().num_ack_pending == 3


def test_ack_next_short_form_and_chaining(js, stream):
    cons = _setup(js, stream, 4)
    msg = cons.next(timeout=2)
    seen = [msg.data]
    for _ in range(3):
        (msg,) = list(msg.ack_next(expires=None))
        seen.append(msg.data)
    msg.ack_sync()
    assert seen == [b"0", b"1", b"2", b"3"]
    wait_until(lambda: cons.info().num_ack_pending == 0, timeout=3)


def test_ack_next_on_an_acked_message_is_refused(js, stream):
    cons = _setup(js, stream, 2)
    msg = cons.next(timeout=2)
    msg.ack()
    with pytest.raises(errors.InvalidAckSubjectError):
        msg.ack_next()
