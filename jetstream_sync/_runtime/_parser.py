"""The wire-protocol parser our nats-py connection reads with: nats-py's, rewritten for throughput.

nats-py's parser copies every read into a bytearray, tries up to seven regular expressions per operation,
deletes what it consumed from the front of the bytearray (a copy of the rest), and awaits a coroutine per
message. At KV and object-store rates that is most of the IO thread's time. This one works on the bytes it
was given with an index: it finds the end of the control line, splits it, slices the payload out, and calls
our subscriptions' handler directly (nats-py's own subscriptions still get ``_process_msg``). Bytes a read
left incomplete are kept as a list of parts and joined once there is enough for the next operation, so a
large message arriving over many reads is copied once, not once per read.

What it hands on is what nats-py's parser hands on, byte for byte: the subject, reply, header block and
payload of each message, the server's ``-ERR`` text (lower-cased, quotes kept), INFO as parsed JSON.
Anything that is not a NATS operation raises nats-py's ProtocolError, which makes nats-py reconnect.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING

import nats.errors
import nats.protocol.parser

if TYPE_CHECKING:
    from ._nats import NatsConnection

__all__ = ["ProtocolParser"]

log = logging.getLogger("jetstream_sync")

_CRLF = b"\r\n"
_H = ord("H")
_M = ord("M")
_OPS = (b"MSG ", b"HMSG ")  # by "has headers"


class ProtocolParser(nats.protocol.parser.Parser):
    """Parses what the server sends and dispatches it to ``nc``; replaces nats-py's ``Client._ps``."""

    nc: NatsConnection

    def reset(self) -> None:
        """Forget any partial operation (nats-py calls this on every reconnect)."""
        super().reset()
        self._resets = getattr(self, "_resets", 0) + 1
        self._parts: list[bytes] = []
        self._parts_size = 0
        # bytes that must have arrived before parsing can go on (a partial message needs all of its payload)
        self._wanted = 0

    async def parse(self, data: bytes = b"") -> None:
        parts = self._parts
        if parts:
            parts.append(data)
            self._parts_size += len(data)
            if self._parts_size < self._wanted:
                return
            buf = b"".join(parts)
            parts.clear()
        else:
            buf = data
        pos = await self._parse(buf)
        if pos is not None and pos < len(buf):
            rest = buf[pos:]
            parts.append(rest)
            self._parts_size = len(rest)

    async def _parse(self, buf: bytes) -> int | None:
        """Parse whole operations from ``buf``; returns where the first incomplete one starts, or None when the
        parser was reset meanwhile (a handler or nats-py began a reconnect: the rest belongs to the old
        connection and must not be parsed, nor kept for the new one)."""
        nc = self.nc
        resets = self._resets
        handlers = nc.fast_handlers
        stats = nc.stats
        pos, end = 0, len(buf)
        self._wanted = 0
        fast_msgs = fast_bytes = 0  # nats-py's in_msgs/in_bytes, added up once per read
        try:
            while pos < end:
                eol = buf.find(_CRLF, pos)
                if eol < 0:
                    self._wanted = end - pos + 1  # any more bytes may complete the control line
                    return pos
                first = buf[pos]
                if first in (_M, _H):
                    # MSG <subject> <sid> [reply] <size> / HMSG <subject> <sid> [reply] <header size> <size>
                    with_headers = first == _H
                    op_end = pos + 4 + with_headers
                    if buf[pos:op_end] != _OPS[with_headers]:
                        raise nats.errors.ProtocolError("nats: unknown protocol")
                    args = buf[op_end:eol].split()
                    try:
                        if with_headers:
                            if len(args) == 5:
                                subject, sid_text, reply, header_text, total_text = args
                            else:
                                (subject, sid_text, header_text, total_text), reply = args, b""
                            header_size = int(header_text)
                        else:
                            if len(args) == 4:
                                subject, sid_text, reply, total_text = args
                            else:
                                (subject, sid_text, total_text), reply = args, b""
                            header_size = 0
                        sid = int(sid_text)
                        total = int(total_text)
                    except ValueError:
                        raise nats.errors.ProtocolError("nats: malformed MSG") from None
                    if header_size < 0 or total < header_size:
                        raise nats.errors.ProtocolError("nats: malformed MSG")
                    start = eol + 2
                    stop = start + total
                    if stop + 2 > end:
                        self._wanted = stop + 2 - pos
                        return pos
                    headers = buf[start : start + header_size] if header_size else None
                    payload = buf[start + header_size : stop]
                    pos = stop + 2
                    handler = handlers.get(sid)
                    if handler is None:
                        await nc._process_msg(sid, subject, reply, payload, headers)
                        if self._resets != resets:
                            return None
                        continue
                    fast_msgs += 1
                    fast_bytes += len(payload)
                    try:
                        handler(subject, reply, payload, headers)
                    except Exception:
                        log.exception("a message handler raised on the IO thread; the message was dropped")
                    continue
                line = buf[pos:eol]
                pos = eol + 2
                await self._control(line)
                if self._resets != resets:
                    return None
            return pos
        finally:
            stats["in_msgs"] += fast_msgs
            stats["in_bytes"] += fast_bytes

    async def _control(self, line: bytes) -> None:
        """Everything the server sends that is not a message."""
        nc = self.nc
        if line.startswith(b"PING"):
            await nc._process_ping()
        elif line.startswith(b"PONG"):
            await nc._process_pong()
        elif line.startswith(b"+OK"):
            return
        elif line.startswith(b"-ERR"):
            await nc._process_err(line[4:].strip().decode(errors="replace").lower())
        elif line.startswith(b"INFO"):
            try:
                info = json.loads(line[4:])
            except ValueError:
                raise nats.errors.ProtocolError("nats: malformed INFO") from None
            await nc._process_info(info)
        else:
            raise nats.errors.ProtocolError("nats: unknown protocol")
