"""close() always releases the client's threads, even when nats-py fails inside its own close."""

from __future__ import annotations

import logging

import jetstream_sync
from jetstream_sync._runtime._nats import NatsConnection
from tests.helpers import our_threads, wait_until


def test_close_stops_threads_when_nats_py_close_raises(nats_server, monkeypatch, caplog):
    async def broken_close(self):
        raise AttributeError("'NoneType' object has no attribute 'close'")  # nats.py #785, before 2.15

    before = set(our_threads())
    nc = jetstream_sync.connect(nats_server.url)
    monkeypatch.setattr(NatsConnection, "close", broken_close)
    with caplog.at_level(logging.WARNING, logger="jetstream_sync"):
        nc.close(timeout=2)
    assert nc.is_closed
    wait_until(lambda: set(our_threads()) <= before, timeout=5)
    assert "nats-py failed while closing" in caplog.text
