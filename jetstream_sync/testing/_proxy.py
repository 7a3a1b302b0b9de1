"""FaultProxy: a TCP proxy on loopback in front of a nats-server that stalls, delays, cuts or refuses connections,
and drops (or watches) chosen NATS protocol frames.

A module of its own because only fault tests need it, and it is the largest piece (threads, selectors, buffering):
``jetstream_sync.testing`` imports it on the first use of FaultProxy, FaultProxyError or Direction, and the pytest
plugin only when a test asks for the ``fault_proxy`` fixture. It depends on _server.py (a target may be an
EmbeddedServer), never the other way round.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import math
import os
import selectors
import socket
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable
from types import TracebackType
from typing import Literal

from ..errors import InvalidArgumentError, InvalidTypeError, JetStreamError
from ._server import EmbeddedServer, _check_port

__all__ = ["Direction", "FaultProxy", "FaultProxyError", "Frame", "FramePredicate", "FrameRule"]

logger = logging.getLogger("jetstream_sync.testing")

Direction = Literal["both", "upstream", "downstream"]

_UPSTREAM = "upstream"  # client -> server
_DOWNSTREAM = "downstream"  # server -> client
_DIRECTIONS: dict[str, frozenset[str]] = {
    "both": frozenset({_UPSTREAM, _DOWNSTREAM}),
    _UPSTREAM: frozenset({_UPSTREAM}),
    _DOWNSTREAM: frozenset({_DOWNSTREAM}),
}
_PROXY_HOST = "127.0.0.1"
_PROXY_TICK = 0.05  # every wait in the proxy threads is at most this long, so state changes apply promptly
_PROXY_CHUNK = 1 << 16
_PROXY_MAX_HELD = 1 << 22  # per connection and direction; reading from the source pauses while this much is held
_PROXY_CONNECT_TIMEOUT = 5.0
_PROXY_JOIN_TIMEOUT = 5.0
_PROXY_BACKLOG = 128
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
_CONNECT_PENDING = frozenset(
    {errno.EINPROGRESS, errno.EWOULDBLOCK, errno.EALREADY, getattr(errno, "WSAEWOULDBLOCK", errno.EWOULDBLOCK)}
)


class FaultProxyError(JetStreamError, RuntimeError):
    """A FaultProxy was used in a state that does not allow it (started again after stop())."""


class FaultProxy:
    """A TCP proxy on 127.0.0.1 in front of a nats-server, which injects network faults for tests.

    Point the client at ``proxy.url`` instead of the server's URL, then break the network at will:

        with EmbeddedServer() as server, FaultProxy(server) as proxy:
            nc = connect(proxy.url)
            proxy.stall()       # a silent network: connections stay open, no byte moves, nothing is lost
            proxy.resume()      # the held bytes flow again, in order
            proxy.cut()         # every connection is closed on both sides; the client reconnects through the proxy
            proxy.refuse(True)  # new connections are closed at once, as if the server were down
            proxy.drop_next("upstream", "$JS.FC.>").wait()  # one frame lost: the next flow-control reply

    The target is an EmbeddedServer (its port is read at each new connection, so a server started later or on
    another port after a retry is still found) or a port on 127.0.0.1. Both ends are loopback only. The proxy runs
    plain daemon threads named ``fault-proxy-...`` (one acceptor, one per connection) and no event loop; stop()
    joins them. ``port`` may fix the listening port, e.g. to keep the URL across a new proxy; by default a free
    one is taken when the proxy is created, so ``url`` is known before start().

    drop_next() and watch() look inside the byte stream: while a rule is armed for a direction, each connection
    cuts that direction into NATS protocol frames and drops (or records) the matching ones, every other byte going
    out unchanged and in order. With no rule armed the bytes are forwarded unparsed, as by a plain TCP proxy.
    """

    def __init__(
        self, target: EmbeddedServer | int | None = None, *, target_port: int | None = None, port: int | None = None
    ) -> None:
        self._server, self._target_host, self._fixed_target_port = _proxy_target(target, target_port)
        self._lock = threading.Lock()  # guards the state below; a forwarding send holds it, see _send()
        self._stopping = threading.Event()
        self._started = False
        self._stopped = False
        self._stalled: frozenset[str] = frozenset()
        self._latency = 0.0
        self._refusing = False
        self._links: dict[int, _Link] = {}
        self._link_count = 0
        self._forwarded = {_UPSTREAM: 0, _DOWNSTREAM: 0}
        self._cuts = 0
        self._dropped = {_UPSTREAM: 0, _DOWNSTREAM: 0}
        # The armed frame rules per direction, in arming order: a tuple replaced whole under the lock, so each
        # connection's thread reads it without the lock (an empty tuple is the "forward unparsed" fast path).
        self._rules: dict[str, tuple[FrameRule, ...]] = {_UPSTREAM: (), _DOWNSTREAM: ()}
        self._acceptor: threading.Thread | None = None
        self._listener = _bind_listener(0 if port is None else _check_port(port))
        self._port = int(self._listener.getsockname()[1])
        self._listener_finalizer = weakref.finalize(self, self._listener.close)

    # -- properties -------------------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """Client URL of the proxy, ``nats://127.0.0.1:PORT``."""
        return f"nats://{_PROXY_HOST}:{self._port}"

    @property
    def host(self) -> str:
        """The loopback address the proxy listens on."""
        return _PROXY_HOST

    @property
    def port(self) -> int:
        """The port the proxy listens on (bound when the proxy is created)."""
        return self._port

    @property
    def target(self) -> tuple[str, int]:
        """Where each new connection is forwarded to: (host, port)."""
        port = self._server.port if self._server is not None else self._fixed_target_port
        return self._target_host, port

    @property
    def is_running(self) -> bool:
        """Started and not stopped."""
        return self._started and not self._stopped

    @property
    def connections(self) -> int:
        """Client connections open right now (a refused one is never counted)."""
        with self._lock:
            return len(self._links)

    @property
    def bytes_forwarded(self) -> dict[str, int]:
        """Bytes delivered so far, over all connections: ``{"upstream": n, "downstream": n}`` (held bytes are not)."""
        with self._lock:
            return dict(self._forwarded)

    @property
    def frames_dropped(self) -> dict[str, int]:
        """Frames dropped so far by drop_next() rules, over all connections: ``{"upstream": n, "downstream": n}``."""
        with self._lock:
            return dict(self._dropped)

    @property
    def cuts(self) -> int:
        """How many times cut() was called."""
        with self._lock:
            return self._cuts

    @property
    def stalled(self) -> frozenset[str]:
        """The stalled directions: a subset of {"upstream", "downstream"}."""
        return self._stalled

    @property
    def latency(self) -> float:
        """The delay added to every forwarded chunk, in seconds."""
        return self._latency

    @property
    def refusing(self) -> bool:
        """New connections are refused (``refuse(True)``)."""
        return self._refusing

    # -- lifecycle --------------------------------------------------------------------------------------------

    def start(self) -> FaultProxy:
        """Start accepting connections; a second call does nothing. A stopped proxy cannot start again."""
        with self._lock:
            if self._stopped:
                raise FaultProxyError(f"{self!r} was stopped; create a new FaultProxy (port= keeps the URL)")
            if self._started:
                return self
            self._started = True
        self._listener.listen(_PROXY_BACKLOG)
        self._listener.setblocking(False)
        self._acceptor = threading.Thread(
            target=self._accept_loop, name=f"fault-proxy-{self._port}-accept", daemon=True
        )
        self._acceptor.start()
        logger.info("fault proxy %s forwarding to %s:%d", self.url, *self.target)
        return self

    def stop(self, timeout: float = _PROXY_JOIN_TIMEOUT) -> None:
        """Close every connection and the listener, and join the proxy's threads (at most ``timeout`` seconds)."""
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
        self._stopping.set()
        deadline = time.monotonic() + timeout
        if self._acceptor is not None:
            self._acceptor.join(timeout)  # after this no new link can appear
            if self._acceptor.is_alive():
                logger.warning("fault proxy %s: the acceptor thread did not end within %gs", self.url, timeout)
        self._listener_finalizer()
        self._abort_all(max(0.0, deadline - time.monotonic()))
        logger.info("fault proxy %s stopped", self.url)

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "running" if self.is_running else "stopped" if self._stopped else "not started"
        host, port = self.target
        return f"<FaultProxy {self.url} -> {host}:{port} {state}>"

    # -- faults -----------------------------------------------------------------------------------------------

    def cut(self) -> None:
        """Close every open connection now, on both sides (shutdown + close); new connections are still accepted.

        Returns once the connections are closed (their threads joined, bounded), so ``connections`` is 0 then
        unless a client has already reconnected.
        """
        with self._lock:
            self._cuts += 1
            n = len(self._links)
        logger.info("fault proxy %s: cutting %d connection(s)", self.url, n)
        self._abort_all(_PROXY_JOIN_TIMEOUT)

    def stall(self, direction: Direction = "both") -> None:
        """Stop forwarding in ``direction`` ("both", "upstream" = client to server, "downstream" = back).

        Connections stay open and no byte is dropped: the proxy stops reading the source (the sender's TCP window
        fills, as on a silent network) and holds what it had read. Stalls add up; resume() lifts them. Once this
        returns, no byte goes out in that direction.
        """
        directions = _check_direction(direction)
        with self._lock:
            self._stalled = self._stalled | directions
        logger.info("fault proxy %s: stalled %s", self.url, "+".join(sorted(self._stalled)))

    def resume(self, direction: Direction = "both") -> None:
        """Lift the stall in ``direction``; the held bytes flow again, in order."""
        directions = _check_direction(direction)
        with self._lock:
            self._stalled = self._stalled - directions
        logger.info("fault proxy %s: resumed %s", self.url, direction)

    def set_latency(self, seconds: float) -> None:
        """Delay every chunk by ``seconds`` in each direction (so a round trip takes twice that more); 0 disables.

        The delay is fixed when a chunk is read, so chunks already held keep theirs; order is always kept.
        """
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
            raise InvalidTypeError("seconds", f"must be a number, got {type(seconds).__name__}")
        if not math.isfinite(seconds) or seconds < 0:
            raise InvalidArgumentError("seconds", f"{seconds!r} is not a finite number >= 0")
        with self._lock:
            self._latency = float(seconds)
        logger.info("fault proxy %s: latency %gs per direction", self.url, seconds)

    def refuse(self, refuse: bool = True) -> None:
        """While True, new connections are accepted and closed at once (the server looks down); open ones stay."""
        if not isinstance(refuse, bool):
            raise InvalidTypeError("refuse", f"must be a bool, got {type(refuse).__name__}")
        with self._lock:
            self._refusing = refuse
        logger.info("fault proxy %s: %s new connections", self.url, "refusing" if refuse else "accepting")

    # -- frame rules ------------------------------------------------------------------------------------------

    def drop_next(
        self,
        direction: Direction,
        match: str | FramePredicate | None = None,
        *,
        reply: str | None = None,
        count: int = 1,
        skip: int = 0,
    ) -> FrameRule:
        """Drop the next ``count`` frames in ``direction`` that match, after letting ``skip`` matches through.

        For a fault a test cannot cause otherwise: one lost message or one lost reply on a connection that stays
        up (the server and the client each see a stream with exactly that frame missing, as if it had been lost
        on its way), e.g. a flow-control reply the client publishes, or the Nth message pushed to a consumer::

            fc = proxy.drop_next("upstream", "$JS.FC.>")                         # the next PUB to $JS.FC.*
            msg = proxy.drop_next("downstream", reply="$JS.ACK.S.C.>", skip=4)   # consumer S/C's 5th message
            assert msg.wait(timeout=5)                                           # the drop happened

        ``match`` is a subject (NATS wildcards ``*`` and ``>`` allowed), compared with the subject of message
        frames only: PUB/HPUB upstream, MSG/HMSG downstream. Or it is a predicate called with each
        [`Frame`][jetstream_sync.testing.Frame] of that direction (any verb, e.g. ``lambda f: f.verb == "PONG"``), on a
        connection's thread: it must be quick and must not call the proxy. ``reply`` is a subject pattern the frame's
        reply subject must match as well. It is how to pick what a JetStream consumer is pushed: the server sends each
        message under its own stream subject, not the deliver subject, with the reply ``$JS.ACK.<stream>.<consumer>.…``;
        a flow-control request has a ``$JS.FC.`` reply, a heartbeat none. One rule counts over all connections, so
        exactly ``count`` frames are dropped in all; then it disarms itself. Returns the rule: wait(), frames,
        cancel().

        A connection opened while a rule is armed is framed from its first byte. One already open joins at the
        first point where a frame verifiably starts (see `_FrameParser`), so arm the rule before the traffic
        it is meant to catch.
        """
        return self._arm(direction, match, reply, drop=True, count=count, skip=skip)

    def watch(
        self, direction: Direction, match: str | FramePredicate | None = None, *, reply: str | None = None
    ) -> FrameRule:
        """Record the frames in ``direction`` that match (as for drop_next) without touching them.

        Only frames that are forwarded are seen, never one a drop rule removed, so a test can tell what really
        reached the other side (e.g. that the client published to a flow-control subject again after its first
        reply was dropped). The rule stays armed until cancel() (or the end of its ``with`` block); while it is,
        that direction is parsed on every connection.
        """
        return self._arm(direction, match, reply, drop=False, count=None, skip=0)

    def _arm(
        self,
        direction: Direction,
        match: str | FramePredicate | None,
        reply: str | None,
        *,
        drop: bool,
        count: int | None,
        skip: int,
    ) -> FrameRule:
        directions = _check_direction(direction)
        if count is not None:
            _check_count("count", count, 1)
        _check_count("skip", skip, 0)
        rule = FrameRule(self, directions, match, reply, drop=drop, count=count, skip=skip)
        with self._lock:
            for d in directions:
                self._rules[d] = (*self._rules[d], rule)
        logger.info("fault proxy %s: armed %r", self.url, rule)
        return rule

    def _disarm(self, rule: FrameRule) -> None:
        with self._lock:
            for d in rule.directions:
                self._rules[d] = tuple(r for r in self._rules[d] if r is not rule)

    def _filter(self, direction: str, items: list[Frame | bytes]) -> bytes:
        """The bytes to forward for what a parser returned: every frame the rules keep and every unframed byte."""
        kept: list[bytes] = []
        for item in items:
            if isinstance(item, bytes):
                kept.append(item)
            elif self._keep(direction, item):
                kept.append(item.raw)
        return b"".join(kept)

    def _keep(self, direction: str, frame: Frame) -> bool:
        """Apply the rules to one frame: the drop rules first (in arming order), then watches see what is kept."""
        rules = self._rules[direction]
        for rule in rules:
            if rule.drops and rule._matches(frame) and rule._take(frame):
                with self._lock:
                    self._dropped[direction] += 1
                logger.info("fault proxy %s: dropped %s (%d bytes) for %r", self.url, frame, len(frame.raw), rule)
                return False
        for rule in rules:
            if not rule.drops and rule._matches(frame):
                rule._take(frame)
        return True

    # -- internals --------------------------------------------------------------------------------------------

    def _abort_all(self, timeout: float) -> None:
        """Shut down every open connection on both sides and join their threads, at most ``timeout`` seconds."""
        with self._lock:
            links = list(self._links.values())
        for link in links:
            link.abort()
        deadline = time.monotonic() + timeout
        for link in links:
            thread = link.thread
            # A link admitted a moment ago may not have its thread started yet (it is started outside the lock);
            # it ends at once when it does, since an aborted link refuses to attach. Nothing to join then.
            if thread is not None and thread.ident is not None and thread is not threading.current_thread():
                thread.join(max(0.0, deadline - time.monotonic()))
                if thread.is_alive():
                    logger.warning("fault proxy %s: thread %s did not end in time", self.url, thread.name)

    def _accept_loop(self) -> None:
        try:
            with selectors.DefaultSelector() as selector:
                selector.register(self._listener, selectors.EVENT_READ)
                while not self._stopping.is_set():
                    if not selector.select(_PROXY_TICK):
                        continue
                    try:
                        client, _ = self._listener.accept()
                    except (BlockingIOError, InterruptedError):
                        continue
                    except OSError as exc:  # e.g. out of file descriptors: wait a tick rather than spin
                        if not self._stopping.is_set():
                            logger.warning("fault proxy %s: accept failed: %s", self.url, exc)
                            self._stopping.wait(_PROXY_TICK)
                        continue
                    self._admit(client)
        except Exception:
            if not self._stopping.is_set():
                logger.exception("fault proxy %s: the acceptor failed", self.url)

    def _admit(self, client: socket.socket) -> None:
        with self._lock:
            admit = not self._refusing and not self._stopping.is_set()
            if admit:
                self._link_count += 1
                link = _Link(self._link_count, client)
                self._links[link.ident] = link
        if not admit:
            logger.debug("fault proxy %s: refused a connection", self.url)
            _close_socket(client)
            return
        link.thread = threading.Thread(
            target=self._serve, args=(link,), name=f"fault-proxy-{self._port}-conn-{link.ident}", daemon=True
        )
        link.thread.start()

    def _serve(self, link: _Link) -> None:
        """One connection's thread: connect to the target, then pump both directions until either side ends."""
        try:
            upstream = self._connect_upstream(link)
            if upstream is not None:
                logger.debug("fault proxy %s: connection %d open", self.url, link.ident)
                self._pump(link, link.client, upstream)
        except OSError as exc:  # a reset, a broken pipe, or the socket shut down by cut()
            if not link.closed.is_set():
                logger.debug("fault proxy %s: connection %d ended: %s", self.url, link.ident, exc)
        except Exception:
            logger.exception("fault proxy %s: connection %d failed", self.url, link.ident)
        finally:
            link.close()
            with self._lock:
                self._links.pop(link.ident, None)
            logger.debug("fault proxy %s: connection %d closed", self.url, link.ident)

    def _connect_upstream(self, link: _Link) -> socket.socket | None:
        """A non-blocking connect, waited for in ticks so cut() and stop() interrupt it; None if it fails."""
        host, port = self.target
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.setblocking(False)
            code = sock.connect_ex((host, port))
            if code in _CONNECT_PENDING:
                deadline = time.monotonic() + _PROXY_CONNECT_TIMEOUT
                with selectors.DefaultSelector() as selector:
                    selector.register(sock, selectors.EVENT_WRITE)
                    while not selector.select(_PROXY_TICK):
                        if link.closed.is_set() or time.monotonic() >= deadline:
                            code = errno.ETIMEDOUT
                            break
                    else:
                        code = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if code != 0:
                logger.debug("fault proxy %s: target %s:%d unreachable: %s", self.url, host, port, os.strerror(code))
            elif link.attach(sock):
                return sock
        except BaseException:
            sock.close()
            raise
        sock.close()
        return None

    def _pump(self, link: _Link, client: socket.socket, upstream: socket.socket) -> None:
        """Forward both directions with one selector until both have ended, an error, cut() or stop()."""
        for sock in (client, upstream):
            sock.setblocking(False)
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        source = {_UPSTREAM: client, _DOWNSTREAM: upstream}
        dest = {_UPSTREAM: upstream, _DOWNSTREAM: client}
        held: dict[str, deque[tuple[float, bytes]]] = {_UPSTREAM: deque(), _DOWNSTREAM: deque()}
        held_bytes = {_UPSTREAM: 0, _DOWNSTREAM: 0}
        eof = {_UPSTREAM: False, _DOWNSTREAM: False}
        done = {_UPSTREAM: False, _DOWNSTREAM: False}  # source ended, everything delivered, dest shut for writing
        # Frame parsers exist only while a rule is armed for their direction; a parser made before the first byte
        # of its direction is in step with the frames from the start, a later one has to find a frame start.
        parsers: dict[str, _FrameParser | None] = {_UPSTREAM: None, _DOWNSTREAM: None}
        started = {_UPSTREAM: False, _DOWNSTREAM: False}

        def hold(d: str, data: bytes) -> None:
            if data:
                held[d].append((time.monotonic() + self._latency, data))
                held_bytes[d] += len(data)

        def unparse(d: str) -> None:
            """The direction is no longer filtered (or ended): what the parser held goes out as it came."""
            parser = parsers[d]
            if parser is not None:
                parsers[d] = None
                hold(d, parser.flush())

        with selectors.DefaultSelector() as selector:
            while not link.closed.is_set() and not all(done.values()):
                for d in (_UPSTREAM, _DOWNSTREAM):
                    if parsers[d] is not None and not self._rules[d]:
                        unparse(d)
                now = time.monotonic()
                stalled = self._stalled
                wanted = {client: 0, upstream: 0}
                timeout = _PROXY_TICK
                for d in (_UPSTREAM, _DOWNSTREAM):
                    if d in stalled or done[d]:
                        continue
                    if not eof[d] and held_bytes[d] < _PROXY_MAX_HELD:
                        wanted[source[d]] |= selectors.EVENT_READ
                    if held[d]:
                        wait = held[d][0][0] - now
                        if wait <= 0:
                            wanted[dest[d]] |= selectors.EVENT_WRITE
                        else:
                            timeout = min(timeout, wait)
                    elif eof[d]:  # pass the half-close on, as TCP would
                        with contextlib.suppress(OSError):
                            dest[d].shutdown(socket.SHUT_WR)
                        done[d] = True
                _set_interest(selector, wanted)
                if not selector.get_map():
                    link.closed.wait(timeout)
                    continue
                for key, mask in selector.select(timeout):
                    events = mask & key.events  # an error or hang-up is reported as both; act only on what we asked
                    sock = client if key.fileobj is client else upstream
                    if events & selectors.EVENT_READ:
                        d = _UPSTREAM if sock is client else _DOWNSTREAM
                        try:
                            data = sock.recv(_PROXY_CHUNK)
                        except (BlockingIOError, InterruptedError):
                            data = None
                        if data == b"":
                            eof[d] = True
                            unparse(d)
                        elif data:
                            if self._rules[d]:
                                parser = parsers[d]
                                if parser is None:
                                    parser = parsers[d] = _FrameParser(d, in_step=not started[d])
                                data = self._filter(d, parser.feed(data))
                            started[d] = True
                            hold(d, data)
                    if events & selectors.EVENT_WRITE:
                        d = _DOWNSTREAM if sock is client else _UPSTREAM
                        held_bytes[d] -= self._send(sock, held[d], d)

    def _send(self, sock: socket.socket, queue: deque[tuple[float, bytes]], direction: str) -> int:
        """Send the due chunks, in order, without blocking; returns how many bytes went out.

        Runs under the lock, so once stall() has returned nothing more goes out in that direction.
        """
        sent = 0
        with self._lock:
            if direction in self._stalled:
                return 0
            now = time.monotonic()
            while queue and queue[0][0] <= now:
                due, data = queue[0]
                try:
                    n = sock.send(data)
                except (BlockingIOError, InterruptedError):
                    break
                sent += n
                if n < len(data):
                    queue[0] = (due, data[n:])
                    break
                queue.popleft()
            self._forwarded[direction] += sent
        return sent


class _Link:
    """One client connection and its upstream; the connection's own thread is the only one that closes them."""

    def __init__(self, ident: int, client: socket.socket) -> None:
        self.ident = ident
        self.client = client
        self.upstream: socket.socket | None = None
        self.thread: threading.Thread | None = None
        self.closed = threading.Event()
        self._lock = threading.Lock()

    def attach(self, upstream: socket.socket) -> bool:
        """Keep the upstream socket, unless the link was aborted while connecting."""
        with self._lock:
            if self.closed.is_set():
                return False
            self.upstream = upstream
            return True

    def abort(self) -> None:
        """From any thread: both peers see the connection end now (FIN); the link's thread then closes the sockets."""
        with self._lock:
            self.closed.set()
            for sock in (self.client, self.upstream):
                if sock is not None:
                    with contextlib.suppress(OSError):
                        sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        with self._lock:
            self.closed.set()
            for sock in (self.client, self.upstream):
                if sock is not None:
                    _close_socket(sock)


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


class FrameRule:
    """An armed drop_next() or watch(): which frames it matches, and what it has done so far.

    Thread-safe: the connections' threads record into it, a test reads it and waits on it. A drop rule disarms
    itself once it has dropped its ``count``; cancel() (or leaving a ``with`` block) disarms either kind at once,
    after which its direction is forwarded unparsed again if no other rule is armed for it.
    """

    def __init__(
        self,
        proxy: FaultProxy,
        directions: frozenset[str],
        match: str | FramePredicate | None,
        reply: str | None = None,
        *,
        drop: bool,
        count: int | None,
        skip: int,
    ) -> None:
        self._proxy = proxy
        #: the directions the rule applies to
        self.directions = directions
        #: True for drop_next(), False for watch()
        self.drops = drop
        self._limit = count
        self._skip = skip
        self._tokens: tuple[str, ...] | None = None
        self._predicate: FramePredicate | None = None
        self._reply: tuple[str, ...] | None = None
        if isinstance(match, str):
            self._tokens = _check_pattern("match", match)
            what = match
        elif callable(match):
            self._predicate = match
            what = getattr(match, "__name__", "predicate")
        elif match is None:
            if reply is None:
                raise InvalidArgumentError("match", "give a subject, a predicate or reply=, or any of them")
            what = "any"
        else:
            raise InvalidTypeError("match", f"must be a subject or a callable, got {type(match).__name__}")
        if reply is not None:
            if not isinstance(reply, str):
                raise InvalidTypeError("reply", f"must be a subject, got {type(reply).__name__}")
            self._reply = _check_pattern("reply", reply)
            what += f" reply={reply}"
        self._what = what
        self._cond = threading.Condition()
        self._frames: list[Frame] = []
        self._active = True
        self._predicate_failed = False

    @property
    def frames(self) -> list[Frame]:
        """The frames dropped (drop_next) or seen (watch) so far, in the order the proxy met them."""
        with self._cond:
            return list(self._frames)

    @property
    def count(self) -> int:
        """How many frames were dropped (drop_next) or seen (watch) so far."""
        with self._cond:
            return len(self._frames)

    @property
    def active(self) -> bool:
        """Still armed: a drop rule that has not dropped its count yet, or a watch not cancelled."""
        with self._cond:
            return self._active

    def wait(self, count: int | None = None, timeout: float | None = 5.0) -> bool:
        """Wait until ``count`` frames were dropped or seen (default: all of a drop rule's, or one for a watch);
        returns whether that happened within ``timeout`` seconds (None: no limit)."""
        want = count if count is not None else (self._limit or 1)
        with self._cond:
            return self._cond.wait_for(lambda: len(self._frames) >= want, timeout)

    def cancel(self) -> None:
        """Disarm now; what was recorded stays readable."""
        with self._cond:
            self._active = False
            self._cond.notify_all()
        self._proxy._disarm(self)

    def __enter__(self) -> FrameRule:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.cancel()

    def __repr__(self) -> str:
        kind = f"drop {self._limit} after {self._skip}" if self.drops else "watch"
        where = "+".join(sorted(self.directions))
        return f"<FrameRule {kind} {where} {self._what!r}: {self.count} so far{'' if self.active else ', done'}>"

    def _matches(self, frame: Frame) -> bool:
        """Connection thread: the patterns (message frames only) and the predicate, which must not break the proxy."""
        if self._reply is not None and (frame.reply is None or not _subject_matches(self._reply, frame.reply)):
            return False
        if self._tokens is not None:
            return frame.is_message and frame.subject is not None and _subject_matches(self._tokens, frame.subject)
        if self._predicate is None:
            return frame.is_message
        try:
            return bool(self._predicate(frame))
        except Exception:
            if not self._predicate_failed:  # once per rule: a broken predicate would otherwise log every frame
                self._predicate_failed = True
                logger.exception("fault proxy: the predicate of %r failed; it matches nothing then", self)
            return False

    def _take(self, frame: Frame) -> bool:
        """Connection thread, for a matching frame: whether the rule acts on it (drops it, or records a watch).

        Atomic, so over several connections exactly ``skip`` matches pass and ``count`` are dropped.
        """
        finished = False
        with self._cond:
            if not self._active:
                return False
            if self._skip:
                self._skip -= 1
                return False
            self._frames.append(frame)
            if self._limit is not None and len(self._frames) >= self._limit:
                self._active = False
                finished = True
            self._cond.notify_all()
        if finished:
            self._proxy._disarm(self)
        return True


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


def _check_count(name: str, value: int, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidTypeError(name, f"must be an int, got {type(value).__name__}")
    if value < minimum:
        raise InvalidArgumentError(name, f"{value!r} is less than {minimum}")


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


def _proxy_target(
    target: EmbeddedServer | int | None, target_port: int | None
) -> tuple[EmbeddedServer | None, str, int]:
    if isinstance(target, EmbeddedServer):
        if target_port is not None:
            raise InvalidArgumentError("target_port", "give either an EmbeddedServer or target_port, not both")
        return target, target.host, 0
    if target is not None:
        if target_port is not None:
            raise InvalidArgumentError("target_port", "give the target port once, positionally or as target_port")
        if isinstance(target, bool) or not isinstance(target, int):
            raise InvalidTypeError("target", f"must be an EmbeddedServer or a port, got {type(target).__name__}")
        target_port = target
    if target_port is None:
        raise InvalidArgumentError("target_port", "FaultProxy needs a target: FaultProxy(server) or target_port=PORT")
    return None, _PROXY_HOST, _check_port(target_port)


def _check_direction(direction: str) -> frozenset[str]:
    if not isinstance(direction, str):
        raise InvalidTypeError("direction", f"must be a str, got {type(direction).__name__}")
    try:
        return _DIRECTIONS[direction]
    except KeyError:
        raise InvalidArgumentError("direction", f"{direction!r} is not one of {', '.join(_DIRECTIONS)}") from None


def _bind_listener(port: int) -> socket.socket:
    """Bound now, listening from start(): until then a connection is refused rather than left waiting."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        if os.name != "nt":  # so a fixed port can be taken again while old connections sit in TIME_WAIT
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((_PROXY_HOST, port))
    except BaseException:
        sock.close()
        raise
    return sock


def _set_interest(selector: selectors.BaseSelector, wanted: dict[socket.socket, int]) -> None:
    for sock, events in wanted.items():
        key = selector.get_map().get(sock)
        if key is None:
            if events:
                selector.register(sock, events)
        elif not events:
            selector.unregister(sock)
        elif key.events != events:
            selector.modify(sock, events)


def _close_socket(sock: socket.socket) -> None:
    """Shut down (so the peer sees the end even if the fd were shared), then close; errors do not matter here."""
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    sock.close()
