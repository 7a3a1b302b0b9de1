"""The compiled delivery sink (``_csink.c``) hands a pull engine what the pure-Python path hands it.

A pull engine's subscription handler is, on the pure-Python path, its ``_on_message``: one call a message, which
builds the Msg (`pulled_message`). With the extension, a `DeliverySink` builds the Msgs of JetStream deliveries
in C and hands them over in a batch per read; statuses, heartbeats, messages with headers where the engine must
read them, and subjects that are not UTF-8 still go to ``_on_message``. These tests feed both the same streams,
cut at every byte, and compare what reached the engine, in order: every Msg slot by slot (a field added to
`Msg.__init__` and not to the sink fails here), every slow call, the counters and the logged failures.
"""

from __future__ import annotations

import gc
import random
import weakref
from typing import Any

import pytest

from jetstream_sync import _protocol
from jetstream_sync._delivery._target import PullTarget, pulled_message
from jetstream_sync._runtime import _parser, _scan
from jetstream_sync.message import Msg
from tests.unit.runtime.test_parser import Recorder
from tests.unit.runtime.test_parser_paths import drive, every_cut, feed

try:
    from jetstream_sync._runtime import _cscan
except ImportError:  # built where a compiler exists; CI checks that it was
    _cscan = None  # type: ignore[assignment]

pytestmark = pytest.mark.skipif(_cscan is None, reason="the compiled extension is not built here")

SID = 1
ACK = b"$JS.ACK.S.C.1.%d.%d.1700000000000000000.0"
SENDER = object()  # what the Msgs ack through: compared by identity


def frame(subject: bytes, reply: bytes, payload: bytes, headers: bytes | None = None, sid: int = SID) -> bytes:
    if headers is None:
        head = b"MSG %s %d %s%d\r\n" % (subject, sid, reply + b" " if reply else b"", len(payload))
        return head + payload + b"\r\n"
    total = len(headers) + len(payload)
    head = b"HMSG %s %d %s%d %d\r\n" % (subject, sid, reply + b" " if reply else b"", len(headers), total)
    return head + headers + payload + b"\r\n"


def delivery(seq: int, payload: bytes = b"x", headers: bytes | None = None, subject: bytes = b"orders.new") -> bytes:
    return frame(subject, ACK % (seq, seq), payload, headers)


def status(code: bytes, text: bytes = b"") -> bytes:
    return frame(b"_INBOX.abc.10.0", b"", b"", b"NATS/1.0 " + code + (b" " + text if text else b"") + b"\r\n\r\n")


def slots(msg: Msg) -> dict[str, Any]:
    """Every slot of ``msg`` (unset ones as a marker), the sender by identity."""
    out = {}
    for name in Msg.__slots__:
        value = getattr(msg, name, "<unset>")
        out[name] = ("sender", value is SENDER) if name == "_sender" else value
    return out


class Engine:
    """What a pull engine gives its handler: ``_on_message`` (one message) and ``_on_messages`` (a batch)."""

    def __init__(self, ack_none: bool, pinned: bool) -> None:
        self.events: list[tuple[Any, ...]] = []
        self.target = PullTarget(
            stream="S", consumer="C", next_subject=b"$JS.API.CONSUMER.MSG.NEXT.S.C", ack_none=ack_none
        )
        self.pinned = pinned

    def on_message(self, subject: bytes, reply: bytes, data: bytes, headers: bytes | None) -> None:
        """The pure-Python path's handler for everything, the sink's slow handler: a delivery the sink could have
        taken is recorded as the sink would record it, anything else as a slow call."""
        takes_headers = headers is None or not self.pinned
        try:
            text_ok = bool(subject.decode()) or True
        except UnicodeDecodeError:
            text_ok = False
        if reply.startswith(_protocol.ACK_PREFIX) and takes_headers and text_ok:
            msg = pulled_message(SENDER, self.target, subject, reply, data, headers)  # type: ignore[arg-type]
            self.events.append(("msg", slots(msg)))
        else:
            self.events.append(("slow", bytes(subject), bytes(reply), bytes(data), headers))

    def on_messages(self, msgs: list[Msg], size: int) -> None:
        assert size == sum(msg.size for msg in msgs)
        self.events.extend(("msg", slots(msg)) for msg in msgs)
        self.events.append(("batch-end",))


def run(wire: bytes, cuts: list[int], compiled: bool, ack_none: bool = False, pinned: bool = False) -> dict[str, Any]:
    """Feed ``wire`` cut at ``cuts`` to a parser whose subscription SID goes to an engine: through a sink on the
    compiled path, to its ``on_message`` on the pure-Python one. Batch ends are dropped from the events (where
    a batch ends is the one thing the paths may differ in), but each batch must end before the scan returns."""
    nc = Recorder()
    engine = Engine(ack_none, pinned)
    parser = _parser.ProtocolParser(nc)
    if compiled:
        nc.fast_handlers[SID] = _cscan.DeliverySink(
            Msg, engine.on_message, engine.on_messages, SENDER, ack_none, _protocol.ACK_PREFIX, not pinned
        )
    else:
        nc.fast_handlers[SID] = engine.on_message
    original = _scan.scan
    try:
        _scan.scan = _cscan.scan if compiled else None
        drive(feed(parser, wire, cuts))
    finally:
        _scan.scan = original
    return {
        "events": [event for event in engine.events if event[0] != "batch-end"],
        "stats": nc.stats,
        "others": nc.events,
    }


def same_on_both_paths(wire: bytes, **kwargs: Any) -> dict[str, Any]:
    for cuts in every_cut(wire):
        pure = run(wire, cuts, compiled=False, **kwargs)
        compiled = run(wire, cuts, compiled=True, **kwargs)
        assert compiled == pure, f"the paths disagree on {wire[:200]!r}... cut at {cuts[:20]}"
    return pure


def test_deliveries_statuses_and_heartbeats_reach_the_engine_as_on_the_pure_path():
    wire = b"".join(
        [
            delivery(1),
            delivery(2, b"two"),
            status(b"100", b"Idle Heartbeat"),
            delivery(3, b"three", headers=b"NATS/1.0\r\nA: b\r\n\r\n"),
            b"PING\r\n",
            delivery(4, b""),
            status(b"408", b"Request Timeout"),
            frame(b"plain", b"_INBOX.r.1", b"not a delivery"),  # a reply that is no ack subject
            delivery(5, b"\r\nMSG x 1 2\r\n"),
        ]
    )
    outcome = same_on_both_paths(wire)
    kinds = [event[0] for event in outcome["events"]]
    assert kinds == ["msg", "msg", "slow", "msg", "msg", "slow", "slow", "msg"]
    assert outcome["others"] == [("ping",)]
    assert outcome["stats"] == {
        "in_msgs": 8,
        "in_bytes": sum(len(p) for p in (b"x", b"two", b"", b"three", b""))
        + len(b"not a delivery")
        + len(b"\r\nMSG x 1 2\r\n"),
    }


def test_a_msg_built_in_c_has_every_slot_of_one_built_by_msg_init():
    wire = delivery(7, b"payload", headers=b"NATS/1.0\r\nNats-Msg-Id: 1\r\n\r\n") + delivery(8, b"p" * 5000)
    for ack_none in (False, True):
        pure = run(wire, [], compiled=False, ack_none=ack_none)
        compiled = run(wire, [], compiled=True, ack_none=ack_none)
        assert compiled == pure
        first = compiled["events"][0][1]
        assert first["_acked"] is ack_none and first["_codec"] == "<unset>" and first["_value"] == "<unset>"
        assert first["_sender"] == ("sender", True)


def test_with_a_pinned_group_messages_with_headers_go_to_the_slow_handler():
    wire = delivery(1) + delivery(2, headers=b"NATS/1.0\r\nNats-Pin-Id: abc\r\n\r\n") + delivery(3)
    outcome = same_on_both_paths(wire, pinned=True)
    assert [event[0] for event in outcome["events"]] == ["msg", "slow", "msg"]


def test_a_subject_that_is_not_utf8_goes_to_the_slow_handler():
    wire = delivery(1) + delivery(2, subject=b"bad.\xff") + delivery(3)
    outcome = same_on_both_paths(wire)
    assert [event[0] for event in outcome["events"]] == ["msg", "slow", "msg"]


def test_generated_streams_agree_on_both_paths():
    rng = random.Random(29)
    for _ in range(30):
        parts = []
        for seq in range(rng.randint(1, 8)):
            roll = rng.random()
            if roll < 0.6:
                size = rng.choice([0, 1, 128, 4097])
                headers = rng.choice([None, None, b"NATS/1.0\r\nK: v\r\n\r\n"])
                parts.append(delivery(seq + 1, bytes(rng.getrandbits(8) for _ in range(size)), headers))
            elif roll < 0.8:
                parts.append(status(rng.choice([b"100", b"404", b"408", b"409"]), b"text"))
            else:
                parts.append(rng.choice([b"PING\r\n", b"PONG\r\n", b"+OK\r\n"]))
        wire = b"".join(parts)
        cuts = sorted(rng.sample(range(1, len(wire)), min(len(wire) - 1, 5)))
        for ack_none in (False, True):
            assert run(wire, cuts, True, ack_none=ack_none) == run(wire, cuts, False, ack_none=ack_none)


def test_a_batch_is_delivered_before_another_handler_runs_and_before_scan_returns():
    order: list[str] = []
    sink = _cscan.DeliverySink(
        Msg,
        lambda *args: order.append("slow"),
        lambda msgs, size: order.append(f"batch of {len(msgs)}"),
        SENDER,
        False,
        _protocol.ACK_PREFIX,
        True,
    )
    handlers = {SID: sink, 2: lambda *args: order.append("other")}
    wire = delivery(1) + delivery(2) + frame(b"x", b"", b"y", sid=2) + delivery(3) + status(b"100")
    wire += delivery(4) + b"PING\r\n"
    stats = {"in_msgs": 0, "in_bytes": 0}
    failures: list[Exception] = []
    pos = _cscan.scan(wire, 0, handlers, 1 << 20, stats, failures.append)
    assert wire[pos:] == b"PING\r\n"
    assert order == ["batch of 2", "other", "batch of 1", "slow", "batch of 1"]
    assert failures == [] and stats["in_msgs"] == 6


def test_a_deliver_that_raises_is_logged_and_the_reading_goes_on():
    calls: list[int] = []

    def deliver(msgs: list[Msg], size: int) -> None:
        calls.append(len(msgs))
        if len(calls) == 1:
            raise RuntimeError("the engine failed")

    sink = _cscan.DeliverySink(Msg, lambda *args: None, deliver, SENDER, False, _protocol.ACK_PREFIX, True)
    failures: list[Exception] = []
    stats = {"in_msgs": 0, "in_bytes": 0}
    wire = delivery(1) + delivery(2)
    assert _cscan.scan(wire, 0, {SID: sink}, 1 << 20, stats, failures.append) == len(wire)
    assert [str(exc) for exc in failures] == ["the engine failed"]
    assert _cscan.scan(wire, 0, {SID: sink}, 1 << 20, stats, failures.append) == len(wire)
    assert calls == [2, 2] and len(failures) == 1


def test_calling_the_sink_calls_its_slow_handler():
    seen: list[tuple[Any, ...]] = []
    sink = _cscan.DeliverySink(Msg, lambda *a: seen.append(a), lambda *a: None, SENDER, False, b"$JS.ACK.", True)
    sink(b"s", b"r", b"d", None)
    assert seen == [(b"s", b"r", b"d", None)]


def test_a_type_without_the_msg_slots_is_refused():
    class NotAMsg:
        __slots__ = ("subject",)

    with pytest.raises(AttributeError):
        _cscan.DeliverySink(NotAMsg, print, print, SENDER, False, b"$JS.ACK.", True)

    class ReadOnly:
        subject = property(lambda self: "")

    with pytest.raises(TypeError, match="is not a writable object slot"):
        _cscan.DeliverySink(ReadOnly, print, print, SENDER, False, b"$JS.ACK.", True)


def test_a_sink_in_a_cycle_with_its_engine_is_collected():
    class Owner:
        def on_message(self, *args: Any) -> None: ...

        def on_messages(self, msgs: list[Msg], size: int) -> None: ...

    owner = Owner()
    owner.sink = _cscan.DeliverySink(  # type: ignore[attr-defined]
        Msg, owner.on_message, owner.on_messages, owner, False, b"$JS.ACK.", True
    )
    gone = weakref.ref(owner)
    del owner
    gc.collect()
    assert gone() is None


def test_the_extension_is_the_revision_these_sources_expect():
    assert _cscan.REVISION == _scan.REVISION
    assert _scan.DeliverySink is _cscan.DeliverySink or _scan.PARSER == "python"
