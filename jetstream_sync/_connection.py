"""Everything that touches nats-py internals, in one place.

nats-py owns the socket, protocol parsing, reconnects and auth. We hook it at two points, both stable in
the 2.x line (pinned in pyproject.toml):

* ``_process_msg``: messages for our subscriptions go straight to a synchronous handler on the IO thread,
  skipping nats-py's per-subscription asyncio queue and task (most of its per-message cost).
* ``_pending`` / ``_flush_queue``: the outbound queue appends a whole burst of encoded PUBs at once and
  kicks nats-py's flusher once, instead of one coroutine call per publish.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import ssl
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from nats.aio.client import Client as _NatsPyClient
from nats.aio.transport import TcpTransport
from nats.nuid import NUID

from . import errors
from .headers import parse_header_block

if TYPE_CHECKING:
    from ._io import IOLoop

log = logging.getLogger("jetstream_sync")

# (subject, reply, payload, raw header block or None), all as received.
Handler = Callable[[bytes, bytes, bytes, "bytes | None"], None]

_CRLF = b"\r\n"
_NO_RESPONDERS = b"NATS/1.0 503"

# Unsent bytes (nats-py's list plus the transport's buffer) above which the outbound queue waits for the socket.
# Kept small on purpose: Python 3.11's transport memmoves its whole backlog after every partial send, so a
# multi-MiB backlog makes large publishes several times slower (measured: 4 MiB 62k, 512 KiB 92k msgs/s at 16 KiB).
_WRITE_HIGH_WATER = 512 * 1024


# Above this payload size a publish is queued as (control line, payload, CRLF), so the payload is copied once,
# when the socket write joins the burst, instead of once more into a formatted command.
LARGE_PAYLOAD = 4096

Command = bytes | tuple[bytes, ...]


def encode_pub_parts(subject: bytes, reply: bytes, headers: bytes | None, payload: bytes) -> Command:
    """A PUB or HPUB command, as one bytes or, for a large payload, as parts that avoid copying it."""
    if len(payload) <= LARGE_PAYLOAD:
        return encode_pub(subject, reply, headers, payload)
    if headers is None:
        head = (
            b"PUB %b %b %d\r\n" % (subject, reply, len(payload))
            if reply
            else b"PUB %b %d\r\n" % (subject, len(payload))
        )
        return (head, payload, _CRLF)
    hlen = len(headers)
    total = hlen + len(payload)
    head = (
        b"HPUB %b %b %d %d\r\n" % (subject, reply, hlen, total)
        if reply
        else b"HPUB %b %d %d\r\n" % (subject, hlen, total)
    )
    return (head + headers, payload, _CRLF)


def encode_pub(subject: bytes, reply: bytes, headers: bytes | None, payload: bytes) -> bytes:
    """One PUB or HPUB protocol command."""
    if headers is None:
        if reply:
            return b"PUB %b %b %d\r\n%b\r\n" % (subject, reply, len(payload), payload)
        return b"PUB %b %d\r\n%b\r\n" % (subject, len(payload), payload)
    hlen = len(headers)
    if reply:
        return b"HPUB %b %b %d %d\r\n%b%b\r\n" % (subject, reply, hlen, hlen + len(payload), headers, payload)
    return b"HPUB %b %d %d\r\n%b%b\r\n" % (subject, hlen, hlen + len(payload), headers, payload)


class NatsClient(_NatsPyClient):
    """nats-py's client with a synchronous dispatch path for jetstream_sync's own subscriptions."""

    def __init__(self) -> None:
        super().__init__()
        self.fast_handlers: dict[int, Handler] = {}

    async def _process_msg(self, sid: int, subject: bytes, reply: bytes, data: bytes, headers: bytes | None) -> None:
        handler = self.fast_handlers.get(sid)
        if handler is None:
            await super()._process_msg(sid, subject, reply, data, headers)  # type: ignore[arg-type]
            return
        stats = self.stats
        stats["in_msgs"] += 1
        stats["in_bytes"] += len(data)
        try:
            handler(subject, reply, data, headers)
        except Exception:
            log.exception("a message handler raised on the IO thread; the message was dropped")

    def _connect_command(self) -> bytes:
        """nats-py upgrades to TLS only when the server requires it. When the user asked for TLS (``tls=`` or a
        tls:// URL) and the server offers none, refuse here, before CONNECT carries any credentials in clear."""
        server = self._current_server
        wants_tls = self.options.get("tls") is not None or (server is not None and server.uri.scheme == "tls")
        if wants_tls and not self._server_info.get("tls_required"):
            raise ssl.SSLError(
                "TLS was asked for (tls= or a tls:// URL) but the server does not offer TLS; "
                "refusing to connect in plain text"
            )
        return bytes(super()._connect_command())

    def drop_failed_tls_transport(self) -> None:
        """Work around nats-py issue 718: after a failed TLS upgrade, connect() hangs instead of failing.

        The plain stream's socket was handed to the TLS layer, so closing nats-py's transport waits for a close
        event that never comes. Close the socket and drop the transport; nats-py makes a new one for its next try.
        """
        writer = self._tcp_writer()
        if writer is None or isinstance(writer.transport.get_protocol(), asyncio.StreamReaderProtocol):
            return  # no transport, or a plain or upgraded stream: closing it works
        writer.transport.close()
        self._transport = None

    async def fast_subscribe(self, subject: str, queue: str, handler: Handler) -> Any:
        """Subscribe with ``handler`` called for each message; returns nats-py's Subscription."""
        sub = await self.subscribe(subject, queue=queue)
        self.fast_handlers[sub._id] = handler
        return sub

    async def fast_unsubscribe(self, sub: Any) -> None:
        self.fast_handlers.pop(sub._id, None)
        if not self.is_closed:
            await sub.unsubscribe()

    def unwritten_bytes(self) -> int:
        """Bytes not yet handed to the socket: nats-py's pending list plus the transport's buffer."""
        writer = self._tcp_writer()
        buffered = writer.transport.get_write_buffer_size() if writer is not None else 0
        return int(self._pending_data_size) + int(buffered)

    def _tcp_writer(self) -> asyncio.StreamWriter | None:
        transport = self._transport
        if not isinstance(transport, TcpTransport):
            return None
        writer = transport._io_writer
        return writer if isinstance(writer, asyncio.StreamWriter) else None

    def write_now(self, commands: list[bytes], size: int, count: int = 0) -> bool:
        """IO thread: write straight to the socket when nothing of nats-py's is waiting to go first.

        Saves the flusher task's extra loop iteration per burst; False when nats-py must queue it instead
        (not connected, or its own pending data has to keep its place in line).
        """
        if not self.is_connected or self._pending_data_size:
            return False
        writer = self._tcp_writer()
        if writer is None or writer.transport.is_closing():
            return False
        if len(commands) == 1:
            writer.write(commands[0])
        else:
            writer.writelines(commands)
        self._count_out(commands, size, count)
        return True

    def _count_out(self, commands: list[bytes], size: int, count: int) -> None:
        """nats-py's own publish path counts these; ours bypasses it, so it counts here (count: messages)."""
        stats = self.stats
        stats["out_msgs"] += count or len(commands)
        stats["out_bytes"] += size

    async def wait_writable(self) -> None:
        """Until the socket's buffer drained below its low-water mark (or the connection is gone)."""
        writer = self._tcp_writer()
        if writer is None or not self.is_connected:
            return
        try:
            await writer.drain()
        except (ConnectionError, RuntimeError, AssertionError):
            return

    def append_pending(self, commands: list[bytes], size: int, count: int = 0) -> None:
        """IO thread: queue encoded commands in nats-py's write buffer and wake its flusher once."""
        self._pending.extend(commands)
        self._pending_data_size += size
        self._count_out(commands, size, count)
        if self.is_connected:
            queue = self._flush_queue
            if queue is not None and queue.empty():
                queue.put_nowait(asyncio.get_running_loop().create_future())


class Outbound:
    """Coalesces publishes and acks from any thread into one IO-thread hand-off per burst.

    Back-pressure: a thread that finds more than ``high_water`` bytes queued waits until the IO thread
    has taken them. While disconnected, nats-py buffers up to ``reconnect_buffer`` bytes for the
    reconnect; beyond that a publish fails at once with NotConnectedError.
    """

    def __init__(self, io: IOLoop, nc: NatsClient, *, high_water: int, reconnect_buffer: int) -> None:
        self._io = io
        self._nc = nc
        self._cond = threading.Condition(threading.Lock())
        self._queue: list[bytes] = []
        self._queued = 0
        self._count = 0
        self._scheduled = False
        self._waiters = 0
        self._high_water = high_water
        self._reconnect_buffer = reconnect_buffer
        self.stall_timeout = 30.0

    def put(self, command: Command) -> None:
        """Queue one message's command (bytes, or the parts of a large one)."""
        size = len(command) if isinstance(command, bytes) else sum(len(part) for part in command)
        if not self._nc.is_connected and self._nc.unwritten_bytes() + self._queued + size > self._reconnect_buffer:
            if self._nc.is_closed or self._io.closed:
                raise errors.ConnectionClosedError()
            raise errors.NotConnectedError(
                f"not connected and the reconnect buffer ({self._reconnect_buffer} bytes) is full; "
                "wait for the reconnect (is_connected) or raise pending_size in connect()"
            )
        with self._cond:
            if isinstance(command, bytes):
                self._queue.append(command)
            else:
                self._queue.extend(command)
            self._queued += size
            self._count += 1
            schedule = not self._scheduled
            self._scheduled = True
            backed_up = self._queued > self._high_water
        if schedule:
            self._io.post(self._drain)
        if backed_up:
            self._wait_below_high_water()

    def _wait_below_high_water(self) -> None:
        deadline = time.monotonic() + self.stall_timeout
        with self._cond:
            self._waiters += 1
            try:
                while self._queued > self._high_water:
                    if self._io.closed:
                        raise errors.ConnectionClosedError()
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        raise errors.TimeoutError(
                            f"outbound queue stayed above {self._high_water} bytes for {self.stall_timeout:g}s; "
                            "the connection cannot keep up"
                        )
                    self._cond.wait(min(remaining, 0.25))
            finally:
                self._waiters -= 1

    def _drain(self) -> None:
        nc = self._nc
        backed_up = nc.is_connected and nc.unwritten_bytes() > _WRITE_HIGH_WATER
        with self._cond:
            if backed_up:
                commands: list[bytes] = []
                size = count = 0
            else:
                commands, self._queue = self._queue, []
                size, self._queued = self._queued, 0
                count, self._count = self._count, 0
                self._scheduled = False
                if self._waiters:
                    self._cond.notify_all()
        if backed_up:
            # Keep _scheduled set so user threads queue (and block at high water) until the socket drains.
            asyncio.get_running_loop().create_task(self._drain_when_writable())
            return
        if commands and not nc.is_closed and not nc.write_now(commands, size, count):
            nc.append_pending(commands, size, count)

    async def _drain_when_writable(self) -> None:
        await self._nc.wait_writable()
        if not self._nc.is_connected:
            await asyncio.sleep(0.001)  # reconnecting: _drain then queues into nats-py's reconnect buffer
        self._drain()

    def wake_all(self) -> None:
        with self._cond:
            self._cond.notify_all()


class Reply(Protocol):
    """A pending request's receiver: ``resolve`` with the reply or ``fail`` with an error. IO thread."""

    def resolve(self, subject: bytes, data: bytes, headers: bytes | None) -> None: ...

    def fail(self, exc: BaseException) -> None: ...


class RequestMux:
    """One wildcard inbox subscription answers every request, publish ack and double ack by token."""

    def __init__(self, inbox_prefix: str) -> None:
        self.prefix = f"{inbox_prefix}.{NUID().next().decode()}."
        self._prefix_b = self.prefix.encode()
        self._plen = len(self._prefix_b)
        self._pending: dict[bytes, Reply] = {}
        self._counter = itertools.count(1)
        # timeout -> (deadline, token) in submission order: one FIFO per distinct timeout keeps it O(1)
        self._deadlines: dict[float, deque[tuple[float, bytes]]] = {}
        self._deadlines_lock = threading.Lock()

    @property
    def subject(self) -> str:
        return self.prefix + "*"

    def __len__(self) -> int:
        return len(self._pending)

    def register(self, reply: Reply, timeout: float | None = None) -> bytes:
        """Any thread: a fresh reply subject for ``reply``; with ``timeout`` the IO thread expires it."""
        token = b"%x" % next(self._counter)
        self._pending[token] = reply
        if timeout is not None:
            queue = self._deadlines.get(timeout)
            if queue is None:
                with self._deadlines_lock:
                    queue = self._deadlines.setdefault(timeout, deque())
            queue.append((time.monotonic() + timeout, token))  # deque.append is atomic; only the IO thread pops
        return self._prefix_b + token

    def forget(self, reply_subject: bytes) -> None:
        self._pending.pop(reply_subject[self._plen :], None)

    def handle(self, subject: bytes, reply: bytes, data: bytes, headers: bytes | None) -> None:
        """IO thread: the fast handler of the inbox subscription."""
        entry = self._pending.pop(subject[self._plen :], None)
        if entry is None:
            return
        if headers is not None and headers.startswith(_NO_RESPONDERS):
            entry.fail(errors.NoRespondersError(f"no responders on the subject of request {subject.decode()!r}"))
            return
        entry.resolve(subject, data, headers)

    def expire(self, now: float) -> None:
        """IO thread: fail entries whose deadline passed."""
        expired: list[bytes] = []
        with self._deadlines_lock:
            queues = list(self._deadlines.values())
        for queue in queues:
            while queue and queue[0][0] <= now:
                expired.append(queue.popleft()[1])
        for token in expired:
            entry = self._pending.pop(token, None)
            if entry is not None:
                entry.fail(errors.TimeoutError("no reply within the timeout"))

    def fail_all(self, exc_factory: Callable[[], BaseException]) -> None:
        """IO thread: fail every pending entry (disconnect, close)."""
        pending, self._pending = self._pending, {}
        with self._deadlines_lock:
            for queue in self._deadlines.values():
                queue.clear()
        for entry in pending.values():
            entry.fail(exc_factory())


def status_of(headers: bytes | None) -> tuple[int | None, str]:
    """The inline status of a message (e.g. 404, 408, 409, 100), or (None, '') for a normal message."""
    if not headers or headers[8:9] != b" ":
        return None, ""
    status, description, _ = parse_header_block(headers)
    return status, description
