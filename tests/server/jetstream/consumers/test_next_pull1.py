"""next() on ADR-13's Pull(1): one reusable subscription per consumer handle (``_single.py``)."""

from __future__ import annotations

import logging
import threading

import pytest

from jetstream_sync import AckPolicy, ConsumerConfig, errors
from jetstream_sync._delivery import _single
from jetstream_sync._protocol import encode_pub, pull_request
from tests.helpers import wait_until


def publish(js, subject: str, n: int) -> None:
    for i in range(n):
        js.publish_async(subject, b"m%d" % i)
    js.publish_async_complete(timeout=10)


@pytest.fixture
def cons(stream):
    return stream.create_consumer(ConsumerConfig(durable_name="n", ack_policy=AckPolicy.EXPLICIT, ack_wait=30))


def test_successive_next_calls_share_one_subscription(js, stream, cons):
    publish(js, f"{stream.name}.a", 5)
    first = cons.next(timeout=2)
    sub = cons._single._sub
    assert sub is not None
    rest = [cons.next(timeout=2) for _ in range(4)]
    assert cons._single._sub is sub
    assert [m.data for m in [first, *rest]] == [b"m0", b"m1", b"m2", b"m3", b"m4"]
    for m in [first, *rest]:
        m.ack()


def test_next_times_out_on_the_servers_expiry_and_the_next_call_still_works(js, stream, cons):
    with pytest.raises(errors.TimeoutError, match="within 1s"):
        cons.next(timeout=1)
    publish(js, f"{stream.name}.a", 1)
    assert cons.next(timeout=2).data == b"m0"


def test_concurrent_next_calls_on_one_handle_each_get_a_message(js, stream, cons):
    got: list[bytes] = []
    lock = threading.Lock()

    def reader() -> None:
        msg = cons.next(timeout=5)
        msg.ack()
        with lock:
            got.append(msg.data)

    threads = [threading.Thread(target=reader) for _ in range(4)]
    for t in threads:
        t.start()
    publish(js, f"{stream.name}.a", 4)
    for t in threads:
        t.join(10)
    assert sorted(got) == [b"m0", b"m1", b"m2", b"m3"]


def test_a_message_for_no_waiting_call_is_given_back_with_a_nak(caplog, client, js, stream, cons):
    caplog.set_level(logging.DEBUG, logger="jetstream_sync")
    js.publish(f"{stream.name}.a", b"first")
    assert cons.next(timeout=2).data == b"first"  # taken, not acked: ack_wait is 30 s
    js.publish(f"{stream.name}.a", b"second")
    single = cons._single
    # a pull nobody waits for, on the handle's subscription: the server delivers "second" to it
    client.runtime.send_waiting(
        encode_pub(single.target.next_subject, single._prefix + b"stray", None, pull_request(1, 5.0)), 5
    )
    wait_until(lambda: "arrived after its call ended; nak" in caplog.text)
    # the nak gave it back at once: without it the server would hold it for the 30 s of ack wait
    again = cons.next(timeout=3)
    assert again.data == b"second" and again.metadata.num_delivered == 2
    again.ack()


def test_an_idle_handle_drops_its_subscription_and_subscribes_again(monkeypatch, js, stream, cons):
    monkeypatch.setattr(_single, "IDLE_UNSUBSCRIBE", 0.3)
    publish(js, f"{stream.name}.a", 2)
    cons.next(timeout=2).ack()
    wait_until(lambda: cons._single._sub is None, timeout=5)
    assert cons.next(timeout=2).data == b"m1"
    assert cons._single._sub is not None


def test_next_after_close_raises_connection_closed(client, stream, cons):
    client.close()
    with pytest.raises(errors.ConnectionClosedError):
        cons.next(timeout=1)


def test_next_on_a_deleted_consumer_raises(js, stream, cons):
    stream.delete_consumer("n")
    with pytest.raises((errors.ConsumerNotFoundError, errors.ConsumerDeletedError)):
        cons.next(timeout=2)
