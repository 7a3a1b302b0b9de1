"""Reconnect tuning and connection state against real servers: dont_randomize, jitter (plain and TLS), a
reconnect-delay callback, ignoring and reporting discovered servers, force_reconnect(), rtt(), is_reconnecting,
is_draining and last_error.

The reconnect delays are measured at a loopback port that accepts each attempt and closes it at once: an attempt
fails as soon as it is made, so the times between the connections it accepts are the delays.
"""

from __future__ import annotations

import itertools
import socket
import ssl
import statistics
import threading
import time
from collections.abc import Iterator

import pytest

import jetstream_sync
from jetstream_sync import errors
from jetstream_sync.testing import EmbeddedServer
from tests.helpers import core_round_trip, wait_until

_CALLBACKS = "jetstream-sync-callbacks"


class Attempts:
    """An error callback noting when each failed attempt was reported."""

    def __init__(self) -> None:
        self.times: list[float] = []
        self.errors: list[BaseException] = []
        self._lock = threading.Lock()

    def __call__(self, exc: BaseException) -> None:
        with self._lock:
            self.times.append(time.monotonic())
            self.errors.append(exc)

    def gaps(self) -> list[float]:
        with self._lock:
            return [later - earlier for earlier, later in zip(self.times, self.times[1:], strict=False)]

    def count(self) -> int:
        with self._lock:
            return len(self.times)


def _gaps_between_attempts(scheme: str, **options: object) -> list[float]:
    """The times between the client's attempts at a loopback port that accepts each connection and closes it
    at once (the attempt fails on the missing INFO), taken as the connections arrive: not on the callbacks
    thread, whose reports a busy machine may delay. The first two gaps (the first connect's fast round) are
    left out."""
    accepted: list[float] = []
    stop = threading.Event()
    with socket.create_server(("127.0.0.1", 0)) as listener:
        listener.settimeout(0.05)  # the accept loop sees ``stop`` (closing a socket does not wake an accept)

        def accept() -> None:
            while not stop.is_set():
                try:
                    conn, _ = listener.accept()
                except TimeoutError:
                    continue
                accepted.append(time.monotonic())
                conn.close()

        thread = threading.Thread(target=accept, name="test-accept", daemon=True)
        thread.start()
        url = f"{scheme}://127.0.0.1:{listener.getsockname()[1]}"
        try:
            with jetstream_sync.connect(url, retry_on_failed_connect=True, max_reconnect_attempts=-1, **options):
                wait_until(lambda: len(accepted) >= 14, timeout=15)
        finally:
            stop.set()
            thread.join(5)
    return [later - earlier for earlier, later in itertools.pairwise(accepted[:14])][2:]


@pytest.mark.parametrize("scheme", ["nats", "tls"])
def test_reconnect_jitter_spreads_the_attempts(scheme: str) -> None:
    jitter = {"reconnect_jitter": 0.3, "reconnect_jitter_tls": 0.0}
    if scheme == "tls":  # a TLS connection takes reconnect_jitter_tls instead
        jitter = {"reconnect_jitter": 0.0, "reconnect_jitter_tls": 0.3, "tls": ssl.create_default_context()}
    gaps = _gaps_between_attempts(scheme, reconnect_wait=0.05, **jitter)  # type: ignore[arg-type]
    assert statistics.median(gaps) >= 0.05, gaps
    # spread out over the jitter, not one fixed delay. Uniform over 0.3 s, 12 gaps have a quartile range near
    # 0.15 s, under 0.03 s by chance in 7 runs of 100,000 (simulated); without jitter, mostly under 2 ms. The
    # quartiles, not the extremes: one attempt may be late on a busy machine. A run without jitter is not
    # compared here: a loaded machine's noise (23 ms once in 40 runs here; CI runs four suites at once) is no
    # fixed bound; tests/unit/runtime/test_reconnect_delay.py checks the delays themselves, jitter or none.
    assert _spread(gaps) > 0.03, gaps


def _spread(gaps: list[float]) -> float:
    quartiles = statistics.quantiles(gaps, n=4)
    return quartiles[2] - quartiles[0]


def test_a_reconnect_delay_callback_sets_the_delay() -> None:
    calls: list[tuple[int, str]] = []

    def delay(attempts: int) -> float:
        calls.append((attempts, threading.current_thread().name))
        return 0.01 * attempts

    gaps = _gaps_between_attempts("nats", reconnect_wait=5, reconnect_delay_callback=delay)
    assert [n for n, _ in calls[:5]] == [1, 2, 3, 4, 5]
    assert {thread for _, thread in calls} == {"jetstream-sync-connect"}
    assert max(gaps) < 1.0  # reconnect_wait=5 is not used


def test_a_failing_delay_callback_is_reported_and_the_default_used(unused_port: int) -> None:
    attempts = Attempts()

    def broken(attempts: int) -> float:
        raise ValueError("no delay today")

    with jetstream_sync.connect(
        f"nats://127.0.0.1:{unused_port}",
        retry_on_failed_connect=True,
        reconnect_wait=0.02,
        reconnect_jitter=0,
        reconnect_delay_callback=broken,
        error_callback=attempts,
    ):
        wait_until(lambda: attempts.count() >= 6, timeout=10)
    reported = [exc for exc in attempts.errors if isinstance(exc, errors.ConnectCallbackError)]
    assert reported and "reconnect_delay_callback raised ValueError" in str(reported[0])


@pytest.fixture
def two_servers() -> Iterator[tuple[EmbeddedServer, EmbeddedServer]]:
    with EmbeddedServer(jetstream=False) as first, EmbeddedServer(jetstream=False) as second:
        yield first, second


def test_dont_randomize_keeps_the_given_order(two_servers: tuple[EmbeddedServer, EmbeddedServer]) -> None:
    first, second = two_servers
    for _ in range(8):  # shuffled, two servers would put the second first about half the time
        with jetstream_sync.connect([first.url, second.url], dont_randomize=True) as nc:
            assert nc.connected_url == first.url


def test_force_reconnect_moves_to_the_next_server(two_servers: tuple[EmbeddedServer, EmbeddedServer]) -> None:
    first, second = two_servers
    reconnected = threading.Event()
    with jetstream_sync.connect(
        [first.url, second.url], dont_randomize=True, reconnected_callback=reconnected.set
    ) as nc:
        sub = nc.subscribe("moved.>")
        assert nc.connected_url == first.url
        nc.force_reconnect()
        assert reconnected.wait(10)
        wait_until(lambda: nc.is_connected, timeout=5)
        assert nc.connected_url == second.url and nc.reconnects == 1
        nc.publish("moved.1", b"after")  # the subscription was replayed on the new server
        assert sub.next_msg(timeout=5).data == b"after"
        assert nc.last_error is None  # asked for: not an error


def test_force_reconnect_while_reconnecting_tries_now(unused_port: int) -> None:
    server = EmbeddedServer(jetstream=False, port=unused_port)
    with jetstream_sync.connect(
        server.url, retry_on_failed_connect=True, reconnect_wait=60, max_reconnect_attempts=-1
    ) as nc:
        server.start()  # the fail-fast round is over: the next attempt is a minute away
        try:
            assert not nc.is_connected
            nc.force_reconnect()
            nc.wait_connected(5)
        finally:
            server.stop()


def test_state_while_the_server_is_away(nats_server_function: EmbeddedServer) -> None:
    server = nats_server_function
    with jetstream_sync.connect(server.url, reconnect_wait=0.05, max_reconnect_attempts=-1) as nc:
        rtt = nc.rtt()
        assert 0 < rtt < 1
        assert not nc.is_reconnecting and nc.last_error is None
        server.stop()
        wait_until(lambda: nc.is_reconnecting, timeout=5)
        assert isinstance(nc.last_error, errors.JetStreamError)  # why the connection was lost
        with pytest.raises(errors.NotConnectedError):
            nc.rtt(timeout=1)
        server.start()
        nc.wait_connected(10)
        assert not nc.is_reconnecting and nc.rtt() > 0


def test_is_draining_during_a_drain(nats_server: EmbeddedServer) -> None:
    nc = jetstream_sync.connect(nats_server.url)
    sub = nc.subscribe("drain.me")
    nc.publish("drain.me", b"left unread")
    nc.flush()
    wait_until(lambda: sub.pending == 1, timeout=5)
    assert not nc.is_draining
    done = threading.Event()

    def drain() -> None:
        try:
            nc.drain(timeout=1.0)
        except errors.TimeoutError:
            pass  # the message was never read
        finally:
            done.set()

    threading.Thread(target=drain, daemon=True).start()
    wait_until(lambda: nc.is_draining or done.is_set(), timeout=5)
    assert nc.is_draining
    assert done.wait(10)
    assert nc.is_closed and not nc.is_draining


def _cluster_config(listen: int, route_to: int | None = None) -> str:
    routes = f'\n  routes: ["nats://127.0.0.1:{route_to}"]' if route_to else ""
    return f'cluster {{\n  name: tuning\n  listen: "127.0.0.1:{listen}"{routes}\n}}'


def test_discovered_servers_are_reported_or_ignored(unused_port: int) -> None:
    seed_route = unused_port
    with EmbeddedServer(jetstream=False, config=_cluster_config(seed_route)) as seed:
        discovered = threading.Event()
        threads: list[str] = []

        def on_discovered() -> None:
            threads.append(threading.current_thread().name)
            discovered.set()

        with (
            jetstream_sync.connect(seed.url, discovered_servers_callback=on_discovered) as learning,
            jetstream_sync.connect(
                seed.url, ignore_discovered_servers=True, discovered_servers_callback=on_discovered
            ) as ignoring,
        ):
            assert learning.servers == [seed.url] == ignoring.servers
            joiner = EmbeddedServer(jetstream=False, config=_cluster_config(-1, route_to=seed_route))
            with joiner:
                assert discovered.wait(10)
                wait_until(lambda: len(learning.servers) == 2, timeout=5)
                assert core_round_trip(ignoring)  # the INFO that announced the joiner has reached it too
                assert ignoring.servers == [seed.url]
                assert threads == [_CALLBACKS]  # once: the ignoring client never reports one
