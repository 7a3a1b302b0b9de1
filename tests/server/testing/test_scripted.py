"""Tests of jetstream_sync.testing.ScriptedServer: a real jetstream_sync client (and raw sockets, where the exact
bytes matter) against the scripted fake server. No nats-server is needed."""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
from collections.abc import Iterator

import pytest

import jetstream_sync
from jetstream_sync.errors import InvalidArgumentError, InvalidTypeError, JetStreamError, NoRespondersError
from jetstream_sync.errors import TimeoutError as JsTimeoutError
from jetstream_sync.testing import ScriptedReply, ScriptedRequest, ScriptedServer, ScriptedServerError
from tests.helpers import wait_until

_HANDSHAKE = b'CONNECT {"verbose":false,"pedantic":false,"headers":true,"no_responders":true}\r\nPING\r\n'


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as srv:
        yield srv


@pytest.fixture
def client(server: ScriptedServer) -> Iterator[jetstream_sync.Client]:
    with jetstream_sync.connect(server.url, name="scripted", timeout=2) as nc:
        yield nc


class Raw:
    """A plain socket to the server, to see exactly which bytes arrive."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        self.buffer = b""

    def read_until(self, marker: bytes, timeout: float = 5.0) -> bytes:
        """Everything up to and including ``marker``; TimeoutError or EOFError if it does not come."""
        deadline = time.monotonic() + timeout
        while marker not in self.buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"no {marker!r} within {timeout}s; have {self.buffer!r}")
            self.sock.settimeout(remaining)
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                raise EOFError(f"connection closed; have {self.buffer!r}")
            self.buffer += chunk
        end = self.buffer.index(marker) + len(marker)
        data, self.buffer = self.buffer[:end], self.buffer[end:]
        return data

    def assert_closed(self, timeout: float = 5.0) -> None:
        """The server closed the connection: EOF (or a reset) within ``timeout``, with nothing unread first."""
        self.sock.settimeout(timeout)
        try:
            data = self.sock.recv(4096)
        except ConnectionResetError:
            data = b""
        assert data == b"", f"got {data!r} instead of the end of the connection"

    def close(self) -> None:
        self.sock.close()


def scripted_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("scripted-server")]


# -- connecting --------------------------------------------------------------------------------------------------------


def test_the_default_info_and_handshake(server: ScriptedServer) -> None:
    raw = Raw(server.port)
    try:
        line = raw.read_until(b"\r\n")
        assert line.startswith(b"INFO ") and line.endswith(b"}\r\n")
        info = json.loads(line[5:])
        assert info["version"] == "2.15.1" and info["proto"] == 1
        assert (info["headers"], info["jetstream"], info["max_payload"]) == (True, True, 1048576)
        assert (info["host"], info["port"], info["client_id"]) == ("127.0.0.1", server.port, 1)
        raw.sock.sendall(_HANDSHAKE)
        assert raw.read_until(b"\r\n") == b"PONG\r\n"
        assert server.wait_frame(verb="PING") is not None
        assert [f.verb for f in server.received()] == ["CONNECT", "PING"]
    finally:
        raw.close()


def test_a_client_connects_and_the_server_sees_its_frames(
    server: ScriptedServer, client: jetstream_sync.Client
) -> None:
    assert server.wait_connections(1)
    assert server.connections == 1 and server.connection_ids == [1] and server.accepted == 1
    assert client.server_info["version"] == "2.15.1"
    connect = server.wait_frame(verb="CONNECT")
    assert connect is not None and json.loads(connect.raw[len("CONNECT ") :])["name"] == "scripted"
    inbox = server.wait_frame(lambda f: f.verb == "SUB" and (f.subject or "").startswith("_INBOX."))
    assert inbox is not None and inbox.subject is not None and inbox.subject.endswith(".*")
    assert server.received(connection=1) == server.received() and server.received(connection=2) == []


def test_info_fields_merged_or_replaced_whole() -> None:
    with ScriptedServer(info={"max_payload": 1024, "server_name": "odd"}) as srv, jetstream_sync.connect(srv.url) as nc:
        assert (nc.max_payload, nc.server_info["server_name"], nc.server_info["version"]) == (1024, "odd", "2.15.1")
    with ScriptedServer(info=b"INFO []\r\n") as srv:
        raw = Raw(srv.port)
        try:
            assert raw.read_until(b"\r\n") == b"INFO []\r\n"
        finally:
            raw.close()


# -- scripted replies --------------------------------------------------------------------------------------------------


def test_core_request_reply_scripted_by_the_server(server: ScriptedServer, client: jetstream_sync.Client) -> None:
    script = server.reply("svc.*", lambda request: b"echo:" + request.data)
    assert client.request("svc.echo", b"hi").data == b"echo:hi"
    assert script.wait(1)
    [request] = script.requests
    assert isinstance(request, ScriptedRequest)
    assert (request.subject, request.data, request.headers, request.connection) == ("svc.echo", b"hi", b"", 1)
    assert request.reply is not None and request.reply.startswith("_INBOX.")


def test_js_publish_gets_a_scripted_pub_ack(server: ScriptedServer, client: jetstream_sync.Client) -> None:
    js = client.jetstream(timeout=2)
    server.ack_publishes("orders.>", stream="ORDERS")
    first = js.publish("orders.new", b"x")
    assert (first.stream, first.seq, first.duplicate) == ("ORDERS", 1, False)
    broken = server.reply("orders.new", b'{"error":"boom"}', count=1)
    with pytest.raises(JetStreamError):
        js.publish("orders.new", b"y")
    assert broken.wait(1) and broken.requests[0].data == b"y"
    assert js.publish("orders.new", b"z").seq == 2  # the count=1 script is spent: the stream acks again
    assert [f.data for f in server.received() if f.verb == "PUB"] == [b"x", b"y", b"z"]


def test_a_scripted_reply_with_headers_and_a_delay(server: ScriptedServer, client: jetstream_sync.Client) -> None:
    server.reply("svc.slow", ScriptedReply(b"late", headers={"Answer": "42"}, delay=0.3))
    start = time.monotonic()
    msg = client.request("svc.slow", b"")
    assert time.monotonic() - start >= 0.3
    assert (msg.data, msg.headers["Answer"]) == (b"late", "42")


def test_no_responders_silence_and_a_failing_answer(
    server: ScriptedServer, client: jetstream_sync.Client, caplog: pytest.LogCaptureFixture
) -> None:
    with pytest.raises(NoRespondersError):
        client.request("nobody.home", b"", timeout=2)
    silent = server.reply("svc.silent", lambda request: None)
    with pytest.raises(JsTimeoutError):
        client.request("svc.silent", b"", timeout=0.3)
    assert len(silent.requests) == 1

    def broken(request: ScriptedRequest) -> bytes:
        raise RuntimeError("scripted failure")

    server.reply("svc.broken", broken)
    with caplog.at_level(logging.ERROR, logger="jetstream_sync.testing"), pytest.raises(JsTimeoutError):
        client.request("svc.broken", b"", timeout=0.3)
    assert any("scripted failure" in (r.exc_text or "") for r in caplog.records)
    silent.cancel()
    with pytest.raises(NoRespondersError):  # no script any more: a real server would say no responders
        client.request("svc.silent", b"", timeout=2)


def test_core_routing_between_clients(server: ScriptedServer, client: jetstream_sync.Client) -> None:
    with jetstream_sync.connect(server.url, timeout=2) as other:
        everything = other.subscribe("events.>")
        one = other.subscribe("events.*.created")
        group = [other.subscribe("work", queue="q"), client.subscribe("work", queue="q")]
        wait_until(lambda: sum(f.verb == "SUB" for f in server.received()) >= 6)  # 2 inboxes and 4 subscriptions
        client.publish("events.order.created", b"a", headers={"K": "v"})
        client.publish("events.order", b"b")
        for i in range(4):
            client.publish("work", b"%d" % i)
        client.flush(2)
        assert [everything.next_msg(2).data for _ in range(2)] == [b"a", b"b"]
        msg = one.next_msg(2)
        assert (msg.subject, msg.data, msg.headers["K"]) == ("events.order.created", b"a", "v")
        got: list[bytes] = []
        wait_until(lambda: got.extend(m.data for s in group for m in _drain(s)) or len(got) >= 4)
        assert sorted(got) == [b"0", b"1", b"2", b"3"]  # each one once, to one member of the group


def _drain(sub: jetstream_sync.Subscription) -> list[jetstream_sync.Msg]:
    msgs = []
    while True:
        try:
            msgs.append(sub.next_msg(0.01))
        except JsTimeoutError:
            return msgs


# -- raw frames, pings, cuts -------------------------------------------------------------------------------------------


def test_a_raw_injected_frame_reaches_the_client(server: ScriptedServer, client: jetstream_sync.Client) -> None:
    sub = client.subscribe("big.subject")
    frame = server.wait_frame("big.subject", verb="SUB")
    assert frame is not None and frame.sid is not None
    assert server.send(f"MSG big.subject {frame.sid} 5\r\nhello\r\n".encode()) == 1
    assert sub.next_msg(2).data == b"hello"
    assert server.send(b"PING\r\n", connection=99) == 0


def test_send_then_cut_keeps_the_order_and_closes(server: ScriptedServer) -> None:
    raw = Raw(server.port)
    try:
        raw.read_until(b"\r\n")  # INFO
        assert server.wait_connections(1)
        assert server.send(b"-ERR 'going away'\r\n", connection=1) == 1
        assert server.cut(connection=1) == 1
        assert raw.read_until(b"\r\n") == b"-ERR 'going away'\r\n"
        raw.assert_closed()
        assert server.connections == 0
    finally:
        raw.close()


def test_pong_delayed_then_switched_off(server: ScriptedServer, client: jetstream_sync.Client) -> None:
    server.set_pong(delay=0.3)
    start = time.monotonic()
    client.flush(2)
    assert time.monotonic() - start >= 0.3
    pings = sum(f.verb == "PING" for f in server.received())
    server.set_pong(False)
    with pytest.raises(JsTimeoutError):
        client.flush(0.3)
    assert sum(f.verb == "PING" for f in server.received()) == pings + 1  # it came, and was not answered


def test_cut_closes_connections_and_the_client_reconnects(server: ScriptedServer) -> None:
    with jetstream_sync.connect(server.url, max_reconnect_attempts=-1, reconnect_wait=0.05, timeout=2) as nc:
        assert server.wait_connections(1)
        assert server.cut() == 1
        wait_until(lambda: server.accepted >= 2 and server.connections == 1 and nc.is_connected)
        server.reply("svc.after", b"ok")
        assert nc.request("svc.after", b"").data == b"ok"


def test_stop_closes_every_socket_and_joins_its_thread() -> None:
    srv = ScriptedServer().start()
    raws = [Raw(srv.port), Raw(srv.port)]
    try:
        for raw in raws:
            raw.read_until(b"\r\n")
        assert srv.wait_connections(2)
        assert scripted_threads()
        srv.stop()
        for raw in raws:
            raw.assert_closed()
        assert not scripted_threads() and not srv.is_running and srv.connections == 0
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", srv.port), timeout=2).close()
        srv.close()  # a second stop does nothing
        with pytest.raises(ScriptedServerError):
            srv.start()
    finally:
        for raw in raws:
            raw.close()


def test_stop_with_a_client_connected_leaves_no_thread() -> None:
    with ScriptedServer() as srv:
        nc = jetstream_sync.connect(srv.url, allow_reconnect=False, timeout=2)
        assert srv.wait_connections(1)
    try:
        assert not scripted_threads()
        wait_until(lambda: not nc.is_connected)
    finally:
        nc.close()


def test_bad_arguments_raise_typed_errors(server: ScriptedServer) -> None:
    with pytest.raises(InvalidTypeError):
        ScriptedServer(info=["INFO"])  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError):
        ScriptedServer(info={"bad": object()})
    with pytest.raises(InvalidArgumentError):
        ScriptedServer(pong_delay=-1)
    with pytest.raises(InvalidTypeError):
        ScriptedServer(pong="yes")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError):
        server.reply("bad..subject", b"")
    with pytest.raises(InvalidTypeError):
        server.reply(123, b"")  # type: ignore[arg-type]
    with pytest.raises(InvalidTypeError):
        server.reply("ok", "text")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError):
        server.reply("ok", b"", count=0)
    with pytest.raises(InvalidArgumentError):
        server.ack_publishes("ok", stream="A.B")
    with pytest.raises(InvalidTypeError):
        server.send("text")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError):
        server.wait_connections(1, timeout=-1)
    with pytest.raises(InvalidTypeError):
        server.wait_frame(42)  # type: ignore[arg-type]
    with pytest.raises(InvalidTypeError):
        ScriptedReply("text")  # type: ignore[arg-type]
    assert server.reply("ok", b"").requests == []
