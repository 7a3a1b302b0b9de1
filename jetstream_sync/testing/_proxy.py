"""FaultProxy: a TCP proxy on loopback in front of a nats-server that stalls, delays, cuts or refuses connections,
and drops (or watches) chosen NATS protocol frames.

A module of its own because only fault tests need it, and it is the largest piece (threads, selectors, buffering):
``jetstream_sync.testing`` imports it on the first use of FaultProxy, FaultProxyError or Direction, and the pytest
plugin only when a test asks for the ``fault_proxy`` fixture. It depends on _server.py (a target may be an
EmbeddedServer), never the other way round. This module moves the bytes and injects the faults; the frames it
cuts a direction into are ``_frames.py``'s, the rules that drop or watch them ``_frame_rules.py``'s, and the
sockets it shares with the scripted server ``_sockets.py``'s. Their public names are re-exported here.
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
from types import TracebackType

from ..errors import InvalidArgumentError, InvalidTypeError, JetStreamError
from ._frame_rules import FrameRule, _check_count
from ._frames import _DOWNSTREAM, _UPSTREAM, Direction, Frame, FramePredicate, _check_direction, _FrameParser
from ._server import EmbeddedServer, _check_port
from ._sockets import _CONNECT_PENDING, LOOPBACK, _bind_listener, _close_socket, _Link, _set_interest

__all__ = ["Direction", "FaultProxy", "FaultProxyError", "Frame", "FramePredicate", "FrameRule"]

logger = logging.getLogger("jetstream_sync.testing")

_PROXY_HOST = LOOPBACK
_PROXY_TICK = 0.05  # every wait in the proxy threads is at most this long, so state changes apply promptly
_PROXY_CHUNK = 1 << 16
_PROXY_MAX_HELD = 1 << 22  # per connection and direction; reading from the source pauses while this much is held
_PROXY_CONNECT_TIMEOUT = 5.0
_PROXY_JOIN_TIMEOUT = 5.0
_PROXY_BACKLOG = 128


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
