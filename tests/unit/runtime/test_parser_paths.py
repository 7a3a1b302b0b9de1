"""The compiled fast path (``_cscan.c``) and the pure-Python parser hand on exactly the same things.

Each stream is fed to `ProtocolParser` twice, once with the compiled scan and once with the Python code alone,
cut into reads at every byte boundary (one cut at each position, and one byte per read), and at random. What
reached the connection (messages of nats-py's subscriptions and of fast handlers, in order, PINGs, PONGs,
-ERR texts, INFO), the counters, the handlers' logged failures, the error a malformed input raised (its class
and text), what the user's error callback was told and what the parser kept for the next read must be equal.

The streams: a hand-written one with every operation, generated ones (MSG and HMSG with and without reply,
status headers, payloads holding CRLF and "MSG " text, 64 KiB payloads, handlers that raise or drop a
subscription mid-stream), malformed ones, and random corruptions of valid ones. A live server's stream is
recorded and compared in ``tests/server/runtime/test_parser_paths_live.py``. CI runs this module (and the
core suite) on both paths; it skips the comparison only where the extension was not built.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import subprocess
import sys
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

from jetstream_sync import _protocol
from jetstream_sync._runtime import _parser, _scan
from tests.unit.runtime.test_parser import WIRE, Recorder

try:
    from jetstream_sync._runtime import _cscan
except ImportError:  # built where a compiler exists; CI checks that it was
    _cscan = None  # type: ignore[assignment]

needs_compiled = pytest.mark.skipif(_cscan is None, reason="the compiled parser extension is not built here")

FAST_SIDS = (1, 3, 5, 7, 8)  # 2, 4 and 6 are nats-py's own subscriptions (its _process_msg)
RAISES_SID = 5  # its handler raises for payloads starting with b"!"
DROPPER_SID = 7  # b"drop" removes sid 8's handler, b"add" puts it back: lookups are per message


class PathRecorder(Recorder):
    """A Recorder whose fast handlers also raise and re-route, as real ones may."""

    def __init__(self) -> None:
        super().__init__(FAST_SIDS)
        self.fast_handlers[RAISES_SID] = self._raising
        self.fast_handlers[DROPPER_SID] = self._dropper
        self._sid8 = self.fast_handlers[8]

    def _raising(self, subject: bytes, reply: bytes, payload: bytes, headers: bytes | None) -> None:
        if payload.startswith(b"!"):
            raise RuntimeError(f"handler failed on {payload[:20]!r}")
        self.events.append(("msg", subject, RAISES_SID, reply, payload, headers))

    def _dropper(self, subject: bytes, reply: bytes, payload: bytes, headers: bytes | None) -> None:
        if payload == b"drop":
            self.fast_handlers.pop(8, None)
        elif payload == b"add":
            self.fast_handlers[8] = self._sid8
        self.events.append(("msg", subject, DROPPER_SID, reply, payload, headers))


Outcome = dict[str, Any]


def run(wire: bytes, cuts: list[int], scan: _scan.Scan | None, monkeypatch: pytest.MonkeyPatch) -> Outcome:
    """Feed ``wire`` cut at ``cuts`` with the given scan (None: the pure-Python path); everything it caused."""
    monkeypatch.setattr(_scan, "scan", scan)
    nc = PathRecorder()
    parser = _parser.ProtocolParser(nc)
    failures: list[str] = []

    def logged(exc: Exception) -> None:
        failures.append(f"{type(exc).__name__}: {exc}")

    monkeypatch.setattr(_scan, "handler_failed", logged)
    raised: tuple[str, str] | None = None
    try:
        drive(feed(parser, wire, cuts))
    except _parser.ServerProtocolViolation as exc:
        raised = (type(exc).__name__, str(exc))
    return {
        "events": nc.events,
        "stats": nc.stats,
        "failures": failures,
        "raised": raised,
        "reported": [str(exc) for exc in nc.reported],
        "kept": b"".join(parser._parts),
    }


async def feed(parser: _parser.ProtocolParser, wire: bytes, cuts: list[int]) -> None:
    """Parse ``wire`` as reads cut at ``cuts``."""
    start = 0
    for cut in [*cuts, len(wire)]:
        await parser.parse(wire[start:cut])
        start = cut


def drive(coroutine: Coroutine[Any, Any, None]) -> None:
    """Run ``coroutine`` to its end without an event loop (thousands of runs: a loop each would be most of the
    time); the recorder's methods never wait."""
    try:
        coroutine.send(None)
    except StopIteration:
        return
    coroutine.close()
    raise AssertionError("the parser waited for something; the recorder never makes it wait")


def same_on_both_paths(wire: bytes, cuts: list[int], monkeypatch: pytest.MonkeyPatch) -> Outcome:
    pure = run(wire, cuts, None, monkeypatch)
    compiled = run(wire, cuts, _cscan.scan, monkeypatch)
    assert compiled == pure, f"the paths disagree on {wire[:200]!r}... cut at {cuts[:20]}"
    return pure


def every_cut(wire: bytes) -> list[list[int]]:
    """No cut, one cut at every position, and one byte per read."""
    return [[], *([cut] for cut in range(1, len(wire))), list(range(1, len(wire)))]


def msg(rng: random.Random, sid: int, payload: bytes, headers: bytes | None = None) -> bytes:
    subject = rng.choice([b"a", b"orders.new", b"$JS.API.x", b"_INBOX.abc.1", b"s" * 200])
    reply = rng.choice([b"", b"", b"_INBOX.r.2", b"$JS.ACK.S.C.1.2.3.1700000000000000000.0"])
    gap = rng.choice([b" ", b" ", b"  ", b"\t"])
    args = [subject, b"%d" % sid, *([reply] if reply else [])]
    if headers is None:
        return b"MSG " + gap.join([*args, b"%d" % len(payload)]) + b"\r\n" + payload + b"\r\n"
    sizes = [b"%d" % len(headers), b"%d" % (len(headers) + len(payload))]
    return b"HMSG " + gap.join([*args, *sizes]) + b"\r\n" + headers + payload + b"\r\n"


HEADER_BLOCKS = [
    b"NATS/1.0\r\n\r\n",
    b"NATS/1.0\r\nA: b\r\nNats-Msg-Id: 1\r\n\r\n",
    b"NATS/1.0 100 Idle Heartbeat\r\nNats-Last-Consumer: 3\r\nNats-Last-Stream: 9\r\n\r\n",
    b"NATS/1.0 404 No Messages\r\n\r\n",
    b"NATS/1.0 408 Request Timeout\r\nNats-Pending-Messages: 1\r\nNats-Pending-Bytes: 0\r\n\r\n",
    b"NATS/1.0 409 Consumer Deleted\r\n\r\n",
    b"NATS/1.0 503\r\n\r\n",
]
PAYLOADS = [b"", b"x", b"hello\r\n", b"MSG a 1 3\r\nabc\r\n", b"\r\n\r\n", b"HMSG ", b"PING\r\n", b"!oops", b"drop"]


def generated(seed: int, count: int, big: bool = False) -> bytes:
    """A valid stream of ``count`` operations, mostly messages, as a server could send them."""
    rng = random.Random(seed)
    parts = []
    for _ in range(count):
        roll = rng.random()
        if roll < 0.08:
            parts.append(rng.choice([b"PING\r\n", b"PONG\r\n", b"+OK\r\n", b'INFO {"max_payload":1048576}\r\n']))
            continue
        if roll < 0.1:
            parts.append(b"-ERR 'Permissions Violation for Publish to \"x\"'\r\n")
            continue
        sid = rng.choice([1, 1, 1, 2, 3, 4, 5, 6, 7, 8, 8])
        payload = rng.choice([*PAYLOADS, b"add", rng.randbytes(rng.randrange(1, 300))])
        if big and rng.random() < 0.3:
            payload = rng.randbytes(64 * 1024) + b"\r\nMSG x 1 1\r\n"
        headers = rng.choice([None, None, *HEADER_BLOCKS])
        parts.append(msg(rng, sid, payload, headers))
    return b"".join(parts)


@needs_compiled
def test_the_hand_written_stream_is_the_same_cut_anywhere(monkeypatch):
    for cuts in every_cut(WIRE):
        outcome = same_on_both_paths(WIRE, cuts, monkeypatch)
        assert len(outcome["events"]) == 10 and outcome["raised"] is None


@needs_compiled
@pytest.mark.parametrize("seed", range(4))
def test_generated_streams_are_the_same_cut_anywhere(seed, monkeypatch):
    wire = generated(seed, 30)
    for cuts in every_cut(wire):
        outcome = same_on_both_paths(wire, cuts, monkeypatch)
    assert outcome["raised"] is None and outcome["stats"]["in_msgs"] > 5  # the fast handlers got messages


@needs_compiled
@pytest.mark.parametrize("seed", range(3))
def test_streams_with_big_payloads_are_the_same_in_any_reads(seed, monkeypatch):
    wire = generated(100 + seed, 40, big=True)
    rng = random.Random(seed)
    for size in (97, 1000, 4096, 16384, 65536, 262144):
        cuts = sorted({rng.randrange(1, len(wire)) for _ in range(len(wire) // size + 1)})
        assert same_on_both_paths(wire, cuts, monkeypatch)["raised"] is None


MALFORMED = [
    b"BOGUS\r\n",
    b"MSG a x 3\r\nabc\r\n",
    b"MSG a 1\r\n",
    b"MSG\r\n",
    b"MSG a 1 -3\r\nabc\r\n",
    b"MSG a 1 +3\r\nabc\r\n",  # int() takes the sign: the Python path decides
    b"MSG a 1 3_0\r\n" + b"x" * 30 + b"\r\n",
    b"MSG a 1 99999999999999999999999\r\n",
    b"MSG a 1 2 3 4\r\nabcd\r\n",
    b"MSG a 1 b c 4\r\nabcd\r\n",
    b"HMSG a 1 5 3\r\nabc\r\n",
    b"HMSG a 1 r 3\r\nabc\r\n",
    b"HMSG a 1 x 3 5\r\nabcde\r\n",
    b"HMSG a 1 -1 3\r\nabc\r\n",
    b"MSGX a 1 3\r\nabc\r\n",
    b"HMS a 1 3\r\n",
    b"MSG a 1 3\r\nabcXYMSG a 1 1\r\nb\r\n",  # no CRLF after the payload: skipped, as nats-py does
    b"MSG a 1 3\rabc\r\n",
    b"MSG a\x0b1\x0c3\r\nabc\r\n",  # other whitespace splits too
    b"MSG a 1 3 \r\nabc\r\n",
    b"MSG  a 1 3\r\nabc\r\n",
    b"MSG a 1 2000000\r\n",  # over max_payload + FRAME_ROOM, not to our inbox
    b"MSG _INBOX.a 1 2000000\r\n" + b"x" * 10,  # over it, to our inbox: waits for the rest
    b"MSG a 1 3\r\nab",
    b"INFO {not json\r\n",
    b"INFO []\r\n",
    b"MSG a 1 3\r\nabc\r\nMSG a 1 3\r\nabc\r\nGARBAGE\r\n",
    b"MSG a 1 1\r\n!\r\n",
    b"MSG a 5 1\r\n!\r\n",  # the raising handler
]


@needs_compiled
@pytest.mark.parametrize("wire", MALFORMED)
def test_malformed_input_raises_the_same_error_cut_anywhere(wire, monkeypatch):
    for cuts in every_cut(wire):
        same_on_both_paths(wire, cuts, monkeypatch)


@needs_compiled
@pytest.mark.parametrize("seed", range(6))
def test_corrupted_streams_fail_the_same_way(seed, monkeypatch):
    """Random bytes of a valid stream flipped, dropped or doubled: the same messages before the same error."""
    rng = random.Random(seed)
    base = generated(200 + seed, 12)
    errors = 0
    for _ in range(60):
        wire = bytearray(base)
        for _ in range(rng.randrange(1, 4)):
            at = rng.randrange(len(wire))
            action = rng.randrange(3)
            if action == 0:
                wire[at] = rng.choice(b" \r\nMSGH0123456789x-+\t")
            elif action == 1:
                del wire[at]
            else:
                wire.insert(at, wire[at])
        data = bytes(wire)
        cut = rng.randrange(1, len(data))
        outcome = same_on_both_paths(data, [cut], monkeypatch)
        errors += outcome["raised"] is not None
    assert errors  # some corruptions were errors, so errors were compared


@needs_compiled
def test_the_compiled_scan_takes_fast_messages_and_leaves_the_rest():
    """Not a vacuous comparison: the extension does the work, and stops where the Python path must decide."""
    seen: list[tuple[Any, ...]] = []
    stats = {"in_msgs": 0, "in_bytes": 0}
    handlers: dict[int, Callable[..., None]] = {1: lambda *args: seen.append(args)}
    wire = b"MSG a 1 r 3\r\nabc\r\nHMSG b 1 12 14\r\nNATS/1.0\r\n\r\nhi\r\nPING\r\n"
    pos = _cscan.scan(wire, 0, handlers, 1 << 20, stats, _scan.handler_failed)
    assert wire[pos:] == b"PING\r\n"
    assert seen == [(b"a", b"r", b"abc", None), (b"b", b"", b"hi", b"NATS/1.0\r\n\r\n")]
    assert stats == {"in_msgs": 2, "in_bytes": 5}
    assert _cscan.scan(b"MSG a 2 1\r\nx\r\n", 0, handlers, 1 << 20, stats, _scan.handler_failed) == 0
    assert _cscan.scan(b"MSG a 9 1\r\nx\r\n", 0, {9: None}, 1 << 20, stats, _scan.handler_failed) == 0
    assert _cscan.scan(bytearray(b"MSG a 1 1\r\nx\r\n"), 0, handlers, 1 << 20, stats, _scan.handler_failed) == 0


@needs_compiled
def test_an_interrupt_in_a_handler_is_not_swallowed_on_either_path(monkeypatch):
    class Stop(BaseException):
        pass

    def stop(*args: Any) -> None:
        raise Stop

    for scan in (None, _cscan.scan):
        monkeypatch.setattr(_scan, "scan", scan)
        nc = Recorder()
        nc.fast_handlers[1] = stop
        with pytest.raises(Stop):
            asyncio.run(_parser.ProtocolParser(nc).parse(b"MSG a 1 1\r\nx\r\nMSG a 1 1\r\ny\r\n"))
        assert nc.stats == {"in_msgs": 1, "in_bytes": 1}


IMPORT_LOGGED = """
import logging
logging.basicConfig(level=logging.DEBUG, format="%(name)s %(levelname)s %(message)s")
import jetstream_sync, jetstream_sync.testing
from jetstream_sync._runtime import _scan
print("PARSER", _scan.PARSER)
"""


@pytest.mark.parametrize("pure", ["", "1"])
def test_the_path_in_use_is_named_and_logged_once_at_import(pure):
    env = {**os.environ, _scan.PURE_PYTHON_ENV: pure}
    done = subprocess.run(
        [sys.executable, "-c", IMPORT_LOGGED], capture_output=True, text=True, env=env, timeout=60, check=True
    )
    expected = "python" if pure or _cscan is None else "compiled"
    assert f"PARSER {expected}" in done.stdout
    lines = [line for line in done.stderr.splitlines() if "protocol parser:" in line]
    assert len(lines) == 1 and lines[0].startswith(f"jetstream_sync DEBUG protocol parser: {expected} (")


def test_the_switch_forces_the_pure_python_path(monkeypatch):
    monkeypatch.setenv(_scan.PURE_PYTHON_ENV, "1")
    scan, parser, why, level = _scan._load()
    assert (scan, parser, level) == (None, "python", logging.DEBUG) and _scan.PURE_PYTHON_ENV in why
    monkeypatch.setenv(_scan.PURE_PYTHON_ENV, "0")
    assert _scan._load()[1] == ("compiled" if _cscan is not None else "python")


@pytest.mark.skipif(_cscan is None, reason="the compiled extension is not built here")
def test_a_stale_build_is_not_used_and_said_at_warning(monkeypatch):
    """An extension built from other sources (its split size differs) runs nothing: the Python path does, and the
    import says so at WARNING, since the install should be rebuilt."""
    monkeypatch.delenv(_scan.PURE_PYTHON_ENV, raising=False)
    monkeypatch.setattr(_cscan, "LARGE_PAYLOAD", _protocol.LARGE_PAYLOAD + 1)
    scan, parser, why, level = _scan._load()
    assert (scan, parser, level) == (None, "python", logging.WARNING) and "reinstall" in why
