"""A live nats-server's protocol stream, recorded from a raw socket, parsed the same by both parser paths.

The recording has what a JetStream client reads: INFO, +OK (verbose), PONG, MSG and HMSG with and without a
reply, a header block, JetStream deliveries with their ack subjects, the status messages of pulls (404 No
Messages, 408 Request Timeout, 100 Idle Heartbeat), a 16 KiB payload, and the -ERR the server sends before it
closes on an unknown operation. ``tests/unit/runtime/test_parser_paths.py`` compares the paths on it cut at
every byte.
"""

from __future__ import annotations

import json
import socket
import time
from urllib.parse import urlparse

import pytest

import jetstream_sync
from jetstream_sync import AckPolicy, ConsumerConfig, StreamConfig
from tests.unit.runtime.test_parser_paths import _cscan, every_cut, same_on_both_paths

pytestmark = pytest.mark.skipif(_cscan is None, reason="the compiled parser extension is not built here")


def record(url: str) -> bytes:
    """Everything the server sends to a raw client that subscribes, publishes, pulls, and then breaks the
    protocol (the server answers -ERR and closes: the end of the recording)."""
    address = urlparse(url)
    with socket.create_connection((address.hostname, address.port), timeout=5) as sock:
        big = b"MSG \r\n" * 2730 + b"0123"  # 16 KiB holding protocol text
        pull = json.dumps({"batch": 3, "expires": 300_000_000, "idle_heartbeat": 100_000_000}).encode()
        empty = b'{"batch":1,"no_wait":true}'
        headers = b"NATS/1.0\r\nA: b\r\nC: d\r\n\r\n"
        sock.sendall(
            b'CONNECT {"verbose":true,"headers":true,"no_responders":true,"protocol":1}\r\nPING\r\n'
            b"SUB live.> 1\r\nSUB _INBOX.rec.> 2\r\nSUB other 3\r\n"
            b"PUB live.a 5\r\nhello\r\n"
            b"PUB live.b _INBOX.rec.x 2\r\n\r\n\r\n"
            + b"HPUB live.c %d %d\r\n%sbody\r\n" % (len(headers), len(headers) + 4, headers)
            + b"PUB other %d\r\n%s\r\n" % (len(big), big)
            + b"PUB $JS.API.CONSUMER.MSG.NEXT.REC.C _INBOX.rec.pull %d\r\n%s\r\n" % (len(pull), pull)
            + b"PUB $JS.API.CONSUMER.MSG.NEXT.EMPTY.E _INBOX.rec.empty %d\r\n%s\r\n" % (len(empty), empty)
            + b"PING\r\n"
        )
        received = bytearray()
        deadline = time.monotonic() + 5
        while b"408 Request Timeout" not in received:  # the pull's end, after its heartbeats
            assert time.monotonic() < deadline, f"the recording did not complete: {bytes(received[-300:])!r}"
            received += sock.recv(65536)
        sock.sendall(b"BOGUS OPERATION\r\n")
        while chunk := sock.recv(65536):
            received += chunk
    return bytes(received)


def test_a_live_servers_stream_is_parsed_the_same_cut_anywhere(nats_server, monkeypatch):
    with jetstream_sync.connect(nats_server.url) as nc:
        js = nc.jetstream()
        js.create_stream(StreamConfig(name="REC", subjects=["rec.>"]))
        js.create_consumer("REC", ConsumerConfig(durable_name="C", ack_policy=AckPolicy.EXPLICIT))
        js.create_stream(StreamConfig(name="EMPTY", subjects=["empty.>"]))
        js.create_consumer("EMPTY", ConsumerConfig(durable_name="E", ack_policy=AckPolicy.EXPLICIT))
        js.publish("rec.1", b"first")
        js.publish("rec.2", b"MSG 1 2 3\r\n", headers={"Nats-Msg-Id": "2"})
        wire = record(nats_server.url)
    for expected in (b"INFO ", b"+OK\r\n", b"PONG\r\n", b"HMSG live.c 1 24 28", b"$JS.ACK.REC.C.1.", b"-ERR "):
        assert expected in wire
    for status in (b"NATS/1.0 404", b"NATS/1.0 408", b"NATS/1.0 100"):
        assert status in wire
    outcomes = [same_on_both_paths(wire, cuts, monkeypatch) for cuts in every_cut(wire)]
    assert outcomes[0]["raised"] is None
    assert sum(event[0] == "msg" for event in outcomes[0]["events"]) >= 8
