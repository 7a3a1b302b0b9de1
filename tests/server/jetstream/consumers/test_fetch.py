"""fetch, fetch_bytes, fetch_no_wait and next (ADR-37 "Fetch" and "Next") against a real server."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import pytest

from jetstream_sync import AckPolicy, ConsumerConfig, FetchOptions, StreamConfig, errors
from jetstream_sync._delivery._fetch import FetchPull
from tests.helpers import wait_parked, wait_until


def publish(js, subject: str, n: int, size: int = 8) -> None:
    for i in range(n):
        js.publish_async(subject, (b"%08d" % i).ljust(size, b"."))
    js.publish_async_complete(timeout=10)


@pytest.fixture
def cons(stream):
    return stream.create_consumer(ConsumerConfig(durable_name="f", ack_policy=AckPolicy.EXPLICIT))


def test_fetch_yields_a_full_batch_at_once(js, stream, cons):
    publish(js, f"{stream.name}.a", 25)
    started = time.monotonic()
    batch = cons.fetch(10, expires=5)
    msgs = list(batch)
    assert time.monotonic() - started < 3  # a full batch does not wait for the 5 s expiry
    assert [m.metadata.sequence.stream for m in msgs] == list(range(1, 11))
    assert batch.error is None
    for m in msgs:
        m.ack()


def test_short_and_empty_fetches_are_normal_batches(js, stream, cons):
    publish(js, f"{stream.name}.a", 3)
    started = time.monotonic()
    assert len(list(cons.fetch(10, expires=1))) == 3
    elapsed = time.monotonic() - started
    # Waited for the 1 s expiry, then ended quietly (408); the client-side deadline (expires + 1 s) ends it at
    # 2 s at the latest, so the upper bound only has to catch a batch that ends on neither: 4 s leaves room.
    assert 0.9 < elapsed < 4
    assert list(cons.fetch(5, expires=0.5)) == []  # nothing pending: empty, never an exception


def test_fetch_no_wait_returns_what_is_there(js, stream, cons):
    assert list(cons.fetch_no_wait(10)) == []  # 404 No Messages: quiet
    publish(js, f"{stream.name}.a", 4)
    started = time.monotonic()
    got = list(cons.fetch_no_wait(10))
    assert len(got) == 4
    assert time.monotonic() - started < 3  # returns at once; one that waited would run to the 5 s deadline


def test_fetch_bytes_limits_by_server_size(js, stream, cons):
    publish(js, f"{stream.name}.a", 20, size=100)
    msgs = list(cons.fetch_bytes(700, expires=1))
    assert msgs and sum(m.size for m in msgs) <= 700
    assert sum(m.size for m in msgs) + msgs[0].size > 700  # as many as fit
    for m in msgs:
        m.ack()


def test_a_fetch_of_a_message_larger_than_max_bytes_raises(js, stream, cons):
    """409 Message Size Exceeds MaxBytes before any message: no fetch of that size can ever get past it, so an
    empty batch would let a fetch loop spin on it forever, silently. After some messages it is how a fetch
    sized by bytes ends (test_fetch_bytes_limits_by_server_size)."""
    publish(js, f"{stream.name}.a", 1, size=500)
    started = time.monotonic()
    batch = cons.fetch_bytes(100, expires=2)
    with pytest.raises(errors.MessageExceedsMaxBytesError, match=f"{stream.name}/f: .*max_bytes=100"):
        list(batch)
    assert time.monotonic() - started < 1.5  # the server answers at once; no wait for the expiry
    assert isinstance(batch.error, errors.MessageExceedsMaxBytesError) and batch.error.max_bytes == 100
    with pytest.raises(errors.MessageExceedsMaxBytesError):
        list(js.ordered_consumer(stream.name).fetch_bytes(100, expires=2))


def test_next_gets_one_message_or_times_out(js, stream, cons):
    with pytest.raises(errors.TimeoutError):
        cons.next(timeout=0.3)
    threading.Timer(0.2, lambda: js.publish(f"{stream.name}.a", b"late")).start()
    msg = cons.next(timeout=5)
    assert msg.data == b"late"
    msg.ack()


def test_fetch_options_are_validated_before_sending(cons):
    for call, field in [
        (lambda: cons.fetch(0), "max_messages"),
        (lambda: cons.fetch("10"), "max_messages"),
        (lambda: cons.fetch(1, expires=0), "expires"),
        (lambda: cons.fetch(1, expires=4, idle_heartbeat=3), "idle_heartbeat"),
        (lambda: cons.fetch(1, max_bytes=0), "max_bytes"),
        (lambda: cons.fetch_bytes(-5), "max_bytes"),
        (lambda: cons.fetch_no_wait(0), "max_messages"),
        (lambda: cons.next(timeout=0), "timeout"),
    ]:
        with pytest.raises((ValueError, TypeError)) as info:
            call()
        assert info.value.field == field


def test_long_fetch_has_heartbeats_by_default(js, stream, cons):
    assert FetchOptions(max_messages=1, expires=12).heartbeat == 5.0
    assert FetchOptions(max_messages=1, expires=2).heartbeat == 0.0
    batch = cons.fetch(1, expires=12)
    threading.Timer(0.3, lambda: js.publish(f"{stream.name}.a", b"x")).start()
    assert len(list(batch)) == 1


def test_consumer_limits_produce_typed_warnings(js, stream):
    publish(js, f"{stream.name}.a", 3)
    small = stream.create_consumer(ConsumerConfig(durable_name="small", max_batch=2, max_expires=2))
    with pytest.raises(errors.PullWarning, match="MaxRequestBatch"):
        list(small.fetch(5, expires=1))
    with pytest.raises(errors.PullWarning, match="MaxRequestExpires"):
        list(small.fetch(1, expires=5))
    bytes_limited = stream.create_consumer(ConsumerConfig(durable_name="bytes", max_bytes=50))
    with pytest.raises(errors.PullWarning, match="MaxRequestMaxBytes"):
        list(bytes_limited.fetch_bytes(1000, expires=1))


def test_exceeding_max_waiting_is_a_warning(js, stream):
    cons = stream.create_consumer(ConsumerConfig(durable_name="waiting", max_waiting=1))
    first = cons.fetch(1, expires=3)
    with pytest.raises(errors.PullWarning, match="MaxWaiting"):
        list(cons.fetch(1, expires=3))
    js.publish(f"{stream.name}.a", b"x")
    assert len(list(first)) == 1


def test_deleted_consumer_raises_from_iteration(js, stream, cons):
    batch = cons.fetch(5, expires=10)
    deleting = threading.Timer(0.3, cons.delete)
    deleting.start()
    with pytest.raises(errors.ConsumerDeletedError):
        list(batch)
    deleting.join(10)  # the delete's reply too, before the fixture closes the client under it
    assert isinstance(batch.error, errors.ConsumerDeletedError)


def test_fetch_from_missing_consumer_fails_clearly(js, stream, cons):
    cons.delete()
    with pytest.raises(errors.ConsumerNotFoundError):
        list(cons.fetch(1, expires=1))


def test_push_consumer_cannot_be_fetched(js, stream):
    push = stream.create_consumer(ConsumerConfig(durable_name="push", deliver_subject="push.deliver"))
    with pytest.raises(errors.PushConsumerError):
        list(push.fetch(1, expires=1))


def test_bad_request_is_terminal(stream, cons):
    # FetchOptions refuses a heartbeat without an expiry, so the engine gets the raw values to provoke a 400
    raw = SimpleNamespace(
        batch=1, max_bytes=None, expires=0.0, pull_expires=0.0, heartbeat=5.0, no_wait=False, pull_priority=None
    )
    pull = FetchPull(cons.jetstream.client.runtime, cons._pull_target, raw)
    pull.start()
    with pytest.raises(errors.BadRequestError):
        pull.buffer.get(5)


def test_ack_none_messages_ignore_acks(js, stream):
    cons = stream.create_consumer(ConsumerConfig(durable_name="none", ack_policy=AckPolicy.NONE))
    publish(js, f"{stream.name}.a", 2)
    msgs = list(cons.fetch(2, expires=1))
    assert all(m.is_acked for m in msgs)
    msgs[0].ack()  # nothing is sent, nothing raised


def test_close_ends_a_blocked_fetch(nats_server, name):
    import jetstream_sync

    nc = jetstream_sync.connect(nats_server.url)
    js = nc.jetstream()
    stream = js.create_stream(StreamConfig(name=name, subjects=[f"{name}.>"]))
    cons = stream.create_consumer(ConsumerConfig(durable_name="c"))
    batch = cons.fetch(1, expires=30)
    outcome = []

    def iterate():
        try:
            list(batch)
        except Exception as exc:
            outcome.append(exc)

    thread = threading.Thread(target=iterate)
    thread.start()
    wait_until(lambda: cons.info().num_waiting >= 1)  # the pull is at the server
    wait_parked([thread])  # and the iteration waits for its message
    started = time.monotonic()
    nc.close()
    # close() wakes it at once; left alone it would wait out the 30 s expiry, and a close() that had to give up
    # joining threads takes its 5 s timeout: 3 s keeps those apart with room for a loaded machine.
    thread.join(3)
    assert not thread.is_alive() and time.monotonic() - started < 3
    assert isinstance(outcome[0], errors.ConnectionClosedError)
