"""The nats-py adapter: with its protocol parser (``_parser.py``) the only module that imports nats-py, and
the contract it relies on.

nats-py owns the socket, protocol parsing, reconnects and auth. We hook it at a few points, all stable in the
2.x line (pinned in pyproject.toml) and listed in :data:`NATS_PY_CONTRACT`, which a test checks so that a
nats-py release that breaks one fails loudly in CI rather than deep in the IO thread:

* ``_ps``: the protocol parser is ours (``_parser.py``): it parses by index instead of by regular expression
  and calls our subscriptions' handlers directly; nats-py's ``_process_*`` methods get everything else.
* ``_process_msg``: messages for our subscriptions go straight to a synchronous handler on the IO thread,
  skipping nats-py's per-subscription asyncio queue and task (most of its per-message cost).
* ``_pending`` / ``_flush_queue`` / the transport's writer: the outbound queue appends a whole burst of encoded
  commands at once, or writes it straight to the socket, instead of one coroutine call per publish.
* ``_connect_command`` / ``_server_info``: refuse to send credentials in clear when TLS was asked for.
* ``_transport``: the plain TCP transport nats-py makes is our :class:`GatedTcpTransport`, so that its writes
  and a user thread's direct request writes take turns (``_gate.py``), and its socket is read by our
  :class:`ChunkReader` (``_reader.py``: received chunks handed to the parser without copies).

Everything else in the runtime talks to nats-py through :class:`NatsConnection`'s own methods. See
docs/ARCHITECTURE.md, "The runtime port".
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import random
import ssl
from collections.abc import Callable
from typing import Any, Literal

import attrs
import nats.aio.client
import nats.aio.subscription
import nats.aio.transport
import nats.errors
import nats.nuid
import nats.protocol.parser

from .. import errors
from ._gate import SocketGate
from ._parser import ProtocolParser, ServerProtocolViolation, check_info
from ._reader import open_chunked_connection

__all__ = [
    "NATS_PY_CONTRACT",
    "ContractMember",
    "Handler",
    "NatsConnection",
    "NatsSubscription",
    "Nuid",
    "contract_problems",
]

log = logging.getLogger("jetstream_sync")

#: a move off a server in lame-duck mode waits a random share of this many seconds (see NatsConnection._lame_duck)
LAME_DUCK_SPREAD = 5.0

# close(): how often the unsent backlog is looked at, and how long it may stay unmoved before the rest is dropped
_CLOSE_POLL = 0.02
_CLOSE_STALL = 0.5

# (subject, reply, payload, raw header block or None), all as received.
Handler = Callable[[bytes, bytes, bytes, "bytes | None"], None]

#: nats-py's subscription object, opaque outside this module.
NatsSubscription = nats.aio.subscription.Subscription

#: Unique tokens for inboxes and generated names (nats-py's NUID; not thread-safe, callers lock).
Nuid = nats.nuid.NUID


@attrs.frozen
class ContractMember:
    """One nats-py member we rely on: where it lives, what kind it is, and the parameters we pass to it."""

    owner: Literal["Client", "Subscription", "TcpTransport", "Parser"]
    name: str
    kind: Literal["method", "property", "instance"]  # instance: an attribute set by __init__
    params: tuple[str, ...] = ()


_CONNECT_KEYWORDS = (
    "servers",
    "name",
    "connect_timeout",
    "allow_reconnect",
    "max_reconnect_attempts",
    "reconnect_time_wait",
    "ping_interval",
    "max_outstanding_pings",
    "pending_size",
    "inbox_prefix",
    "no_echo",
    "error_cb",
    "disconnected_cb",
    "reconnected_cb",
    "closed_cb",
    "user",
    "password",
    "token",
    "user_credentials",
    "nkeys_seed",
    "nkeys_seed_str",
    "tls",
    "tls_hostname",
)

#: Every nats-py member the adapter uses beyond its documented public API, and the public ones whose
#: signature it depends on. Checked by :func:`contract_problems` (tests/unit/runtime/test_nats_contract.py).
NATS_PY_CONTRACT: tuple[ContractMember, ...] = (
    ContractMember("Client", "connect", "method", _CONNECT_KEYWORDS),
    ContractMember("Client", "subscribe", "method", ("subject", "queue")),
    ContractMember("Client", "close", "method"),
    ContractMember("Client", "is_connected", "property"),
    ContractMember("Client", "is_closed", "property"),
    ContractMember("Client", "connected_url", "property"),
    ContractMember("Client", "servers", "property"),
    ContractMember("Client", "_process_msg", "method", ("sid", "subject", "reply", "data", "headers")),
    ContractMember("Client", "_process_err", "method", ("err_msg",)),
    ContractMember("Client", "_process_info", "method", ("info",)),
    ContractMember("Client", "_process_ping", "method"),
    ContractMember("Client", "_process_pong", "method"),
    ContractMember("Client", "_read_loop", "method"),
    ContractMember("Client", "_process_op_err", "method", ("e",)),
    ContractMember("Client", "_close", "method", ("status", "do_cbs")),
    ContractMember("Client", "_send_ping", "method", ("future",)),
    ContractMember("Client", "_error_cb", "instance"),
    ContractMember("Client", "_reading_task", "instance"),
    ContractMember("Client", "_pongs", "instance"),
    ContractMember("Client", "_server_pool", "instance"),
    ContractMember("Client", "_attempt_reconnect", "method"),
    ContractMember("Client", "is_draining", "property"),
    ContractMember("Client", "_pongs_received", "instance"),
    ContractMember("Client", "_pings_outstanding", "instance"),
    ContractMember("Client", "_ps", "instance"),
    ContractMember("Parser", "reset", "method"),
    ContractMember("Parser", "parse", "method", ("data",)),
    ContractMember("Client", "_connect_command", "method"),
    ContractMember("Client", "stats", "instance"),
    ContractMember("Client", "options", "instance"),
    ContractMember("Client", "_server_info", "instance"),
    ContractMember("Client", "_current_server", "instance"),
    ContractMember("Client", "_max_payload", "instance"),
    ContractMember("Client", "_transport", "instance"),
    ContractMember("Client", "_pending", "instance"),
    ContractMember("Client", "_pending_data_size", "instance"),
    ContractMember("Client", "_flush_queue", "instance"),
    ContractMember("Subscription", "unsubscribe", "method"),
    ContractMember("Subscription", "_id", "instance"),
    ContractMember("TcpTransport", "_io_writer", "instance"),
    ContractMember("TcpTransport", "_io_reader", "instance"),
    ContractMember("TcpTransport", "_bare_io_reader", "instance"),
    ContractMember("TcpTransport", "_bare_io_writer", "instance"),
    ContractMember("TcpTransport", "connect", "method", ("uri", "buffer_size", "connect_timeout")),
    ContractMember("TcpTransport", "connect_tls", "method", ("uri", "ssl_context", "buffer_size", "connect_timeout")),
    ContractMember("TcpTransport", "write", "method", ("payload",)),
    ContractMember("TcpTransport", "writelines", "method", ("payload",)),
    ContractMember("TcpTransport", "close", "method"),
)


def _owners() -> dict[str, tuple[type, Callable[[], object]]]:
    """The nats-py classes, looked up now (so a monkeypatched module is seen), with a way to make an instance."""
    client_cls = nats.aio.client.Client
    sub_cls = nats.aio.subscription.Subscription
    transport_cls = nats.aio.transport.TcpTransport
    parser_cls = nats.protocol.parser.Parser
    return {
        "Parser": (parser_cls, parser_cls),
        "Client": (client_cls, client_cls),
        "Subscription": (sub_cls, lambda: sub_cls(client_cls(), 1, "contract.check")),
        "TcpTransport": (transport_cls, transport_cls),
    }


def contract_problems() -> list[str]:
    """What the installed nats-py lacks of :data:`NATS_PY_CONTRACT`; empty when everything is there."""
    problems: list[str] = []
    instances: dict[str, object] = {}
    for owner_name, (_cls, make) in _owners().items():
        try:
            instances[owner_name] = make()
        except Exception as exc:  # a changed constructor is itself a broken contract
            problems.append(f"nats-py {owner_name}() cannot be constructed as before: {exc!r}")
    for member in NATS_PY_CONTRACT:
        cls = _owners()[member.owner][0]
        where = f"nats-py {member.owner}.{member.name}"
        if member.kind == "instance":
            instance = instances.get(member.owner)
            if instance is not None and not hasattr(instance, member.name):
                problems.append(f"{where}: no longer set by __init__")
            continue
        value = inspect.getattr_static(cls, member.name, None)
        if value is None:
            problems.append(f"{where}: missing")
        elif member.kind == "property" and not isinstance(value, property):
            problems.append(f"{where}: no longer a property")
        elif member.kind == "method":
            if not callable(value):
                problems.append(f"{where}: no longer a method")
                continue
            accepted = inspect.signature(value).parameters
            missing = [name for name in member.params if name not in accepted]
            if missing:
                problems.append(f"{where}: no longer takes {', '.join(missing)}")
    return problems


# -- the transport ----------------------------------------------------------------------------------------
class GatedTcpTransport(nats.aio.transport.TcpTransport):
    """nats-py's TCP transport whose writes and close take the socket gate's lock; it binds the gate to its plain
    connection when the client says the connection is ready, and unbinds it before a TLS upgrade or a close."""

    def __init__(self, gate: SocketGate) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self._gate = gate

    def _socket_transport(self) -> asyncio.BaseTransport | None:
        writer = self._io_writer
        return writer.transport if isinstance(writer, asyncio.StreamWriter) else None

    async def connect(self, uri: Any, buffer_size: int, connect_timeout: int) -> None:
        """nats-py's connect, with a :class:`ChunkReader` reading the socket (``_reader.py``)."""
        reader, writer = await asyncio.wait_for(
            open_chunked_connection(uri.hostname, uri.port, buffer_size), connect_timeout
        )
        # as nats-py: the first reader and writer are kept, so a TLS upgrade does not let the GC close the socket
        self._bare_io_reader = self._io_reader = reader
        self._bare_io_writer = self._io_writer = writer

    def open_gate(self) -> None:
        """IO thread: the connection is ready for direct writes (see :meth:`NatsConnection.open_gate`)."""
        transport = self._socket_transport()
        if transport is not None:
            self._gate.bind(transport)

    async def connect_tls(self, uri: Any, ssl_context: ssl.SSLContext, buffer_size: int, connect_timeout: int) -> None:
        self._gate.unbind(self._socket_transport())  # the socket is about to belong to the TLS layer
        await super().connect_tls(uri, ssl_context, buffer_size, connect_timeout)

    def write(self, payload: bytes) -> None:
        with self._gate.lock:
            self._gate.flush_tail()
            super().write(payload)  # type: ignore[no-untyped-call]

    def writelines(self, payload: list[bytes]) -> None:
        with self._gate.lock:
            self._gate.flush_tail()
            super().writelines(payload)  # type: ignore[no-untyped-call]

    def close(self) -> None:
        with self._gate.lock:
            self._gate.unbind(self._socket_transport())
            super().close()  # type: ignore[no-untyped-call]


# write_now joins a burst into one buffer when its parts average less than this many bytes
_JOIN_BELOW = 2048


# -- the connection ---------------------------------------------------------------------------------------
class NatsConnection(nats.aio.client.Client):
    """nats-py's client with a synchronous dispatch path for our subscriptions, and the few facts the runtime
    reads from it, so that no other module reaches into nats-py."""

    def __init__(self, post: Callable[[Callable[[], None]], None]) -> None:
        #: every write to the socket takes turns through it (set before nats-py's __init__ assigns _transport)
        self.gate = SocketGate(post)
        super().__init__()
        self.fast_handlers: dict[int, Handler] = {}
        #: ``<inbox prefix>.``: replies to this client, which the server may make larger than max_payload
        #: (``_parser.REPLY_LIMIT``); set by the runtime from its options before connecting
        self.reply_prefix = b"_INBOX."
        self._ps = ProtocolParser(self)
        self._flushes: set[asyncio.Future[bool]] = set()  # flush_or_raise's PONG waiters (IO thread)
        self._tasks: set[asyncio.Task[None]] = set()  # tasks of its own, referenced until done (IO thread)
        self._keep_pool_order = False  # the next reconnect leaves a lame-duck server: see _attempt_reconnect

    # nats-py assigns a fresh TcpTransport before each connection attempt; it gets a gated one instead
    @property
    def _transport(self) -> Any:
        return self.__dict__["_gated_transport"]

    @_transport.setter
    def _transport(self, transport: Any) -> None:
        if type(transport) is nats.aio.transport.TcpTransport and not transport:
            transport = GatedTcpTransport(self.gate)
        self.__dict__["_gated_transport"] = transport

    # nats-py assigns the INFO it reads at (re)connect here; one of the wrong shape is refused as it arrives, a
    # protocol violation (which fails that connection attempt), not an AttributeError inside nats-py's connect
    @property
    def _server_info(self) -> dict[str, Any]:
        return self.__dict__["_checked_server_info"]  # type: ignore[no-any-return]

    @_server_info.setter
    def _server_info(self, info: Any) -> None:
        self.__dict__["_checked_server_info"] = check_info(info)

    async def _read_loop(self) -> None:
        """IO thread: nats-py's read loop, which must never end while the connection claims to be up.

        nats-py's loop ends on any exception it does not know; the connection then stays CONNECTED with nobody
        reading the socket ("deaf") until its ping timer gives up, minutes later. The parser turns everything a
        server input causes into a reconnect (``_parser.py``); this is the backstop for whatever else ends the
        loop: the connection is still up, so reconnect now, and say so.
        """
        await super()._read_loop()
        if self.is_connected and self._reading_task is asyncio.current_task():
            reason = "the connection's read loop stopped while connected"
            log.error("%s; reconnecting", reason)
            await self._process_op_err(ServerProtocolViolation(reason))

    async def _process_info(self, info: dict[str, Any], initial_connection: bool = False) -> None:
        """IO thread: an INFO (checked by the parser or the ``_server_info`` setter first). On a lame-duck notice
        (``ldm``: the server is shutting down and will close its clients over the next minutes) the client
        reports a LameDuckModeEvent and, when it knows another server, moves there itself (:meth:`_lame_duck`)."""
        await super()._process_info(info, initial_connection)
        if not initial_connection and info.get("ldm") and self._current_server is not None:
            await self._lame_duck(self._current_server)

    async def _lame_duck(self, server: Any) -> None:
        """IO thread: the server we are connected to entered lame-duck mode.

        nats-py only calls a callback. Waiting for the server to close the connection means a reconnect at a
        moment the server picks, with what was in flight lost then; moving now, while it still answers, lets the
        move happen when the client chooses. With no other server in the pool (a single server, or a cluster that
        announced no ``connect_urls``) there is nowhere to go: the event is reported and the connection stays
        until the server closes it. The move waits a random share of ``LAME_DUCK_SPREAD`` seconds, so that the
        clients of a draining server do not all arrive at the same other server in the same instant.
        """
        others = [srv for srv in self._server_pool if srv is not server]
        where = f"{server.uri.hostname}:{server.uri.port}"
        plan = "moving to another server" if others else "no other server is known, so staying until it closes"
        await self._error_cb(errors.LameDuckModeEvent(f"the server {where} entered lame-duck mode; {plan}"))
        if not others:
            return
        loop = asyncio.get_running_loop()
        delay = random.uniform(0, LAME_DUCK_SPREAD)
        loop.call_later(delay, lambda: self._tasks.add(loop.create_task(self._leave(server, where))))

    async def _leave(self, server: object, where: str) -> None:
        """IO thread: reconnect elsewhere, if still on ``server``: it goes to the end of nats-py's server pool
        first (which keeps the order servers were given and announced in), so every other one is tried before
        it."""
        try:
            if self._current_server is server and self.is_connected and not self.is_draining:
                log.info("leaving %s (lame-duck mode) for another server", where)
                pool = self._server_pool
                if server in pool:
                    pool.remove(server)
                    pool.append(server)
                self._keep_pool_order = True  # nats-py shuffles the pool before a reconnect; not this one
                await self._process_op_err(ConnectionResetError("left the server: it is in lame-duck mode"))
        finally:
            self._tasks.discard(asyncio.current_task())

    async def _attempt_reconnect(self) -> None:
        """IO thread: nats-py's reconnect; after a lame-duck move without its shuffle of the server pool, which
        could put the draining server first again (:meth:`_leave` put it last)."""
        if not self._keep_pool_order:
            await super()._attempt_reconnect()
            return
        self._keep_pool_order = False
        options = self.options
        randomize = options.get("dont_randomize")
        options["dont_randomize"] = True
        try:
            await super()._attempt_reconnect()
        finally:
            options["dont_randomize"] = randomize

    async def _process_pong(self) -> None:
        """A PONG answers the oldest PING. Its waiter may have given up (a flush that timed out cancels its future):
        nats-py would call set_result on it, and the InvalidStateError would end the read loop."""
        pongs = self._pongs
        if pongs:
            waiter = pongs.pop(0)
            if not waiter.done():
                waiter.set_result(True)
            self._pongs_received += 1
            self._pings_outstanding = 0

    async def _process_msg(self, sid: int, subject: bytes, reply: bytes, data: bytes, headers: bytes | None) -> None:
        handler = self.fast_handlers.get(sid)
        if handler is None:
            try:
                await super()._process_msg(sid, subject, reply, data, headers)  # type: ignore[arg-type]
            except Exception:  # one message nats-py could not take (its header parsing, say): not the connection
                log.exception("nats-py could not deliver a message on %r; it was dropped", subject)
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

    async def fast_subscribe(self, subject: str, queue: str, handler: Handler) -> NatsSubscription:
        """Subscribe with ``handler`` called for each message; returns nats-py's Subscription."""
        sub = await self.subscribe(subject, queue=queue)
        self.fast_handlers[sub._id] = handler
        return sub

    def drop_handler(self, sub: NatsSubscription) -> None:
        """IO thread: stop dispatching to ``sub``'s handler at once (the UNSUB may follow later)."""
        self.fast_handlers.pop(sub._id, None)

    @staticmethod
    def unsub_command(sub: NatsSubscription, max_msgs: int = 0) -> bytes:
        """The UNSUB of ``sub`` (after ``max_msgs`` messages in all when given), for a thread that must have it
        written before what it sends next."""
        if max_msgs:
            return b"UNSUB %d %d\r\n" % (sub._id, max_msgs)
        return b"UNSUB %d\r\n" % sub._id

    def handler_of(self, sub: NatsSubscription) -> Handler | None:
        """IO thread: the handler ``sub``'s messages go to now."""
        return self.fast_handlers.get(sub._id)

    def reroute(self, sub: NatsSubscription, handler: Handler) -> None:
        """IO thread: dispatch ``sub``'s messages to ``handler`` from now on."""
        self.fast_handlers[sub._id] = handler

    async def retire(self, sub: NatsSubscription, late: Handler, timeout: float) -> None:
        """IO thread: UNSUB ``sub`` and route what still arrives for it to ``late`` until the server has seen
        the UNSUB (a PING/PONG after it), then to nothing.

        What the server sent before it processed the UNSUB arrives after it was written; nats-py forgets the
        subscription at once and would drop those messages, and a JetStream message dropped that way waits for
        its consumer's ack wait. Dispatch looks up ``fast_handlers`` before nats-py's subscriptions, so ``late``
        sees them all. When the round trip fails (disconnected, closed, timed out) nothing more can come on
        this connection for the subscription, and ``late`` is forgotten all the same.
        """
        sid = sub._id
        self.fast_handlers[sid] = late
        try:
            if not self.is_closed:
                await sub.unsubscribe()
                await self.flush_or_raise(timeout)
        except (errors.JetStreamError, nats.errors.Error, OSError):
            log.debug("the UNSUB of subscription %d was not confirmed; late messages are no longer awaited", sid)
        finally:
            if self.fast_handlers.get(sid) is late:
                del self.fast_handlers[sid]

    async def fast_unsubscribe(self, sub: NatsSubscription) -> None:
        self.fast_handlers.pop(sub._id, None)
        if not self.is_closed:
            await sub.unsubscribe()

    def unwritten_bytes(self) -> int:
        """IO thread: bytes not yet handed to the socket: nats-py's pending list, the transport's buffer and the
        tail of a partial direct write. Not from another thread: asyncio's buffer is not safe to read there."""
        writer = self._tcp_writer()
        buffered = writer.transport.get_write_buffer_size() if writer is not None else 0
        return int(self._pending_data_size) + int(buffered) + self.gate.tail_size

    def reconnect_buffered(self) -> int:
        """Any thread: bytes nats-py keeps for the next connection (its pending list). While disconnected only
        these count against the reconnect buffer: what the lost socket's transport still held is lost with it."""
        return int(self._pending_data_size)

    def _tcp_writer(self) -> asyncio.StreamWriter | None:
        transport = self._transport
        if not isinstance(transport, nats.aio.transport.TcpTransport):
            return None
        writer = transport._io_writer
        return writer if isinstance(writer, asyncio.StreamWriter) else None

    def write_now(self, commands: list[bytes], size: int, count: int = 0) -> bool:
        """IO thread, gate lock held: write straight to the socket when nothing of nats-py's is waiting to go
        first.

        Saves the flusher task's extra loop iteration per burst; False when nats-py must queue it instead
        (not connected, or its own pending data has to keep its place in line).
        """
        if not self.is_connected or self._pending_data_size:
            return False
        transport = self._transport
        writer = self._tcp_writer()
        if writer is None or writer.transport.is_closing():
            return False
        if len(commands) == 1:
            transport.write(commands[0])
        elif size < _JOIN_BELOW * len(commands):
            # Small commands (acks, small publishes) as one buffer: from Python 3.12 writelines keeps every part
            # as a buffer of its own for sendmsg, and 100,000 of them cost more than joining them (core publish
            # of 128 B: 400k msgs/s on 3.13 with writelines, 600k joined; 3.11's writelines joins them itself).
            transport.write(b"".join(commands))
        else:
            transport.writelines(commands)  # large payloads: 3.12+ sends them without a copy
        self._count_out(commands, size, count)
        return True

    def open_gate(self) -> None:
        """IO thread: let requesting threads write to this connection themselves from now on.

        Called once the connection is ready, not when nats-py marks it connected: on a reconnect nats-py sets
        CONNECTED before it replays the subscriptions, and a request written in between would get its reply
        before the reply inbox is subscribed again. A TLS connection is never bound (``SocketGate.bind``).
        """
        transport = self._transport
        if isinstance(transport, GatedTcpTransport) and self.is_connected:
            transport.open_gate()

    def close_gate(self) -> None:
        """IO thread: no more direct writes until :meth:`open_gate` (the connection was lost)."""
        self.gate.unbind()

    def nothing_unsent(self) -> bool:
        """Gate lock held: nothing of nats-py's waits to be written (so a direct write keeps its place)."""
        return not self._pending_data_size and self.is_connected

    def count_direct(self, count: int, size: int) -> None:
        """Count the commands a user thread wrote itself (``count`` messages, ``size`` bytes)."""
        self._count_out([], size, count)

    def _count_out(self, commands: list[bytes], size: int, count: int) -> None:
        """nats-py's own publish path counts these; ours bypasses it, so it counts here (count: messages).
        Under the gate lock: a user thread's direct write counts too."""
        stats = self.stats
        with self.gate.lock:
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

    def _write_pending(self) -> None:
        """IO thread: hand nats-py's queued commands to the transport now, so that a PING written next cannot pass
        them. nats-py's ``_send_ping`` writes straight to the transport while a SUB or UNSUB of its own may still
        wait in ``_pending`` for its flusher task: a flush returned before the server had seen an UNSUB (a drain
        then lost what the server sent until it did) or a SUB (a publish right after the flush found no
        subscriber)."""
        transport = self._transport
        if self._pending and self.is_connected and transport is not None:
            pending, self._pending = self._pending, []
            self._pending_data_size = 0
            transport.writelines(pending)

    def append_pending(self, commands: list[bytes], size: int, count: int = 0) -> None:
        """IO thread: queue encoded commands in nats-py's write buffer and wake its flusher once."""
        self._pending.extend(commands)
        self._pending_data_size += size
        self._count_out(commands, size, count)
        if self.is_connected:
            queue = self._flush_queue
            if queue is not None and queue.empty():
                queue.put_nowait(asyncio.get_running_loop().create_future())

    # -- what the runtime reads of the connection ---------------------------------------------------------
    def server_info(self) -> dict[str, Any]:
        """A copy of the INFO the server sent (version, max_payload, jetstream, ...)."""
        return dict(self._server_info)

    @property
    def tls_required(self) -> bool:
        return bool(self._server_info.get("tls_required"))

    @property
    def payload_limit(self) -> int:
        """The server's max_payload (nats-py's default until the first INFO arrives)."""
        return int(self._max_payload)

    def connected_url_text(self) -> str | None:
        """scheme://host:port of the server we are connected to, without credentials."""
        url = self.connected_url
        return None if url is None else f"{url.scheme}://{url.hostname}:{url.port}"

    def server_urls(self) -> list[str]:
        """scheme://host:port of every server in the reconnect pool: those given and those the cluster
        announced (INFO ``connect_urls``), without credentials."""
        return [f"{url.scheme}://{url.hostname}:{url.port}" for url in self.servers]

    def set_reconnect_policy(self, max_attempts: int, wait: float) -> None:
        """The reconnect policy once connected (the first connect runs with a fail-fast one)."""
        self.options["max_reconnect_attempts"] = max_attempts
        self.options["reconnect_time_wait"] = wait

    async def close_promptly(self, timeout: float) -> None:
        """IO thread: close, writing out what is unsent while the socket takes it, but never waiting on a stall.

        nats-py's close waits, without a bound, for the socket to take everything buffered: on a stalled link
        it would hold close() for its whole timeout and leave the socket open behind it. Here nats-py's pending
        bytes go to the transport first (so its close has nothing to drain), and while it closes, the transport
        is aborted once its buffer stopped shrinking for ``_CLOSE_STALL`` seconds or ``timeout`` passed: what
        was unsent is dropped (and logged) and the socket is closed when close() returns.
        """
        writer = self._tcp_writer()
        transport = writer.transport if writer is not None else None
        with self.gate.lock:
            self.gate.flush_tail()  # the end of a partial direct write goes before anything else
        if transport is not None and self.is_connected and self._pending and not transport.is_closing():
            self._transport.writelines(self._pending)
            self._pending = []
            self._pending_data_size = 0
        loop = asyncio.get_running_loop()
        closing = loop.create_task(self.close())
        deadline = loop.time() + timeout
        unsent = transport.get_write_buffer_size() if transport is not None else 0
        moved = loop.time()
        try:
            while transport is not None and not closing.done():
                await asyncio.wait({closing}, timeout=_CLOSE_POLL)
                now, left = loop.time(), transport.get_write_buffer_size()
                if left < unsent:
                    unsent, moved = left, now
                elif left and (now - moved >= _CLOSE_STALL or now >= deadline):
                    log.warning(
                        "close: the connection took nothing for %.1fs; dropped %d unsent bytes", now - moved, left
                    )
                    transport.abort()
                    break
            await closing
        finally:
            if transport is not None and not closing.done():  # cancelled (close()'s timeout): the socket still closes
                closing.cancel()
                transport.abort()

    async def flush_or_raise(self, timeout: float) -> None:
        """IO thread: a PING/PONG round trip: everything written before it has reached the server.

        nats-py's flush has two holes this closes: a PING sent on a connection that is then lost never gets its
        PONG (nats-py forgets it at the reconnect), so the flush waited out its whole timeout and raised a
        TimeoutError that lied; and while reconnecting it wrote the PING into a closed transport. Here a flush
        fails at once with NotConnectedError when the connection is down or goes down while it waits (what the
        lost socket still held may not have arrived), with our TimeoutError when the PONG is late, and with
        ConnectionClosedError on close. A timed-out flush's late PONG is skipped (:meth:`_process_pong`).
        """
        if self.is_closed:
            raise errors.ConnectionClosedError()
        if not self.is_connected or self._transport is None:
            raise errors.NotConnectedError(f"flush: {_NOT_CONFIRMED}")
        waiter: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._flushes.add(waiter)
        try:
            self._write_pending()  # nats-py writes a PING straight to the socket, past what waits in _pending
            await self._send_ping(waiter)
            await asyncio.wait_for(waiter, timeout)  # cancels the waiter when it times out
        except asyncio.TimeoutError:
            raise errors.TimeoutError(f"flush: no PONG from the server within {timeout:g}s") from None
        finally:
            self._flushes.discard(waiter)

    def _end_flushes(self, error: Callable[[], BaseException]) -> None:
        """IO thread: fail every flush still waiting for its PONG (the connection was lost, or closed)."""
        for waiter in list(self._flushes):
            if not waiter.done():
                waiter.set_exception(error())
        self._flushes.clear()

    async def _process_op_err(self, e: Exception) -> None:
        """IO thread: nats-py's reaction to a lost connection (read error, EOF, stale pings), after failing the
        flushes that can no longer be answered."""
        if not self.is_closed and not self.is_reconnecting:
            self._end_flushes(lambda: errors.NotConnectedError(f"flush: the connection was lost; {_NOT_CONFIRMED}"))
        await super()._process_op_err(e)

    async def _close(self, status: int, do_cbs: bool = True) -> None:
        self._end_flushes(errors.ConnectionClosedError)
        await super()._close(status, do_cbs)


_NOT_CONFIRMED = (
    "not connected, so nothing can be confirmed; what was written before may not have reached the server "
    "(the client reconnects on its own: publish again with the same msg_id to be safe)"
)
