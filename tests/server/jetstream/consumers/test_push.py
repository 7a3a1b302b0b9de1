"""PushConsumer and OrderedPushConsumer against a real server: delivery, flow control, the buffer bound,
queue groups, the checks made before sending, heartbeat alarms and ordered resets."""

from __future__ import annotations

import sys
import threading
import time

import pytest

import jetstream_sync
from jetstream_sync import ConsumerConfig, StreamConfig, errors
from tests.helpers import wait_until


def publish(js, subject: str, count: int, size: int = 0) -> None:
    for i in range(count):
        js.publish_async(subject, b"%d" % i if not size else b"x" * size)
    js.publish_async_complete()


def push_config(name: str, durable: str, **kwargs) -> ConsumerConfig:
    return ConsumerConfig(durable_name=durable, deliver_subject=f"_deliver.{name}.{durable}", **kwargs)


class Collector:
    """A handler that records stream sequences and acks; thread-safe for several consumes."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.seqs: list[int] = []

    def __call__(self, msg: jetstream_sync.Msg) -> None:
        with self.lock:
            self.seqs.append(msg.metadata.sequence.stream)
        msg.ack()

    def __len__(self) -> int:
        with self.lock:
            return len(self.seqs)


def test_consume_delivers_every_message_once(js, stream, name):
    pc = stream.create_or_update_push_consumer(push_config(name, "c", idle_heartbeat=1, flow_control=True))
    publish(js, f"{name}.a", 200)
    got = Collector()
    errs: list[BaseException] = []
    ctx = pc.consume(got, error_handler=errs.append)
    try:
        wait_until(lambda: len(got) >= 200)
        wait_until(lambda: pc.info().num_ack_pending == 0)
    finally:
        ctx.stop()
    ctx.wait(2)
    assert got.seqs == list(range(1, 201))
    assert errs == []
    assert ctx.stats().messages_delivered == 200


def test_messages_iteration(js, stream, name):
    pc = stream.create_or_update_push_consumer(push_config(name, "m", idle_heartbeat=1, flow_control=True))
    publish(js, f"{name}.a", 50)
    seqs = []
    with pc.messages() as it:
        for msg in it:
            seqs.append(msg.metadata.sequence.stream)
            msg.ack()
            if len(seqs) == 50:
                break
        with pytest.raises(errors.TimeoutError):
            it.next(0.2)
    assert seqs == list(range(1, 51))


def rss_bytes() -> int:
    """This process's resident set size (Linux /proc)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS in /proc/self/status")


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads VmRSS from /proc/self/status")
def test_flow_control_with_slow_handler(nats_server, js, stream, name):
    total, size = 20_000, 16 * 1024  # 320 MiB through the consumer
    publish(js, f"{name}.a", total, size=size)
    # no max_ack_pending (the server's default, 1,000, would hold it back first): flow control alone paces it
    pc = stream.create_or_update_push_consumer(
        push_config(name, "fc", idle_heartbeat=1, flow_control=True, max_ack_pending=-1)
    )
    seen = bytearray(total + 1)
    duplicates: list[int] = []
    errs: list[BaseException] = []
    baseline = rss_bytes()
    peak = {"rss": baseline, "buffered": 0}
    handled = 0
    running: list[jetstream_sync.ConsumeContext] = []  # set once consume() returned

    def slow(msg):
        nonlocal handled
        seq = msg.metadata.sequence.stream
        if seen[seq]:
            duplicates.append(seq)
        seen[seq] = 1
        msg.ack()
        handled += 1
        if handled % 250 == 0:
            peak["rss"] = max(peak["rss"], rss_bytes())
            if running:
                peak["buffered"] = max(peak["buffered"], running[0].stats().buffered)
        time.sleep(0.0001)  # per-message work, slower than the server; not synchronisation

    # Every flow-control answer is a publish to the request's $JS.FC subject: another connection counts them.
    with jetstream_sync.connect(nats_server.url) as spy_nc:
        spy = spy_nc.subscribe(f"$JS.FC.{name}.>")
        spy_nc.flush()
        ctx = pc.consume(slow, error_handler=errs.append)
        running.append(ctx)
        try:
            wait_until(lambda: handled >= total, timeout=30)
            wait_until(lambda: pc.info().num_ack_pending == 0)
        finally:
            ctx.stop()
        ctx.wait(2)
        stats = ctx.stats()
        js.client.flush()  # our answers reached the server, so the spy's copies precede its own PONG
        spy_nc.flush()
        answered = [spy.next_msg(1).subject for _ in range(spy.pending)]
    assert duplicates == []
    assert seen.count(1) == total
    assert stats.messages_delivered == total
    assert stats.dropped == 0
    assert not [e for e in errs if isinstance(e, errors.SlowConsumerError)]
    # the handler was the slow side: the server got ahead of it until flow control held it back
    assert peak["buffered"] >= 100, peak
    assert stats.flow_control_answered >= 1
    # each flow-control subject answered exactly once
    assert len(answered) == len(set(answered)) == stats.flow_control_answered
    assert stats.flow_control_answered == stats.flow_control_requests
    # Memory stays bounded by the flow-control window, not by what was published: the server lets at most
    # 32 MiB go unanswered (its pblimit), and growth measured 38-41 MiB (that window of 16 KiB messages plus
    # per-message overhead; peak buffered ~1,950 messages). 80 MiB is twice that, a quarter of the 320 MiB
    # published.
    growth = peak["rss"] - baseline
    assert growth < 80 * 2**20, f"RSS grew {growth / 2**20:.1f} MiB while consuming {total * size / 2**20:.0f} MiB"


def test_buffer_bound_drops_and_redelivers(js, stream, name):
    pc = stream.create_or_update_push_consumer(push_config(name, "slow", ack_wait=1))
    publish(js, f"{name}.a", 200)
    release = threading.Event()
    acked: set[int] = set()
    errs: list[BaseException] = []

    def handler(msg):
        release.wait(5)
        acked.add(msg.metadata.sequence.stream)
        msg.ack()

    ctx = pc.consume(handler, options=jetstream_sync.PushOptions(pending_msgs_limit=50), error_handler=errs.append)
    try:
        wait_until(lambda: any(isinstance(e, errors.SlowConsumerError) for e in errs))
        assert ctx.stats().dropped > 0
        release.set()
        wait_until(lambda: len(acked) == 200, timeout=10)
        wait_until(lambda: pc.info().num_ack_pending == 0, timeout=5)
    finally:
        release.set()
        ctx.stop()
    assert acked == set(range(1, 201))


def test_queue_group_of_three(js, stream, name):
    stream.create_or_update_push_consumer(push_config(name, "q", deliver_group="g"))
    handles = [js.push_consumer(name, "q") for _ in range(3)]
    collectors = [Collector() for _ in handles]
    contexts = [h.consume(c) for h, c in zip(handles, collectors, strict=True)]
    try:
        wait_until(lambda: js.consumer_info(name, "q").push_bound)
        publish(js, f"{name}.a", 10_000)
        wait_until(lambda: sum(len(c) for c in collectors) >= 10_000, timeout=20)
        wait_until(lambda: js.consumer_info(name, "q").num_ack_pending == 0)
    finally:
        for ctx in contexts:
            ctx.stop()
    everything = [seq for c in collectors for seq in c.seqs]
    assert len(everything) == 10_000  # none twice
    assert sorted(everything) == list(range(1, 10_001))  # none lost
    assert all(len(c) > 0 for c in collectors)  # shared by all three


def test_deliver_group_with_flow_control_refused(js, stream, name):
    with pytest.raises(errors.QueueFlowControlError):
        stream.create_push_consumer(push_config(name, "qfc", deliver_group="g", flow_control=True, idle_heartbeat=1))
    with pytest.raises(errors.QueueFlowControlError):
        js.create_push_consumer(name, push_config(name, "qfc", deliver_group="g", flow_control=True, idle_heartbeat=1))
    with pytest.raises(errors.QueueHeartbeatError):
        js.create_or_update_push_consumer(name, push_config(name, "qhb", deliver_group="g", idle_heartbeat=1))
    assert list(js.consumer_names(name)) == []


def test_push_consumer_needs_deliver_subject(js, stream, name):
    with pytest.raises(errors.InvalidArgumentError):
        stream.create_or_update_push_consumer(ConsumerConfig(durable_name="nods"))
    with pytest.raises(errors.InvalidArgumentError):
        js.create_push_consumer(name, ConsumerConfig(durable_name="nods"))
    assert list(js.consumer_names(name)) == []


def test_second_consume_on_same_handle(js, stream, name):
    pc = stream.create_or_update_push_consumer(push_config(name, "one"))
    ctx = pc.consume(lambda m: m.ack())
    try:
        with pytest.raises(errors.DuplicateSubscriptionError):
            pc.consume(lambda m: m.ack())
        with pytest.raises(errors.DuplicateSubscriptionError):
            pc.messages()
    finally:
        ctx.stop()
    ctx.wait(2)
    # once stopped, the handle can be read again (publish after subscribing: a message published while the
    # server still saw the old interest could go to the stopped subscription, redelivered only after ack_wait)
    with pc.messages() as it:
        publish(js, f"{name}.a", 3)
        assert it.next(2).metadata.sequence.stream == 1


def test_push_consumer_handle_on_pull_consumer(js, stream, name):
    js.create_or_update_consumer(name, ConsumerConfig(durable_name="pull"))
    with pytest.raises(errors.PullSubscribeRequiredError):
        js.push_consumer(name, "pull")


def test_missed_heartbeat_alarm(fault_proxy):
    with jetstream_sync.connect(fault_proxy.url) as nc:
        js = nc.jetstream()
        stream = js.create_stream(StreamConfig(name="HB", subjects=["hb.>"]))
        pc = stream.create_or_update_push_consumer(
            ConsumerConfig(durable_name="hb", deliver_subject="_deliver.hb", idle_heartbeat=0.5, flow_control=True)
        )
        errs: list[BaseException] = []
        got = Collector()
        ctx = pc.consume(got, error_handler=errs.append)
        try:
            js.publish("hb.a", b"before")
            wait_until(lambda: len(got) == 1)
            fault_proxy.stall("downstream")
            started = time.monotonic()
            wait_until(lambda: any(isinstance(e, errors.MissedHeartbeatError) for e in errs), timeout=3)
            assert time.monotonic() - started < 3
            assert ctx.stats().heartbeats_missed >= 1
            fault_proxy.resume("downstream")
            js.publish("hb.a", b"after")
            wait_until(lambda: len(got) == 2)
        finally:
            fault_proxy.resume()
            ctx.stop()
        assert got.seqs == [1, 2]


def test_ordered_push_in_order(js, stream, name):
    publish(js, f"{name}.a", 300)
    opc = js.ordered_push_consumer(name, idle_heartbeat=0.5)
    seqs = []
    with opc.messages() as it:
        while len(seqs) < 300:
            seqs.append(it.next(2).metadata.sequence.stream)
    assert seqs == list(range(1, 301))


def test_ordered_push_reset_after_consumer_deleted(js, stream, name):
    publish(js, f"{name}.a", 500)
    opc = js.ordered_push_consumer(name, idle_heartbeat=0.5)
    seqs = []
    with opc.messages() as it:
        while len(seqs) < 700:
            seqs.append(it.next(4).metadata.sequence.stream)
            if len(seqs) == 100:
                first = opc.name
                js.delete_consumer(name, first)
                publish(js, f"{name}.a", 200)  # only a new consumer can deliver these
        # a new push link may deliver before the reply to its create call comes, which is when it is counted
        wait_until(lambda: it.stats().resets >= 1)
    assert seqs == list(range(1, 701))
    assert opc.name != first
