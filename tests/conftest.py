"""Shared fixtures: one embedded nats-server per session (the project's own plugin) and fresh clients."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator

import pytest

import jetstream_sync
from jetstream_sync import StreamConfig

pytest_plugins = ["jetstream_sync.testing"]


@pytest.fixture
def client(nats_server) -> Iterator[jetstream_sync.Client]:
    with jetstream_sync.connect(nats_server.url, name="tests") as nc:
        yield nc
        if not nc.is_closed:
            js = nc.jetstream()
            for name in list(js.stream_names()):
                js.delete_stream(name)


@pytest.fixture
def js(client) -> jetstream_sync.JetStream:
    return client.jetstream()


@pytest.fixture
def name() -> str:
    """A unique stream/consumer name for this test."""
    return "T" + uuid.uuid4().hex[:12].upper()


@pytest.fixture
def stream(js, name) -> jetstream_sync.Stream:
    return js.create_stream(StreamConfig(name=name, subjects=[f"{name}.>"]))


def wait_until(predicate: Callable[[], object], timeout: float = 5.0, interval: float = 0.01) -> None:
    """Poll ``predicate`` until it is truthy; fail the test after ``timeout``."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        time.sleep(interval)


def our_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("jetstream-sync")]


@pytest.fixture
def unused_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def pull(client, stream: str, consumer: str, batch: int, expires: float = 1.0) -> list[jetstream_sync.Msg]:
    """A raw pull request, independent of the consumer API, for tests of messages and acks."""
    import json

    sub = client.subscribe(client._mux.prefix + "pull" + uuid.uuid4().hex)
    body = json.dumps({"batch": batch, "expires": int(expires * 1e9)}).encode()
    client.publish(f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{consumer}", body, reply=sub.subject)
    got: list[jetstream_sync.Msg] = []
    deadline = time.monotonic() + expires + 2
    while len(got) < batch and time.monotonic() < deadline:
        try:
            msg = sub.next_msg(timeout=max(0.01, deadline - time.monotonic()))
        except jetstream_sync.errors.TimeoutError:
            break
        if not msg.reply.startswith("$JS.ACK."):
            break  # a status (404, 408, 409) ends the pull
        got.append(msg)
    sub.unsubscribe()
    return got
