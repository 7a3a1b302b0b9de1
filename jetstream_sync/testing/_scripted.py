"""ScriptedServer: a fake NATS server on loopback that a test scripts, for what a real nats-server never does.

Issue 26 ("silent failures") needs the client to meet a broken or hostile server (a malformed reply, an async
``INFO []``, a MSG that claims 300 MB), which a real server cannot be made to be, and tests do not mock servers.
Imported on the first use of one of its names (``_LAZY`` in ``__init__``); it borrows the client-to-server frame
parser and the subject matching of ``_frames.py`` and the socket helpers of ``_sockets.py`` (the fault proxy's too).
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import json
import logging
import selectors
import socket
import threading
import time
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Union

from .._validate import check_int, check_name, to_seconds
from ..errors import InvalidArgumentError, InvalidTypeError, JetStreamError
from ._frames import Frame, FramePredicate, _check_pattern, _FrameParser, _subject_matches
from ._server import _check_port, _json_object
from ._sockets import _bind_listener, _close_socket

__all__ = ["ReplyScript", "ScriptedAnswer", "ScriptedReply", "ScriptedRequest", "ScriptedServer", "ScriptedServerError"]

logger = logging.getLogger("jetstream_sync.testing")

_HOST = "127.0.0.1"
_TICK = 0.05  # the server thread looks at stop() at least this often, whatever else it waits for
_CHUNK = 1 << 16
_TIMEOUT = 5.0
_MAX_PENDING_IN = 70 << 20  # a client's unframed input beyond this (a frame that never ends) closes it
_DEFAULT_INFO = {"server_id": "SCRIPTED", "server_name": "scripted", "version": "2.15.1", "proto": 1}
_DEFAULT_INFO.update(go="scripted", headers=True, max_payload=1048576, jetstream=True)


class ScriptedServerError(JetStreamError, RuntimeError):
    """A ScriptedServer was used in a state that does not allow it (started again after stop())."""


@dataclass(frozen=True)
class ScriptedRequest:
    """A message a client published that a reply script matched: what a callable answer is called with.

    ``headers`` is the raw header block of an HPUB (``b"NATS/1.0\\r\\n...\\r\\n\\r\\n"``), ``b""`` for a PUB;
    ``reply`` is None for a publish without a reply subject; ``connection`` is the client's connection id.
    """

    subject: str
    reply: str | None
    headers: bytes
    data: bytes
    connection: int


@dataclass(frozen=True)
class ScriptedReply:
    """An answer with more than a payload: headers, or a delay before it is sent.

    ``headers`` is a mapping (sent as ``NATS/1.0`` header lines, in an HMSG) or a whole raw header block sent as
    is, e.g. ``b"NATS/1.0 503\\r\\n\\r\\n"`` for a status. ``delay`` (seconds) holds this answer back without
    holding up anything else the server sends.
    """

    data: bytes = b""
    headers: Mapping[str, str] | bytes | None = None
    delay: float = 0.0

    def __post_init__(self) -> None:
        _check_type("data", self.data, (bytes,), "bytes")
        _check_type("headers", self.headers, (bytes, Mapping, type(None)), "a mapping or bytes")
        object.__setattr__(self, "delay", to_seconds("delay", self.delay, allow_zero=True))  # a timedelta too

    def header_block(self) -> bytes | None:
        """The header block as sent, or None for a plain MSG; called on the server's thread."""
        if self.headers is None or isinstance(self.headers, bytes):
            return self.headers
        lines = ["NATS/1.0", *(f"{key}: {value}" for key, value in self.headers.items())]
        return ("\r\n".join(lines) + "\r\n\r\n").encode()


#: what ``reply()`` sends back: a payload, a `ScriptedReply`, or a callable that makes one per request
#: (returning None sends nothing, so the client's request times out). A callable runs on the server's thread.
ScriptedAnswer = Union[bytes, ScriptedReply, Callable[[ScriptedRequest], Union[bytes, ScriptedReply, None]]]  # noqa: UP007


class ReplyScript:
    """An armed [`ScriptedServer.reply`][jetstream_sync.testing.ScriptedServer.reply]: what it answers, and the requests
    it has answered so far.

    Thread-safe: the server's thread records into it, a test reads it and waits on it. One limited by ``count``
    disarms itself once it has answered that many; cancel() disarms it at once.
    """

    def __init__(self, server: ScriptedServer, subject: str, answer: ScriptedAnswer, count: int | None) -> None:
        self._server = server
        _check_type("subject", subject, (str,), "a str")
        self._tokens = _check_pattern("subject", subject)
        #: the subject pattern this script answers (``*`` and ``>`` wildcards allowed)
        self.subject = subject
        if not isinstance(answer, (bytes, ScriptedReply)) and not callable(answer):
            raise InvalidTypeError("answer", f"must be bytes, a ScriptedReply or a callable, got {type(answer)}")
        self._answer, self._limit = answer, count
        self._cond = threading.Condition()
        self._requests: list[ScriptedRequest] = []
        self._active = True

    @property
    def requests(self) -> list[ScriptedRequest]:
        """The requests answered so far (a callable that returned None counts), in arrival order."""
        with self._cond:
            return list(self._requests)

    def wait(self, count: int = 1, timeout: float = _TIMEOUT) -> bool:
        """Any thread: whether ``count`` requests were answered within ``timeout`` seconds."""
        check_int("count", count, minimum=1)
        timeout = to_seconds("timeout", timeout, allow_zero=True)
        with self._cond:
            return self._cond.wait_for(lambda: len(self._requests) >= count, timeout)

    def cancel(self) -> None:
        """Any thread: disarm now (an older script for the subject answers again); the requests stay readable."""
        with self._cond:
            self._active = False
        self._server._disarm(self)

    def __repr__(self) -> str:
        limit = "" if self._limit is None else f"/{self._limit}"
        return f"<ReplyScript {self.subject!r}: {len(self.requests)}{limit} answered>"

    def _take(self, request: ScriptedRequest) -> bool:
        """Server thread: record ``request`` if still armed; atomic, so a ``count`` is never exceeded."""
        with self._cond:
            if not self._active:
                return False
            self._requests.append(request)
            self._active = self._limit is None or len(self._requests) < self._limit
            self._cond.notify_all()
        if not self._active:
            self._server._disarm(self)
        return True

    def _reply_for(self, request: ScriptedRequest) -> ScriptedReply | None:
        """Server thread: this script's answer to ``request``; a failing callable is logged and answers nothing."""
        result: object = self._answer
        if callable(self._answer):
            try:
                result = self._answer(request)
            except Exception:
                logger.exception("scripted server: the answer of %r failed on %r", self, request.subject)
                return None
        if result is None or isinstance(result, ScriptedReply):
            return result
        if isinstance(result, (bytes, bytearray)):
            return ScriptedReply(bytes(result))
        logger.error("scripted server: the answer of %r returned %s, not bytes or a ScriptedReply", self, type(result))
        return None


class ScriptedServer:
    """A fake NATS server on 127.0.0.1 that a test scripts, to see how code copes with a broken server.

    A real client connects to ``server.url``; the server sends its INFO, answers PING with PONG, routes core
    NATS messages between its clients (so request/reply through a wildcard inbox works) and answers what the
    test scripts. It stores nothing and knows no JetStream: every JetStream reply is scripted.

        with ScriptedServer() as server, jetstream_sync.connect(server.url) as nc:
            server.reply("$JS.API.STREAM.INFO.ORDERS", b"not json")          # a broken API reply
            server.ack_publishes("orders.>", stream="ORDERS")                 # a stream that acks, seq 1, 2, ...
            server.reply("orders.new", b'{"error":"boom"}', count=1)          # but once, a PubAck that is none
            server.send(b"INFO []\\r\\n")                                      # raw bytes to every client
            server.cut()                                                      # close every client connection

    ``info`` is merged into the default INFO (``version`` 2.15.1, ``headers``, ``max_payload`` 1 MiB,
    ``jetstream``, ``host``/``port``, a ``client_id`` per connection) or, as bytes, replaces it verbatim
    (``b"INFO []\\r\\n"``; ``b""`` for a server that never speaks first). ``pong``/``pong_delay``: see
    set_pong(). With ``no_responders`` a request that no subscription and no script receives gets a 503 status,
    as from a real server. Bound when made (so ``url`` is known), it serves from start() on one daemon thread,
    ``scripted-server-PORT``, which owns every socket; stop() closes them all and joins it. Every wait takes a
    timeout. Not supported: TLS, auth, verbose mode.
    """

    def __init__(
        self,
        *,
        info: Mapping[str, Any] | bytes | None = None,
        port: int | None = None,
        pong: bool = True,
        pong_delay: float = 0.0,
        no_responders: bool = True,
    ) -> None:
        self._info_raw, self._info_extra = _check_info(info)
        _check_type("pong", pong, (bool,), "a bool")
        _check_type("no_responders", no_responders, (bool,), "a bool")
        self._pong, self._pong_delay = pong, to_seconds("pong_delay", pong_delay, allow_zero=True)
        self._no_responders = no_responders
        self._lock = threading.Lock()  # guards the connections table, their output, the frames and the scripts
        self._changed = threading.Condition(self._lock)  # a connection came or went, or a frame arrived
        self._stopping = threading.Event()
        self._started = self._stopped = False
        self._conns: dict[int, _Conn] = {}  # changed by the server thread only, under the lock
        self._accepted = 0
        self._frames: list[tuple[int, Frame]] = []
        # The armed scripts, newest last: a tuple replaced whole under the lock, read by the server thread without.
        self._scripts: tuple[ReplyScript, ...] = ()
        self._timers: list[tuple[float, int, Callable[[], object]]] = []  # server thread only
        self._timer_seq, self._rotation = itertools.count(), itertools.count()  # timer order, queue group turns
        self._thread: threading.Thread | None = None
        self._listener = _bind_listener(0 if port is None else _check_port(port))
        self._port = int(self._listener.getsockname()[1])
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_w.setblocking(False)  # the read end is only read when select says it has bytes
        self._finalizer = weakref.finalize(self, _close_all, self._listener, self._wake_r, self._wake_w)

    @property
    def url(self) -> str:
        """Client URL, ``nats://127.0.0.1:PORT``."""
        return f"nats://{_HOST}:{self._port}"

    @property
    def port(self) -> int:
        """The port the server listens on (bound when the server is made)."""
        return self._port

    @property
    def is_running(self) -> bool:
        """Started and not stopped."""
        return self._started and not self._stopped

    @property
    def connections(self) -> int:
        """Client connections open right now."""
        with self._lock:
            return len(self._conns)

    @property
    def connection_ids(self) -> list[int]:
        """The ids of the open connections (each INFO's ``client_id``), oldest first; for send() and cut()."""
        with self._lock:
            return sorted(self._conns)

    @property
    def accepted(self) -> int:
        """How many connections were accepted so far: a reconnect shows here as one more."""
        with self._lock:
            return self._accepted

    def start(self) -> ScriptedServer:
        """Start serving on the server's own thread; a second call does nothing. A stopped server cannot restart."""
        with self._lock:
            if self._stopped:
                raise ScriptedServerError(f"{self!r} was stopped; make a new ScriptedServer (port= keeps the URL)")
            if self._started:
                return self
            self._started = True
        self._listener.listen(64)
        self._listener.setblocking(False)
        self._thread = threading.Thread(target=self._run, name=f"scripted-server-{self._port}", daemon=True)
        self._thread.start()
        logger.info("scripted server listening on %s", self.url)
        return self

    def stop(self, timeout: float = _TIMEOUT) -> None:
        """Close every connection and the listener and join the server's thread (at most ``timeout`` seconds).

        Any thread, also a callable answer on the server's thread (which is then not joined: it ends after).
        A second call does nothing.
        """
        timeout = to_seconds("timeout", timeout, allow_zero=True)
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
        self._stopping.set()
        self._wake()
        thread = self._thread
        if thread is None:
            self._finalizer()  # never started: only the listener and the wake-up pair to close
        elif thread is not threading.current_thread():  # else a callable answer: the thread ends after it
            thread.join(timeout)
            if thread.is_alive():  # it closes every socket itself when it ends
                logger.warning("scripted server %s: its thread did not end within %gs", self.url, timeout)
        logger.info("scripted server %s stopped", self.url)

    close = stop

    def __enter__(self) -> ScriptedServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "running" if self.is_running else "stopped" if self._stopped else "not started"
        return f"<ScriptedServer {self.url} {state}>"

    def reply(self, subject: str, answer: ScriptedAnswer, *, count: int | None = None) -> ReplyScript:
        """Answer what clients publish on ``subject`` (``*`` and ``>`` allowed) with ``answer``; any thread.

        The answer goes to the message's reply subject, routed like any message (so to the requester's inbox).
        ``answer`` is the payload, a [`ScriptedReply`][jetstream_sync.testing.ScriptedReply] (headers, delay), or a
        callable called on the server's thread with a [`ScriptedRequest`][jetstream_sync.testing.ScriptedRequest] that
        returns either, or None to stay silent (the request times out). It must be quick; it may call send(), reply()
        and stop(). The newest matching script answers, so a test may override an earlier one; subscribers get the
        message as well. With ``count`` it answers that many, then disarms itself. Returns the
        [`ReplyScript`][jetstream_sync.testing.ReplyScript] (``requests``, ``wait()``).
        """
        if count is not None:
            check_int("count", count, minimum=1)
        script = ReplyScript(self, subject, answer, count)
        with self._lock:
            self._scripts = (*self._scripts, script)
        logger.info("scripted server %s: armed %r", self.url, script)
        return script

    def ack_publishes(self, subject: str, stream: str, *, count: int | None = None) -> ReplyScript:
        """Answer publishes on ``subject`` with PubAcks of ``stream``, seq 1, 2, 3, ... as a stream would.

        What ``js.publish()`` needs to succeed against this server; a script armed later on the same subject
        (e.g. with ``count=1``) answers instead of it, such as one malformed PubAck among good ones.
        """
        check_name("stream", stream)
        seqs = itertools.count(1)
        return self.reply(subject, lambda _: b'{"stream":%s,"seq":%d}' % (json.dumps(stream).encode(), next(seqs)))

    def set_pong(self, enabled: bool = True, *, delay: float = 0.0) -> None:
        """How the next PINGs are answered: a PONG after ``delay`` seconds, or none at all (``enabled=False``).

        No PONG leaves the client's pings unanswered for good (a stale connection; its flush() times out); with
        none at connect the client cannot connect. A delayed PONG holds up nothing else the server sends.
        """
        _check_type("enabled", enabled, (bool,), "a bool")
        seconds = to_seconds("delay", delay, allow_zero=True)
        with self._lock:
            self._pong, self._pong_delay = enabled, seconds
        logger.info("scripted server %s: %s", self.url, f"PONG after {seconds:g}s" if enabled else "no PONG")

    def send(self, raw: bytes, *, connection: int | None = None) -> int:
        """Write ``raw`` as is to every client connection, or to the one with id ``connection``; any thread.

        For what no script can make: ``b"INFO []\\r\\n"``, ``b"-ERR 'boom'\\r\\n"``, a MSG whose size lies. The
        bytes go out after whatever the server queued before, soon after this returns (which does not wait for
        them). Returns how many connections they were queued for (0 if ``connection`` is not open).
        """
        _check_type("raw", raw, (bytes, bytearray), "bytes")
        if connection is not None:
            check_int("connection", connection, minimum=1)
        with self._lock:
            conns = [c for i, c in self._conns.items() if connection in (None, i) and not c.cut]
            for conn in conns:
                conn.out += raw
        self._wake()
        return len(conns)

    def cut(self, connection: int | None = None, *, timeout: float = _TIMEOUT) -> int:
        """Close every client connection, or the one with id ``connection``, as a server going away would.

        What was queued for it before (by send(), say) is written first if the socket takes it at once. Returns
        how many connections were closed within ``timeout`` seconds; new ones are still accepted.
        """
        if connection is not None:
            check_int("connection", connection, minimum=1)
        timeout = to_seconds("timeout", timeout, allow_zero=True)
        with self._lock:
            conns = [c for i, c in self._conns.items() if connection in (None, i)]
            for conn in conns:
                conn.cut = True
        self._wake()
        if threading.current_thread() is self._thread:  # a callable answer: they close once it returns
            return len(conns)
        with self._changed:
            self._changed.wait_for(lambda: not any(c.ident in self._conns for c in conns), timeout)
            closed = sum(c.ident not in self._conns for c in conns)
        logger.info("scripted server %s: cut %d connection(s)", self.url, closed)
        return closed

    def wait_connections(self, count: int = 1, timeout: float = _TIMEOUT) -> bool:
        """Whether at least ``count`` client connections were open at once within ``timeout`` seconds."""
        check_int("count", count, minimum=0)
        timeout = to_seconds("timeout", timeout, allow_zero=True)
        with self._changed:
            return self._changed.wait_for(lambda: len(self._conns) >= count, timeout)

    def received(self, connection: int | None = None) -> list[Frame]:
        """Every frame the clients sent (CONNECT, PING, SUB, PUB, ...), or those of one connection, in order.

        Each is a [`Frame`][jetstream_sync.testing.Frame] (direction ``"upstream"``): ``verb``, ``subject``, ``reply``,
        ``headers``, ``data`` and ``raw``, the frame exactly as it came.
        """
        with self._lock:
            return [frame for ident, frame in self._frames if connection in (None, ident)]

    def wait_frame(
        self,
        match: str | FramePredicate | None = None,
        *,
        verb: str | None = None,
        start: int = 0,
        timeout: float = _TIMEOUT,
    ) -> Frame | None:
        """The first frame a client sent that matches, waiting at most ``timeout`` seconds; None if none came.

        ``match`` is a subject pattern, compared with the subject of PUB, HPUB and SUB frames, or a predicate
        called with each [`Frame`][jetstream_sync.testing.Frame] under the server's lock (so it must not call the
        server); ``verb`` ("CONNECT", "SUB", "PUB", ...) must match as well. Frames already received count:
        ``start=len(server.received())`` looks only at those that come after.
        """
        tokens = _check_pattern("match", match) if isinstance(match, str) else None
        predicate = match if callable(match) else None
        if match is not None and tokens is None and predicate is None:
            raise InvalidTypeError("match", f"must be a subject or a callable, got {type(match).__name__}")
        _check_type("verb", verb, (str, type(None)), "a str")
        check_int("start", start, minimum=0)
        timeout = to_seconds("timeout", timeout, allow_zero=True)

        def matches(frame: Frame) -> bool:
            if (verb is not None and frame.verb != verb.upper()) or (tokens and frame.subject is None):
                return False
            return bool(_subject_matches(tokens, frame.subject or "") if tokens else not predicate or predicate(frame))

        def first() -> Frame | None:
            return next((f for _, f in self._frames[start:] if matches(f)), None)

        with self._changed:
            return self._changed.wait_for(first, timeout)

    def _disarm(self, script: ReplyScript) -> None:
        with self._lock:
            self._scripts = tuple(s for s in self._scripts if s is not script)

    def _wake(self) -> None:
        """Any thread: interrupt the server thread's select, so queued output and cuts apply at once."""
        with contextlib.suppress(OSError):
            self._wake_w.send(b"\0")

    def _run(self) -> None:
        """The server thread: accept, read, route and write, until stop(); then close every socket."""
        try:
            with selectors.DefaultSelector() as selector:
                selector.register(self._listener, selectors.EVENT_READ)
                selector.register(self._wake_r, selectors.EVENT_READ)
                while not self._stopping.is_set():
                    now = time.monotonic()
                    while self._timers and self._timers[0][0] <= now:
                        heapq.heappop(self._timers)[2]()
                    self._close_cut(selector)
                    for key, events in selector.select(self._interest(selector)):
                        if key.fileobj is self._listener:
                            self._accept(selector)
                        elif key.fileobj is self._wake_r:
                            with contextlib.suppress(OSError):
                                self._wake_r.recv(_CHUNK)
                        else:
                            if events & selectors.EVENT_READ:
                                self._read(selector, key.data)
                            if events & selectors.EVENT_WRITE and key.data.ident in self._conns:  # not closed
                                self._write(selector, key.data)
        except Exception:
            logger.exception("scripted server %s: the server thread failed", self.url)
        finally:
            with self._changed:
                for conn in self._conns.values():
                    _close_socket(conn.sock)
                self._conns.clear()
                self._changed.notify_all()
            self._finalizer()  # the listener and the wake-up pair: no thread uses them any more

    def _interest(self, selector: selectors.BaseSelector) -> float:
        """Read every connection, write those with output; returns how long select may wait."""
        with self._lock:
            for conn in self._conns.values():
                events = selectors.EVENT_READ | (selectors.EVENT_WRITE if conn.out else 0)
                if events != conn.events:
                    selector.modify(conn.sock, events, conn)
                    conn.events = events
        return max(0.0, min(_TICK, self._timers[0][0] - time.monotonic())) if self._timers else _TICK

    def _later(self, delay: float, action: Callable[[], object]) -> None:
        if delay <= 0:
            action()
        else:
            heapq.heappush(self._timers, (time.monotonic() + delay, next(self._timer_seq), action))

    def _accept(self, selector: selectors.BaseSelector) -> None:
        """One connection per call: the selector reports the listener again while more are waiting."""
        try:
            sock, _ = self._listener.accept()
        except (BlockingIOError, InterruptedError):  # the client went before we took it: nothing to accept
            return
        except OSError as exc:  # e.g. out of file descriptors: wait a tick rather than spin
            logger.warning("scripted server %s: accept failed: %s", self.url, exc)
            self._stopping.wait(_TICK)
            return
        sock.setblocking(False)
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self._changed:
            self._accepted += 1
            conn = _Conn(self._accepted, sock)
            conn.out += self._info_raw if self._info_raw is not None else self._info(conn.ident)
            self._conns[conn.ident] = conn
            self._changed.notify_all()
        selector.register(sock, conn.events, conn)
        logger.debug("scripted server %s: connection %d open", self.url, conn.ident)

    def _info(self, ident: int) -> bytes:
        info = {**_DEFAULT_INFO, "host": _HOST, "port": self._port, "client_id": ident, "client_ip": _HOST}
        info.update(self._info_extra)
        return b"INFO " + json.dumps(info, separators=(",", ":")).encode() + b"\r\n"

    def _close_cut(self, selector: selectors.BaseSelector) -> None:
        """Close the connections cut() asked for, after one last non-blocking write of what they had queued."""
        with self._lock:
            cut = [conn for conn in self._conns.values() if conn.cut]
        for conn in cut:
            with self._lock, contextlib.suppress(OSError):
                del conn.out[: conn.sock.send(conn.out)]
            self._drop(selector, conn)

    def _drop(self, selector: selectors.BaseSelector, conn: _Conn) -> None:
        with contextlib.suppress(KeyError, ValueError):
            selector.unregister(conn.sock)
        _close_socket(conn.sock)
        with self._changed:
            self._conns.pop(conn.ident, None)
            self._changed.notify_all()
        logger.debug("scripted server %s: connection %d closed", self.url, conn.ident)

    def _write(self, selector: selectors.BaseSelector, conn: _Conn) -> None:
        try:
            with self._lock:
                del conn.out[: conn.sock.send(conn.out)]
        except (BlockingIOError, InterruptedError):  # the socket is full: the selector calls again when writable
            return
        except OSError as exc:
            logger.debug("scripted server %s: connection %d: %s", self.url, conn.ident, exc)
            self._drop(selector, conn)

    def _read(self, selector: selectors.BaseSelector, conn: _Conn) -> None:
        """Read and act on what a client sent; at its end, or an endless frame, close the connection."""
        try:
            data = conn.sock.recv(_CHUNK)
        except (BlockingIOError, InterruptedError):  # nothing to read after all: the selector calls again
            return
        except OSError as exc:
            logger.debug("scripted server %s: connection %d: %s", self.url, conn.ident, exc)
            data = b""
        conn.pending += len(data)
        for item in conn.parser.feed(data):
            if isinstance(item, bytes):
                conn.pending -= len(item)
                logger.debug("scripted server %s: connection %d sent no frame: %r", self.url, conn.ident, item[:80])
                continue
            conn.pending -= len(item.raw)
            with self._changed:
                self._frames.append((conn.ident, item))
                self._changed.notify_all()
            self._handle(conn, item)
        if data and conn.pending > _MAX_PENDING_IN:
            logger.warning("scripted server %s: connection %d sent an endless frame; closing it", self.url, conn.ident)
            data = b""
        if not data:
            self._drop(selector, conn)

    def _handle(self, conn: _Conn, frame: Frame) -> None:
        """Server thread: what the server does with one frame a client sent."""
        args = frame.args
        if frame.verb == "CONNECT":
            options = _json_object(frame.raw[len("CONNECT") :]) or {}
            conn.echo = options.get("echo", True) is not False
            conn.no_responders = options.get("no_responders") is True and options.get("headers") is True
        elif frame.verb == "PING":
            with self._lock:
                pong, delay = self._pong, self._pong_delay
            if pong:
                self._later(delay, lambda: self._queue(conn, b"PONG\r\n"))
        elif frame.verb == "SUB" and len(args) in (3, 4):
            try:
                tokens = _check_pattern("subject", args[1])
            except InvalidArgumentError:
                logger.debug("scripted server %s: connection %d: bad SUB %r", self.url, conn.ident, frame.raw)
                return
            conn.subs[args[-1]] = _Sub(conn, args[-1], tokens, args[2] if len(args) == 4 else None)
        elif frame.verb == "UNSUB" and len(args) in (2, 3):
            sub = conn.subs.get(args[1])
            if sub is not None and len(args) == 3 and args[2].isdigit() and int(args[2]) > sub.delivered:
                sub.limit = int(args[2])
            else:
                conn.subs.pop(args[1], None)
        elif frame.is_message and frame.subject is not None:
            headers = frame.headers if frame.verb == "HPUB" else None
            self._publish(conn, frame.subject, frame.reply, headers, frame.data)

    def _publish(self, origin: _Conn, subject: str, reply: str | None, headers: bytes | None, data: bytes) -> None:
        """A client's message: to every matching subscription, then to the newest matching script."""
        delivered = self._route(subject, reply, headers, data, origin)
        script = next((s for s in reversed(self._scripts) if _subject_matches(s._tokens, subject)), None)
        request = ScriptedRequest(subject, reply, headers or b"", data, origin.ident)
        if script is not None and script._take(request):
            answer = script._reply_for(request)
            if answer is not None and reply is not None:
                to, block, payload = reply, answer.header_block(), answer.data
                self._later(answer.delay, lambda: self._route(to, None, block, payload, None))
        elif not delivered and reply is not None and origin.no_responders and self._no_responders:
            sub = next((s for s in origin.subs.values() if _subject_matches(s.tokens, reply)), None)
            if sub is not None:
                self._deliver(sub, reply, None, b"NATS/1.0 503\r\n\r\n", b"")  # as nats-server

    def _route(self, subject: str, reply: str | None, headers: bytes | None, data: bytes, origin: _Conn | None) -> bool:
        """Deliver to every matching subscription, one member per queue group; whether any got it."""
        groups: dict[str, list[_Sub]] = {}
        delivered = False
        for conn in list(self._conns.values()):
            for sub in list(conn.subs.values()) if conn is not origin or conn.echo else ():
                if not _subject_matches(sub.tokens, subject):
                    continue
                if sub.queue is not None:
                    groups.setdefault(sub.queue, []).append(sub)
                else:
                    self._deliver(sub, subject, reply, headers, data)
                    delivered = True
        for members in groups.values():
            self._deliver(members[next(self._rotation) % len(members)], subject, reply, headers, data)
        return delivered or bool(groups)

    def _deliver(self, sub: _Sub, subject: str, reply: str | None, headers: bytes | None, data: bytes) -> None:
        via = f" {reply}" if reply else ""
        if headers is None:
            line = f"MSG {subject} {sub.sid}{via} {len(data)}\r\n"
        else:
            line = f"HMSG {subject} {sub.sid}{via} {len(headers)} {len(headers) + len(data)}\r\n"
        self._queue(sub.conn, b"".join((line.encode(), headers or b"", data, b"\r\n")))
        sub.delivered += 1
        if sub.limit is not None and sub.delivered >= sub.limit:
            sub.conn.subs.pop(sub.sid, None)

    def _queue(self, conn: _Conn, data: bytes) -> None:
        """Server thread: output for ``conn`` (nothing if it has closed meanwhile); written when it can take it."""
        with self._lock:
            if self._conns.get(conn.ident) is conn and not conn.cut:
                conn.out += data


@dataclass(eq=False)
class _Conn:
    """One client connection. The server thread owns the socket; ``out`` and ``cut`` are guarded by the lock."""

    ident: int
    sock: socket.socket
    events: int = selectors.EVENT_READ | selectors.EVENT_WRITE  # what the selector watches for it
    out: bytearray = field(default_factory=bytearray)
    cut: bool = False
    parser: _FrameParser = field(default_factory=lambda: _FrameParser("upstream", in_step=True))
    pending: int = 0  # bytes fed to the parser that it has not returned yet
    subs: dict[str, _Sub] = field(default_factory=dict)
    echo: bool = True
    no_responders: bool = False


@dataclass(eq=False)
class _Sub:
    """A client's subscription: server thread only."""

    conn: _Conn
    sid: str
    tokens: tuple[str, ...]
    queue: str | None
    delivered: int = 0
    limit: int | None = None


def _check_info(info: Mapping[str, Any] | bytes | None) -> tuple[bytes | None, dict[str, Any]]:
    """(raw INFO bytes or None, the fields to merge into the default INFO); a mapping must be JSON."""
    if info is None or isinstance(info, (bytes, bytearray)):
        return (None if info is None else bytes(info)), {}
    _check_type("info", info, (Mapping,), "a mapping or bytes")
    try:
        return None, json.loads(json.dumps(dict(info)))  # a copy, as the server will send it
    except (TypeError, ValueError) as exc:
        raise InvalidArgumentError("info", f"is not JSON: {exc}") from None


def _check_type(name: str, value: object, types: tuple[type, ...], what: str) -> None:
    if not isinstance(value, types):
        raise InvalidTypeError(name, f"must be {what}, got {type(value).__name__}")


def _close_all(*socks: socket.socket) -> None:
    for sock in socks:
        sock.close()
