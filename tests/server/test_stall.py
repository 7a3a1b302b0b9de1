"""A backlog behind a stalled link (issue 15 B and C): every call returns within its own timeout, and close()
wakes blocked callers at once and closes the socket before it returns.

The fault proxy stops reading what the client sends, so the client's socket fills, then asyncio's buffer, then
the outbound queue: a thread that publishes into it waits at high water.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator

import pytest

import jetstream_sync
from jetstream_sync import ConsumerConfig, StreamConfig, errors
from tests.helpers import wait_parked

CHUNK = b"x" * 65536


class Filler:
    """A thread that keeps core-publishing into the stalled link; ``stalled`` is set once a publish timed out."""

    def __init__(self, nc: jetstream_sync.Client) -> None:
        self.nc = nc
        self.stalled = threading.Event()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="filler", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.is_set():
            try:
                self.nc.publish("fill", CHUNK)
            except errors.TimeoutError:
                self.stalled.set()
            except errors.ConnectionClosedError:
                return


@contextlib.contextmanager
def stalled_client(proxy, timeout: float) -> Iterator[tuple[jetstream_sync.Client, jetstream_sync.Msg]]:
    """A client with a message in hand, its link stalled under a backlog over the outbound high water."""
    nc = jetstream_sync.connect(proxy.url, timeout=timeout)
    js = nc.jetstream(timeout=5)
    stream = js.create_stream(StreamConfig(name="STALL", subjects=["stall.>"]))
    js.publish("stall.a", b"one")
    msg = stream.create_consumer(ConsumerConfig(durable_name="c")).next(timeout=2)
    sock = nc.runtime._nc.gate._sock
    assert sock is not None
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    proxy.stall("upstream")
    filler = Filler(nc)
    try:
        # the kernel's buffers take megabytes first: stalled once a publish waited its whole timeout at high water
        assert filler.stalled.wait(20), "the backlog never stalled"
        yield nc, msg
    finally:
        filler.stop.set()
        nc.close(timeout=2)
        filler.thread.join(5)


@pytest.fixture
def stalled(fault_proxy) -> Iterator[tuple[jetstream_sync.Client, jetstream_sync.Msg]]:
    """A stalled client whose default timeout is 1 s."""
    with stalled_client(fault_proxy, timeout=1) as (nc, msg):
        yield nc, msg


CALLS: dict[str, tuple[Callable[[jetstream_sync.Client, jetstream_sync.Msg], object], type[BaseException]]] = {
    "js.publish": (lambda nc, _: nc.jetstream().publish("stall.b", b"x", timeout=1), errors.TimeoutError),
    "publish_async": (
        lambda nc, _: nc.jetstream(stall_timeout=1).publish_async("stall.b", b"x"),
        errors.PublishBackpressureError,
    ),
    "ack_sync": (lambda _, msg: msg.ack_sync(timeout=1), errors.TimeoutError),
    "ack": (lambda _, msg: msg.ack(), errors.TimeoutError),  # the client's timeout
    "core publish": (lambda nc, _: nc.publish("core", b"x"), errors.TimeoutError),  # the client's timeout
    "request": (lambda nc, _: nc.request("svc", b"x", timeout=1), errors.TimeoutError),
    "flush": (lambda nc, _: nc.flush(timeout=1), errors.TimeoutError),
}


@pytest.mark.parametrize("call", list(CALLS))
def test_a_call_behind_a_stalled_backlog_returns_within_its_own_timeout(stalled, call):
    nc, msg = stalled
    run, error = CALLS[call]
    started = time.monotonic()
    with pytest.raises(error):
        run(nc, msg)
    took = time.monotonic() - started
    assert took < 2.5, f"{call} with a 1 s timeout took {took:.1f}s"  # it was 30 s


def test_close_wakes_blocked_callers_at_once_and_closes_the_socket(fault_proxy):
    with stalled_client(fault_proxy, timeout=1) as (nc, msg):
        sock = nc.runtime._nc.gate._sock
        assert sock is not None
        raised: dict[str, BaseException] = {}
        calls = {
            "flush": lambda: nc.flush(timeout=30),
            "js.publish": lambda: nc.jetstream(timeout=30).publish("stall.c", b"x"),
            "publish_async": lambda: nc.jetstream(stall_timeout=30).publish_async("stall.c", b"x").result(timeout=30),
            "ack_sync": lambda: msg.ack_sync(timeout=30),
            "request": lambda: nc.request("svc", b"x", timeout=30),
        }

        def run(name: str) -> None:
            try:
                calls[name]()
            except BaseException as exc:
                raised[name] = exc

        threads = [threading.Thread(target=run, args=(name,), daemon=True) for name in calls]
        for thread in threads:
            thread.start()
        wait_parked(threads)
        started = time.monotonic()
        nc.close(timeout=10)
        took = time.monotonic() - started
        for thread in threads:
            thread.join(2)
        assert {name: type(exc) for name, exc in raised.items()} == dict.fromkeys(calls, errors.ConnectionClosedError)
        assert took < 2.0, f"close() took {took:.1f}s on a stalled link"  # it was the whole timeout
        assert sock.fileno() == -1, "the socket is still open after close()"


def test_close_writes_out_a_backlog_the_link_takes(nats_server):
    """The abort is for a stall only: a backlog the socket keeps taking is sent in full before close() returns."""
    with jetstream_sync.connect(nats_server.url) as reader:
        sub = reader.subscribe("bulk")
        reader.flush()
        nc = jetstream_sync.connect(nats_server.url)
        for _ in range(200):
            nc.publish("bulk", CHUNK)
        nc.close(timeout=10)
        got: list[int] = []
        with contextlib.suppress(errors.TimeoutError):
            while len(got) < 200:
                got.append(len(sub.next_msg(timeout=5).data))
        assert got == [len(CHUNK)] * 200, f"{len(got)} of 200 arrived; {reader.stats}"


def test_a_short_next_on_a_stalled_link_ends_soon_after_its_timeout(fault_proxy):
    """The client waits past the pull's expiry for the server's own answer, by a grace that scales with it."""
    with jetstream_sync.connect(fault_proxy.url) as nc:
        stream = nc.jetstream().create_stream(StreamConfig(name="QUIET", subjects=["quiet"]))
        consumer = stream.create_consumer(ConsumerConfig(durable_name="c"))
        fault_proxy.stall("downstream")
        started = time.monotonic()
        with pytest.raises(errors.TimeoutError):
            consumer.next(timeout=0.1)
        took = time.monotonic() - started
        assert took < 0.6, f"next(timeout=0.1) took {took:.2f}s"  # it was 1.1 s
        fault_proxy.resume("downstream")


def test_flush_returns_after_the_server_has_a_backlog_past_high_water(nats_server_function):
    """flush() hands over everything queued before it, even past the socket's high water, before its PING."""
    with jetstream_sync.connect(nats_server_function.url) as nc:
        for _ in range(200):
            nc.publish("bulk", CHUNK)
        nc.flush(timeout=10)
        direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: never through a proxy
        with direct.open(f"{nats_server_function.monitor_url}/varz", timeout=5) as response:
            assert json.load(response)["in_msgs"] == 200
