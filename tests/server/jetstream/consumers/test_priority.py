"""Priority groups (ADR-42): pinned client, overflow and prioritized pulls, unpin, and what is refused."""

from __future__ import annotations

import threading
import time

import pytest

import jetstream_sync
from jetstream_sync import ConsumerConfig, PriorityPolicy, StreamConfig, errors
from tests.helpers import wait_until


@pytest.fixture
def orders(js, name):
    return js.create_stream(StreamConfig(name=name, subjects=[f"{name}.>"]))


def pinned_config(timeout: float = 2.0) -> ConsumerConfig:
    return ConsumerConfig(
        durable_name="jobs",
        priority_groups=["jobs"],
        priority_policy=PriorityPolicy.PINNED_CLIENT,
        priority_timeout=timeout,
        ack_wait=30,
    )


class Recorder:
    """A consume's handler and error handler: what it received, and the pin events it was told about."""

    def __init__(self) -> None:
        self.received: list[bytes] = []
        self.events: list[BaseException] = []

    def handle(self, msg: jetstream_sync.Msg) -> None:
        self.received.append(msg.data)
        msg.ack()

    def error(self, exc: BaseException) -> None:
        self.events.append(exc)

    def pins(self) -> list[str]:
        return [e.pin_id for e in self.events if isinstance(e, errors.ConsumerPinnedEvent)]


def publish(js, subject: str, count: int, start: int = 0) -> None:
    for i in range(start, start + count):
        js.publish(subject, b"%d" % i)


def test_the_config_round_trips_and_the_state_is_reported(js, name, orders):
    cons = orders.create_consumer(pinned_config(timeout=30))
    config = cons.cached_info.config
    assert (config.priority_groups, config.priority_policy, config.priority_timeout) == (
        ["jobs"],
        PriorityPolicy.PINNED_CLIENT,
        30.0,
    )
    (state,) = cons.info().priority_groups
    assert (state.group, state.pinned, state.pinned_ts) == ("jobs", False, None)
    js.publish(f"{name}.a", b"x")
    cons.next(timeout=5, priority_group="jobs").ack()
    (state,) = cons.info().priority_groups
    assert state.pinned and state.pinned_client_id == cons.pin_id and state.pinned_ts is not None


def test_only_the_pinned_client_receives_and_the_pin_moves_when_it_dies(nats_server, js, name, orders):
    orders.create_consumer(pinned_config(timeout=2))
    first, second = Recorder(), Recorder()
    other = jetstream_sync.connect(nats_server.url, name="second")
    try:
        with jetstream_sync.connect(nats_server.url, name="first") as nc:
            a = nc.jetstream().consumer(name, "jobs")
            a_ctx = a.consume(first.handle, error_handler=first.error, priority_group="jobs")
            publish(js, f"{name}.a", 1)
            wait_until(lambda: first.received == [b"0"], timeout=5)  # a is pinned before b starts pulling
            b = other.jetstream().consumer(name, "jobs")
            b_ctx = b.consume(second.handle, error_handler=second.error, priority_group="jobs")
            wait_until(lambda: js.consumer_info(name, "jobs").num_waiting >= 2, timeout=5)
            publish(js, f"{name}.a", 19, start=1)
            wait_until(lambda: len(first.received) == 20, timeout=5)
            assert second.received == []
            assert first.pins() == [a.pin_id]
            a_ctx.stop()
        # the first client is gone; after priority_timeout the pin moves to the second
        wait_until(lambda: js.consumer_info(name, "jobs").priority_groups[0].pinned_client_id != a.pin_id, 10)
        publish(js, f"{name}.a", 10, start=20)
        wait_until(lambda: len(second.received) == 10, timeout=10)
        assert second.pins() == [b.pin_id] and b.pin_id != a.pin_id
        b_ctx.stop()
    finally:
        other.close()


def test_an_idle_pinned_consume_keeps_its_pin(nats_server, js, name, orders):
    """The server's pin timer restarts only on a pull carrying the pin: the consume's pulls expire, and are
    sent again, within the timeout, so a quiet period longer than it does not lose the pin."""
    orders.create_consumer(pinned_config(timeout=2))
    first, second = Recorder(), Recorder()
    with jetstream_sync.connect(nats_server.url, name="second") as other:
        a = js.consumer(name, "jobs")
        with a.consume(first.handle, error_handler=first.error, priority_group="jobs"):
            publish(js, f"{name}.a", 1)
            wait_until(lambda: len(first.received) == 1, timeout=5)
            b = other.jetstream().consumer(name, "jobs")
            with b.consume(second.handle, error_handler=second.error, priority_group="jobs"):
                time.sleep(3.5)  # the subject of the test: longer than priority_timeout with nothing to deliver
                publish(js, f"{name}.a", 5, start=1)
                wait_until(lambda: len(first.received) == 6, timeout=5)
        assert second.received == []
        assert first.pins() == [a.pin_id]


def test_unpin_moves_the_pin_and_the_consume_pulls_for_it_again(js, name, orders):
    cons = orders.create_consumer(pinned_config(timeout=30))
    rec = Recorder()
    with cons.consume(rec.handle, error_handler=rec.error, priority_group="jobs"):
        publish(js, f"{name}.a", 1)
        wait_until(lambda: len(rec.received) == 1, timeout=5)
        old = cons.pin_id
        cons.unpin("jobs")
        publish(js, f"{name}.a", 3, start=1)  # the server refuses the old pin's pulls when it next delivers
        wait_until(lambda: len(rec.received) == 4, timeout=10)
    assert any(isinstance(e, errors.PinIdMismatchError) and e.status == 423 for e in rec.events)
    assert rec.pins() == [old, cons.pin_id] and cons.pin_id != old


def test_a_fetch_holds_the_pin_for_its_handle(nats_server, js, name, orders):
    cons = orders.create_consumer(pinned_config(timeout=30))
    publish(js, f"{name}.a", 4)
    assert [m.data for m in cons.fetch(2, expires=2, priority_group="jobs")] == [b"0", b"1"]
    assert cons.pin_id is not None
    with jetstream_sync.connect(nats_server.url) as other:
        stranger = other.jetstream().consumer(name, "jobs")
        assert list(stranger.fetch(2, expires=1, priority_group="jobs")) == []  # pinned elsewhere: waits it out
    assert [m.data for m in cons.fetch(2, expires=2, priority_group="jobs")] == [b"2", b"3"]

    cons.unpin("jobs")
    js.publish(f"{name}.a", b"4")
    batch = cons.fetch(1, expires=2, priority_group="jobs")
    with pytest.raises(errors.PinIdMismatchError):
        list(batch)
    assert cons.pin_id is None  # cleared: the next pull competes for a new pin
    assert cons.next(timeout=2, priority_group="jobs").data == b"4"


def test_overflow_delivers_only_past_min_pending(nats_server, js, name, orders):
    orders.create_consumer(
        ConsumerConfig(durable_name="jobs", priority_groups=["jobs"], priority_policy=PriorityPolicy.OVERFLOW)
    )
    overflow = js.consumer(name, "jobs")
    publish(js, f"{name}.a", 10)
    assert list(overflow.fetch(5, expires=1, priority_group="jobs", min_pending=50)) == []  # 10 pending: not yet
    publish(js, f"{name}.a", 50, start=10)  # 60 pending
    got = list(overflow.fetch(5, expires=2, priority_group="jobs", min_pending=50))
    assert [m.data for m in got] == [b"0", b"1", b"2", b"3", b"4"]
    for msg in got:
        msg.ack()


def test_prioritized_pulls_are_served_lowest_first(js, name, orders):
    cons = orders.create_consumer(
        ConsumerConfig(durable_name="jobs", priority_groups=["jobs"], priority_policy=PriorityPolicy.PRIORITIZED)
    )
    results: dict[int, list[bytes]] = {}

    def pull(priority: int) -> None:
        results[priority] = [m.data for m in cons.fetch(1, expires=3, priority_group="jobs", priority=priority)]

    threads = [threading.Thread(target=pull, args=(p,)) for p in (5, 0)]
    for t in threads:
        t.start()
    wait_until(lambda: js.consumer_info(name, "jobs").num_waiting == 2, timeout=5)
    js.publish(f"{name}.a", b"first")
    for t in threads:
        t.join(10)
    assert results == {0: [b"first"], 5: []}


def test_bad_priority_settings_are_refused_before_sending(js, name, orders):
    with pytest.raises(errors.InvalidArgumentError, match="priority_groups"):
        ConsumerConfig(durable_name="c", priority_policy=PriorityPolicy.PINNED_CLIENT)
    with pytest.raises(errors.InvalidArgumentError, match="priority_groups"):
        ConsumerConfig(durable_name="c", priority_groups=["jobs"])
    with pytest.raises(errors.InvalidArgumentError, match="priority_timeout"):
        ConsumerConfig(durable_name="c", priority_timeout=5)
    with pytest.raises(errors.InvalidArgumentError, match="priority group name"):
        ConsumerConfig(durable_name="c", priority_groups=["a.b"], priority_policy="overflow")
    with pytest.raises(errors.InvalidArgumentError, match="priority group name"):
        ConsumerConfig(durable_name="c", priority_groups=["x" * 17], priority_policy="overflow")
    with pytest.raises(errors.InvalidArgumentError, match="pull consumers"):
        ConsumerConfig(
            durable_name="c", deliver_subject="d.x", priority_groups=["jobs"], priority_policy="pinned_client"
        )
    with pytest.raises(errors.InvalidArgumentError, match="priority_policy"):
        ConsumerConfig(durable_name="c", priority_groups=["jobs"], priority_policy="sticky")

    pinned = orders.create_consumer(pinned_config())
    plain = orders.create_consumer(ConsumerConfig(durable_name="plain"))
    cases = [
        (pinned, {}, "name one"),
        (pinned, {"priority_group": "other"}, "not a group"),
        (pinned, {"priority_group": "jobs", "min_pending": 5}, "OVERFLOW"),
        (pinned, {"priority_group": "jobs", "priority": 1}, "PRIORITIZED"),
        (plain, {"priority_group": "jobs"}, "no priority groups"),
        (plain, {"min_pending": 5}, "give priority_group too"),
        (pinned, {"priority_group": "jobs", "priority": 10}, "0 .served first. to 9"),
    ]
    for cons, kwargs, message in cases:
        with pytest.raises(errors.InvalidArgumentError, match=message):
            cons.fetch(1, expires=1, **kwargs)
        with pytest.raises(errors.InvalidArgumentError, match=message):
            cons.consume(lambda m: None, **kwargs)
    with pytest.raises(errors.InvalidArgumentError, match="ordered consumer"):
        js.ordered_consumer(name).fetch(1, priority_group="jobs")
    with pytest.raises(errors.InvalidArgumentError, match="not a group"):
        pinned.unpin("other")
    with pytest.raises(errors.APIError) as info:  # not checked client side without a handle: the server's answer
        js.unpin_consumer(name, "plain", "jobs")
    assert info.value.err_code == 10160
    assert js.consumer_info(name, "jobs").num_waiting == 0  # nothing refused above reached the server


def test_an_older_server_is_refused_before_sending(js, name, orders, monkeypatch):
    monkeypatch.setattr(js.client.runtime, "server_info", lambda: {"version": "2.10.22"})
    with pytest.raises(errors.FeatureNotSupportedError, match=r"2\.11\.0"):
        orders.create_consumer(pinned_config())
    with pytest.raises(errors.FeatureNotSupportedError, match=r"2\.11\.0"):
        js.unpin_consumer(name, "jobs", "jobs")
    monkeypatch.setattr(js.client.runtime, "server_info", lambda: {"version": "2.11.4"})
    with pytest.raises(errors.FeatureNotSupportedError, match="PRIORITIZED"):
        orders.create_consumer(
            ConsumerConfig(durable_name="p", priority_groups=["g"], priority_policy=PriorityPolicy.PRIORITIZED)
        )
    assert list(js.consumer_names(name)) == []
