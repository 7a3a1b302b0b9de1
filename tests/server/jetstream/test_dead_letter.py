"""js.dead_letter: messages a consumer gives up on are moved, once, with where they came from and why."""

from __future__ import annotations

import logging

import pytest

import jetstream_sync
from jetstream_sync import ConsumerConfig, RetentionPolicy, StreamConfig, errors
from tests.helpers import wait_until


@pytest.fixture
def setup(js, name):
    source = js.create_stream(StreamConfig(name=name, subjects=[f"{name}.jobs.>"]))
    dead = js.create_stream(StreamConfig(name=f"{name}_DLQ", subjects=[f"{name}.dead"]))
    consumer = source.create_consumer(ConsumerConfig(durable_name="worker", max_deliver=2, ack_wait=30))
    return source, dead, consumer


@pytest.mark.parametrize("durable", [True, False], ids=["events-stream", "core-advisories"])
def test_terminated_and_exhausted_messages_are_moved_with_their_story(js, name, setup, durable):
    source, dead, consumer = setup
    js.publish(f"{name}.jobs.a", b"bad input", headers={"Trace": "t-1", "Nats-Msg-Id": "job-a"})
    js.publish(f"{name}.jobs.b", b"flaky")
    with js.dead_letter(name, "worker", to=f"{name}.dead", delete=True, durable=durable) as dlq:
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
    """Two core movers on one consumer both see the advisory and both move: Nats-Msg-Id keeps one copy."""
    _, dead, consumer = setup
    js.publish(f"{name}.jobs.a", b"x")
    with (
        js.dead_letter(name, "worker", to=f"{name}.dead", durable=False) as one,
        js.dead_letter(name, "worker", to=f"{name}.dead", durable=False) as two,
    ):
        consumer.next(timeout=5).term()
        wait_until(lambda: one.moved == 1 and two.moved == 1, timeout=10)
    assert dead.info().state.messages == 1


def test_durable_movers_share_the_work(js, name, setup):
    """Two durable movers (two replicas of a service) read one events stream: each message is moved once."""
    _, dead, consumer = setup
    for i in range(10):
        js.publish(f"{name}.jobs.{i}", b"x")
    with (
        js.dead_letter(name, "worker", to=f"{name}.dead") as one,
        js.dead_letter(name, "worker", to=f"{name}.dead") as two,
    ):
        assert one.events_stream == two.events_stream == f"DLQ_EVENTS_{name}_worker"
        for _ in range(10):
            consumer.next(timeout=5).term()
        wait_until(lambda: one.moved + two.moved == 10, timeout=10)
    assert dead.info().state.messages == 10
    assert js.stream_info(f"DLQ_EVENTS_{name}_worker").state.messages == 0  # every advisory acked


def test_messages_given_up_while_no_mover_runs_are_moved_by_the_next(nats_server, js, name):
    """The acceptance case: max_deliver=3, a handler that always naks, and the mover's client restarted
    midway. Every message lands on the dead-letter subject exactly once, with its story."""
    js.create_stream(StreamConfig(name=name, subjects=[f"{name}.jobs.>"]))
    dead = js.create_stream(StreamConfig(name=f"{name}_DLQ", subjects=[f"{name}.dead"]))
    worker = js.create_consumer(name, ConsumerConfig(durable_name="worker", max_deliver=3, ack_wait=30))
    events = f"DLQ_EVENTS_{name}_worker"

    with jetstream_sync.connect(nats_server.url, name="mover-1") as nc:
        first = nc.jetstream().dead_letter(name, "worker", to=f"{name}.dead")
        with worker.consume(lambda msg: msg.nak()):
            for i in range(10):
                js.publish(f"{name}.jobs.{i}", str(i).encode())
            wait_until(lambda: first.moved == 10, timeout=15)
    # the mover's client went away; the handler goes on failing messages meanwhile
    wait_until(lambda: not first.running, timeout=5)
    with worker.consume(lambda msg: msg.nak()):
        for i in range(10, 20):
            js.publish(f"{name}.jobs.{i}", str(i).encode())
        wait_until(lambda: js.stream_info(events).state.messages == 10, timeout=15)  # kept for the next mover

    with jetstream_sync.connect(nats_server.url, name="mover-2") as nc:
        second = nc.jetstream().dead_letter(name, "worker", to=f"{name}.dead")
        wait_until(lambda: second.moved == 10, timeout=15)
        second.stop()

    moved = [dead.get_msg(seq) for seq in range(1, dead.info().state.messages + 1)]
    assert sorted(int(m.headers["Dead-Letter-Sequence"]) for m in moved) == list(range(1, 21))
    for m in moved:
        assert m.headers["Dead-Letter-Reason"] == "max_deliveries"
        assert m.headers["Dead-Letter-Deliveries"] == "3"
        assert m.data == str(int(m.headers["Dead-Letter-Sequence"]) - 1).encode()
    assert js.stream_info(events).state.messages == 0


def test_a_core_mover_misses_what_is_advised_while_it_is_away(nats_server, js, name, setup):
    """The control for the test above: without the events stream, the advisory has no listener."""
    _, dead, consumer = setup
    js.publish(f"{name}.jobs.a", b"x")
    consumer.next(timeout=5).term()  # advised now, to nobody
    with js.dead_letter(name, "worker", to=f"{name}.dead", durable=False) as mover:
        js.publish(f"{name}.jobs.b", b"y")
        consumer.next(timeout=5).term()
        wait_until(lambda: mover.moved == 1, timeout=10)
    assert dead.info().state.messages == 1


def test_bad_arguments_are_refused(js, name, setup):
    with pytest.raises(errors.InvalidArgumentError, match="to"):
        js.dead_letter(name, "worker", to="dead.*")
    with pytest.raises(errors.InvalidTypeError, match="delete"):
        js.dead_letter(name, "worker", to=f"{name}.dead", delete="yes")
    with pytest.raises(errors.InvalidTypeError, match="durable"):
        js.dead_letter(name, "worker", to=f"{name}.dead", durable=1)
    with pytest.raises(errors.InvalidArgumentError, match="events_stream"):
        js.dead_letter(name, "worker", to=f"{name}.dead", durable=False, events_stream="E")
    with pytest.raises(errors.InvalidArgumentError, match="events_stream"):
        js.dead_letter(name, "worker", to=f"{name}.dead", events_stream="a.b")
    with pytest.raises(errors.StreamNotFoundError):
        js.dead_letter("NO_SUCH_STREAM", "worker", to=f"{name}.dead")
    assert list(js.stream_names()) == [name, f"{name}_DLQ"]  # a refused mover created nothing


def test_a_message_terminated_on_a_work_queue_stream_is_reported_not_lost_silently(js, name, caplog):
    """A work-queue stream removes a message at term(): the mover cannot move it. Before, it only counted it in
    ``missing``; now it says so once at WARNING, naming what to do."""
    js.create_stream(StreamConfig(name=name, subjects=[f"{name}.jobs.>"], retention=RetentionPolicy.WORK_QUEUE))
    js.create_stream(StreamConfig(name=f"{name}_DLQ", subjects=[f"{name}.dead"]))
    consumer = js.stream(name).create_consumer(ConsumerConfig(durable_name="worker", ack_wait=30))
    for job in (b"one", b"two"):
        js.publish(f"{name}.jobs.a", job)
    with (
        caplog.at_level(logging.WARNING, logger="jetstream_sync"),
        js.dead_letter(name, "worker", to=f"{name}.dead", durable=False) as dlq,
    ):
        consumer.next(timeout=5).term()
        consumer.next(timeout=5).term()
        wait_until(lambda: dlq.missing == 2, timeout=10)
    said = [r.getMessage() for r in caplog.records if "cannot be dead-lettered" in r.getMessage()]
    assert len(said) == 1 and f"{name}.dead" in said[0]
    assert dlq.moved == 0
