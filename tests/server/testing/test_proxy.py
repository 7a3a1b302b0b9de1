"""Tests of jetstream_sync.testing.FaultProxy against the real nats-server, over raw sockets."""

from __future__ import annotations

import json
import socket
import threading
import time
import urllib.request
from typing import Any

import pytest

from jetstream_sync.errors import InvalidArgumentError, InvalidTypeError
from jetstream_sync.testing import EmbeddedServer, FaultProxy, FaultProxyError, Frame
from tests.helpers import wait_until

_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))
_HANDSHAKE = b'CONNECT {"verbose":false,"pedantic":false}\r\n'


class RawClient:
    """A NATS connection over a plain socket, enough to see exactly which bytes arrive and when."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        self.buffer = b""

    def close(self) -> None:
        self.sock.close()

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def read_line(self, timeout: float = 5.0) -> bytes:
        """The next protocol line (without CRLF); TimeoutError if none comes in time, EOFError on close."""
        deadline = time.monotonic() + timeout
        while b"\r\n" not in self.buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"no line within {timeout}s; have {self.buffer!r}")
            self.sock.settimeout(remaining)
            chunk = self.sock.recv(4096)
            if not chunk:
                raise EOFError(f"connection closed; have {self.buffer!r}")
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\r\n", 1)
        return line

    def read_exact(self, n: int, timeout: float = 5.0) -> bytes:
        """The next ``n`` bytes (a payload and its CRLF)."""
        deadline = time.monotonic() + timeout
        while len(self.buffer) < n:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"no {n} bytes within {timeout}s; have {len(self.buffer)}")
            self.sock.settimeout(remaining)
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                raise EOFError("connection closed")
            self.buffer += chunk
        data, self.buffer = self.buffer[:n], self.buffer[n:]
        return data

    def read_lines(self, n: int, timeout: float = 5.0) -> list[bytes]:
        deadline = time.monotonic() + timeout
        return [self.read_line(max(0.01, deadline - time.monotonic())) for _ in range(n)]

    def assert_silent(self, seconds: float = 0.5) -> None:
        """Nothing at all arrives for ``seconds`` (a bounded recv that must time out)."""
        assert self.buffer == b""
        self.sock.settimeout(seconds)
        with pytest.raises(TimeoutError):
            data = self.sock.recv(4096)
            raise AssertionError(f"got {data!r} during the stall")

    def assert_closed(self, timeout: float = 2.0) -> None:
        """The proxy closed this connection: recv gives EOF or a reset within ``timeout``, with no data first."""
        self.sock.settimeout(timeout)
        try:
            data = self.sock.recv(4096)
        except ConnectionError:
            return
        assert data == b"", f"expected the connection to be closed, got {data!r}"


def handshake(port: int, connect: bytes = _HANDSHAKE) -> RawClient:
    """Connect, read INFO, send CONNECT and PING, and wait for the PONG."""
    client = RawClient(port)
    info = client.read_line()
    assert info.startswith(b"INFO {"), info
    client.send(connect + b"PING\r\n")
    assert client.read_line() == b"PONG"
    return client


def round_trip(client: RawClient) -> float:
    start = time.monotonic()
    client.send(b"PING\r\n")
    assert client.read_line(timeout=10) == b"PONG"
    return time.monotonic() - start


def server_connections(server: EmbeddedServer) -> int:
    with _DIRECT.open(server.monitor_url + "/connz", timeout=5) as response:
        connz: dict[str, Any] = json.load(response)
    return int(connz["num_connections"])


def proxy_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("fault-proxy")]


def publishes(subject: str, count: int) -> bytes:
    return b"".join(f"PUB {subject} {len(str(i))}\r\n{i}\r\n".encode() for i in range(count))


def expected_msgs(subject: str, count: int) -> list[bytes]:
    lines: list[bytes] = []
    for i in range(count):
        lines += [f"MSG {subject} 1 {len(str(i))}".encode(), str(i).encode()]
    return lines


# -- forwarding ---------------------------------------------------------------------------------------------------


def test_forwards_both_ways(fault_proxy: FaultProxy, nats_server_function: EmbeddedServer) -> None:
    assert fault_proxy.is_running
    assert fault_proxy.url == f"nats://127.0.0.1:{fault_proxy.port}"
    assert fault_proxy.target == ("127.0.0.1", nats_server_function.port)
    assert fault_proxy.port != nats_server_function.port
    client = handshake(fault_proxy.port)
    try:
        client.send(b"SUB fwd 1\r\n" + publishes("fwd", 20) + b"PING\r\n")
        assert client.read_lines(41) == [*expected_msgs("fwd", 20), b"PONG"]
        assert fault_proxy.connections == 1
        assert server_connections(nats_server_function) == 1
        forwarded = fault_proxy.bytes_forwarded
        assert forwarded["upstream"] > len(publishes("fwd", 20))
        assert forwarded["downstream"] > 0
    finally:
        client.close()
    wait_until(lambda: fault_proxy.connections == 0)
    wait_until(lambda: server_connections(nats_server_function) == 0)


def test_server_restart_is_seen_through_the_proxy(
    fault_proxy: FaultProxy, nats_server_function: EmbeddedServer
) -> None:
    client = handshake(fault_proxy.port)
    try:
        nats_server_function.kill()
        client.assert_closed(timeout=5)
    finally:
        client.close()
    down = RawClient(fault_proxy.port)  # the target refuses: the proxy closes the client side at once
    try:
        down.assert_closed()
    finally:
        down.close()
    nats_server_function.start()
    handshake(fault_proxy.port).close()


def test_target_down_closes_client_at_once(unused_port: int) -> None:
    with FaultProxy(target_port=unused_port) as proxy:
        client = RawClient(proxy.port)
        try:
            start = time.monotonic()
            client.assert_closed(timeout=4)
            # At once: the refused connect fails at once on loopback. A proxy that waited out its 5 s connect
            # timeout instead would take 5 s: 3 s keeps those apart with room for a loaded machine.
            assert time.monotonic() - start < 3
        finally:
            client.close()
        wait_until(lambda: proxy.connections == 0)


# -- cut ----------------------------------------------------------------------------------------------------------


def test_cut_closes_both_sides_and_keeps_listening(
    fault_proxy: FaultProxy, nats_server_function: EmbeddedServer
) -> None:
    clients = [handshake(fault_proxy.port) for _ in range(3)]
    try:
        assert fault_proxy.connections == 3
        fault_proxy.cut()
        assert fault_proxy.cuts == 1
        assert fault_proxy.connections == 0  # cut() returns once its connections are closed
        for client in clients:
            client.assert_closed()
        wait_until(lambda: server_connections(nats_server_function) == 0)
    finally:
        for client in clients:
            client.close()
    again = handshake(fault_proxy.port)
    try:
        assert round_trip(again) < 2
        assert fault_proxy.connections == 1
    finally:
        again.close()
    fault_proxy.cut()
    assert fault_proxy.cuts == 2


def test_cut_ends_a_stalled_connection(fault_proxy: FaultProxy) -> None:
    client = handshake(fault_proxy.port)
    try:
        fault_proxy.stall()
        client.send(b"PING\r\n")
        fault_proxy.cut()
        client.assert_closed()
        assert fault_proxy.connections == 0
    finally:
        client.close()


# -- stall --------------------------------------------------------------------------------------------------------


def test_stall_downstream_holds_bytes_until_resume(fault_proxy: FaultProxy) -> None:
    client = handshake(fault_proxy.port)
    try:
        client.send(b"SUB down 1\r\nPING\r\n")
        assert client.read_line() == b"PONG"
        fault_proxy.stall("downstream")
        assert fault_proxy.stalled == {"downstream"}
        before = fault_proxy.bytes_forwarded
        client.send(publishes("down", 50) + b"PING\r\n")
        client.assert_silent(0.5)
        after = fault_proxy.bytes_forwarded
        assert after["downstream"] == before["downstream"]
        assert after["upstream"] > before["upstream"]  # the other direction still flows
        assert fault_proxy.connections == 1
        fault_proxy.resume()
        assert fault_proxy.stalled == frozenset()
        assert client.read_lines(101, timeout=2) == [*expected_msgs("down", 50), b"PONG"]
    finally:
        client.close()


def test_stall_upstream_holds_bytes_until_resume(fault_proxy: FaultProxy, nats_server_function: EmbeddedServer) -> None:
    client = handshake(fault_proxy.port)
    try:
        fault_proxy.stall("upstream")
        before = fault_proxy.bytes_forwarded
        client.send(b"SUB up 1\r\n" + publishes("up", 50) + b"PING\r\n")
        client.assert_silent(0.5)
        assert fault_proxy.bytes_forwarded["upstream"] == before["upstream"]
        assert server_connections(nats_server_function) == 1  # the server still sees the connection
        fault_proxy.resume("upstream")
        assert client.read_lines(101, timeout=2) == [*expected_msgs("up", 50), b"PONG"]
    finally:
        client.close()


def test_stall_both_holds_a_new_connection_too(fault_proxy: FaultProxy) -> None:
    fault_proxy.stall("both")
    client = RawClient(fault_proxy.port)
    try:
        client.assert_silent(0.5)  # not even INFO: a silent network
        client.send(_HANDSHAKE + b"PING\r\n")
        wait_until(lambda: fault_proxy.connections == 1)
        fault_proxy.resume()
        assert client.read_line(timeout=2).startswith(b"INFO {")
        assert client.read_line(timeout=2) == b"PONG"
    finally:
        client.close()


def test_partial_resume(fault_proxy: FaultProxy) -> None:
    client = handshake(fault_proxy.port)
    try:
        fault_proxy.stall("upstream")
        fault_proxy.stall("downstream")  # stalls add up
        client.send(b"PING\r\n")
        fault_proxy.resume("upstream")
        assert fault_proxy.stalled == {"downstream"}
        client.assert_silent(0.3)
        fault_proxy.resume("downstream")
        assert client.read_line(timeout=2) == b"PONG"
    finally:
        client.close()


# -- latency ------------------------------------------------------------------------------------------------------


def test_latency_delays_each_direction(fault_proxy: FaultProxy) -> None:
    client = handshake(fault_proxy.port)
    try:
        fault_proxy.set_latency(0.2)
        assert fault_proxy.latency == 0.2
        assert round_trip(client) >= 0.4  # 0.2 s on the way up and 0.2 s on the way down
        client.send(b"SUB lat 1\r\n" + publishes("lat", 10) + b"PING\r\n")
        assert client.read_lines(21, timeout=5) == [*expected_msgs("lat", 10), b"PONG"]
        fault_proxy.set_latency(0)
        # Latency still applied would make every round trip at least 0.4 s; the best of three is below 0.3 s
        # even when a loaded machine delays one of them.
        assert min(round_trip(client) for _ in range(3)) < 0.3
    finally:
        client.close()


# -- refuse -------------------------------------------------------------------------------------------------------


def test_refuse_closes_new_connections_only(fault_proxy: FaultProxy) -> None:
    existing = handshake(fault_proxy.port)
    try:
        fault_proxy.refuse(True)
        assert fault_proxy.refusing
        refused = RawClient(fault_proxy.port)
        try:
            start = time.monotonic()
            refused.assert_closed(timeout=4)
            assert time.monotonic() - start < 3  # closed at once, not after a 5 s connect timeout (see above)
        finally:
            refused.close()
        assert fault_proxy.connections == 1
        assert round_trip(existing) < 2  # open connections are not affected
        fault_proxy.refuse(False)
        handshake(fault_proxy.port).close()
    finally:
        existing.close()


# -- frame rules: drop_next and watch ----------------------------------------------------------------------------


def test_drop_next_upstream_pub_by_subject(fault_proxy: FaultProxy) -> None:
    client = handshake(fault_proxy.port)
    try:
        client.send(b"SUB keep 1\r\nSUB gone.> 2\r\nPING\r\n")
        assert client.read_line() == b"PONG"
        rule = fault_proxy.drop_next("upstream", "gone.>")
        client.send(b"PUB keep 1\r\na\r\nPUB gone.x 1\r\nb\r\nPUB keep 1\r\nc\r\nPUB gone.y 1\r\nd\r\nPING\r\n")
        assert client.read_lines(7) == [b"MSG keep 1 1", b"a", b"MSG keep 1 1", b"c", b"MSG gone.y 2 1", b"d", b"PONG"]
        assert rule.wait(timeout=0)
        assert not rule.active  # it dropped its one frame and disarmed itself
        (frame,) = rule.frames
        assert (frame.verb, frame.subject, frame.data, frame.raw) == ("PUB", "gone.x", b"b", b"PUB gone.x 1\r\nb\r\n")
        assert fault_proxy.frames_dropped == {"upstream": 1, "downstream": 0}
    finally:
        client.close()


def test_drop_next_downstream_nth_message(fault_proxy: FaultProxy) -> None:
    client = handshake(fault_proxy.port)
    try:
        client.send(b"SUB nth 1\r\nPING\r\n")
        assert client.read_line() == b"PONG"
        rule = fault_proxy.drop_next("downstream", "nth", skip=3, count=2)  # the 4th and 5th
        client.send(publishes("nth", 10) + b"PING\r\n")
        expected = [line for i, line in enumerate(expected_msgs("nth", 10)) if i // 2 not in (3, 4)]
        assert client.read_lines(len(expected) + 1) == [*expected, b"PONG"]
        assert rule.wait()
        assert [f.data for f in rule.frames] == [b"3", b"4"]
        assert [f.sid for f in rule.frames] == ["1", "1"]
    finally:
        client.close()


def test_drop_next_by_reply_subject(fault_proxy: FaultProxy) -> None:
    """As a JetStream consumer's deliveries are told apart: by their reply subject ($JS.ACK.<stream>.<consumer>...,
    which the server does not let a raw client use), not their subject."""
    client = handshake(fault_proxy.port)
    try:
        client.send(b"SUB s.> 1\r\nPING\r\n")
        assert client.read_line() == b"PONG"
        rule = fault_proxy.drop_next("downstream", reply="ack.S.c1.>", skip=1)
        client.send(
            b"PUB s.a ack.S.c1.1 1\r\n1\r\nPUB s.a ack.S.c2.1 1\r\n2\r\nPUB s.a 1\r\n3\r\n"
            b"PUB s.b ack.S.c1.2 1\r\n4\r\nPUB s.b ack.S.c1.3 1\r\n5\r\nPING\r\n"
        )
        assert client.read_lines(9) == [
            *(b"MSG s.a 1 ack.S.c1.1 1", b"1", b"MSG s.a 1 ack.S.c2.1 1", b"2", b"MSG s.a 1 1", b"3"),
            *(b"MSG s.b 1 ack.S.c1.3 1", b"5", b"PONG"),
        ]
        assert [(f.subject, f.reply, f.data) for f in rule.frames] == [("s.b", "ack.S.c1.2", b"4")]
    finally:
        client.close()


def test_drop_next_with_a_predicate_and_a_rule_armed_before_the_connection(fault_proxy: FaultProxy) -> None:
    rule = fault_proxy.drop_next("downstream", lambda f: f.verb == "PONG")
    client = RawClient(fault_proxy.port)  # framed from its first byte
    try:
        assert client.read_line().startswith(b"INFO {")
        client.send(_HANDSHAKE + b"PING\r\n")
        assert rule.wait()
        client.send(b"PING\r\n")
        assert client.read_line() == b"PONG"  # only the first one was dropped
        assert rule.frames[0].raw == b"PONG\r\n"
    finally:
        client.close()


def test_large_and_split_frames_pass_byte_exact_while_a_rule_is_armed(fault_proxy: FaultProxy) -> None:
    """Payloads far larger than one read, headers, many frames per read: all arrive unchanged but the dropped one."""
    client = handshake(fault_proxy.port, b'CONNECT {"verbose":false,"pedantic":false,"headers":true}\r\n')
    try:
        client.send(b"SUB big 1\r\nPING\r\n")
        assert client.read_line() == b"PONG"
        rule = fault_proxy.drop_next("downstream", lambda f: f.data == b"drop me")
        sizes = [0, 1, 5, 70_000, 3, 200_000, 10, 65_536, 65_534, 1]
        headers = b"NATS/1.0\r\nX: y\r\n\r\n"
        sent = b""
        for i, size in enumerate(sizes):
            data = bytes([65 + i % 26]) * size
            sent += b"HPUB big %d %d\r\n%b%b\r\n" % (len(headers), len(headers) + size, headers, data)
            if i == 4:
                sent += b"PUB big 7\r\ndrop me\r\n"
        client.send(sent + b"PING\r\n")
        for i, size in enumerate(sizes):
            total = len(headers) + size
            assert client.read_line(timeout=10) == b"HMSG big 1 %d %d" % (len(headers), total)
            assert client.read_exact(total + 2) == headers + bytes([65 + i % 26]) * size + b"\r\n"
        assert client.read_line() == b"PONG"
        assert rule.wait(timeout=0)
    finally:
        client.close()


def test_watch_sees_forwarded_frames_only_and_stops_on_cancel(fault_proxy: FaultProxy) -> None:
    client = handshake(fault_proxy.port)
    try:
        with fault_proxy.watch("upstream", "w.*") as seen:
            fault_proxy.drop_next("upstream", "w.a")
            client.send(b"PUB w.a 1\r\n1\r\nPUB w.b 1\r\n2\r\nPUB w.a 1\r\n3\r\nPUB other 1\r\n4\r\nPING\r\n")
            assert client.read_line() == b"PONG"
            assert seen.wait(2)
            assert [(f.subject, f.data) for f in seen.frames] == [("w.b", b"2"), ("w.a", b"3")]
            assert seen.active
        assert not seen.active
        client.send(b"PUB w.c 1\r\n5\r\nPING\r\n")
        assert client.read_line() == b"PONG"
        assert seen.count == 2
    finally:
        client.close()


def test_cancelled_drop_rule_drops_nothing(fault_proxy: FaultProxy) -> None:
    client = handshake(fault_proxy.port)
    try:
        client.send(b"SUB c 1\r\nPING\r\n")
        assert client.read_line() == b"PONG"
        rule = fault_proxy.drop_next("downstream", "c")
        rule.cancel()
        client.send(publishes("c", 3) + b"PING\r\n")
        assert client.read_lines(7) == [*expected_msgs("c", 3), b"PONG"]
        assert not rule.wait(timeout=0.05)
        assert rule.frames == [] and fault_proxy.frames_dropped == {"upstream": 0, "downstream": 0}
    finally:
        client.close()


def test_a_broken_predicate_matches_nothing(fault_proxy: FaultProxy) -> None:
    def broken(frame: Frame) -> bool:
        raise RuntimeError("boom")

    client = handshake(fault_proxy.port)
    try:
        with fault_proxy.drop_next("upstream", broken):
            assert round_trip(client) < 2
    finally:
        client.close()


def test_frame_rule_arguments(fault_proxy: FaultProxy) -> None:
    with pytest.raises(InvalidArgumentError, match="direction"):
        fault_proxy.drop_next("sideways", "x")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError):
        fault_proxy.drop_next("upstream", "a..b")
    with pytest.raises(InvalidArgumentError):
        fault_proxy.drop_next("upstream", "x", count=0)
    with pytest.raises(InvalidArgumentError):
        fault_proxy.drop_next("upstream", "x", skip=-1)
    with pytest.raises(InvalidTypeError):
        fault_proxy.drop_next("upstream", "x", count=True)
    with pytest.raises(InvalidTypeError):
        fault_proxy.watch("upstream", 42)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="reply="):
        fault_proxy.drop_next("upstream")
    with pytest.raises(InvalidTypeError):
        fault_proxy.drop_next("upstream", reply=42)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError):
        fault_proxy.watch("upstream", reply="a.>.b")


# -- lifecycle ----------------------------------------------------------------------------------------------------


def test_stop_closes_everything_and_joins_threads(nats_server: EmbeddedServer) -> None:
    proxy = FaultProxy(nats_server).start()
    clients = [handshake(proxy.port) for _ in range(2)]
    try:
        proxy.stall("downstream")
        assert len(proxy_threads()) >= 3
        proxy.stop()
        assert not proxy.is_running
        for client in clients:
            client.assert_closed()
    finally:
        for client in clients:
            client.close()
    wait_until(lambda: not proxy_threads(), timeout=5)
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", proxy.port), timeout=1).close()
    proxy.stop()  # a second stop is harmless
    with pytest.raises(FaultProxyError, match="stopped"):
        proxy.start()


def test_context_manager_and_fixed_port(nats_server: EmbeddedServer, unused_port: int) -> None:
    with FaultProxy(nats_server.port, port=unused_port) as proxy:
        assert proxy.port == unused_port
        assert proxy.start() is proxy  # starting again does nothing
        handshake(unused_port).close()
        assert "running" in repr(proxy)
    assert not proxy.is_running
    wait_until(lambda: not proxy_threads())


def test_not_listening_before_start(nats_server: EmbeddedServer) -> None:
    proxy = FaultProxy(nats_server)
    try:
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", proxy.port), timeout=1).close()
    finally:
        proxy.stop()


def test_invalid_arguments(nats_server: EmbeddedServer) -> None:
    with pytest.raises(InvalidArgumentError, match="needs a target"):
        FaultProxy()
    with pytest.raises(InvalidArgumentError, match="not both"):
        FaultProxy(nats_server, target_port=nats_server.port)
    with pytest.raises(InvalidTypeError):
        FaultProxy("4222")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError):
        FaultProxy(target_port=70000)
    proxy = FaultProxy(nats_server)
    try:
        with pytest.raises(InvalidArgumentError, match="direction"):
            proxy.stall("sideways")  # type: ignore[arg-type]
        with pytest.raises(InvalidArgumentError):
            proxy.set_latency(-1)
        with pytest.raises(InvalidArgumentError):
            proxy.set_latency(float("inf"))
        with pytest.raises(InvalidTypeError):
            proxy.set_latency(True)
        with pytest.raises(InvalidTypeError):
            proxy.refuse(1)  # type: ignore[arg-type]
    finally:
        proxy.stop()
