"""The periodic stats callback and Client.stats_snapshot (issue 33: lag and health): the counters of a known
workload, the period, a callback that raises, and the close that stops it."""

from __future__ import annotations

import logging
import statistics
import threading
import time

import pytest

import jetstream_sync
from jetstream_sync import ClientStats, ConsumeFill, ConsumerConfig, StreamConfig, errors
from jetstream_sync._protocol import encode_pub
from tests.helpers import wait_until


class Snapshots:
    """A stats callback that keeps what it was given (thread-safe: the test reads while the callbacks thread
    appends)."""

    def __init__(self, raises: BaseException | None = None) -> None:
        self.lock = threading.Lock()
        self.got: list[ClientStats] = []
        self.threads: set[str] = set()
        self.raises = raises

    def __call__(self, stats: ClientStats) -> None:
        with self.lock:
            self.got.append(stats)
            self.threads.add(threading.current_thread().name)
        if self.raises is not None:
            raise self.raises

    def __len__(self) -> int:
        with self.lock:
            return len(self.got)

    def last(self) -> ClientStats:
        with self.lock:
            return self.got[-1]


def test_counters_of_a_known_workload_are_exact(nats_server):
    snaps = Snapshots()
    with jetstream_sync.connect(nats_server.url, stats_callback=snaps, stats_interval=0.2) as nc:
        sub = nc.subscribe("health.in")
        nc.flush()
        before = nc.stats_snapshot()
        payload = b"x" * 100
        for _ in range(1000):
            nc.publish("health.in", payload)
        nc.flush()
        for _ in range(1000):
            sub.next_msg(5)
        after = nc.stats_snapshot()
        assert after.in_msgs - before.in_msgs == 1000
        assert after.in_bytes - before.in_bytes == 100_000
        assert after.out_msgs - before.out_msgs == 1000
        assert after.out_bytes - before.out_bytes == 1000 * len(encode_pub(b"health.in", b"", None, payload))
        assert (after.reconnects, after.acks_unconfirmed, after.publish_acks_pending) == (0, 0, 0)
        assert after.connected and after.consumes == ()
        wait_until(lambda: len(snaps) >= 2 and snaps.last().rtt is not None)
        assert 0 < snaps.last().rtt < 1.0  # type: ignore[operator]
        assert snaps.threads == {"jetstream-sync-callbacks"}


def the_one_fill(nc: jetstream_sync.Client) -> ConsumeFill:
    (fill,) = nc.stats_snapshot().consumes
    return fill


def bounds(fill: ConsumeFill) -> tuple[str, str, int, int, int]:
    return (fill.label, fill.kind, fill.held_messages, fill.max_messages, fill.max_bytes)


def test_each_running_consume_reports_what_it_holds_against_its_bounds(nats_server):
    with jetstream_sync.connect(nats_server.url) as nc:
        js = nc.jetstream()
        js.create_stream(StreamConfig(name="HEALTH", subjects=["health.s.>"]))
        try:
            for i in range(100):
                js.publish_async("health.s.a", b"%03d" % i)
            js.publish_async_complete()
            cons = js.create_consumer("HEALTH", ConsumerConfig(durable_name="c", ack_wait=60))
            with cons.messages(max_messages=50) as it:
                first = it.next(5)
                wait_until(lambda: it.stats().buffered == 49)
                fill = the_one_fill(nc)
                assert bounds(fill) == ("HEALTH/c", "pull", 49, 50, 0)
                assert fill.delivered == 1 and fill.fill == pytest.approx(49 / 50)
                held = [it.next(5) for _ in range(49)]  # the very messages it held, in order
                assert fill.held_bytes == sum(m.size for m in held)
                first.ack()
            wait_until(lambda: nc.stats_snapshot().consumes == ())  # a stopped iterator is no longer reported

            pc = js.create_or_update_push_consumer(
                "HEALTH", ConsumerConfig(durable_name="p", deliver_subject="_deliver.health", ack_wait=60)
            )
            with pc.messages(pending_msgs_limit=1000, pending_bytes_limit=1 << 20) as it:
                wait_until(lambda: it.stats().buffered == 100)
                fill = the_one_fill(nc)
                assert bounds(fill) == ("HEALTH/p", "push", 100, 1000, 1 << 20)
                held = [it.next(5) for _ in range(100)]
                assert fill.held_bytes == sum(m.size for m in held)
        finally:
            js.delete_stream("HEALTH")


def test_acks_and_pub_acks_awaiting_the_server_are_counted(fault_proxy):
    with jetstream_sync.connect(fault_proxy.url, timeout=10) as nc:
        js = nc.jetstream()
        js.create_stream(StreamConfig(name="HEALTHACK", subjects=["health.ack"]))
        js.publish("health.ack", b"1")
        cons = js.create_consumer("HEALTHACK", ConsumerConfig(durable_name="c", ack_wait=60))
        (msg,) = list(cons.fetch(1, expires=5))
        fault_proxy.stall("downstream")  # the server hears us; its answers wait in the proxy
        acking = threading.Thread(target=msg.ack_sync, kwargs={"timeout": 10})
        acking.start()
        futures = [js.publish_async("health.ack", b"%d" % i) for i in range(5)]
        wait_until(lambda: nc.stats_snapshot().acks_unconfirmed == 1)
        assert nc.stats_snapshot().publish_acks_pending == 5
        fault_proxy.resume("downstream")
        acking.join(10)
        for future in futures:
            future.result(10)
        after = nc.stats_snapshot()
        assert (after.acks_unconfirmed, after.publish_acks_pending) == (0, 0)


def test_reconnects_and_rtt_follow_the_link(fault_proxy):
    snaps = Snapshots()
    with jetstream_sync.connect(
        fault_proxy.url, stats_callback=snaps, stats_interval=0.2, reconnect_wait=0.1, max_reconnect_attempts=-1
    ) as nc:
        fault_proxy.set_latency(0.05)  # a round trip takes 0.1 s more
        wait_until(lambda: (snaps.last().rtt or 0) >= 0.1 if len(snaps) else False)
        fault_proxy.set_latency(0)
        fault_proxy.cut()
        wait_until(lambda: len(snaps) and snaps.last().reconnects == 1 and snaps.last().connected, timeout=10)
        assert nc.stats_snapshot().reconnects == 1


def test_the_period_holds(nats_server):
    snaps = Snapshots()
    with jetstream_sync.connect(nats_server.url, stats_callback=snaps, stats_interval=0.2):
        started = time.monotonic()
        wait_until(lambda: len(snaps) >= 10, timeout=10)
        elapsed = time.monotonic() - started
    gaps = [s.interval for s in snaps.got[1:10]]
    assert snaps.got[0].interval == 0.0
    # Fixed due times: ten periods take ten periods, not ten periods plus each tick's delay (a timer re-armed
    # "interval after it ran" would drift). The machine is shared, so the bounds leave room for a late callback.
    assert 1.8 <= elapsed <= 2.8, elapsed
    assert statistics.median(gaps) == pytest.approx(0.2, abs=0.04), gaps
    assert all(0.02 <= gap <= 0.6 for gap in gaps), gaps


def test_a_raising_callback_is_logged_once_and_keeps_being_called(nats_server, caplog):
    snaps = Snapshots(raises=ValueError("the dashboard is down"))
    with (
        caplog.at_level(logging.DEBUG, logger="jetstream_sync"),
        jetstream_sync.connect(nats_server.url, stats_callback=snaps, stats_interval=0.1),
    ):
        wait_until(lambda: len(snaps) >= 4)
    assert [s.callback_errors for s in snaps.got[:4]] == [0, 1, 2, 3]
    errors_logged = [r for r in caplog.records if r.levelno >= logging.ERROR and "stats callback" in r.getMessage()]
    assert len(errors_logged) == 1
    assert errors_logged[0].exc_info is not None and "the dashboard is down" in str(errors_logged[0].exc_info[1])


def test_closing_the_client_stops_the_callback(nats_server):
    snaps = Snapshots()
    nc = jetstream_sync.connect(nats_server.url, stats_callback=snaps, stats_interval=0.1)
    wait_until(lambda: len(snaps) >= 2)
    nc.close()
    count = len(snaps)
    reporter = nc._stats_reporter
    assert reporter._timer.cancelled
    time.sleep(0.5)  # five periods: a timer left running would have called it again by now
    assert len(snaps) == count


def test_a_slow_callback_skips_periods_instead_of_queueing_them(nats_server):
    release = threading.Event()
    snaps = Snapshots()

    def slow(stats: ClientStats) -> None:
        snaps(stats)
        release.wait(10)

    with jetstream_sync.connect(nats_server.url, stats_callback=slow, stats_interval=0.1) as nc:
        wait_until(lambda: len(snaps) == 1)
        wait_until(lambda: nc._stats_reporter.skipped >= 3)
        release.set()
        wait_until(lambda: len(snaps) >= 2)
        assert snaps.got[1].skipped >= 3


def test_stats_interval_is_checked():
    with pytest.raises(errors.InvalidArgumentError, match="stats_interval"):
        jetstream_sync.ConnectOptions(stats_interval=0.01)
    with pytest.raises(errors.InvalidTypeError, match="stats_callback"):
        jetstream_sync.ConnectOptions(stats_callback=42)
