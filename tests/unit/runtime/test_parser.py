"""Our protocol parser hands on exactly what nats-py's does, however the bytes are split across reads.

Each case feeds the same wire bytes to ProtocolParser and to nats-py's Parser (the reference) and compares
what reached the connection, in order: messages (subject, sid, reply, payload, headers), PINGs, PONGs, -ERR
texts and INFO. Messages for a subscription with a fast handler reach the handler instead.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

import nats.errors
import nats.protocol.parser
import pytest

from jetstream_sync import errors
from jetstream_sync._runtime._parser import REPLY_LIMIT, ProtocolParser, ServerProtocolViolation


class Recorder:
    """Stands in for the connection: records what the parser dispatches (no server involved)."""

    def __init__(self, fast_sids: tuple[int, ...] = ()) -> None:
        self.events: list[tuple[Any, ...]] = []
        self.stats = {"in_msgs": 0, "in_bytes": 0}
        self.fast_handlers = {sid: self._fast(sid) for sid in fast_sids}
        self.parser: Any = None
        self._max_payload = 1024 * 1024
        self.reply_prefix = b"_INBOX."
        self.reported: list[BaseException] = []

    async def _error_cb(self, exc: BaseException) -> None:
        self.reported.append(exc)

    def _fast(self, sid: int):
        def handler(subject: bytes, reply: bytes, payload: bytes, headers: bytes | None) -> None:
            self.events.append(("msg", bytes(subject), sid, bytes(reply), bytes(payload), headers and bytes(headers)))

        return handler

    async def _process_msg(self, sid, subject, reply, data, headers):
        self.events.append(("msg", bytes(subject), sid, bytes(reply), bytes(data), headers and bytes(headers)))

    async def _process_ping(self):
        self.events.append(("ping",))

    async def _process_pong(self):
        self.events.append(("pong",))

    async def _process_err(self, err_msg):
        self.events.append(("err", err_msg))

    async def _process_info(self, info):
        self.events.append(("info", info))


def feed(parser_cls, wire: bytes, cuts: list[int], fast_sids: tuple[int, ...] = ()) -> list[tuple[Any, ...]]:
    nc = Recorder(fast_sids)
    parser = parser_cls(nc)

    async def run() -> None:
        start = 0
        for cut in [*cuts, len(wire)]:
            await parser.parse(wire[start:cut])
            start = cut

    asyncio.run(run())
    return nc.events


WIRE = (
    b'INFO {"server_id":"x","max_payload":1048576}\r\n'
    b"MSG a.b 1 5\r\nhello\r\n"
    b"MSG a.b 2 _INBOX.x 0\r\n\r\n"
    b"PING\r\n"
    b"HMSG $KV.b.k 3 $JS.ACK.KV_b.c.1.2.3.4.0 18 23\r\nNATS/1.0\r\nA: b\r\n\r\nvalue\r\n"
    b"HMSG h 1 12 12\r\nNATS/1.0\r\n\r\n\r\n"
    b"+OK\r\n"
    b"PONG\r\n"
    b"MSG bin 2 6\r\n\r\nMSG \r\n"  # a payload that looks like protocol
    b"-ERR 'Permissions Violation for Subscription to \"x\"'\r\n"
    b"HMSG s 1 r 16 16\r\nNATS/1.0 100\r\n\r\n\r\n"
)


def test_whole_stream_matches_nats_py():
    expected = feed(nats.protocol.parser.Parser, WIRE, [])
    assert len(expected) == 10  # +OK dispatches nothing
    assert feed(ProtocolParser, WIRE, []) == expected


def test_every_split_point_matches_nats_py():
    expected = feed(nats.protocol.parser.Parser, WIRE, [])
    for cut in range(1, len(WIRE)):
        assert feed(ProtocolParser, WIRE, [cut]) == expected, f"split at {cut}"


def test_one_byte_per_read_matches_nats_py():
    expected = feed(nats.protocol.parser.Parser, WIRE, [])
    assert feed(ProtocolParser, WIRE, list(range(1, len(WIRE)))) == expected


def test_fast_handlers_get_their_messages_and_stats_count_them():
    nc = Recorder(fast_sids=(1,))
    parser = ProtocolParser(nc)
    asyncio.run(parser.parse(b"MSG a 1 3\r\nabc\r\nMSG b 2 2\r\nde\r\n"))
    assert nc.events == [("msg", b"a", 1, b"", b"abc", None), ("msg", b"b", 2, b"", b"de", None)]
    assert nc.stats == {"in_msgs": 1, "in_bytes": 3}  # nats-py counts its own subscriptions' messages


def test_a_large_message_over_many_reads_is_joined_once():
    payload = bytes(range(256)) * 4096  # 1 MiB
    wire = b"MSG big 1 %d\r\n" % len(payload) + payload + b"\r\nPING\r\n"
    cuts = list(range(10, len(wire), 32768))
    assert feed(ProtocolParser, wire, cuts) == [("msg", b"big", 1, b"", payload, None), ("ping",)]


def test_a_handler_that_raises_loses_only_its_message(caplog):
    nc = Recorder()

    def broken(subject, reply, payload, headers):
        raise RuntimeError("boom")

    nc.fast_handlers[1] = broken
    asyncio.run(ProtocolParser(nc).parse(b"MSG a 1 1\r\nx\r\nPING\r\n"))
    assert nc.events == [("ping",)]
    assert "a message handler raised" in caplog.text


def test_a_reset_during_dispatch_drops_the_old_connections_bytes():
    """A -ERR that makes nats-py reconnect resets the parser: what followed on the old socket is not parsed,
    and nothing of it leaks into the next connection's parse."""
    nc = Recorder()
    parser = ProtocolParser(nc)

    async def err_then_reset(err_msg):
        nc.events.append(("err", err_msg))
        parser.reset()

    nc._process_err = err_then_reset  # type: ignore[method-assign]

    async def run() -> None:
        await parser.parse(b"-ERR 'Stale Connection'\r\nMSG a 1 10\r\nabc")
        await parser.parse(b"PONG\r\n")

    asyncio.run(run())
    assert nc.events == [("err", "'stale connection'"), ("pong",)]


@pytest.mark.parametrize(
    "wire",
    [
        b"BOGUS\r\n",
        b"MSG a x 3\r\nabc\r\n",  # sid not a number
        b"MSG a 1\r\n",  # no size
        b"HMSG a 1 5 3\r\nabc\r\n",  # header block larger than the message
        b"MSGX a 1 3\r\nabc\r\n",
        b"INFO {not json\r\n",
    ],
)
def test_garbage_is_a_protocol_error(wire):
    with pytest.raises(nats.errors.ProtocolError):
        feed(ProtocolParser, wire, [])


def run_parse(nc: Recorder, parser: ProtocolParser, *chunks: bytes) -> None:
    async def run() -> None:
        for chunk in chunks:
            await parser.parse(chunk)

    asyncio.run(run())


@pytest.mark.parametrize(
    ("wire", "says"),
    [
        (b"INFO []\r\n", "not a JSON object but list"),
        (b'INFO {"connect_urls": 5}\r\n', "connect_urls=5"),
        (b'INFO {"connect_urls": [1]}\r\n', "not a list of addresses"),
        (b'INFO {"max_payload": "abc"}\r\n', "max_payload='abc'"),
        (b'INFO {"max_payload": -1}\r\n', "not a positive size"),
        (b'INFO {"ldm": "yes"}\r\n', "ldm='yes'"),
        (b"INFO " + b"[" * 100_000 + b"]" * 100_000 + b"\r\n", "not JSON"),
    ],
)
def test_an_info_of_the_wrong_shape_is_refused_and_reported(wire, says):
    nc = Recorder()
    parser = ProtocolParser(nc)
    with pytest.raises(ServerProtocolViolation, match=re.escape(says)):
        run_parse(nc, parser, wire)
    assert not any(event[0] == "info" for event in nc.events)  # nats-py never saw it
    assert len(nc.reported) == 1 and isinstance(nc.reported[0], errors.ProtocolError)
    assert says in str(nc.reported[0])


def test_a_message_larger_than_max_payload_is_refused_before_its_payload_is_buffered():
    nc = Recorder()
    parser = ProtocolParser(nc)
    with pytest.raises(ServerProtocolViolation, match="314572800 bytes, more than the connection's max_payload"):
        run_parse(nc, parser, b"MSG big 1 314572800\r\n" + b"x" * 1000)
    assert parser._parts == []  # nothing held for the rest of it


def test_a_reply_to_our_inbox_may_exceed_max_payload_but_not_the_reply_limit():
    """JetStream API replies are made by the server, not published: a STREAM.INFO listing 100,000 subjects is
    1.2 MB on a server whose max_payload is 1 MiB. Replies to this client's inbox are bounded by REPLY_LIMIT."""
    nc = Recorder()
    parser = ProtocolParser(nc)
    payload = b"x" * (nc._max_payload + 200 * 1024)
    run_parse(nc, parser, b"MSG _INBOX.abc.1 1 %d\r\n" % len(payload) + payload + b"\r\n")
    assert nc.events[0][4] == payload
    with pytest.raises(ServerProtocolViolation, match="more than the connection's max_payload"):
        run_parse(nc, ProtocolParser(nc), b"MSG other.subject 1 %d\r\n" % len(payload) + payload + b"\r\n")
    with pytest.raises(ServerProtocolViolation, match="more than"):
        run_parse(nc, ProtocolParser(nc), b"MSG _INBOX.abc.1 1 %d\r\n" % (REPLY_LIMIT + 1) + b"x" * 100)


def test_a_message_of_max_payload_with_the_servers_headers_is_taken():
    nc = Recorder()
    parser = ProtocolParser(nc)
    payload = b"x" * nc._max_payload
    headers = b"NATS/1.0\r\nNats-Stream: S\r\nNats-Sequence: 1\r\n\r\n"
    total = len(headers) + len(payload)
    run_parse(nc, parser, b"HMSG s 1 %d %d\r\n" % (len(headers), total) + headers + payload + b"\r\n")
    assert nc.events[0][4] == payload


def test_a_control_line_that_never_ends_is_refused():
    nc = Recorder()
    parser = ProtocolParser(nc)
    chunk = b"INFO {" + b" " * 65536
    with pytest.raises(ServerProtocolViolation, match="without ending the control line"):
        run_parse(nc, parser, *([chunk] + [b" " * 65536] * 20))


def test_an_exception_of_any_kind_becomes_a_protocol_error_and_a_report():
    class Broken(Recorder):
        async def _process_pong(self):
            raise ValueError("a bug")

    nc = Broken()
    parser = ProtocolParser(nc)
    with pytest.raises(nats.errors.ProtocolError, match="ValueError: a bug"):
        run_parse(nc, parser, b"PONG\r\n")
    assert "ValueError: a bug" in str(nc.reported[0]) and "reconnecting" in str(nc.reported[0])
