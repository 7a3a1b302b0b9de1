"""A first connect that waits (nats.go's RetryOnFailedConnect): a worker that starts before NATS keeps running.

With ``retry_on_failed_connect=True`` connect() returns although no server answers; the client connects in the
background, and what is done meanwhile behaves as while reconnecting: publishes and subscriptions are buffered
and sent once connected, requests wait at most their timeout. ``first_connect_wait`` bounds a connect() that
waits instead. The server is an EmbeddedServer made on a fixed port and started later, as NATS coming up after
the worker in Kubernetes.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable

import pytest

import jetstream_sync
from jetstream_sync import errors
from jetstream_sync.testing import EmbeddedServer
from tests.helpers import our_threads, wait_until

_CALLBACKS = "jetstream-sync-callbacks"


class Events:
    """Connection callbacks, with the thread each ran on."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []
        self.errors: list[BaseException] = []
        self._lock = threading.Lock()

    def on(self, name: str) -> Callable[[], None]:
        def record() -> None:
            with self._lock:
                self.seen.append((name, threading.current_thread().name))

        return record

    def error(self, exc: BaseException) -> None:
        with self._lock:
            self.errors.append(exc)

    def names(self) -> list[str]:
        with self._lock:
            return [name for name, _ in self.seen]

    def callbacks(self) -> dict[str, object]:
        return {
            "connected_callback": self.on("connected"),
            "disconnected_callback": self.on("disconnected"),
            "reconnected_callback": self.on("reconnected"),
            "closed_callback": self.on("closed"),
            "error_callback": self.error,
        }


def test_a_worker_that_starts_before_nats_connects_once_it_is_up() -> None:
    server = EmbeddedServer(jetstream=False)  # its port is chosen; nothing listens there yet
    events = Events()
    started = time.monotonic()
    nc = jetstream_sync.connect(
        server.url, retry_on_failed_connect=True, reconnect_wait=0.05, max_reconnect_attempts=-1, **events.callbacks()
    )
    try:
        assert time.monotonic() - started < 2.0
        assert not nc.is_connected and nc.is_reconnecting and not nc.is_closed
        assert isinstance(nc.last_error, errors.NoServersError)  # the first round's, or a later attempt's
        assert str(server.port) in str(nc.last_error)
        assert "reconnecting" in repr(nc)
        # what a worker does at start-up behaves as while reconnecting
        sub = nc.subscribe("jobs.>")
        nc.publish("jobs.1", b"buffered before the server ran")
        with pytest.raises(errors.TimeoutError, match="reconnecting"):
            nc.request("svc.echo", b"x", timeout=0.2)
        with pytest.raises(errors.TimeoutError, match="not connected within"):
            nc.wait_connected(0.1)
        server.start()
        nc.wait_connected(10)
        assert nc.is_connected and not nc.is_reconnecting
        assert sub.next_msg(timeout=5).data == b"buffered before the server ran"
        echo = nc.subscribe("svc.echo")
        nc.flush()
        threading.Thread(target=lambda: nc.publish(echo.next_msg(5).reply, b"pong"), daemon=True).start()
        assert nc.request("svc.echo", b"ping", timeout=5).data == b"pong"
        wait_until(lambda: "connected" in events.names(), timeout=5)
        assert nc.reconnects == 0  # the first connection is not a reconnect
    finally:
        nc.close()
        server.stop()
    wait_until(lambda: "closed" in events.names(), timeout=5)
    assert events.names() == ["connected", "closed"]  # no disconnected: nothing was connected to lose
    assert {thread for _, thread in events.seen} == {_CALLBACKS}
    assert all(isinstance(exc, OSError) for exc in events.errors)  # each failed attempt, reported


def test_first_connect_wait_returns_once_the_server_is_up() -> None:
    server = EmbeddedServer(jetstream=False)
    starter = threading.Timer(0.5, server.start)
    starter.start()
    try:
        started = time.monotonic()
        with jetstream_sync.connect(
            server.url, retry_on_failed_connect=True, first_connect_wait=20, reconnect_wait=0.05
        ) as nc:
            assert nc.is_connected
            assert time.monotonic() - started < 15
    finally:
        starter.join()
        server.stop()


def test_first_connect_wait_gives_up_with_the_reason_and_releases_the_threads(unused_port: int) -> None:
    before = set(our_threads())
    started = time.monotonic()
    with pytest.raises(errors.NoServersError, match=r"first_connect_wait=0\.5s") as caught:
        jetstream_sync.connect(
            f"nats://127.0.0.1:{unused_port}", retry_on_failed_connect=True, first_connect_wait=0.5, reconnect_wait=0.05
        )
    assert 0.5 <= time.monotonic() - started < 5
    assert "could not connect" in str(caught.value)
    wait_until(lambda: set(our_threads()) <= before, timeout=5)


def test_without_retry_the_first_connect_still_fails_fast(unused_port: int) -> None:
    started = time.monotonic()
    with pytest.raises(errors.NoServersError):
        jetstream_sync.connect(f"nats://127.0.0.1:{unused_port}", reconnect_wait=5)
    assert time.monotonic() - started < 3


def test_first_connect_wait_needs_retry() -> None:
    with pytest.raises(errors.InvalidArgumentError, match="retry_on_failed_connect") as caught:
        jetstream_sync.connect("nats://127.0.0.1:4222", first_connect_wait=5)
    assert caught.value.field == "first_connect_wait"


def test_background_attempts_that_run_out_close_the_client(unused_port: int) -> None:
    before = set(our_threads())
    events = Events()
    nc = jetstream_sync.connect(
        f"nats://127.0.0.1:{unused_port}",
        retry_on_failed_connect=True,
        reconnect_wait=0.02,
        max_reconnect_attempts=3,
        **events.callbacks(),
    )
    wait_until(lambda: nc.is_closed, timeout=10)
    with pytest.raises(errors.ConnectionClosedError):
        nc.wait_connected(1)
    wait_until(lambda: "closed" in events.names(), timeout=5)
    assert "connected" not in events.names()
    assert isinstance(nc.last_error, errors.JetStreamError)
    with pytest.raises(errors.ConnectionClosedError):
        nc.publish("x", b"y")
    wait_until(lambda: set(our_threads()) <= before, timeout=5)  # closed by itself, it leaves no thread


def test_the_integrations_settings_make_a_worker_that_waits_for_nats() -> None:
    """Flask's, Django's and Celery's settings all go through ConnectionSettings.from_mapping; the process's
    client connects in the background."""
    from jetstream_sync.integrations import close_process_clients, process_client
    from jetstream_sync.integrations._connection import ConnectionSettings

    server = EmbeddedServer(jetstream=False)
    environ = {"SERVERS": server.url, "RETRY_ON_FAILED_CONNECT": True, "MAX_RECONNECT_ATTEMPTS": -1}
    settings = ConnectionSettings.from_mapping({**environ, "RECONNECT_WAIT": 0.05}, source="JETSTREAM")
    assert settings.retry_on_failed_connect and settings.max_reconnect_attempts == -1
    try:
        nc = process_client(settings)
        assert nc.is_reconnecting
        assert process_client(settings) is nc  # the same client for the process, connected or not
        server.start()
        nc.wait_connected(10)
        waiting = ConnectionSettings.from_mapping({**environ, "FIRST_CONNECT_WAIT": 5}, source="JETSTREAM")
        assert process_client(waiting).is_connected  # a worker that waits: connected when it gets its client
    finally:
        close_process_clients()
        server.stop()
    with pytest.raises(errors.InvalidArgumentError, match="FIRST_CONNECT_WAIT"):
        ConnectionSettings.from_mapping({"SERVERS": server.url, "FIRST_CONNECT_WAIT": 5}, source="JETSTREAM")
    with pytest.raises(errors.InvalidTypeError, match="RETRY_ON_FAILED_CONNECT"):
        ConnectionSettings.from_mapping({"SERVERS": server.url, "RETRY_ON_FAILED_CONNECT": "maybe"}, source="X")


def _connect_threads() -> list[threading.Thread]:
    return [thread for thread in our_threads() if thread.name == "jetstream-sync-connect"]


def test_close_ends_the_connect_thread_of_a_client_connecting_in_the_background() -> None:
    """close() while a background attempt runs a user function (a socket factory that returns once the client
    is closed, as a proxy that gives up): when close() returns, the connect thread is gone, not still running."""
    clients: list[jetstream_sync.Client] = []
    entered = threading.Event()

    def dial(host: str, port: int, timeout: float) -> socket.socket:
        if clients:  # a background attempt: held until the client closes
            entered.set()
            wait_until(lambda: clients[0].is_closed, timeout=5, interval=0.001)
        raise ConnectionRefusedError("the proxy has no route yet")

    nc = jetstream_sync.connect(
        "nats://behind.proxy.invalid:4222", socket_factory=dial, retry_on_failed_connect=True, reconnect_wait=0.01
    )
    clients.append(nc)
    assert entered.wait(5)
    nc.close()
    assert not _connect_threads()
    # a first connect that fails on a user function ends the thread before it raises
    with pytest.raises(errors.ConnectCallbackError, match="socket_factory raised ConnectionRefusedError"):
        jetstream_sync.connect("nats://behind.proxy.invalid:4222", socket_factory=dial)
    assert not _connect_threads()
