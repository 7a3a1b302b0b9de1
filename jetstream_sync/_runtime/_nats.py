"""The nats-py adapter: with its protocol parser (``_parser.py``) the only module that imports nats-py, and
the contract it relies on.

nats-py owns the socket, protocol parsing, reconnects and auth. We hook it at a few points, all stable in the
2.x line (pinned in pyproject.toml) and listed in `NATS_PY_CONTRACT`, which a test checks so that a
nats-py release that breaks one fails loudly in CI rather than deep in the IO thread:

* ``_ps``: the protocol parser is ours (``_parser.py``): it parses by index instead of by regular expression
  and calls our subscriptions' handlers directly; nats-py's ``_process_*`` methods get everything else.
* ``_process_msg``: messages for our subscriptions go straight to a synchronous handler on the IO thread,
  skipping nats-py's per-subscription asyncio queue and task (most of its per-message cost).
* ``_pending`` / ``_flush_queue`` / the transport's writer: the outbound queue appends a whole burst of encoded
  commands at once, or writes it straight to the socket, instead of one coroutine call per publish.
* ``_connect_command`` / ``_server_info``: refuse to send credentials in clear when TLS was asked for.
* ``_transport``: the plain TCP transport nats-py makes is our `GatedTcpTransport`, so that its writes
  and a user thread's direct request writes take turns (``_gate.py``), and its socket is read by our
  `ChunkReader` (``_reader.py``: received chunks handed to the parser without copies).

Everything else in the runtime talks to nats-py through `NatsConnection`'s own methods. See
docs/ARCHITECTURE.md, "The runtime port".
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import socket
import ssl
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import nats.aio.client
import nats.aio.subscription
import nats.aio.transport
import nats.errors
import nats.nuid

from .. import errors
from ._auth import ConnectAuth
from ._connect import reconnect_delay
from ._contract import NATS_PY_CONTRACT, ContractMember, contract_problems
from ._gate import SocketGate
from ._parser import ProtocolParser, ServerProtocolViolation, check_info
from ._threads import io_thread
from ._translate import AttemptFailed
from ._transports import GatedTcpTransport, WebSocketTransport
from ._usercode import BlockingCalls

if TYPE_CHECKING:
    from ..options import ConnectOptions

__all__ = [
    "NATS_PY_CONTRACT",
    "AttemptFailed",
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

#: how long close() waits for a reconnect in progress to stop once cancelled
_RECONNECT_STOP = 1.0


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
        #: user functions a connection attempt waits for run there (``_usercode.py``)
        self.calls = BlockingCalls()
        # how attempts are made, set by configure(); the defaults are nats-py's
        self._auth: ConnectAuth | None = None
        self._auth_fields: dict[str, str] | None = None  # made after INFO, used (and dropped) by the CONNECT
        self._options: ConnectOptions | None = None
        self._tls_wanted = False
        self._reconnect_wait = 0.0
        #: the first connect's round: every server at once, without the reconnect delay
        self.fail_fast = True
        self._wake: asyncio.Event | None = None  # set by force_reconnect: the reconnect delay ends now
        #: told about every error that costs the connection (Runtime.last_error); IO thread
        self.on_lost: Callable[[BaseException], None] | None = None

    # nats-py assigns a fresh TcpTransport before each connection attempt; it gets a gated one instead
    @property
    def _transport(self) -> Any:
        return self.__dict__["_gated_transport"]

    @_transport.setter
    def _transport(self, transport: Any) -> None:
        if type(transport) is nats.aio.transport.TcpTransport and not transport:
            factory = self._options.socket_factory if self._options is not None else None
            transport = GatedTcpTransport(self.gate, self._dial if factory is not None else None)
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
        reports a LameDuckModeEvent and, when it knows another server, moves there itself (`_lame_duck`).

        With ``ignore_discovered_servers`` the servers a cluster announces are not added to the pool. The INFO
        of a connection attempt (``initial_connection``) carries the nonce: the credentials made by our code
        (``_auth.py``) are made now, before nats-py builds the CONNECT.
        """
        options = self._options
        if options is not None and options.ignore_discovered_servers and "connect_urls" in info:
            info = {key: value for key, value in info.items() if key != "connect_urls"}
        if initial_connection and self._auth is not None:
            nonce = info.get("nonce")
            try:
                self._auth_fields = await self._auth.fields(
                    nonce if isinstance(nonce, str) else None, float(self.options["connect_timeout"])
                )
            except errors.JetStreamError as exc:
                raise AttemptFailed(exc) from exc
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
        could put the draining server first again (`_leave` put it last)."""
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
        scheme = server.uri.scheme if server is not None else ""
        wants_tls = scheme == "tls" or self.options.get("tls") is not None or self.options.get("tls_handshake_first")
        if wants_tls and scheme != "wss" and not self._server_info.get("tls_required"):  # wss: TLS below the ws
            raise ssl.SSLError(
                "TLS was asked for (tls= or a tls:// URL) but the server does not offer TLS; "
                "refusing to connect in plain text"
            )
        command = bytes(super()._connect_command())
        fields, self._auth_fields = self._auth_fields, None
        if not fields:
            return command
        connect = json.loads(command.partition(b" ")[2])  # CONNECT {...}\r\n, built by nats-py just now
        connect.update(fields)
        return b"CONNECT " + json.dumps(connect, sort_keys=True).encode() + b"\r\n"

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

    @io_thread
    async def fast_subscribe(self, subject: str, queue: str, handler: Handler) -> NatsSubscription:
        """Subscribe with ``handler`` called for each message; returns nats-py's Subscription."""
        sub = await self.subscribe(subject, queue=queue)
        self.fast_handlers[sub._id] = handler
        return sub

    @io_thread
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

    @io_thread
    def handler_of(self, sub: NatsSubscription) -> Handler | None:
        """IO thread: the handler ``sub``'s messages go to now."""
        return self.fast_handlers.get(sub._id)

    @io_thread
    def reroute(self, sub: NatsSubscription, handler: Handler) -> None:
        """IO thread: dispatch ``sub``'s messages to ``handler`` from now on."""
        self.fast_handlers[sub._id] = handler

    @io_thread
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

    @io_thread
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
        else:  # large payloads from their own buffers (SocketGate.send_burst), what the kernel left for the transport
            transport.writelines(self.gate.send_burst(commands))
        self._count_out(commands, size, count)
        return True

    @io_thread
    def open_gate(self) -> None:
        """IO thread: let requesting threads write to this connection themselves from now on.

        Called once the connection is ready, not when nats-py marks it connected: on a reconnect nats-py sets
        CONNECTED before it replays the subscriptions, and a request written in between would get its reply
        before the reply inbox is subscribed again. A TLS connection is never bound (``SocketGate.bind``).
        """
        transport = self._transport
        if isinstance(transport, GatedTcpTransport) and self.is_connected:
            transport.open_gate()

    @io_thread
    def close_gate(self) -> None:
        """IO thread: no more direct writes until `open_gate` (the connection was lost)."""
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

    @io_thread
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
        """The reconnect policy once connected (the first connect runs with a fail-fast one). The wait between
        attempts is ours (`_connect_to_server`), so nats-py's own is 0."""
        self.options["max_reconnect_attempts"] = max_attempts
        self.options["reconnect_time_wait"] = 0
        self._reconnect_wait = wait
        self.fail_fast = False

    # -- how attempts are made (options beyond nats-py's) ---------------------------------------------------
    def configure(self, options: ConnectOptions) -> None:
        """Before connect(): the options nats-py has no keyword for (credentials made by ``_auth.py``, the
        socket factory, the reconnect delay, ignoring discovered servers)."""
        self._options = options
        if ConnectAuth.wanted(options):
            self._auth = ConnectAuth(options, self.calls)
        self._tls_wanted = (
            options.tls is not None
            or options.tls_handshake_first
            or any(url.partition("://")[0].lower() in ("tls", "wss") for url in options.servers)
        )

    async def _dial(self, host: str, port: int, timeout: float) -> socket.socket:
        """IO thread: the user's socket factory, on the connect thread, bounded by ``timeout``."""
        factory = self._options.socket_factory if self._options is not None else None
        if factory is None:  # the transport is given _dial only when there is one
            raise AttemptFailed(errors.ConnectCallbackError("socket_factory is not set"))
        try:
            sock = await self.calls.run("socket_factory", factory, host, port, timeout, timeout=timeout, on_late=_close)
        except errors.ConnectCallbackError as exc:
            raise AttemptFailed(exc) from exc.__cause__
        if not isinstance(sock, socket.socket) or sock.type != socket.SOCK_STREAM:
            _close(sock)
            failure = errors.ConnectCallbackError(
                f"socket_factory returned {type(sock).__name__}; it must return a connected stream socket.socket"
            )
            raise AttemptFailed(failure)
        return sock

    async def _connect_to_server(self, s: Any) -> None:
        """IO thread: one attempt at server ``s``, after the reconnect delay when it was tried before; a
        websocket server gets our `WebSocketTransport`."""
        if not self.fail_fast and s.last_attempt is not None:
            left = s.last_attempt + await self._reconnect_delay(s) - time.monotonic()
            if left > 0:
                self._wake = asyncio.Event()
                try:
                    await asyncio.wait_for(self._wake.wait(), left)
                except asyncio.TimeoutError:
                    pass  # the delay ran out (not woken by force_reconnect or close): the next attempt goes now
                finally:
                    self._wake = None
        if s.uri.scheme in ("ws", "wss") and not self._transport:
            self._transport = WebSocketTransport(ws_headers=self.options.get("ws_connection_headers"))
        try:
            await super()._connect_to_server(s)
        except BaseException:
            transport = self._transport
            if isinstance(transport, WebSocketTransport):
                self._transport = None
                await transport.discard()
            raise

    async def _reconnect_delay(self, s: Any) -> float:
        """IO thread: how long after its last attempt server ``s`` is tried again (``_connect.reconnect_delay``);
        a failing delay callback is reported and the default used."""
        delay, failure = await reconnect_delay(
            self._options, self.calls, int(s.reconnects), self._reconnect_wait, self._tls_wanted
        )
        if failure is not None:
            await self._error_cb(AttemptFailed(failure))
        return delay

    def connect_in_background(self, servers: Sequence[str]) -> None:
        """IO thread, after a first connect found no server: go on as a connection that was lost, with the
        reconnect policy (nats.go's RetryOnFailedConnect). nats-py's reconnect loop does the rest: it tries the
        servers with the reconnect delay, replays the subscriptions made meanwhile and sends what was buffered,
        or closes once the attempts run out."""
        self._server_pool = []
        self._setup_server_pool(list(servers))  # the failed round dropped every server from the pool
        self._current_server = self._server_pool[0]
        self._transport = None  # the failed attempts' transport is closed; nats-py makes a new one
        self._status = nats.aio.client.Client.RECONNECTING
        self._reconnection_task = asyncio.get_running_loop().create_task(self._attempt_reconnect())

    async def reconnect_now(self) -> None:
        """IO thread: leave the server connected to for the next one in the pool (nats.go's ForceReconnect);
        while reconnecting, end the reconnect delay now. What was written goes out before the socket closes."""
        if self.is_reconnecting or self.is_connecting:
            if self._wake is not None:
                self._wake.set()
            return
        server = self._current_server
        if not self.is_connected or self.is_closed or server is None:
            return
        pool = self._server_pool
        if server in pool and len(pool) > 1:
            pool.remove(server)
            pool.append(server)
            self._keep_pool_order = True  # to another server first, not back by a shuffle
        lost, self.on_lost = self.on_lost, None  # asked for: not an error to remember
        try:
            await self._process_op_err(ConnectionResetError("force_reconnect() was called"))
        finally:
            self.on_lost = lost

    async def round_trip(self, timeout: float) -> float:
        """IO thread: seconds a PING takes to come back as a PONG (nats.go's RTT); fails as a flush fails."""
        loop = asyncio.get_running_loop()
        started = loop.time()
        await self.flush_or_raise(timeout)
        return loop.time() - started

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
        ConnectionClosedError on close. A timed-out flush's late PONG is skipped (`_process_pong`).
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

    @io_thread
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
            if self.on_lost is not None:
                self.on_lost(e)
        await super()._process_op_err(e)

    async def _close(self, status: int, do_cbs: bool = True) -> None:
        """IO thread: nats-py's close, after failing the flushes and stopping a reconnect in progress (nats-py
        waits for that only as long as its reconnect wait, which is ours and so 0 to nats-py)."""
        self._end_flushes(errors.ConnectionClosedError)
        task = self._reconnection_task
        if task is not None and not task.done() and task is not asyncio.current_task():
            task.cancel()
            await asyncio.wait({task}, timeout=_RECONNECT_STOP)
        await super()._close(status, do_cbs)


def _close(sock: object) -> None:
    """Close what a socket factory returned and the attempt does not use (it came too late, or is unusable)."""
    close = getattr(sock, "close", None)
    if callable(close):
        close()


_NOT_CONFIRMED = (
    "not connected, so nothing can be confirmed; what was written before may not have reached the server "
    "(the client reconnects on its own: publish again with the same msg_id to be safe)"
)
