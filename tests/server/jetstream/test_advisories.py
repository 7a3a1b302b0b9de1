"""js.advisories(): typed events from $JS.EVENT against a real server, narrowed by stream, consumer and kind.

Negative checks ("an event for another stream does not arrive") always follow a positive control: the event
that must not arrive is caused first and a wanted one after it, and the server sends events in order, so
taking the wanted one proves the unwanted one was not sent to us; a short quiet wait then covers stragglers.

Leader elections are not tested here: nats-server sends them only from clustered JetStream (raft groups), so a
single server never does; tests/unit/models/test_advisory.py covers their decoding.
"""

from __future__ import annotations

import threading
from datetime import datetime, timedelta, timezone

import pytest

import jetstream_sync
from jetstream_sync import ConsumerConfig, StreamConfig, errors
from jetstream_sync.jetstream.advisories import subjects_for
from jetstream_sync.models import (
    Advisory,
    AdvisoryAction,
    AdvisoryKind,
    APIAudit,
    ConsumerAckMetric,
    ConsumerAction,
    ConsumerPaused,
    MaxDeliveriesExceeded,
    MessageNaked,
    MessageTerminated,
    StreamAction,
    UnknownAdvisory,
)
from tests.helpers import join_all, wait_parked


def _take(events, count: int, within: float = 2.0) -> list[Advisory]:
    """Exactly the next ``count`` events, each within ``within`` seconds."""
    return [events.next(within) for _ in range(count)]


def _quiet(events, within: float = 0.2) -> None:
    """Nothing more arrives (used only after a positive control, see the module docstring)."""
    with pytest.raises(errors.TimeoutError):
        ev = events.next(within)
        pytest.fail(f"unexpected event {ev!r}")


def _find(events, predicate, within: float = 2.0) -> Advisory:
    """The first event matching ``predicate`` (for readers of the whole tree, which other clients share)."""
    while True:
        ev = events.next(within)
        if predicate(ev):
            return ev


def _publish(js, subject: str, count: int) -> None:
    for i in range(count):
        js.publish(subject, b"%d" % i)


def test_sampled_acks_arrive_as_consumer_ack_metrics(js, stream):
    cons = stream.create_consumer(ConsumerConfig(durable_name="c", sample_freq="100%"))
    _publish(js, f"{stream.name}.a", 2)
    with js.advisories(stream=stream.name, consumer="c", kinds=["consumer_ack"]) as events:
        first, second = list(cons.fetch(2, expires=1))
        second.ack()
        first.ack()
        metrics = _take(events, 2)
        _quiet(events)
    assert all(isinstance(m, ConsumerAckMetric) for m in metrics)
    assert [(m.stream, m.consumer, m.stream_seq, m.consumer_seq, m.deliveries) for m in metrics] == [
        (stream.name, "c", 2, 2, 1),
        (stream.name, "c", 1, 1, 1),
    ]
    metric = metrics[0]
    assert isinstance(metric, ConsumerAckMetric)
    assert 0 <= metric.ack_time < 5
    assert metric.subject == f"$JS.EVENT.METRIC.CONSUMER.ACK.{stream.name}.c"
    assert metric.type == "io.nats.jetstream.metric.v1.consumer_ack"
    assert metric.id and metric.domain is None
    assert metric.timestamp is not None and abs(datetime.now(timezone.utc) - metric.timestamp) < timedelta(minutes=1)


def test_term_and_nak_and_max_deliveries(js, stream):
    cons = stream.create_consumer(ConsumerConfig(durable_name="c", max_deliver=1))
    _publish(js, f"{stream.name}.a", 2)
    with js.advisories(stream=stream.name) as events:
        first, second = list(cons.fetch(2, expires=1))
        first.term("bad input")
        second.nak()
        terminated, naked = _take(events, 2)
        # max_deliver=1: the naked message is due again but may not be delivered, which the next pull finds
        assert list(cons.fetch_no_wait(1)) == []
        (exceeded,) = _take(events, 1)
        _quiet(events)
    assert isinstance(terminated, MessageTerminated)
    assert (terminated.stream, terminated.consumer, terminated.stream_seq, terminated.reason) == (
        stream.name,
        "c",
        1,
        "bad input",
    )
    assert terminated.subject == f"$JS.EVENT.ADVISORY.CONSUMER.MSG_TERMINATED.{stream.name}.c"
    assert isinstance(naked, MessageNaked)
    assert (naked.stream, naked.consumer, naked.stream_seq, naked.consumer_seq, naked.deliveries) == (
        stream.name,
        "c",
        2,
        2,
        1,
    )
    assert isinstance(exceeded, MaxDeliveriesExceeded)
    assert (exceeded.stream, exceeded.consumer, exceeded.stream_seq, exceeded.deliveries) == (stream.name, "c", 2, 1)


def test_stream_actions_narrowed_to_one_stream(js, name):
    other = name + "X"
    with js.advisories(stream=name, kinds=[AdvisoryKind.STREAM_ACTION]) as events:
        js.create_stream(StreamConfig(name=other, subjects=[f"{other}.>"]))  # before each wanted event: the
        js.create_stream(StreamConfig(name=name, subjects=[f"{name}.>"]))  # control that it was filtered out
        js.update_stream(StreamConfig(name=other, subjects=[f"{other}.>"], description="x"))
        js.update_stream(StreamConfig(name=name, subjects=[f"{name}.>"], description="x"))
        js.delete_stream(other)
        js.delete_stream(name)
        actions = _take(events, 3)
        _quiet(events)
    assert all(isinstance(a, StreamAction) for a in actions)
    assert [(a.stream, a.action) for a in actions if isinstance(a, StreamAction)] == [
        (name, AdvisoryAction.CREATED),
        (name, AdvisoryAction.UPDATED),
        (name, AdvisoryAction.DELETED),
    ]
    assert [a.subject.split(".")[4] for a in actions] == ["CREATED", "UPDATED", "DELETED"]


def test_consumer_actions_narrowed_to_one_stream(js, stream, name):
    other = js.create_stream(StreamConfig(name=name + "X", subjects=[f"{name}X.>"]))
    with js.advisories(stream=stream.name, kinds=["consumer_action"]) as events:
        other.create_consumer(ConsumerConfig(durable_name="d"))
        stream.create_consumer(ConsumerConfig(durable_name="d"))
        other.delete_consumer("d")
        stream.delete_consumer("d")
        actions = _take(events, 2)
        _quiet(events)
    assert all(isinstance(a, ConsumerAction) for a in actions)
    assert [(a.stream, a.consumer, a.action) for a in actions if isinstance(a, ConsumerAction)] == [
        (stream.name, "d", AdvisoryAction.CREATED),
        (stream.name, "d", AdvisoryAction.DELETED),
    ]


def test_a_consumer_narrows_to_that_consumers_events_only(js, stream, name):
    a = stream.create_consumer(ConsumerConfig(durable_name="a"))
    b = stream.create_consumer(ConsumerConfig(durable_name="b"))
    _publish(js, f"{stream.name}.x", 1)
    with js.advisories(consumer="a") as events:
        (msg_b,) = list(b.fetch(1, expires=1))
        msg_b.term()  # another consumer: filtered out
        js.update_stream(
            StreamConfig(name=stream.name, subjects=[f"{stream.name}.>"], description="x")
        )  # a stream event
        (msg_a,) = list(a.fetch(1, expires=1))
        msg_a.term("mine")
        (ev,) = _take(events, 1)
        _quiet(events)
    assert isinstance(ev, MessageTerminated)
    assert (ev.consumer, ev.reason) == ("a", "mine")


def test_kinds_pick_what_arrives(js, stream):
    cons = stream.create_consumer(ConsumerConfig(durable_name="c", sample_freq="100%"))
    _publish(js, f"{stream.name}.a", 3)
    with js.advisories(stream=stream.name, kinds=["nak"]) as events:
        first, second, third = list(cons.fetch(3, expires=1))
        first.ack()  # a consumer_ack metric: not asked for
        second.term()  # terminated: not asked for
        third.nak()
        (ev,) = _take(events, 1)
        _quiet(events)
    assert isinstance(ev, MessageNaked)
    assert ev.stream_seq == 3


def test_consumer_pause_and_api_audit(js, stream):
    stream.create_consumer(ConsumerConfig(durable_name="c"))
    until = (datetime.now(timezone.utc) + timedelta(minutes=5)).replace(microsecond=0)
    with js.advisories(stream=stream.name, kinds=["consumer_pause"]) as events:
        js.api.request(f"CONSUMER.PAUSE.{stream.name}.c", {"pause_until": until.isoformat().replace("+00:00", "Z")})
        js.api.request(f"CONSUMER.PAUSE.{stream.name}.c", {})  # resume
        paused, resumed = _take(events, 2)
    assert isinstance(paused, ConsumerPaused)
    assert (paused.consumer, paused.paused, paused.pause_until) == ("c", True, until)
    assert isinstance(resumed, ConsumerPaused)
    assert resumed.paused is False
    with js.advisories(kinds=["api_audit"]) as events:
        js.stream_info(stream.name)
        audit = _find(events, lambda ev: getattr(ev, "api_subject", "").endswith(f"STREAM.INFO.{stream.name}"))
    assert isinstance(audit, APIAudit)
    assert audit.subject == "$JS.EVENT.ADVISORY.API"
    assert stream.name in audit.response


def test_the_whole_tree_passes_unknown_and_unreadable_events_on(client, js):
    with js.advisories() as events:
        client.publish("$JS.EVENT.ADVISORY.FUTURE.THING", b"not json")
        client.publish("$JS.EVENT.METRIC.FUTURE.THING", b'{"type": "io.nats.jetstream.metric.v9.thing", "x": 1}')
        bad = _find(events, lambda ev: ev.subject == "$JS.EVENT.ADVISORY.FUTURE.THING")
        future = _find(events, lambda ev: ev.subject == "$JS.EVENT.METRIC.FUTURE.THING")
    assert isinstance(bad, UnknownAdvisory)
    assert bad.payload == b"not json"
    assert isinstance(future, UnknownAdvisory)
    assert (future.type, future.raw["x"]) == ("io.nats.jetstream.metric.v9.thing", 1)


def test_reading_timing_out_closing_and_iterating(nats_server, name):
    with jetstream_sync.connect(nats_server.url) as nc:
        js = nc.jetstream()
        events = js.advisories(stream=name)
        with pytest.raises(errors.TimeoutError):
            events.next(0.05)
        js.create_stream(StreamConfig(name=name, subjects=[f"{name}.>"]))
        js.delete_stream(name)
        assert [type(ev) for ev in _take(events, 2)] == [StreamAction, StreamAction]
        assert events.is_active
        events.close()
        events.close()  # idempotent
        assert not events.is_active
        assert list(events) == []  # iteration ends once closed and read
        with pytest.raises(errors.SubscriptionClosedError):
            events.next(0.05)

        # a reader blocked in iteration wakes when the client closes
        events = js.advisories(stream=name)
        outcome: list[BaseException] = []

        def read() -> None:
            try:
                for _ in events:
                    pass
            except BaseException as exc:
                outcome.append(exc)

        reader = threading.Thread(target=read)
        reader.start()
        wait_parked([reader])
        nc.close()
        assert join_all([reader], 5) == []
        assert [type(exc) for exc in outcome] == [errors.ConnectionClosedError]


def test_bad_arguments_are_refused_before_subscribing(js, monkeypatch):
    def no_subscribe(*args, **kwargs):
        raise AssertionError("subscribed despite a bad argument")

    monkeypatch.setattr(js.client.runtime, "subscribe", no_subscribe)
    with pytest.raises(errors.InvalidArgumentError, match="known kinds: consumer_ack, max_deliver") as unknown:
        js.advisories(kinds=["nak", "no_such_kind"])
    assert unknown.value.field == "kinds"
    with pytest.raises(errors.InvalidTypeError):
        js.advisories(kinds="nak")
    with pytest.raises(errors.InvalidTypeError):
        js.advisories(kinds=3)  # type: ignore[arg-type]
    with pytest.raises(errors.InvalidArgumentError, match="empty"):
        js.advisories(kinds=[])
    with pytest.raises(errors.InvalidArgumentError, match="stream_action events name no consumer"):
        js.advisories(consumer="c", kinds=["nak", "stream_action"])
    with pytest.raises(errors.InvalidArgumentError, match="api_audit events name no stream"):
        js.advisories(stream="S", kinds=["api_audit"])
    with pytest.raises(errors.InvalidArgumentError) as bad_stream:
        js.advisories(stream="a.b")
    assert bad_stream.value.field == "stream"
    with pytest.raises(errors.InvalidArgumentError) as bad_consumer:
        js.advisories(consumer="c*")
    assert bad_consumer.value.field == "consumer"


@pytest.mark.parametrize(
    ("stream", "consumer", "kinds", "subjects"),
    [
        (None, None, None, ["$JS.EVENT.ADVISORY.>", "$JS.EVENT.METRIC.>"]),
        (
            "S",
            None,
            None,
            ["$JS.EVENT.ADVISORY.STREAM.*.S", "$JS.EVENT.ADVISORY.CONSUMER.*.S.*", "$JS.EVENT.METRIC.CONSUMER.*.S.*"],
        ),
        (None, "C", None, ["$JS.EVENT.ADVISORY.CONSUMER.*.*.C", "$JS.EVENT.METRIC.CONSUMER.*.*.C"]),
        ("S", "C", None, ["$JS.EVENT.ADVISORY.CONSUMER.*.S.C", "$JS.EVENT.METRIC.CONSUMER.*.S.C"]),
        (None, None, ["consumer_ack"], ["$JS.EVENT.METRIC.CONSUMER.ACK.*.*"]),
        (
            "S",
            "C",
            ["nak", "max_deliver"],
            ["$JS.EVENT.ADVISORY.CONSUMER.MSG_NAKED.S.C", "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.S.C"],
        ),
        (
            "S",
            None,
            ["stream_action", "consumer_action"],
            [
                "$JS.EVENT.ADVISORY.STREAM.CREATED.S",
                "$JS.EVENT.ADVISORY.STREAM.DELETED.S",
                "$JS.EVENT.ADVISORY.STREAM.UPDATED.S",
                "$JS.EVENT.ADVISORY.CONSUMER.CREATED.S.*",
                "$JS.EVENT.ADVISORY.CONSUMER.DELETED.S.*",
            ],
        ),
        (
            None,
            None,
            ["stream_leader_elected", "api_audit"],
            ["$JS.EVENT.ADVISORY.STREAM.LEADER_ELECTED.*", "$JS.EVENT.ADVISORY.API"],
        ),
    ],
)
def test_which_subjects_each_combination_reads(stream, consumer, kinds, subjects):
    chosen = None if kinds is None else [AdvisoryKind(k) for k in kinds]
    assert subjects_for(stream, consumer, chosen) == subjects
