"""User callbacks run on the client's callbacks thread, so one that blocks holds up only later callbacks.

The heartbeat checks, the catch-up probe and the close after reconnects ran out stay on the watchdog
(docs/ARCHITECTURE.md, "Threads and ownership"): a silent link is noticed and close() is prompt while a
user callback is stuck.
"""

from __future__ import annotations

import logging
import threading
import time

import pytest

import jetstream_sync
from jetstream_sync import ConsumerConfig, StreamConfig, errors
from jetstream_sync._runtime import CALLBACKS_THREAD_NAME, _callbacks
from jetstream_sync.message import Msg
from jetstream_sync.testing import EmbeddedServer, FaultProxy
from tests.helpers import our_threads, wait_until

_STUCK_FOR = 30.0  # the most a test's stuck callback waits for its release (the test releases it at the end)


class Stuck:
    """A callback that blocks until the test releases it; ``entered`` is set once it runs."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()

    def __call__(self, *args: object) -> None:
        self.entered.set()
        self.release.wait(_STUCK_FOR)


def publish(js: jetstream_sync.JetStream, subject: str, n: int) -> None:
    for i in range(n):
        js.publish(subject, b"%d" % i)


def test_a_stuck_disconnected_callback_does_not_stop_heartbeat_checks(fault_proxy: FaultProxy) -> None:
    """The link goes silent (stalled for far longer than twice the heartbeat) while the disconnected callback
    blocks: the consume still notices, counts the missed heartbeat and pulls again; its error handler hears of
    it once the stuck callback returns (callbacks keep their order)."""
    stuck = Stuck()
    reported: list[BaseException] = []
    nc = jetstream_sync.connect(fault_proxy.url, reconnect_wait=0.1, disconnected_callback=stuck)
    try:
        js = nc.jetstream()
        stream = js.create_stream(StreamConfig(name="SILENT", subjects=["silent.>"]))
        cons = stream.create_consumer(ConsumerConfig(durable_name="c"))
        fault_proxy.cut()
        assert stuck.entered.wait(5), "the disconnected callback never ran"
        wait_until(lambda: nc.reconnects >= 1 and nc.is_connected, timeout=10)
        got: list[bytes] = []

        def handle(msg: Msg) -> None:
            msg.ack()
            got.append(msg.data)

        ctx = cons.consume(handle, error_handler=reported.append, expires=5, idle_heartbeat=0.5)
        publish(js, "silent.a", 5)
        wait_until(lambda: len(got) == 5, timeout=10)
        pulls = ctx.stats().pulls_sent
        fault_proxy.stall("downstream")  # heartbeats stop reaching us; the connection stays open
        wait_until(lambda: ctx.stats().heartbeats_missed >= 1, timeout=5)
        wait_until(lambda: ctx.stats().pulls_sent > pulls, timeout=5)  # it pulled again after the alarm
        assert not reported, "the error handler ran before the stuck callback returned"
        fault_proxy.resume()
        stuck.release.set()
        wait_until(lambda: any(isinstance(e, errors.MissedHeartbeatError) for e in reported), timeout=5)
        publish(js, "silent.a", 5)
        wait_until(lambda: len(got) == 10, timeout=10)
        ctx.stop()
    finally:
        stuck.release.set()
        nc.close()


def test_close_is_prompt_while_a_callback_is_stuck(
    nats_server: EmbeddedServer, caplog: pytest.LogCaptureFixture
) -> None:
    """A stuck error callback delays close() by a short bound only: the callbacks thread is left running
    (a daemon, with a warning), and runs what was queued, the closed callback last, once it returns."""
    stuck = Stuck()
    closed = threading.Event()
    nc = jetstream_sync.connect(nats_server.url, error_callback=stuck, closed_callback=closed.set)
    try:
        sub = nc.subscribe("stuck.close", max_pending=1)
        nc.publish("stuck.close", b"1")
        nc.publish("stuck.close", b"2")  # over max_pending: a slow consumer error for the error callback
        nc.flush()
        wait_until(lambda: sub.dropped >= 1)
        assert stuck.entered.wait(5), "the error callback never ran"
        started = time.monotonic()
        with caplog.at_level(logging.WARNING, logger="jetstream_sync"):
            nc.close()
        took = time.monotonic() - started
        assert took < 2.0, f"close() took {took:.2f}s with a callback stuck"
        assert nc.is_closed
        assert "still running" in caplog.text
        assert not closed.is_set(), "the closed callback ran before the stuck one returned"
    finally:
        stuck.release.set()
    assert closed.wait(5), "the closed callback never ran once the stuck one returned"
    wait_until(lambda: not [t for t in our_threads() if t.name == CALLBACKS_THREAD_NAME], timeout=5)


def test_connection_callbacks_keep_their_order(fault_proxy: FaultProxy) -> None:
    """disconnected, reconnected, closed: in that order, on the callbacks thread, even when the first one is
    still running when the reconnect happens."""
    stuck = Stuck()
    seen: list[tuple[str, str]] = []

    def record(event: str) -> None:
        seen.append((event, threading.current_thread().name))

    def on_disconnected() -> None:
        record("disconnected")
        stuck()

    nc = jetstream_sync.connect(
        fault_proxy.url,
        reconnect_wait=0.1,
        disconnected_callback=on_disconnected,
        reconnected_callback=lambda: record("reconnected"),
        closed_callback=lambda: record("closed"),
    )
    try:
        fault_proxy.cut()
        assert stuck.entered.wait(5)
        wait_until(lambda: nc.reconnects >= 1 and nc.is_connected, timeout=10)
        assert [event for event, _ in seen] == ["disconnected"]  # reconnected waits behind it
        stuck.release.set()
        wait_until(lambda: len(seen) == 2)
    finally:
        stuck.release.set()
        nc.close()
    wait_until(lambda: len(seen) == 3)
    assert seen == [(event, CALLBACKS_THREAD_NAME) for event in ("disconnected", "reconnected", "closed")]


@pytest.mark.parametrize("exc", [SystemExit, KeyboardInterrupt, RuntimeError])
def test_a_raising_callback_does_not_stop_later_ones(
    nats_server_function: EmbeddedServer, exc: type[BaseException], caplog: pytest.LogCaptureFixture
) -> None:
    """A disconnected callback that raises (SystemExit too) is logged; the reconnected callback still runs."""
    reconnected = threading.Event()

    def on_disconnect() -> None:
        raise exc("from a user callback")

    with jetstream_sync.connect(
        nats_server_function.url,
        reconnect_wait=0.1,
        max_reconnect_attempts=-1,
        disconnected_callback=on_disconnect,
        reconnected_callback=reconnected.set,
    ):
        nats_server_function.restart()
        assert reconnected.wait(10), "the reconnected callback never ran"
    assert "the callbacks thread goes on" in caplog.text


def test_callbacks_dropped_behind_a_stuck_one_are_counted_in_stats(
    nats_server: EmbeddedServer, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(_callbacks, "MAX_QUEUED", 5)
    stuck = Stuck()
    ran: list[int] = []
    nc = jetstream_sync.connect(nats_server.url)
    try:
        assert nc.stats["callbacks_dropped"] == 0
        nc.runtime.run_callback(stuck)
        assert stuck.entered.wait(5)
        with caplog.at_level(logging.WARNING, logger="jetstream_sync"):
            for i in range(8):
                nc.runtime.run_callback(ran.append, i)
        assert nc.stats["callbacks_dropped"] == 3
        assert "callbacks are dropped" in caplog.text
        stuck.release.set()
        wait_until(lambda: ran == [0, 1, 2, 3, 4])
    finally:
        stuck.release.set()
        nc.close()
