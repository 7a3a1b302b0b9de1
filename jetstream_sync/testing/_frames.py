"""The NATS protocol frames a FaultProxy filters and a ScriptedServer reads: `Frame`, the incremental parser that
cuts one direction of a connection into frames, and the subject patterns rules match frames with.

A module of its own because two servers of this package read frames (the fault proxy's rules and the scripted
server's script), and because parsing is a concern apart from moving bytes between sockets (``_proxy.py``) and
from what a rule does with a frame (``_frame_rules.py``). It imports nothing of this package.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from ..errors import InvalidArgumentError, InvalidTypeError

__all__ = ["Direction", "Frame", "FramePredicate"]

Direction = Literal["both", "upstream", "downstream"]

_UPSTREAM = "upstream"  # client -> server
_DOWNSTREAM = "downstream"  # server -> client
_DIRECTIONS: dict[str, frozenset[str]] = {
    "both": frozenset({_UPSTREAM, _DOWNSTREAM}),
    _UPSTREAM: frozenset({_UPSTREAM}),
    _DOWNSTREAM: frozenset({_DOWNSTREAM}),
}
#: the verbs that carry a payload, per direction, and whether they carry a header block before it
_MESSAGE_VERBS: dict[str, dict[bytes, bool]] = {
    _UPSTREAM: {b"PUB": False, b"HPUB": True},
    _DOWNSTREAM: {b"MSG": False, b"HMSG": True},
}
#: every verb each side sends; only needed to recognise a frame start when joining a connection mid-stream
_VERBS: dict[str, frozenset[bytes]] = {
    _UPSTREAM: frozenset({b"CONNECT", b"SUB", b"UNSUB", b"PING", b"PONG", b"PUB", b"HPUB"}),
    _DOWNSTREAM: frozenset({b"INFO", b"PING", b"PONG", b"+OK", b"-ERR", b"MSG", b"HMSG"}),
}
_SEEK_MAX_LINE = 1 << 16  # joining mid-stream: a partial line longer than this is not held back as a frame start
_SEEK_MAX_PAYLOAD = 64 << 20  # nats-server's largest max_payload: a frame claiming more is not a frame start


class Frame:
    """One NATS protocol frame seen by the proxy: a control line, plus for PUB/HPUB/MSG/HMSG its payload and CRLF.

    What a drop_next()/watch() predicate is called with and what FrameRule.frames keeps. ``raw`` is the frame
    exactly as on the wire, so a test can assert precisely what was dropped; the other fields are read from it.
    ``verb`` is upper-case ("PUB", "MSG", "PING", ...). ``subject``, ``reply`` and ``sid`` are set for the message
    verbs (``sid`` on MSG/HMSG only), ``subject`` and ``sid`` for SUB; ``headers`` is the header block of an
    HPUB/HMSG (b"" otherwise) and ``data`` the payload after it.
    """

    __slots__ = ("_body", "_header_size", "args", "direction", "raw", "reply", "sid", "subject", "verb")

    def __init__(
        self,
        direction: str,
        raw: bytes,
        args: tuple[str, ...],
        *,
        subject: str | None = None,
        reply: str | None = None,
        sid: str | None = None,
        body: int = -1,
        header_size: int = 0,
    ) -> None:
        #: "upstream" (client to server) or "downstream"
        self.direction = direction
        self.raw = raw
        #: the control line split on whitespace, the verb first (as sent)
        self.args = args
        self.verb = args[0].upper() if args else ""
        self.subject = subject
        self.reply = reply
        self.sid = sid
        self._body = body  # where the payload starts in raw; -1 for a frame that has none
        self._header_size = header_size

    @property
    def is_message(self) -> bool:
        """A PUB/HPUB (upstream) or MSG/HMSG (downstream): a frame with a subject and a payload."""
        return self._body >= 0

    @property
    def headers(self) -> bytes:
        """The header block of a message frame (empty for other frames and messages without headers)."""
        if self._body < 0:
            return b""
        return self.raw[self._body : self._body + self._header_size]

    @property
    def data(self) -> bytes:
        """The payload of a message frame (empty for other frames)."""
        if self._body < 0:
            return b""
        return self.raw[self._body + self._header_size : -2]

    def __repr__(self) -> str:
        if self.is_message:
            reply = f" reply={self.reply}" if self.reply else ""
            return f"<Frame {self.direction} {self.verb} {self.subject}{reply} {len(self.raw)}B>"
        return f"<Frame {self.direction} {' '.join(self.args)[:60]}>"


#: a frame rule's test, called on a connection's thread with each frame of the rule's direction(s)
FramePredicate = Callable[[Frame], bool]


class _FrameParser:
    """Cuts one direction of a NATS connection into frames, incrementally: a frame may span reads and a read may
    hold several frames.

    feed() returns, in order, the frames completed so far and the bytes it could not frame; joined (a frame by
    its ``raw``), they are exactly the bytes fed, less the incomplete tail it holds for the next feed. flush()
    gives that tail back when the parser is no longer wanted.

    A parser made before the direction's first byte is in step with the frames from the start. One made
    mid-stream (a rule armed on an open connection) must first find a frame start: a position at the start of
    what it is fed or just after a newline, where a verb this side sends begins a well-formed frame, a message's
    payload ending in CRLF exactly where its size says. The bytes before it pass through unparsed. Only payload
    bytes that spell such a frame could mislead it, which the traffic of a test does not contain. In step, a
    malformed message line (which the server would refuse) passes through and the parser seeks again.
    """

    def __init__(self, direction: str, *, in_step: bool) -> None:
        self._direction = direction
        self._messages = _MESSAGE_VERBS[direction]
        self._verbs = _VERBS[direction]
        self._buf = bytearray()
        self._in_step = in_step
        self._at_line_start = True  # seeking: whether the held bytes begin where a frame may begin

    @property
    def in_step(self) -> bool:
        return self._in_step

    def feed(self, data: bytes) -> list[Frame | bytes]:
        buf = self._buf
        buf += data
        out: list[Frame | bytes] = []
        pos = 0
        while pos < len(buf):
            found: Frame | bool | None = None  # True: the frame here is incomplete, wait for more
            if self._in_step or self._at_line_start:
                found = self._frame_at(pos, strict=not self._in_step)
            if found is True:
                break
            if isinstance(found, Frame):
                out.append(found)
                pos += len(found.raw)
                self._in_step = True
                continue
            # No frame starts here: pass this line through and look again after its newline.
            newline = buf.find(b"\n", pos)
            stop = len(buf) if newline < 0 else newline + 1
            out.append(bytes(buf[pos:stop]))
            self._in_step = False
            self._at_line_start = newline >= 0
            pos = stop
        del buf[:pos]
        return out

    def flush(self) -> bytes:
        """The bytes held for an incomplete frame; the parser is then empty and no longer in step."""
        rest = bytes(self._buf)
        self._buf.clear()
        self._in_step = False
        self._at_line_start = False
        return rest

    def _frame_at(self, pos: int, *, strict: bool) -> Frame | bool | None:
        """The frame starting at ``pos``; True if it is not complete yet; None if no frame starts there.

        ``strict`` (seeking): only a verb this side sends starts a frame, and a partial line that cannot become
        one is given up at once, so seeking holds back no more than a possible frame start.
        """
        buf = self._buf
        newline = buf.find(b"\n", pos)
        if newline < 0:
            if strict and (len(buf) - pos > _SEEK_MAX_LINE or not self._could_start(pos)):
                return None
            return True
        args = bytes(buf[pos:newline]).split()
        verb = args[0].upper() if args else b""
        text = tuple(a.decode("utf-8", "replace") for a in args)
        has_headers = self._messages.get(verb)
        if has_headers is None:
            if strict and verb not in self._verbs:
                return None
            raw = bytes(buf[pos : newline + 1])
            if verb == b"SUB" and len(text) >= 3:
                return Frame(self._direction, raw, text, subject=text[1], sid=text[-1])
            return Frame(self._direction, raw, text)
        fields = self._message_fields(text[1:], has_headers)
        if fields is None:
            return None
        subject, sid, reply, header_size, total = fields
        if strict and total > _SEEK_MAX_PAYLOAD:
            return None
        body = newline + 1
        stop = body + total + 2
        if stop > len(buf):
            return True
        if buf[stop - 2 : stop] != b"\r\n":
            return None
        raw = bytes(buf[pos:stop])
        return Frame(
            self._direction, raw, text, subject=subject, reply=reply, sid=sid, body=body - pos, header_size=header_size
        )

    def _message_fields(
        self, args: tuple[str, ...], has_headers: bool
    ) -> tuple[str, str | None, str | None, int, int] | None:
        """(subject, sid, reply, header size, total size) of a PUB/HPUB/MSG/HMSG line's arguments, or None.

        PUB subject [reply] size, HPUB subject [reply] hdr total; MSG and HMSG have the sid after the subject.
        """
        named = 2 if self._direction == _DOWNSTREAM else 1  # subject (and sid)
        sizes = 2 if has_headers else 1
        if len(args) not in (named + sizes, named + sizes + 1):
            return None
        numbers = args[-sizes:]
        if not all(n.isascii() and n.isdigit() for n in numbers):
            return None
        total = int(numbers[-1])
        header_size = int(numbers[0]) if has_headers else 0
        if header_size > total:
            return None
        sid = args[1] if named == 2 else None
        reply = args[named] if len(args) > named + sizes else None
        return args[0], sid, reply, header_size, total

    def _could_start(self, pos: int) -> bool:
        """Whether the partial line at ``pos`` may still become a control line of this side."""
        head = bytes(self._buf[pos : pos + 8]).upper()
        return any(verb.startswith(head) or head.startswith((verb + b" ", verb + b"\t")) for verb in self._verbs)


def _check_pattern(name: str, pattern: str) -> tuple[str, ...]:
    """The tokens of a subject pattern: non-empty tokens, ``*`` for one token, ``>`` (last) for the rest."""
    tokens = tuple(pattern.split("."))
    if not pattern or any(c.isspace() for c in pattern) or "" in tokens:
        raise InvalidArgumentError(name, f"{pattern!r} is not a subject (empty token or white space)")
    for i, token in enumerate(tokens):
        if (">" in token and (token != ">" or i != len(tokens) - 1)) or ("*" in token and token != "*"):
            raise InvalidArgumentError(name, f"{pattern!r}: a wildcard is a whole token, and '>' comes last")
    return tokens


def _subject_matches(tokens: tuple[str, ...], subject: str) -> bool:
    parts = subject.split(".")
    for i, token in enumerate(tokens):
        if token == ">":
            return len(parts) > i
        if i >= len(parts) or (token != "*" and token != parts[i]):
            return False
    return len(parts) == len(tokens)


def _check_direction(direction: str) -> frozenset[str]:
    if not isinstance(direction, str):
        raise InvalidTypeError("direction", f"must be a str, got {type(direction).__name__}")
    try:
        return _DIRECTIONS[direction]
    except KeyError:
        raise InvalidArgumentError("direction", f"{direction!r} is not one of {', '.join(_DIRECTIONS)}") from None
