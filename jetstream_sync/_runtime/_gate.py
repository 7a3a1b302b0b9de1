"""The socket gate: a thread about to wait for a reply writes its request to the socket itself.

A synchronous request (``kv.get``, ``kv.put``, ``js.publish``, an API call) used to reach the socket through the
IO thread: queue, wake the loop, let it write. Waking a sleeping loop costs about as much as the whole server
round trip on a virtual machine (measured: kv.get p50 0.25 ms against nats-py's 0.16 ms, and 0.17 ms once the
requesting thread writes itself). So when nothing else is waiting to be written, the requesting thread sends
its own bytes, and only the reply comes through the IO thread.

Two threads writing one socket must never interleave or reorder bytes. The gate makes every write to the
connection's socket happen under one re-entrant lock:

* the IO thread's writes: nats-py's (through `GatedTcpTransport`), the outbound queue's drain, and
  asyncio's own ``_write_ready`` (which sends what the transport buffered) and ``_call_connection_lost`` (which
  closes the socket), both wrapped on the bound transport;
* a user thread's direct write, which only tries the lock (never waits) and then sends only when nothing is
  queued anywhere before it: not in the outbound queue, not in nats-py's pending list, not in the transport's
  buffer, not a tail left by an earlier partial send.

A direct send the kernel takes only in part leaves its tail here; the IO thread writes it before anything else
(every gated write flushes it first), so the command stays whole. Only plain TCP is gated: over TLS (or a
websocket, or an asyncio without the members used here) every write goes through the IO thread as before.
See docs/ARCHITECTURE.md, "The life of a request".
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["SocketGate"]

log = logging.getLogger("jetstream_sync")

#: at most this many buffers in one sendmsg (the kernel's IOV_MAX on Linux and the BSDs)
_IOV_MAX = 1024

#: what a bound transport must have: its socket, the callbacks the gate wraps, and the state it reads
_TRANSPORT_MEMBERS = ("_sock", "_buffer", "_write_ready", "_call_connection_lost", "is_closing")


class SocketGate:
    """Serializes every write to one connection's socket; lets a user thread write when the line is empty.

    ``lock`` is held by the IO thread around each of its writes, and tried (never waited for) by a user thread.
    ``bind`` / ``unbind`` run on the IO thread as connections come and go.
    """

    def __init__(self, post: Callable[[Callable[[], None]], None]) -> None:
        self.lock = threading.RLock()
        self._post = post  # schedules a callback on the IO thread
        self._transport: Any = None  # the bound asyncio socket transport, None when no direct write may happen
        self._sock: socket.socket | None = None
        self._tail: bytes | None = None  # the unsent end of a partial direct send: goes out before anything else
        self._sending = False  # a direct send is under way on the thread holding the lock
        #: how many commands user threads wrote themselves (and how many of those the kernel took only in part)
        self.direct_writes = 0
        self.partial_writes = 0

    @property
    def bound(self) -> bool:
        return self._sock is not None

    @property
    def tail_size(self) -> int:
        """Bytes of a partial direct write not yet handed to the transport."""
        tail = self._tail
        return 0 if tail is None else len(tail)

    # -- the IO thread ----------------------------------------------------------------------------------
    def bind(self, transport: asyncio.BaseTransport) -> None:
        """IO thread: a plain TCP connection was made; wrap its transport's socket writes and its close."""
        if type(transport).__name__ != "_SelectorSocketTransport" or not all(
            hasattr(transport, name) for name in _TRANSPORT_MEMBERS
        ):
            log.debug("socket gate: %s is not a plain selector socket transport; no direct writes", transport)
            return
        raw: Any = transport
        write_ready = raw._write_ready
        connection_lost = raw._call_connection_lost
        lock = self.lock

        def gated_write_ready() -> None:
            with lock:
                write_ready()

        def gated_connection_lost(exc: BaseException | None) -> None:
            with lock:
                self.unbind(raw)
                connection_lost(exc)

        with lock:
            # looked up on the instance each time asyncio schedules or calls them, so these shadow the methods
            raw._write_ready = gated_write_ready
            raw._call_connection_lost = gated_connection_lost
            self._transport = raw
            self._sock = raw._sock
            self._tail = None

    def unbind(self, transport: object | None = None) -> None:
        """IO thread: no more direct writes (the connection closes, or is upgraded to TLS). With ``transport``,
        only if that is the bound one (a closing old connection must not unbind its successor)."""
        with self.lock:
            if transport is None or transport is self._transport:
                self._transport = None
                self._sock = None
                self._tail = None

    def flush_tail(self) -> None:
        """IO thread, lock held: hand a partial direct send's tail to the transport, ahead of what follows."""
        tail = self._tail
        if tail is None:
            return
        self._tail = None
        transport = self._transport
        if transport is not None and not transport.is_closing():
            transport.write(tail)

    def send_burst(self, parts: list[bytes]) -> list[bytes | memoryview]:
        """IO thread, lock held: send large commands' parts straight from their buffers (``sendmsg``), without
        joining them into one first; what the kernel did not take is returned, for the transport to buffer.

        Python 3.11's transport joins the parts of ``writelines`` into one copy before it sends (3.12's sends
        them as they are): at 16 KiB a publish that copy is an eighth of the IO thread's time (perf, 3.11).
        Only when the line is empty (no tail, nothing in the transport's buffer); otherwise every part is
        returned, unsent. A socket error sends nothing more: the transport's own write meets it and reports it.
        """
        sock = self._sock
        transport = self._transport
        if sock is None or self._tail is not None or transport is None or transport._buffer:
            return list(parts)
        done = 0
        while done < len(parts):
            batch = parts[done : done + _IOV_MAX]
            try:
                sent = sock.sendmsg(batch)
            except (BlockingIOError, InterruptedError):
                sent = 0
            except OSError:
                break  # breaking: the transport's own write meets the error and reports the lost connection
            for part in batch:
                if sent < len(part):  # the first part not wholly sent: its unsent end, then all after it
                    return [memoryview(part)[sent:] if sent else part, *parts[done + 1 :]]
                sent -= len(part)
                done += 1
        return list(parts[done:])

    def _flush_tail_soon(self) -> None:
        with self.lock:
            self.flush_tail()

    # -- a user thread ----------------------------------------------------------------------------------
    def send(self, data: bytes) -> bool:
        """Lock held, nothing queued before ``data``: write it to the socket now. False when it must be queued
        instead (not bound, something buffered, the socket full or broken, or a signal handler's request
        made in the middle of this thread's own direct write); then nothing of it was sent."""
        transport = self._transport
        sock = self._sock
        if (
            sock is None
            or self._sending
            or self._tail is not None
            or transport.is_closing()
            # Only whether the transport holds anything: a truth test of its buffer is atomic, while
            # get_write_buffer_size() iterates it (a deque on 3.12+), which another thread may be changing.
            or transport._buffer
        ):
            return False
        # A Python signal handler runs on the main thread between two bytecodes, so it can interrupt this method
        # after the send and before the tail is kept. Its own request must not write (the lock is re-entrant:
        # ``_sending`` refuses it), and an exception it raises (KeyboardInterrupt) leaves a command whose sent
        # part is unknown: the connection is then dropped and remade rather than carry a torn command.
        self._sending = True
        settled = False
        try:
            try:
                sent = sock.send(data)
            except OSError:  # full (BlockingIOError), interrupted, or breaking: the IO thread hears of a broken
                settled = True  # connection on its own (and logs it); the caller queues the request instead
                return False
            self.direct_writes += 1
            if sent < len(data):
                self.partial_writes += 1
                self._tail = data[sent:]
                self._post(self._flush_tail_soon)
            settled = True
            return True
        finally:
            self._sending = False
            if not settled:
                self._tear(transport)

    def _tear(self, transport: Any) -> None:
        """Lock held: a direct write was interrupted where its sent part is unknown; abort the connection (nats-py
        reconnects, as after any lost connection) so that no command is ever completed wrongly."""
        log.warning("socket gate: a direct write was interrupted midway; dropping the connection to reconnect")
        self.unbind()
        with contextlib.suppress(Exception):
            self._post(transport.abort)
