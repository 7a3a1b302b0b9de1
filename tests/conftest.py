"""Shared fixtures: one embedded nats-server per session (the project's own plugin) and fresh clients.

Only fixtures live here; helper functions that tests import are in helpers.py.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

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


@pytest.fixture
def unused_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
