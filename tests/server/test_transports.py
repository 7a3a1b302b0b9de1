"""Every transport against a server configured for it on loopback: TLS handshake-first, websockets (``ws://`` and
``wss://``, with handshake headers), and a socket factory for proxied or in-process connections.

The websocket headers are proven by the server itself: its ``token_cookie`` takes the token from a Cookie
header, so a client connects only if the header arrived. Handshake-first is proven by the server's ``/connz``
(``tls_first``); the server's handshake_first has a short fallback so that EmbeddedServer's plain readiness
probe still gets its INFO.
"""

from __future__ import annotations

import contextlib
import json
import socket
import ssl
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import jetstream_sync
from jetstream_sync import errors
from jetstream_sync.testing import EmbeddedServer
from tests.helpers import core_round_trip, wait_until

trustme = pytest.importorskip("trustme", reason="the TLS tests make their certificates with trustme")
pytest.importorskip("aiohttp", reason="websockets need aiohttp (the websocket extra)")

_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _connz(server: EmbeddedServer) -> list[dict[str, Any]]:
    with _DIRECT.open(f"{server.monitor_url}/connz", timeout=2) as response:
        return list(json.loads(response.read()).get("connections") or [])


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Path]:
    """A throwaway CA and a server certificate for 127.0.0.1 written to files."""
    directory = tmp_path_factory.mktemp("pki")
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost")
    cert.private_key_pem.write_to_path(str(directory / "server.key"))
    cert.cert_chain_pems[0].write_to_path(str(directory / "server.pem"))
    return ca, directory


def _trusting(ca: Any) -> ssl.SSLContext:
    context = ssl.create_default_context()
    ca.configure_trust(context)
    return context


def _tls_block(directory: Path, extra: str = "") -> str:
    return f'tls {{\n  cert_file: "{directory / "server.pem"}"\n  key_file: "{directory / "server.key"}"\n{extra}}}'


# -- TLS handshake first -----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def handshake_first(pki: tuple[Any, Path]) -> Iterator[EmbeddedServer]:
    # a fallback of 300 ms lets EmbeddedServer's plain readiness probe see INFO; a TLS-first client is served at once
    with EmbeddedServer(jetstream=False, config=_tls_block(pki[1], '  handshake_first: "300ms"\n')) as server:
        yield server


def test_tls_handshake_first(handshake_first: EmbeddedServer, pki: tuple[Any, Path]) -> None:
    started = time.monotonic()
    with jetstream_sync.connect(handshake_first.url, tls=_trusting(pki[0]), tls_handshake_first=True) as nc:
        assert time.monotonic() - started < 0.3  # not served by the server's fallback
        assert core_round_trip(nc)
        [conn] = [c for c in _connz(handshake_first) if c.get("lang") == "python3"]
        assert conn.get("tls_first") is True
        assert not nc._runtime._nc.gate.bound  # TLS: requests go through the IO thread


def test_tls_handshake_first_with_an_untrusted_certificate_fails_fast(handshake_first: EmbeddedServer) -> None:
    started = time.monotonic()
    with pytest.raises(errors.NoServersError, match="certificate verify failed"):
        jetstream_sync.connect(handshake_first.url, tls=ssl.create_default_context(), tls_handshake_first=True)
    assert time.monotonic() - started < 3


# -- websockets --------------------------------------------------------------------------------------------------


def test_websocket_with_headers_the_server_authenticates() -> None:
    port, token = _free_port(), "ws-" + str(time.monotonic_ns())
    config = (
        f'authorization {{ token: "{token}" }}\n'
        f'websocket {{ listen: "127.0.0.1:{port}"\n  no_tls: true\n  token_cookie: "nats_token" }}'
    )
    with EmbeddedServer(jetstream=False, config=config):
        url = f"ws://127.0.0.1:{port}"
        with jetstream_sync.connect(url, ws_headers={"Cookie": f"nats_token={token}"}) as nc:
            assert nc.connected_url == url
            sub = nc.subscribe("ws.burst")
            for index in range(2000):  # a burst goes out as few frames; every message arrives, in order
                nc.publish("ws.burst", b"%d" % index)
            assert [sub.next_msg(timeout=5).data for _ in range(2000)] == [b"%d" % i for i in range(2000)]
            with pytest.raises(errors.NoRespondersError):  # a request and its status reply, through the websocket
                nc.request("nobody.listens", timeout=5)
            assert nc.rtt() < 1.0
        with pytest.raises(errors.AuthorizationError):
            jetstream_sync.connect(url)  # without the header the server has no token


def test_websocket_over_tls(pki: tuple[Any, Path]) -> None:
    ca, directory = pki
    port = _free_port()
    with EmbeddedServer(jetstream=False, config=f'websocket {{ listen: "127.0.0.1:{port}"\n{_tls_block(directory)} }}'):
        with jetstream_sync.connect(f"wss://127.0.0.1:{port}", tls=_trusting(ca)) as nc:
            assert core_round_trip(nc)
        with pytest.raises(errors.NoServersError):
            jetstream_sync.connect(f"wss://127.0.0.1:{port}", tls=ssl.create_default_context())


def test_websocket_options_are_checked() -> None:
    with pytest.raises(errors.InvalidArgumentError, match="mixes"):
        jetstream_sync.connect(["ws://127.0.0.1:1", "nats://127.0.0.1:2"])
    with pytest.raises(errors.InvalidArgumentError, match="websocket handshake") as caught:
        jetstream_sync.connect("nats://127.0.0.1:1", ws_headers={"X": "y"})
    assert caught.value.field == "ws_headers"
    with pytest.raises(errors.InvalidArgumentError, match="header"):
        jetstream_sync.connect("ws://127.0.0.1:1", ws_headers={"X": "a\r\nInjected: 1"})


# -- a socket factory ------------------------------------------------------------------------------------------


def test_socket_factory_connects_through_the_socket_it_returns(nats_server: EmbeddedServer) -> None:
    dialed: list[tuple[str, int, float, str]] = []

    def dial(host: str, port: int, timeout: float) -> socket.socket:
        # a name only the factory knows how to reach, as behind a proxy or a sidecar
        dialed.append((host, port, timeout, threading.current_thread().name))
        return socket.create_connection((nats_server.host, nats_server.port), timeout=timeout)

    with jetstream_sync.connect(
        "nats://nats.internal.invalid:4222", socket_factory=dial, connect_timeout=2, reconnect_wait=0.05
    ) as nc:
        assert core_round_trip(nc)
        assert nc.request("$JS.API.INFO", timeout=5).data
        assert nc._runtime._nc.gate.bound  # the plain-TCP fast path, direct writes included
        nc.force_reconnect()
        wait_until(lambda: nc.reconnects >= 1 and nc.is_connected, timeout=10)
        assert core_round_trip(nc)
    assert dialed[0] == ("nats.internal.invalid", 4222, 2.0, "jetstream-sync-connect")
    assert len(dialed) == 2


def test_socket_factory_over_a_socketpair_to_a_relay(nats_server: EmbeddedServer) -> None:
    """An in-process connection: one end of a socketpair, the other relayed to the server by a thread."""
    relays: list[threading.Thread] = []

    def pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (src, dst):  # a shutdown wakes the other relay's recv (a close would not)
                with contextlib.suppress(OSError):  # the other relay shut it already
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()

    def dial(host: str, port: int, timeout: float) -> socket.socket:
        ours, theirs = socket.socketpair()
        upstream = socket.create_connection((nats_server.host, nats_server.port), timeout=timeout)
        upstream.settimeout(None)
        for args in ((theirs, upstream), (upstream, theirs)):
            relay = threading.Thread(target=pump, args=args, daemon=True)
            relay.start()
            relays.append(relay)
        return ours

    with jetstream_sync.connect("nats://in-process:4222", socket_factory=dial) as nc:
        assert core_round_trip(nc)
    for relay in relays:
        relay.join(5)


def test_socket_factory_failures_are_typed_and_bounded(unused_port: int) -> None:
    def refusing(host: str, port: int, timeout: float) -> socket.socket:
        raise ConnectionRefusedError("the proxy said no")

    with pytest.raises(errors.ConnectCallbackError, match="socket_factory raised ConnectionRefusedError") as caught:
        jetstream_sync.connect("nats://x:4222", socket_factory=refusing)
    assert isinstance(caught.value.__cause__, ConnectionRefusedError)

    with pytest.raises(errors.ConnectCallbackError, match="connected stream socket"):
        jetstream_sync.connect("nats://x:4222", socket_factory=lambda host, port, timeout: "not a socket")

    release = threading.Event()
    late: list[socket.socket] = []

    def hanging(host: str, port: int, timeout: float) -> socket.socket:
        release.wait(10)
        sock = socket.socket()
        late.append(sock)
        return sock

    started = time.monotonic()
    with pytest.raises(errors.ConnectCallbackError, match=r"did not return within 0\.3s"):
        jetstream_sync.connect("nats://x:4222", socket_factory=hanging, connect_timeout=0.3)
    assert time.monotonic() - started < 3
    release.set()
    wait_until(lambda: late and late[0].fileno() == -1, timeout=5)  # a late socket is closed
    assert late and late[0].fileno() == -1
    with pytest.raises(errors.InvalidArgumentError, match="not websockets"):
        jetstream_sync.connect("ws://127.0.0.1:1", socket_factory=refusing)
