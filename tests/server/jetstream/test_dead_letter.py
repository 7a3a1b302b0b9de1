"""js.dead_letter: messages a consumer gives up on are moved, once, with where they came from and why."""

from __future__ import annotations

import pytest

from jetstream_sync import ConsumerConfig, StreamConfig, errors
from tests.helpers import wait_until


@pytest.fixture
def setup(js, name):
    source = js.create_stream(StreamConfig(name=name, subjects=[f"{name}.jobs.>"]))
    dead = js.create_stream(StreamConfig(name=f"{name}_DLQ", subjects=[f"{name}.dead"]))
    consumer = source.create_consumer(ConsumerConfig(durable_name="worker", max_deliver=2, ack_wait=30))
    return source, dead, consumer


def test_terminated_and_exhausted_messages_are_moved_with_their_story(js, name, setup):
    source, dead, consumer = setup
    js.publish(f"{name}.jobs.a", b"bad input", headers={"Trace": "t-1", "Nats-Msg-Id": "job-a"})
    js.publish(f"{name}.jobs.b", b"flaky")
    with js.dead_letter(name, "worker", to=f"{name}.dead", delete=True) as dlq:
        first = consumer.next(timeout=5)
        first.term(reason="cannot parse")
        for _ in range(2):  # two deliveries of b, both naked: max_deliver reached
            consumer.next(timeout=5).nak()
        with pytest.raises(errors.TimeoutError):  # the server notices (and advises) at the next delivery attempt
            consumer.next(timeout=1)
        wait_until(lambda: dlq.moved == 2, timeout=10)
    assert not dlq.running
    moved = {m.headers["Dead-Letter-Sequence"]: m for m in (dead.get_msg(1), dead.get_msg(2))}
    a, b = moved["1"], moved["2"]
    assert (a.subject, a.data, a.headers["Trace"]) == (f"{name}.dead", b"bad input", "t-1")
    assert a.headers["Dead-Letter-Reason"] == "terminated: cannot parse"
    assert a.headers["Dead-Letter-Subject"] == f"{name}.jobs.a"
    assert (a.headers["Dead-Letter-Stream"], a.headers["Dead-Letter-Consumer"]) == (name, "worker")
    assert "Nats-Msg-Id" not in a.headers or a.headers["Nats-Msg-Id"].startswith("dlq.")  # the original's is dropped
    assert (b.data, b.headers["Dead-Letter-Reason"], b.headers["Dead-Letter-Deliveries"]) == (
        b"flaky",
        "max_deliveries",
        "2",
    )
    assert source.info().state.messages == 0  # delete=True removed both from the source


def test_a_message_moved_twice_is_stored_once(js, name, setup):
    """Two movers on one consumer (say, two replicas of a service): Nats-Msg-Id keeps one copy."""
    _, dead, consumer = setup
    js.publish(f"{name}.jobs.a", b"x")
    with (
        js.dead_letter(name, "worker", to=f"{name}.dead") as one,
        js.dead_letter(name, "worker", to=f"{name}.dead") as two,
    ):
        consumer.next(timeout=5).term()
        wait_until(lambda: one.moved == 1 and two.moved == 1, timeout=10)
    assert dead.info().state.messages == 1


def test_bad_arguments_are_refused(js, name, setup):
    with pytest.raises(errors.InvalidArgumentError, match="to"):
        js.dead_letter(name, "worker", to="dead.*")
    with pytest.raises(errors.InvalidTypeError, match="delete"):
        js.dead_letter(name, "worker", to=f"{name}.dead", delete="yes")
    with pytest.raises(errors.StreamNotFoundError):
        js.dead_letter("NO_SUCH_STREAM", "worker", to=f"{name}.dead")
