"""Nothing the server sends, and nothing that goes wrong while reading it, may leave the connection deaf.

nats-py's read loop ends for good on an exception it does not know, while ``is_connected`` stays True: no reply,
message or callback arrives until its ping timer gives up (minutes). Issue 26, items 1 and 6: a flush that timed
out before its late PONG, and an INFO of the wrong shape. The rule these tests prove: whatever a server input
causes inside the read path, the connection either carries on or reconnects at once, and says why.
"""

from __future__ import annotations

import logging

import pytest

import jetstream_sync
from jetstream_sync import errors
from jetstream_sync._runtime._nats import NatsConnection
from jetstream_sync._runtime._parser import ProtocolParser
from tests.helpers import core_round_trip, wait_until


def test_a_flush_that_timed_out_leaves_the_connection_reading(fault_proxy):
    with jetstream_sync.connect(fault_proxy.url) as nc:
        fault_proxy.set_latency(0.3)
        with pytest.raises(errors.TimeoutError, match="no PONG"):
            nc.flush(timeout=0.05)
        nc.flush(timeout=2)  # the late PONG of the first flush arrives before this one's
        fault_proxy.set_latency(0)
        assert nc.is_connected
        assert nc.reconnects == 0  # carried on: a late PONG is no fault of the server's
        assert core_round_trip(nc)


def test_many_flushes_that_time_out_keep_the_pings_in_step(fault_proxy):
    with jetstream_sync.connect(fault_proxy.url) as nc:
        fault_proxy.set_latency(0.2)
        for _ in range(5):
            with pytest.raises(errors.TimeoutError):
                nc.flush(timeout=0.01)
        nc.flush(timeout=3)
        fault_proxy.set_latency(0)
        assert nc.reconnects == 0
        assert core_round_trip(nc)


def test_any_exception_in_the_read_path_reconnects_and_is_reported(nats_server, monkeypatch):
    """A bug of nats-py's or ours (any exception type) while handling server input: a reconnect, reported."""
    reported: list[BaseException] = []
    with jetstream_sync.connect(nats_server.url, error_callback=reported.append) as nc:
        original = NatsConnection._process_pong
        raised = []

        async def broken(self):
            if not raised:
                raised.append(True)
                raise KeyError("an unexpected bug")
            await original(self)

        monkeypatch.setattr(NatsConnection, "_process_pong", broken)
        with pytest.raises(errors.NotConnectedError, match="connection was lost"):
            nc.flush(timeout=5)  # its PONG meets the bug; the flush learns at once that it cannot be confirmed
        wait_until(lambda: nc.reconnects == 1, timeout=10)
        assert core_round_trip(nc)
        wait_until(lambda: reported, timeout=5)
        assert isinstance(reported[0], errors.ProtocolError)
        assert "KeyError" in str(reported[0]) and "reconnecting" in str(reported[0])


def test_a_read_loop_that_ends_while_connected_reconnects(nats_server, monkeypatch, caplog):
    """The backstop: an exception that escapes the parser's net ends nats-py's read loop; the connection must not
    keep claiming to be up with nobody reading it."""
    with jetstream_sync.connect(nats_server.url) as nc:
        original = ProtocolParser.parse
        raised = []

        async def escaping(self, data=b""):
            if not raised:
                raised.append(True)
                raise RuntimeError("escaped the parser")
            return await original(self, data)

        monkeypatch.setattr(ProtocolParser, "parse", escaping)
        with caplog.at_level(logging.ERROR, logger="jetstream_sync"):
            with pytest.raises(errors.NotConnectedError, match="connection was lost"):
                nc.flush(timeout=5)  # the PONG's read meets the broken parse; nats-py's loop ends
            wait_until(lambda: nc.reconnects == 1, timeout=10)
        assert "read loop stopped while connected" in caplog.text
        assert core_round_trip(nc)
