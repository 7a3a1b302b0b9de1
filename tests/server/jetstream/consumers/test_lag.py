"""lag() of every consumer handle and of a running consume, checked against the server's consumer info under a
known backlog (issue 33: lag and health)."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta, timezone

import attrs

import jetstream_sync
from jetstream_sync import ConsumerConfig, ConsumerLag
from tests.helpers import wait_until


def publish(js: jetstream_sync.JetStream, subject: str, count: int) -> None:
    for i in range(count):
        js.publish_async(subject, b"%d" % i)
    js.publish_async_complete(timeout=20)


def recent(when: datetime | None) -> bool:
    now = datetime.now(timezone.utc)
    return when is not None and now - timedelta(seconds=30) < when <= now + timedelta(seconds=5)


def test_pull_consumer_lag_under_a_known_backlog(js, stream, name):
    cons = stream.create_consumer(ConsumerConfig(durable_name="c", ack_wait=60))
    publish(js, f"{name}.a", 500)
    assert cons.lag() == ConsumerLag(
        stream=name,
        consumer="c",
        pending=500,
        ack_pending=0,
        redelivered=0,
        waiting=0,
        last_active=None,
        delivered_stream_seq=0,
        ack_floor_stream_seq=0,
        ts=cons.cached_info.ts,
    )
    fetched = list(cons.fetch(200, expires=5))
    assert len(fetched) == 200
    for msg in fetched[:50]:
        msg.ack_sync()  # confirmed by the server before lag() asks
    lag = cons.lag()
    assert (lag.pending, lag.ack_pending, lag.redelivered, lag.waiting) == (300, 150, 0, 0)
    assert (lag.delivered_stream_seq, lag.ack_floor_stream_seq) == (200, 50)
    assert lag.lag == 450 and recent(lag.last_active) and recent(lag.ts)
    info = js.consumer_info(name, "c")
    assert attrs.evolve(ConsumerLag.from_info(info), ts=lag.ts) == lag  # the same figures, asked again
    assert cons.cached_info.num_ack_pending == 150  # lag() refreshed the handle's info too


def test_redelivered_counts_messages_delivered_again_and_not_yet_acked(js, stream, name):
    # max_ack_pending=10: while the 10 nak'd messages await redelivery nothing new may go out, so the second
    # fetch is exactly the redeliveries, whenever the server processes the naks
    cons = stream.create_consumer(ConsumerConfig(durable_name="r", ack_wait=60, max_ack_pending=10))
    publish(js, f"{name}.a", 500)
    for msg in cons.fetch(10, expires=5):
        msg.nak()
    again = list(cons.fetch(10, expires=5))
    assert [m.metadata.sequence.stream for m in again] == list(range(1, 11))
    assert all(m.metadata.num_delivered == 2 for m in again)
    lag = cons.lag()
    assert (lag.pending, lag.ack_pending, lag.redelivered) == (490, 10, 10)


def test_a_running_consume_reports_the_lag_of_its_consumer(js, stream, name):
    cons = stream.create_consumer(ConsumerConfig(durable_name="c", ack_wait=60))
    publish(js, f"{name}.a", 500)
    release = threading.Event()
    ctx = cons.consume(lambda msg: release.wait(10), max_messages=100, deferred_ack=True)
    try:
        wait_until(lambda: ctx.stats().buffered == 99)  # one in the handler, the rest of the pull held here
        lag = ctx.lag()
        assert lag is not None
        assert (lag.stream, lag.consumer) == (name, "c")
        assert (lag.pending, lag.ack_pending, lag.redelivered, lag.delivered_stream_seq) == (400, 100, 0, 100)
    finally:
        release.set()
        ctx.stop()
    ctx.wait(5)


def test_push_consumer_lag(js, stream, name):
    pc = stream.create_or_update_push_consumer(
        ConsumerConfig(
            durable_name="p", deliver_subject=f"_deliver.{name}", ack_wait=60, flow_control=True, idle_heartbeat=1
        )
    )
    publish(js, f"{name}.a", 500)
    with pc.messages() as it:
        got = [it.next(5) for _ in range(50)]
        for msg in got:
            msg.ack_sync()
        wait_until(lambda: it.stats().buffered + it.stats().messages_delivered == 500)
        lag = pc.lag()
        assert (lag.pending, lag.ack_pending, lag.redelivered, lag.waiting) == (0, 450, 0, 0)
        assert (lag.delivered_stream_seq, lag.ack_floor_stream_seq) == (500, 50)


def test_ordered_consumers_report_their_live_consumers_lag(js, stream, name):
    publish(js, f"{name}.a", 500)
    oc = stream.ordered_consumer()
    assert len(list(oc.fetch(200, expires=5))) == 200
    lag = oc.lag()
    assert (lag.stream, lag.consumer) == (name, oc.name)
    assert (lag.pending, lag.ack_pending, lag.delivered_stream_seq) == (300, 0, 200)

    opc = stream.ordered_push_consumer(idle_heartbeat=0.5)
    with opc.messages() as it:
        assert it.next(5).metadata.sequence.stream == 1
        wait_until(lambda: opc.lag().delivered_stream_seq == 500)
        assert opc.lag().pending == 0


def test_subscriptions_of_js_subscribe_and_pull_subscribe_report_their_consumers_lag(js, stream, name):
    publish(js, f"{name}.a", 500)
    sub = js.subscribe(f"{name}.a", durable="s", manual_ack=True, pending_msgs_limit=1000)
    psub = js.pull_subscribe(f"{name}.a", durable="p")
    try:
        for msg in [sub.next_msg(5) for _ in range(50)]:
            msg.ack_sync()
        wait_until(lambda: sub.lag().delivered_stream_seq == 500)
        lag = sub.lag()
        assert (lag.consumer, lag.pending, lag.ack_pending, lag.ack_floor_stream_seq) == ("s", 0, 450, 50)

        assert len(psub.fetch(200, timeout=5)) == 200
        lag = psub.lag()
        assert (lag.stream, lag.consumer, lag.pending, lag.ack_pending) == (name, "p", 300, 200)
    finally:
        sub.unsubscribe()
        psub.unsubscribe()
