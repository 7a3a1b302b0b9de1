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

**Nothing read can stop the reading.** nats-py's read loop reconnects on its ``ProtocolError`` and on an
``OSError``; any other exception ends the loop for good while the connection still says it is connected
(issue 26: a late PONG's ``InvalidStateError``, an ``INFO []``). So `ProtocolParser.parse` is the one
place where whatever a server input causes is settled: a `ServerProtocolViolation` (what the server sent
is not NATS: an unknown operation, a malformed MSG, an INFO of the wrong shape, a frame larger than the
connection may carry, a control line that never ends) and any exception of nats-py's ``_process_*`` methods are
reported once (the user's ``error_callback`` gets a
[`jetstream_sync.errors.ProtocolError`][jetstream_sync.errors.ProtocolError], else it is logged) and become nats-py's
``ProtocolError``, so the connection reconnects. A handler's exception is logged and only its message is dropped.
``NatsConnection._read_loop`` backs this up: a read loop that ends while the connection is still up starts a reconnect
too.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any

import nats.errors
import nats.protocol.parser

from .. import errors
from . import _scan

if TYPE_CHECKING:
    from ._nats import NatsConnection

__all__ = ["FRAME_ROOM", "MAX_CONTROL_LINE", "REPLY_LIMIT", "ProtocolParser", "ServerProtocolViolation", "check_info"]

log = logging.getLogger("jetstream_sync")

_CRLF = b"\r\n"
_H = ord("H")
_M = ord("M")
_OPS = (b"MSG ", b"HMSG ")  # by "has headers"

#: The longest control line (MSG, INFO, -ERR, ...) a server may send. nats-server's own limit for what it reads
#: is 4 KiB; its INFO grows with a cluster's ``connect_urls``, so the room here is generous, but a line that never
#: ends must not be buffered without bound.
MAX_CONTROL_LINE = 1024 * 1024

#: A message may be this much larger than the server's ``max_payload``: the server adds headers of its own to
#: what it stored (direct gets, JetStream status and metadata headers), a few hundred bytes. A frame that claims
#: more is refused before any of it is buffered: no server can legitimately send it.
FRAME_ROOM = 64 * 1024

#: A reply to one of this client's inboxes may be larger still: JetStream API responses are made by the server,
#: not published, and max_payload does not bound them (a STREAM.INFO listing 100,000 subjects is 1.2 MB, over
#: a default server's 1 MiB). They are bounded here instead, so a hostile server still cannot make the client
#: buffer without limit.
REPLY_LIMIT = 64 * 1024 * 1024


class ServerProtocolViolation(nats.errors.ProtocolError):
    """What the server sent is not NATS; ``reason`` says what. A nats-py ``ProtocolError``, so that nats-py's read
    loop reconnects on it, with a text of its own (nats-py's says only "protocol error")."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason

    def __str__(self) -> str:
        return self.reason


# INFO fields the client reads, and the JSON types each must have. A wrong type is refused where the INFO is
# decoded, at connect and later, rather than surfacing as an AttributeError or TypeError deep inside nats-py.
_INFO_FIELDS: dict[str, tuple[type, ...]] = {
    "server_id": (str,),
    "server_name": (str,),
    "version": (str,),
    "host": (str,),
    "nonce": (str,),
    "client_ip": (str,),
    "domain": (str,),
    "cluster": (str,),
    "proto": (int,),
    "port": (int,),
    "max_payload": (int,),
    "client_id": (int,),
    "headers": (bool,),
    "jetstream": (bool,),
    "auth_required": (bool,),
    "tls_required": (bool,),
    "tls_available": (bool,),
    "ldm": (bool,),
    "connect_urls": (list,),
}


def check_info(info: Any) -> dict[str, Any]:
    """``info`` if it is an INFO the client can use; else `ServerProtocolViolation` naming the fault.

    Unknown fields are let be (servers add fields); known ones must have their type (``bool`` is not an int
    here), ``max_payload`` must be positive and ``connect_urls`` a list of strings.
    """
    if not isinstance(info, dict):
        raise ServerProtocolViolation(f"the server's INFO is not a JSON object but {type(info).__name__}")
    for field, types in _INFO_FIELDS.items():
        if field not in info or info[field] is None:
            continue
        value = info[field]
        if not isinstance(value, types) or (bool not in types and isinstance(value, bool)):
            raise ServerProtocolViolation(
                f"the server's INFO has {field}={value!r:.80}, not a {' or '.join(t.__name__ for t in types)}"
            )
    max_payload = info.get("max_payload")
    if max_payload is not None and max_payload <= 0:
        raise ServerProtocolViolation(f"the server's INFO has max_payload={max_payload}, not a positive size")
    urls = info.get("connect_urls")
    if urls is not None and not all(isinstance(url, str) for url in urls):
        raise ServerProtocolViolation(f"the server's INFO has connect_urls={urls!r:.80}, not a list of addresses")
    return info


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
        """IO thread (nats-py's read loop): parse and dispatch ``data``. Whatever the input makes go wrong ends as
        nats-py's ``ProtocolError`` (so the connection reconnects), reported first; see the module's docstring."""
        try:
            await self._parse_data(data)
        except ServerProtocolViolation as exc:
            await self._report(exc.reason)
            raise
        except nats.errors.ProtocolError:  # nats-py's own, from a _process_* method
            await self._report("nats-py refused what the server sent")
            raise
        except Exception as exc:
            log.debug("the read path raised", exc_info=True)
            reason = f"what the server sent made the client fail ({type(exc).__name__}: {exc})"
            await self._report(reason)
            raise ServerProtocolViolation(reason) from exc

    async def _report(self, reason: str) -> None:
        """Tell the user (error_callback, else the log) why the connection is about to reconnect."""
        nc = self.nc
        try:
            await nc._error_cb(errors.ProtocolError(f"{reason}; reconnecting"))
        except Exception:
            log.exception("reporting a protocol error failed")

    async def _parse_data(self, data: bytes) -> None:
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
        limit = int(nc._max_payload) + FRAME_ROOM
        self._wanted = 0
        fast_msgs = fast_bytes = 0  # nats-py's in_msgs/in_bytes, added up once per read
        scan = _scan.scan  # the compiled fast path, when built and not switched off
        failed = _scan.handler_failed
        try:
            while pos < end:
                if scan is not None:
                    pos = scan(buf, pos, handlers, limit, stats, failed)  # the fast-handler messages from pos on
                    if pos == end:
                        break
                eol = buf.find(_CRLF, pos)
                if eol < 0:
                    if end - pos > MAX_CONTROL_LINE:
                        raise ServerProtocolViolation(
                            f"the server sent {end - pos} bytes without ending the control line "
                            f"(more than {MAX_CONTROL_LINE})"
                        )
                    self._wanted = end - pos + 1  # any more bytes may complete the control line
                    return pos
                first = buf[pos]
                if first in (_M, _H):
                    # MSG <subject> <sid> [reply] <size> / HMSG <subject> <sid> [reply] <header size> <size>
                    with_headers = first == _H
                    op_end = pos + 4 + with_headers
                    if buf[pos:op_end] != _OPS[with_headers]:
                        raise ServerProtocolViolation(f"the server sent an unknown operation: {_head(buf, pos, eol)}")
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
                        raise ServerProtocolViolation(
                            f"the server sent a malformed MSG: {_head(buf, pos, eol)}"
                        ) from None
                    if header_size < 0 or total < header_size:
                        raise ServerProtocolViolation(f"the server sent a malformed MSG: {_head(buf, pos, eol)}")
                    if total > limit and (total > REPLY_LIMIT or not subject.startswith(nc.reply_prefix)):
                        raise ServerProtocolViolation(
                            f"the server sent a message of {total} bytes, more than the connection's max_payload "
                            f"({limit - FRAME_ROOM}) allows; refused before buffering it"
                        )
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
                    except Exception as exc:
                        failed(exc)
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
            except (ValueError, RecursionError):
                raise ServerProtocolViolation(f"the server sent an INFO that is not JSON: {line[:80]!r}") from None
            await nc._process_info(check_info(info))
        else:
            raise ServerProtocolViolation(f"the server sent an unknown operation: {line[:80]!r}")


def _head(buf: bytes, pos: int, eol: int) -> str:
    """The start of the control line at ``pos``, for an error's text."""
    return repr(buf[pos : min(eol, pos + 80)])
