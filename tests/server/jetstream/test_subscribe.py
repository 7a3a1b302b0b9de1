"""js.subscribe / js.pull_subscribe against a real server: every ADR-15 binding rule, then behaviour."""

from __future__ import annotations

import json
import threading
import time
import urllib.request

import pytest

import jetstream_sync
from jetstream_sync import AckPolicy, ConsumerConfig, StreamConfig, errors
from tests.helpers import wait_until


def consumers(js, stream_name: str) -> set[str]:
    return set(js.consumer_names(stream_name))


def publish(js, subject: str, count: int) -> None:
    for i in range(count):
        js.publish_async(subject, b"%d" % i)
    js.publish_async_complete()


def push_config(name: str, durable: str, **kwargs) -> ConsumerConfig:
    return ConsumerConfig(durable_name=durable, deliver_subject=f"_deliver.{name}.{durable}", **kwargs)


# -- ADR-15 rules: the exact error, nothing left behind ---------------------------------------------------


def test_push_bound_duplicate(js, stream, name):
    first = js.subscribe(f"{name}.a", durable="dup")
    assert first.created
    before = consumers(js, name)
    with pytest.raises(errors.DuplicateSubscriptionError):
        js.subscribe(f"{name}.a", durable="dup")
    assert consumers(js, name) == before == {"dup"}
    first.unsubscribe()


def test_resubscribe_right_after_unsubscribe(js, stream, name):
    """nats.go #1269: the server clears push_bound a moment after the UNSUB; a rebind must not race it."""
    stream.create_or_update_push_consumer(push_config(name, "again"))
    for round_ in range(15):
        sub = js.subscribe(None, durable="again", stream=name, bind=True)
        js.publish(f"{name}.a", b"%d" % round_)
        msg = sub.next_msg(2)
        assert msg.data == b"%d" % round_
        msg.ack_sync()
        sub.unsubscribe()
    assert consumers(js, name) == {"again"}


def test_non_queue_subscribe_on_queue_consumer(js, stream, name):
    member = js.subscribe(f"{name}.a", durable="qb", queue="g")
    with pytest.raises(errors.ConsumerIsQueueBoundError):
        js.subscribe(f"{name}.a", durable="qb")
    assert consumers(js, name) == {"qb"}
    member.unsubscribe()


def test_queue_name_differs_from_deliver_group(js, stream, name):
    member = js.subscribe(f"{name}.a", durable="qb", queue="g")
    with pytest.raises(errors.DeliverGroupMismatchError):
        js.subscribe(f"{name}.a", durable="qb", queue="other")
    assert consumers(js, name) == {"qb"}
    member.unsubscribe()


def test_queue_subscribe_on_consumer_without_group(js, stream, name):
    stream.create_or_update_push_consumer(push_config(name, "nq"))
    with pytest.raises(errors.ConsumerNotQueueError):
        js.subscribe(f"{name}.a", durable="nq", queue="g")
    assert consumers(js, name) == {"nq"}


def test_filter_subject_mismatch(js, stream, name):
    stream.create_or_update_push_consumer(push_config(name, "f", filter_subject=f"{name}.a"))
    with pytest.raises(errors.SubjectMismatchError):
        js.subscribe(f"{name}.b", durable="f")
    assert consumers(js, name) == {"f"}


def test_pull_subscribe_on_push_consumer(js, stream, name):
    stream.create_or_update_push_consumer(push_config(name, "p"))
    with pytest.raises(errors.PullSubscribeToPushConsumerError):
        js.pull_subscribe(f"{name}.a", durable="p")
    assert consumers(js, name) == {"p"}


def test_subscribe_on_pull_consumer(js, stream, name):
    pull = js.pull_subscribe(f"{name}.a", durable="pl")
    assert pull.created
    with pytest.raises(errors.PullSubscribeRequiredError):
        js.subscribe(f"{name}.a", durable="pl")
    assert consumers(js, name) == {"pl"}


def test_config_drift(js, stream, name):
    stream.create_or_update_push_consumer(push_config(name, "drift", max_ack_pending=10))
    with pytest.raises(errors.ConsumerConfigMismatchError):
        js.subscribe(f"{name}.a", durable="drift", config=ConsumerConfig(max_ack_pending=20))
    assert consumers(js, name) == {"drift"}
    assert js.consumer_info(name, "drift").config.max_ack_pending == 10


def test_config_with_another_deliver_subject_is_drift(js, stream, name):
    stream.create_or_update_push_consumer(push_config(name, "ds"))
    other = ConsumerConfig(deliver_subject=f"_elsewhere.{name}")
    with pytest.raises(errors.ConsumerConfigMismatchError, match="deliver_subject"):
        js.subscribe(f"{name}.a", durable="ds", config=other)
    same = ConsumerConfig(deliver_subject=push_config(name, "ds").deliver_subject)
    sub = js.subscribe(f"{name}.a", durable="ds", config=same)
    sub.unsubscribe()
    assert consumers(js, name) == {"ds"}


def test_pull_config_drift(js, stream, name):
    js.pull_subscribe(f"{name}.a", durable="pd", config=ConsumerConfig(max_ack_pending=10))
    with pytest.raises(errors.ConsumerConfigMismatchError):
        js.pull_subscribe(f"{name}.a", durable="pd", config=ConsumerConfig(max_ack_pending=20))
    assert consumers(js, name) == {"pd"}


def test_queue_with_flow_control(js, stream, name):
    with pytest.raises(errors.QueueFlowControlError):
        js.subscribe(f"{name}.a", queue="g", flow_control=True, idle_heartbeat=1)
    assert consumers(js, name) == set()


def test_queue_with_heartbeat(js, stream, name):
    with pytest.raises(errors.QueueHeartbeatError):
        js.subscribe(f"{name}.a", queue="g", idle_heartbeat=1)
    assert consumers(js, name) == set()


def test_no_subject_no_stream(js, stream, name):
    with pytest.raises(errors.InvalidArgumentError):
        js.subscribe(None)
    with pytest.raises(errors.InvalidArgumentError):
        js.pull_subscribe(None, durable="x")
    assert consumers(js, name) == set()


def test_pull_subscribe_ack_none(js, stream, name):
    with pytest.raises(errors.InvalidArgumentError):
        js.pull_subscribe(f"{name}.a", durable="n", config=ConsumerConfig(ack_policy=AckPolicy.NONE))
    assert consumers(js, name) == set()


def test_subject_captured_by_no_stream(js, stream, name):
    with pytest.raises(errors.StreamNotFoundError):
        js.subscribe(f"nowhere{name}.a")
    with pytest.raises(errors.StreamNotFoundError):
        js.pull_subscribe(f"nowhere{name}.a", durable="x")
    assert consumers(js, name) == set()


def test_subject_captured_by_two_streams(js, name):
    js.create_stream(StreamConfig(name=f"{name}A", subjects=[f"{name}.a"]))
    js.create_stream(StreamConfig(name=f"{name}B", subjects=[f"{name}.b"]))
    with pytest.raises(errors.SubscribeError):
        js.subscribe(f"{name}.*")
    with pytest.raises(errors.SubscribeError):
        js.pull_subscribe(f"{name}.*", durable="x")
    assert consumers(js, f"{name}A") == consumers(js, f"{name}B") == set()


def test_bind_to_missing_consumer(js, stream, name):
    with pytest.raises(errors.ConsumerNotFoundError):
        js.subscribe(f"{name}.a", durable="missing", stream=name, bind=True)
    with pytest.raises(errors.ConsumerNotFoundError):
        js.pull_subscribe(f"{name}.a", durable="missing", stream=name, bind=True)
    assert consumers(js, name) == set()


# -- behaviour ----------------------------------------------------------------------------------------------


def test_queue_name_is_the_durable(js, stream, name):
    lock = threading.Lock()
    got: list[list[int]] = [[], []]

    def collector(index):
        def cb(msg):
            with lock:
                got[index].append(msg.metadata.sequence.stream)

        return cb

    first = js.subscribe(f"{name}.a", queue="workers", cb=collector(0))
    second = js.subscribe(f"{name}.a", queue="workers", cb=collector(1))
    assert first.consumer == second.consumer == "workers"
    assert first.created and not second.created
    assert consumers(js, name) == {"workers"}
    publish(js, f"{name}.a", 300)
    wait_until(lambda: len(got[0]) + len(got[1]) >= 300)
    wait_until(lambda: js.consumer_info(name, "workers").num_ack_pending == 0)
    both = got[0] + got[1]
    assert len(both) == 300
    assert sorted(both) == list(range(1, 301))
    second.unsubscribe()
    first.unsubscribe()
    assert consumers(js, name) == set()


def test_next_msg_and_iteration(js, stream, name):
    publish(js, f"{name}.a", 10)
    sub = js.subscribe(f"{name}.a")
    first = [sub.next_msg(2) for _ in range(5)]
    rest = []
    for msg in sub:
        rest.append(msg)
        if len(rest) == 5:
            break
    seqs = [m.metadata.sequence.stream for m in first + rest]
    assert seqs == list(range(1, 11))
    for msg in first + rest:
        msg.ack()
    with pytest.raises(errors.TimeoutError):
        sub.next_msg(0.2)
    sub.unsubscribe()


def test_cb_auto_ack(js, stream, name):
    got = []
    sub = js.subscribe(f"{name}.a", durable="auto", cb=lambda m: got.append(m.data))
    publish(js, f"{name}.a", 20)
    wait_until(lambda: len(got) == 20)
    wait_until(lambda: sub.consumer_info().num_ack_pending == 0)
    assert sub.consumer_info().delivered.stream_seq == 20
    sub.unsubscribe()


def test_cb_manual_ack(js, stream, name):
    got = []
    sub = js.subscribe(f"{name}.a", durable="manual", cb=got.append, manual_ack=True)
    publish(js, f"{name}.a", 20)
    wait_until(lambda: len(got) == 20)
    wait_until(lambda: sub.consumer_info().num_ack_pending == 20)
    for msg in got:
        msg.ack()
    wait_until(lambda: sub.consumer_info().num_ack_pending == 0)
    sub.unsubscribe()


def test_unsubscribe_deletes_the_consumer_it_created(js, stream, name):
    durable = js.subscribe(f"{name}.a", durable="mine")
    ephemeral = js.subscribe(f"{name}.a")
    assert durable.created and ephemeral.created
    assert consumers(js, name) == {"mine", ephemeral.consumer}
    durable.unsubscribe()
    ephemeral.unsubscribe()
    assert consumers(js, name) == set()


def test_unsubscribe_keeps_a_bound_consumer(js, stream, name):
    stream.create_or_update_push_consumer(push_config(name, "existing"))
    sub = js.subscribe(f"{name}.a", durable="existing")
    assert not sub.created
    publish(js, f"{name}.a", 3)
    sub.next_msg(2).ack()
    # All three reached this client before it unsubscribes: what the server pushes while it processes an UNSUB
    # may go to the subject it still thinks has interest (its consumer learns of the UNSUB on a channel it
    # selects on beside "new messages"), reaching nobody until the ack wait; no client can give that back.
    wait_until(lambda: sub.delivery.received == 3)
    sub.unsubscribe()
    assert consumers(js, name) == {"existing"}

    bound = js.subscribe(None, durable="existing", stream=name, bind=True)
    assert not bound.created
    js.publish(f"{name}.a", b"after")
    # "1" and "2" reached the first subscription and were not handed out: its unsubscribe gave them back once the
    # server had seen its UNSUB, so they come again now, long before the consumer's ack wait (30 s), and once:
    # given back earlier, a redelivery could go to the retiring subscription (given back again) or, under load,
    # to the subject the server still thought had interest (then it waited for the ack wait).
    got = {}
    for _ in range(3):
        msg = bound.next_msg(5)
        got[msg.data] = msg.metadata.num_delivered
    assert got == {b"1": 2, b"2": 2, b"after": 1}
    bound.unsubscribe()
    assert consumers(js, name) == {"existing"}


def test_a_client_closed_right_after_unsubscribe_still_gives_back(nats_server, js, stream, name):
    """The give-back waits for the server to confirm the UNSUB; a close that comes first sends it before the
    connection goes, so the next subscriber gets the messages now, not after the ack wait (30 s)."""
    stream.create_or_update_push_consumer(push_config(name, "existing"))
    with jetstream_sync.connect(nats_server.url) as other:
        sub = other.jetstream().subscribe(f"{name}.a", durable="existing")
        publish(js, f"{name}.a", 3)
        sub.next_msg(2).ack()
        wait_until(lambda: sub.delivery.received == 3)
        sub.unsubscribe()
    bound = js.subscribe(None, durable="existing", stream=name, bind=True)
    got = {}
    for _ in range(2):
        msg = bound.next_msg(5)
        got[msg.data] = msg.metadata.num_delivered
    assert got == {b"1": 2, b"2": 2}
    bound.unsubscribe()


def test_adr15_member_example(js, stream, name):
    member1 = js.subscribe(f"{name}.a", durable="shared", queue="bar")
    member2 = js.subscribe(f"{name}.a", durable="shared", queue="bar")
    assert member1.created and not member2.created
    member2.unsubscribe()
    assert consumers(js, name) == {"shared"}
    publish(js, f"{name}.a", 5)
    msgs = [member1.next_msg(2) for _ in range(5)]
    assert [m.metadata.sequence.stream for m in msgs] == [1, 2, 3, 4, 5]
    for msg in msgs:
        msg.ack()
    member1.drain()
    assert member1.drained.wait(5)
    assert consumers(js, name) == set()


def test_drain_delivers_buffered_then_deletes(js, stream, name):
    publish(js, f"{name}.a", 10)
    sub = js.subscribe(f"{name}.a")
    consumer = sub.consumer
    wait_until(lambda: sub.delivery.stats().buffered >= 10)
    sub.drain()
    msgs = [sub.next_msg(2) for _ in range(10)]
    assert [m.metadata.sequence.stream for m in msgs] == list(range(1, 11))
    for msg in msgs:
        msg.ack()
    assert sub.drained.wait(5)
    assert consumer not in consumers(js, name)


def test_drain_with_cb(js, stream, name):
    release = threading.Event()
    got = []

    def cb(msg):
        release.wait(5)
        got.append(msg.metadata.sequence.stream)

    publish(js, f"{name}.a", 10)
    sub = js.subscribe(f"{name}.a", durable="drained", cb=cb)
    wait_until(lambda: sub.delivery.stats().buffered >= 9)
    sub.drain()
    release.set()
    assert sub.drained.wait(5)
    assert got == list(range(1, 11))
    assert consumers(js, name) == set()


def test_fetch(js, stream, name):
    sub = js.pull_subscribe(f"{name}.a", durable="fetch")
    publish(js, f"{name}.a", 5)
    msgs = sub.fetch(10, timeout=1)
    assert isinstance(msgs, list)
    assert [m.metadata.sequence.stream for m in msgs] == [1, 2, 3, 4, 5]
    for msg in msgs:
        msg.ack()
    js.publish(f"{name}.a", b"six")
    (one,) = sub.fetch(1, timeout=1)
    assert one.data == b"six"
    one.ack()
    started = time.monotonic()
    with pytest.raises(errors.TimeoutError):
        sub.fetch(1, timeout=0.5)
    assert time.monotonic() - started < 0.5 + 0.4
    started = time.monotonic()
    with pytest.raises(errors.TimeoutError):
        sub.fetch(10, timeout=0.5)
    assert time.monotonic() - started < 0.5 + 0.4
    sub.unsubscribe()
    assert consumers(js, name) == set()


def subscriptions_made(server) -> int:
    with urllib.request.urlopen(f"{server.monitor_url}/subsz", timeout=5) as response:
        return int(json.load(response)["num_inserts"])


def test_fetch_one_reuses_one_wildcard_inbox(nats_server_function):
    # ADR-13 Pull(1): one subscription for the no-wait requests of every fetch(1), made at the first one.
    with jetstream_sync.connect(nats_server_function.url) as nc:
        js = nc.jetstream()
        js.create_stream(StreamConfig(name="P1", subjects=["p1.>"]))
        sub = js.pull_subscribe("p1.a", durable="one")
        publish(js, "p1.a", 21)
        (first,) = sub.fetch(1, timeout=1)
        first.ack()
        made = subscriptions_made(nats_server_function)
        seqs = []
        for _ in range(20):
            (msg,) = sub.fetch(1, timeout=1)
            seqs.append(msg.metadata.sequence.stream)
            msg.ack_sync()
        assert seqs == list(range(2, 22))
        assert subscriptions_made(nats_server_function) == made
        with pytest.raises(errors.TimeoutError):
            sub.fetch(1, timeout=0.3)  # nothing now: the long pull, on an inbox of its own
        assert js.consumer_info("P1", "one").num_ack_pending == 0
        sub.unsubscribe()


def test_fetch_waits_for_a_late_message(js, stream, name):
    sub = js.pull_subscribe(f"{name}.a", durable="late")
    timer = threading.Timer(0.3, lambda: js.publish(f"{name}.a", b"late"))
    timer.start()
    try:
        msgs = sub.fetch(1, timeout=2)
    finally:
        timer.join()
    assert [m.data for m in msgs] == [b"late"]
    msgs[0].ack()
    sub.unsubscribe()


def test_ordered_consumer(js, stream, name):
    publish(js, f"{name}.a", 50)
    sub = js.subscribe(f"{name}.a", ordered_consumer=True)
    seqs = [sub.next_msg(2).metadata.sequence.stream for _ in range(50)]
    assert seqs == list(range(1, 51))
    sub.unsubscribe()
