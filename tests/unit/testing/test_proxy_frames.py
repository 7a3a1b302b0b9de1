"""The FaultProxy's frame parser and subject patterns, without a server: frames split across reads, several per
read, header sizes, joining a stream mid-way, and byte-exact pass-through of everything not dropped."""

from __future__ import annotations

import random

import pytest

from jetstream_sync.errors import InvalidArgumentError
from jetstream_sync.testing._frames import Frame, _check_pattern, _FrameParser, _subject_matches

UP = "upstream"
DOWN = "downstream"


def hpub(subject: bytes, reply: bytes, headers: bytes, data: bytes) -> bytes:
    total = len(headers) + len(data)
    return b"HPUB %b %b %d %d\r\n%b%b\r\n" % (subject, reply, len(headers), total, headers, data)


def hmsg(subject: bytes, reply: bytes, headers: bytes, data: bytes = b"") -> bytes:
    total = len(headers) + len(data)
    reply = b" " + reply if reply else b""
    return b"HMSG %b 1%b %d %d\r\n%b%b\r\n" % (subject, reply, len(headers), total, headers, data)


FC_HEADERS = b"NATS/1.0 100 FlowControl Request\r\n\r\n"
STALLED_HEADERS = b"NATS/1.0 100 Idle Heartbeat\r\nNats-Consumer-Stalled: $JS.FC.S.C.fc1\r\n\r\n"

# What a client sends: handshake, subscriptions, publishes with and without reply and headers, a flow-control reply.
CLIENT = (
    b'CONNECT {"verbose":false,"pedantic":false,"headers":true}\r\n'
    b"PING\r\n"
    b"SUB _deliver.x 1\r\n"
    b"SUB q.> workers 2\r\n"
    b"PUB orders.new 5\r\nhello\r\n"
    b"PUB orders.new _INBOX.abc.1 0\r\n\r\n"
    + hpub(b"orders.new", b"_INBOX.abc.2", b"NATS/1.0\r\nK: V\r\n\r\n", b"body")
    + b"PUB $JS.FC.S.C.abc 0\r\n\r\n"
    b"PUB with.crlf 6\r\na\r\nb\r\n\r\n"
    b"UNSUB 2\r\n"
    b"PONG\r\n"
)
# What a server sends: INFO, +OK, a message, flow control, a heartbeat with the stalled header, an error.
SERVER = (
    b'INFO {"server_id":"x","headers":true,"max_payload":1048576}\r\n'
    b"+OK\r\n"
    b"MSG _deliver.x 1 $JS.ACK.S.C.1.1.1.1700000000000000000.0 3\r\nabc\r\n"
    + hmsg(b"_deliver.x", b"$JS.FC.S.C.fc1", FC_HEADERS)
    + hmsg(b"_deliver.x", b"", STALLED_HEADERS)
    + b"MSG plain 9 0\r\n\r\n"
    b"PING\r\n"
    b"-ERR 'Unknown Protocol Operation'\r\n"
)


def frames_of(items: list[Frame | bytes]) -> list[Frame]:
    return [item for item in items if isinstance(item, Frame)]


def joined(items: list[Frame | bytes]) -> bytes:
    return b"".join(item.raw if isinstance(item, Frame) else item for item in items)


def feed_in(parser: _FrameParser, data: bytes, cuts: list[int]) -> list[Frame | bytes]:
    """Feed ``data`` split at ``cuts`` (as recv() might), collecting what the parser returns."""
    out: list[Frame | bytes] = []
    start = 0
    for cut in [*cuts, len(data)]:
        out += parser.feed(data[start:cut])
        start = cut
    return out


def test_client_frames_in_one_read():
    items = _FrameParser(UP, in_step=True).feed(CLIENT)
    assert all(isinstance(i, Frame) for i in items)
    assert joined(items) == CLIENT
    verbs = [f.verb for f in frames_of(items)]
    assert verbs == ["CONNECT", "PING", "SUB", "SUB", "PUB", "PUB", "HPUB", "PUB", "PUB", "UNSUB", "PONG"]
    frames = frames_of(items)
    assert (frames[2].subject, frames[2].sid) == ("_deliver.x", "1")
    assert (frames[3].subject, frames[3].sid) == ("q.>", "2")
    pub = frames[4]
    assert (pub.subject, pub.reply, pub.data, pub.headers, pub.is_message) == ("orders.new", None, b"hello", b"", True)
    assert (frames[5].reply, frames[5].data) == ("_INBOX.abc.1", b"")
    hpub = frames[6]
    assert hpub.reply == "_INBOX.abc.2"
    assert (hpub.headers, hpub.data) == (b"NATS/1.0\r\nK: V\r\n\r\n", b"body")
    assert frames[7].subject == "$JS.FC.S.C.abc"
    assert frames[8].data == b"a\r\nb\r\n"  # a CRLF inside a payload is payload
    assert not frames[0].is_message and frames[0].subject is None


def test_server_frames_in_one_read():
    frames = frames_of(_FrameParser(DOWN, in_step=True).feed(SERVER))
    assert joined(frames) == SERVER
    assert [f.verb for f in frames] == ["INFO", "+OK", "MSG", "HMSG", "HMSG", "MSG", "PING", "-ERR"]
    msg = frames[2]
    assert (msg.subject, msg.sid, msg.reply, msg.data) == (
        "_deliver.x",
        "1",
        "$JS.ACK.S.C.1.1.1.1700000000000000000.0",
        b"abc",
    )
    fc = frames[3]
    assert (fc.reply, fc.headers, fc.data) == ("$JS.FC.S.C.fc1", FC_HEADERS, b"")
    heartbeat = frames[4]
    assert heartbeat.reply is None
    assert (heartbeat.headers, heartbeat.data) == (STALLED_HEADERS, b"")
    assert (frames[5].subject, frames[5].sid, frames[5].data) == ("plain", "9", b"")


@pytest.mark.parametrize(("direction", "stream"), [(UP, CLIENT), (DOWN, SERVER)])
def test_every_split_point_gives_the_same_frames(direction, stream):
    """A read boundary anywhere (inside a verb, a size, a header block, a CRLF) changes nothing."""
    whole = [f.raw for f in frames_of(_FrameParser(direction, in_step=True).feed(stream))]
    for cut in range(1, len(stream)):
        items = feed_in(_FrameParser(direction, in_step=True), stream, [cut])
        assert [f.raw for f in frames_of(items)] == whole, cut
        assert joined(items) == stream


@pytest.mark.parametrize(("direction", "stream"), [(UP, CLIENT), (DOWN, SERVER)])
def test_byte_at_a_time_and_random_reads(direction, stream):
    whole = [f.raw for f in frames_of(_FrameParser(direction, in_step=True).feed(stream))]
    one_by_one = feed_in(_FrameParser(direction, in_step=True), stream, list(range(1, len(stream))))
    assert [f.raw for f in frames_of(one_by_one)] == whole
    rng = random.Random(7)
    for _ in range(50):
        cuts = sorted(rng.sample(range(1, len(stream)), rng.randint(1, 12)))
        items = feed_in(_FrameParser(direction, in_step=True), stream * 3, cuts)
        assert [f.raw for f in frames_of(items)] == whole * 3
        assert joined(items) == stream * 3


def test_incomplete_frame_is_held_until_complete_then_flush_returns_it():
    parser = _FrameParser(DOWN, in_step=True)
    big = b"x" * 100_000
    frame = b"MSG big 1 %d\r\n%b\r\n" % (len(big), big)
    assert parser.feed(frame[:10]) == []
    assert parser.feed(frame[10:50_000]) == []
    assert parser.flush() == frame[:50_000]
    parser = _FrameParser(DOWN, in_step=True)
    assert parser.feed(frame[:-1]) == []
    (done,) = parser.feed(frame[-1:] + b"PING")  # the next frame's partial line stays held
    assert isinstance(done, Frame) and done.data == big
    assert parser.flush() == b"PING"


def test_header_size_is_part_of_the_total():
    headers = b"NATS/1.0\r\nNats-Msg-Id: 1\r\n\r\n"
    data = b"payload"
    frame, ping = frames_of(_FrameParser(DOWN, in_step=True).feed(hmsg(b"s", b"r", headers, data) + b"PING\r\n"))
    assert (frame.headers, frame.data, frame.reply, frame.sid) == (headers, data, "r", "1")
    assert ping.verb == "PING"


def test_lower_case_verbs_and_tabs_are_accepted():
    items = _FrameParser(UP, in_step=True).feed(b"pub\tsubj  3\r\nabc\r\nping\r\n")
    assert [(f.verb, f.subject) for f in frames_of(items)] == [("PUB", "subj"), ("PING", None)]


def test_malformed_message_line_passes_through_and_the_parser_seeks_again():
    parser = _FrameParser(UP, in_step=True)
    bad = b"PUB subj notanumber\r\n"
    items = parser.feed(bad + b"PUB ok 2\r\nhi\r\n")
    assert items[0] == bad
    assert [f.subject for f in frames_of(items)] == ["ok"]
    assert joined(items) == bad + b"PUB ok 2\r\nhi\r\n"
    # a payload whose size is wrong (no CRLF where the size says) is not taken as a frame either
    parser = _FrameParser(UP, in_step=True)
    items = parser.feed(b"PUB s 1\r\nabc\r\nPING\r\n")
    assert joined(items) == b"PUB s 1\r\nabc\r\nPING\r\n"
    assert [f.verb for f in frames_of(items)] == ["PING"]


def test_joining_mid_stream_skips_to_the_first_frame_start():
    """A parser made on an open connection: the partial frame it starts in passes through unparsed."""
    stream = SERVER * 2
    whole = frames_of(_FrameParser(DOWN, in_step=True).feed(stream))
    for cut in range(len(stream) - len(SERVER)):  # start anywhere in the first copy
        parser = _FrameParser(DOWN, in_step=False)
        items = parser.feed(stream[cut:])
        assert joined(items) + parser.flush() == stream[cut:]
        # from the first frame start on, in step: the second copy is framed exactly
        assert [f.raw for f in frames_of(items)][-len(whole) // 2 :] == [f.raw for f in whole[len(whole) // 2 :]]


def test_joining_at_a_frame_start_takes_that_frame():
    parser = _FrameParser(DOWN, in_step=False)
    items = parser.feed(b"MSG d 1 $JS.ACK.S.C.1.5.5.0.0 2\r\nhi\r\n")
    assert [f.subject for f in frames_of(items)] == ["d"]
    assert parser.in_step


def test_joining_inside_a_payload_that_contains_line_breaks():
    """Payload lines are not frames: no known verb, or not a well-formed frame."""
    payload = b"line one\r\nMSG looks 1 but is not\r\nPING? no\r\n"
    stream = b"MSG d 1 %d\r\n%b\r\nMSG d 1 2\r\nok\r\n" % (len(payload), payload)
    parser = _FrameParser(DOWN, in_step=False)
    items = parser.feed(stream[15:])  # inside the first payload
    assert [f.data for f in frames_of(items)] == [b"ok"]
    assert joined(items) == stream[15:]


def test_seeking_does_not_hold_back_what_cannot_start_a_frame():
    parser = _FrameParser(UP, in_step=False)
    assert parser.feed(b"xyz") == [b"xyz"]  # not a verb prefix: passed on at once
    assert parser.feed(b" tail\r\nPU") == [b" tail\r\n"]  # "PU" may become PUB: held
    assert frames_of(parser.feed(b"B s 0\r\n\r\n"))[0].subject == "s"


@pytest.mark.parametrize(
    ("pattern", "subject", "matches"),
    [
        ("$JS.FC.>", "$JS.FC.S.C.abc", True),
        ("$JS.FC.>", "$JS.FC", False),
        ("$JS.FC.>", "$JS.ACK.S.C", False),
        ("a.*.c", "a.b.c", True),
        ("a.*.c", "a.b.d", False),
        ("a.*", "a.b.c", False),
        ("a.b", "a.b", True),
        ("a.b", "a.b.c", False),
        (">", "anything.at.all", True),
    ],
)
def test_subject_patterns(pattern, subject, matches):
    assert _subject_matches(_check_pattern("match", pattern), subject) is matches


@pytest.mark.parametrize("pattern", ["", "a..b", "a.>.b", "a.b*", "a b", "a.>x"])
def test_bad_patterns(pattern):
    with pytest.raises(InvalidArgumentError):
        _check_pattern("match", pattern)
