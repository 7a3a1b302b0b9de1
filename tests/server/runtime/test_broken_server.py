"""A broken or hostile server, scripted with ScriptedServer (issue 26, items 6, 7, 9 and 10).

Whatever it sends, the client either carries on or reconnects, says why, and raises typed errors; no future is
left pending and nothing is buffered past what the connection may carry.
"""

from __future__ import annotations

import resource
import threading

import pytest

import jetstream_sync
from jetstream_sync import errors
from jetstream_sync.testing import ScriptedServer
from tests.helpers import core_round_trip, wait_until

LOOKS_BROKEN = [
    b"INFO []\r\n",
    b'INFO {"connect_urls": 5}\r\n',
    b'INFO {"max_payload": "abc"}\r\n',
    b"INFO " + b"[" * 50_000 + b"]" * 50_000 + b"\r\n",
    b"BOGUS\r\n",
    b"MSG a x 3\r\nabc\r\n",
    b"MSG big.subject 1 314572800\r\n",
]


@pytest.mark.parametrize("wire", LOOKS_BROKEN, ids=lambda w: w[:24].decode(errors="replace"))
def test_a_broken_frame_mid_connection_reconnects_and_is_reported(wire):
    reported: list[BaseException] = []
    connect = {"error_callback": reported.append, "reconnect_wait": 0.05}
    with ScriptedServer() as server, jetstream_sync.connect(server.url, **connect) as nc:
        assert core_round_trip(nc)
        server.send(wire)
        wait_until(lambda: nc.reconnects == 1, timeout=10)
        assert nc.is_connected
        assert core_round_trip(nc)
        wait_until(lambda: reported, timeout=5)
        assert isinstance(reported[0], errors.ProtocolError)
        assert "reconnecting" in str(reported[0])


def test_a_message_of_300_mb_is_refused_before_it_is_buffered():
    with ScriptedServer() as server, jetstream_sync.connect(server.url, reconnect_wait=0.05) as nc:
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
        server.send(b"MSG big.subject 1 314572800\r\n" + b"x" * (4 * 1024 * 1024))
        wait_until(lambda: nc.reconnects == 1, timeout=10)
        grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
        assert grown < 64 * 1024, f"peak RSS grew {grown} KiB"
        assert core_round_trip(nc)


@pytest.mark.parametrize(
    ("info", "says"),
    [
        (b"INFO []\r\n", "not a JSON object"),
        (b'INFO {"max_payload":"abc"}\r\n', "max_payload='abc'"),
        (b'INFO {"connect_urls":5}\r\n', "connect_urls=5"),
    ],
)
def test_connect_to_a_server_whose_info_is_malformed_raises_protocol_error(info, says):
    with ScriptedServer(info=info) as server, pytest.raises(errors.ProtocolError, match=says):
        jetstream_sync.connect(server.url, connect_timeout=2)


@pytest.mark.parametrize(
    "reply",
    [
        b'{"error":"boom"}',
        b'{"error":{"code":"abc"}}',
        b'{"error":[1]}',
        b'{"error":{"code":1e400}}',
        b'{"stream":"S","seq":"abc"}',
        b'{"stream":"S","seq":-5}',
        b'{"stream":5,"seq":1}',
        b"[" * 50_000 + b"]" * 50_000,
    ],
)
def test_publish_async_futures_resolve_whatever_the_pub_ack(reply):
    with ScriptedServer() as server, jetstream_sync.connect(server.url) as nc:
        js = nc.jetstream(max_pending=4)
        server.reply("orders.new", reply)
        futures = [js.publish_async("orders.new", b"x") for _ in range(12)]  # 3x max_pending: slots come back
        for future in futures:
            with pytest.raises(errors.ProtocolError):
                future.result(timeout=5)
        assert js.publish_async_pending() == 0
        with pytest.raises(errors.ProtocolError):
            js.publish("orders.new", b"sync", timeout=2)
        assert core_round_trip(nc)  # the connection carried on


def test_a_pending_publish_async_future_fails_on_close():
    """A PubAck that never comes: close() fails the future (the sweeper would after ack_timeout)."""
    with ScriptedServer() as server:
        nc = jetstream_sync.connect(server.url)
        js = nc.jetstream()
        server.reply("orders.new", lambda request: None)  # silence
        future = js.publish_async("orders.new", b"x")
        closer = threading.Thread(target=nc.close)
        closer.start()
        with pytest.raises(errors.ConnectionClosedError):
            future.result(timeout=5)
        closer.join(5)


def test_lame_duck_mode_moves_to_another_server_and_says_so(monkeypatch):
    monkeypatch.setattr("jetstream_sync._runtime._nats.LAME_DUCK_SPREAD", 0.2)
    reported: list[BaseException] = []
    connect = {"error_callback": reported.append, "reconnect_wait": 0.05}
    with ScriptedServer() as draining, ScriptedServer() as other, jetstream_sync.connect(draining.url, **connect) as nc:
        assert core_round_trip(nc)
        other_address = other.url.removeprefix("nats://")
        draining.send(b'INFO {"ldm":true,"connect_urls":["%s"]}\r\n' % other_address.encode())
        wait_until(lambda: nc.connected_url == other.url and nc.is_connected, timeout=10)
        assert core_round_trip(nc)
        assert any(isinstance(r, errors.LameDuckModeEvent) and "moving" in str(r) for r in reported)


def test_lame_duck_mode_with_nowhere_to_go_is_reported_and_the_connection_stays():
    reported: list[BaseException] = []
    with ScriptedServer() as draining, jetstream_sync.connect(draining.url, error_callback=reported.append) as nc:
        draining.send(b'INFO {"ldm":true}\r\n')
        wait_until(lambda: reported, timeout=5)
        assert isinstance(reported[0], errors.LameDuckModeEvent) and "staying" in str(reported[0])
        assert nc.reconnects == 0 and core_round_trip(nc)


def test_publish_async_bounds_the_bytes_held_in_flight():
    """Acks held back (a slow or silent stream): publish_async stops at max_pending_bytes, not only max_pending."""
    payload = b"x" * (256 * 1024)
    with ScriptedServer() as server, jetstream_sync.connect(server.url) as nc:
        server.reply("big.>", lambda request: None)  # the stream never acks
        js = nc.jetstream(max_pending=1000, max_pending_bytes=1024 * 1024, stall_timeout=0.5, timeout=30)
        futures = [js.publish_async("big.x", payload) for _ in range(4)]  # 1 MiB in flight: full
        assert js.publish_async_pending() == 4
        with pytest.raises(errors.PublishBackpressureError, match=r"\(1048576 bytes\) stayed in flight"):
            js.publish_async("big.x", b"y")
        assert js.publish_async_pending() == 4
        del futures


def test_a_publish_larger_than_the_byte_cap_goes_when_nothing_else_is_in_flight():
    with ScriptedServer() as server, jetstream_sync.connect(server.url) as nc:
        server.ack_publishes("big.>", stream="BIG")
        js = nc.jetstream(max_pending_bytes=1024)
        assert js.publish_async("big.x", b"x" * 4096).result(timeout=5).seq == 1
        futures = [js.publish_async("big.x", b"x" * 4096) for _ in range(5)]  # one at a time, none stuck
        assert [f.result(timeout=5).seq for f in futures] == [2, 3, 4, 5, 6]


@pytest.mark.parametrize(
    "answer",
    [b'{"type":"ack","seq":"abc"}', b'{"type":"err","error":"boom"}', b'{"error":[1]}', b'{"error":{"code":1e400}}'],
)
def test_a_fast_publisher_ends_with_protocol_error_on_a_malformed_answer(answer):
    """A fast-ingest answer of the wrong shape ends the batch at once (it raised on the IO thread and the batch
    waited for an answer that had come)."""
    with ScriptedServer() as server, jetstream_sync.connect(server.url) as nc:
        server.reply("fast.>", answer)
        publisher = nc.jetstream(timeout=10).fast_publisher()
        with pytest.raises(errors.ProtocolError, match="fast batch"):
            publisher.add("fast.x", b"1")
            publisher.commit("fast.x", b"2")
