"""Client(ConnectOptions(...)) is the same connection connect() makes, over the runtime port."""

from __future__ import annotations

import pytest

import jetstream_sync
from jetstream_sync import Client, ConnectOptions, errors
from tests.helpers import our_threads, wait_until


def test_client_from_options_connects_and_closes(nats_server):
    before = set(our_threads())
    with Client(ConnectOptions(servers=nats_server.url, name="from-options", timeout=3)) as nc:
        assert nc.is_connected and nc.default_timeout == 3.0
        assert isinstance(nc.runtime, jetstream_sync.Runtime)
        nc.publish("x.y", b"hi")
        nc.flush()
    assert nc.is_closed
    wait_until(lambda: set(our_threads()) <= before)


def test_client_from_options_fails_like_connect(unused_port):
    with pytest.raises(errors.NoServersError):
        Client(ConnectOptions(servers=f"nats://127.0.0.1:{unused_port}", connect_timeout=0.5))
