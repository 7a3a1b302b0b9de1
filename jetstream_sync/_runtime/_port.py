"""Runtime: the one object through which the client and the JetStream layer reach the IO loop and nats-py.

It owns the IO thread (a private asyncio loop running the nats-py connection), the watchdog thread (the
library's timers), the callbacks thread (user callbacks), the outbound queue and the request mux, and offers
a narrow, typed set of operations: send a command, make a request, subscribe with a fast handler, post or call
onto the loop, notify a reader, run a user callback, watch on the watchdog, listen to connection events.
Nothing outside this package touches the loop or nats-py. See docs/ARCHITECTURE.md, "The runtime port".
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
import weakref
from collections.abc import Callable, Coroutine
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from .. import errors
from .._protocol import Command
from .._telemetry import note_reconnected
from .._validate import check_control_line, prepare_message, to_seconds
from ._buffer import MessageBuffer
from ._callbacks import CLOSE_WAIT, CallbackRunner
from ._connect import ConnectionState, nats_py_keywords
from ._exit import LIVE
from ._fork import ForkGuard, ProcessLocal
from ._health import HealthProbe
from ._io import IOLoop
from ._mux import FutureReply, RawReply, ReplyHandler, ReplyWaiter, RequestMux
from ._nats import Handler, NatsConnection, NatsSubscription, Nuid
from ._outbound import Outbound
from ._scan import encode_pub, encode_pub_parts
from ._threads import io_thread
from ._translate import connect_failure, translate_error
from ._wait import warn_if_in_event_loop
from ._watchdog import Timer, Watchdog, check_library_code

if TYPE_CHECKING:
    from ..headers import HeadersInput
    from ..options import ConnectOptions

__all__ = ["Closeable", "ConnectionListener", "Runtime"]

log = logging.getLogger("jetstream_sync")

T = TypeVar("T")
Item = TypeVar("Item")

_OUTBOUND_HIGH_WATER = 1024 * 1024
_SWEEP_INTERVAL = 0.05  # how often publish_async deadlines are checked
_WATCH_INTERVAL = 0.25  # how often the watchdog calls the registered watchers (heartbeat monitors)


class Closeable(Protocol):
    """Something that must end when the client closes (subscriptions, pulls, publishers). Any thread."""

    def on_client_closed(self, exc: BaseException) -> None: ...


class ConnectionListener(Protocol):
    """Connection events, delivered on the IO thread (pull consumers re-pull on reconnect)."""

    def on_disconnected(self) -> None: ...

    def on_reconnected(self) -> None: ...


class Runtime(ProcessLocal):
    """The thread boundary of one client. Thread-safe unless a method says "IO thread"."""

    def __init__(self, options: ConnectOptions) -> None:
        self.options = options
        self.default_timeout: float = options.timeout
        #: in a forked child the parent's threads do not exist, so every call fails fast (``forked``)
        self.fork_guard = ForkGuard()
        self._alive = self.fork_guard.mark
        self.reconnects = 0
        self._closed = False
        self._closing = False
        self._close_lock = threading.Lock()
        self._closeables: weakref.WeakSet[Any] = weakref.WeakSet()
        self._listeners: list[ConnectionListener] = []
        self._threads: weakref.WeakSet[threading.Thread] = weakref.WeakSet()
        self._nuid = Nuid()
        self._nuid_lock = threading.Lock()
        self._io = IOLoop()
        self._watchdog = Watchdog()
        self._callbacks = CallbackRunner()
        self._nc = NatsConnection(self._io.post)
        self._nc.configure(options)
        #: the health snapshot's counters and probes: double acks in flight, RTT, the stats timer (``_health.py``)
        self.health = HealthProbe(self._io, self._nc, self._watchdog)
        self._nc.on_lost = self._on_lost
        self._state = ConnectionState()
        self._first_round = True  # the first connect's fail-fast round: errors are collected, not reported
        self._draining = False
        self._mux = RequestMux(options.inbox_prefix, self.new_token())
        self._outbound = Outbound(
            self._io,
            self._nc,
            high_water=_OUTBOUND_HIGH_WATER,
            reconnect_buffer=options.pending_size,
            default_timeout=options.timeout,
        )
        #: Any thread: queue a command (``send(command, timeout=None)``: behind a stalled backlog, wait at most
        #: ``timeout``, by default the client's); commands queued together reach the socket in one write. The
        #: outbound queue's own method, bound here: a wrapper would cost a call per published message.
        self.send = self._outbound.put
        #: Any thread but the IO thread: write what ``send(command, later=True)`` queued, on the calling thread
        #: when the socket is free, else through the IO thread (``Outbound.flush``)
        self.flush_sends = self._outbound.flush
        #: IO thread: write what is queued now, if anything is (``Outbound.drain_queued``)
        self.drain_sends = self._outbound.drain_queued
        #: IO thread: run ``fn()`` once the current burst of input is parsed (``IOLoop.notify_later``: a call
        #: soon on the loop, cheaper than a timer)
        self.after_input = self._io.notify_later
        #: the server's max_payload, read once per (re)connect rather than through nats-py on every publish
        self.max_payload: int = self._nc.payload_limit
        self._sweeper: asyncio.Task[None] | None = None
        self._connect_errors: list[BaseException] = []
        self._watchers: set[Callable[[float], object]] = set()
        self._watchers_lock = threading.Lock()
        self._watch_timer: Timer | None = None

    # -- connecting -------------------------------------------------------------------------------------
    def connect(self) -> None:
        """Connect, or raise (and release every thread) when no server can be reached. With
        ``retry_on_failed_connect`` a failed first round goes on in the background instead (``_connect.py``),
        and ``first_connect_wait`` bounds how long this waits for it."""
        opts = self.options
        budget = opts.connect_timeout * max(1, len(opts.servers)) * 2 + 5.0
        try:
            self._io.call(self._connect_async(), budget, "connect")
        except BaseException:
            self._release()
            raise
        LIVE.add(self)
        if opts.first_connect_wait and not self.wait_connected(opts.first_connect_wait):
            failure, cause = self._state.wait_failure(opts)
            self.close(timeout=2.0)
            raise failure from cause

    def _release(self) -> None:  # a first connect failed: end every thread (the client was never usable)
        self._closed = True
        self._state.closed()
        self._nc.calls.stop()
        self._shutdown_threads(timeout=2.0)
        self._nc.calls.join(timeout=2.0)
        self._watchdog.stop(timeout=2.0)
        self._callbacks.stop(CLOSE_WAIT)

    async def _connect_async(self) -> None:
        opts = self.options
        self._nc.reply_prefix = (opts.inbox_prefix + ".").encode()
        callbacks: dict[str, Callable[..., Coroutine[Any, Any, object]]] = {"error_cb": self._on_error}
        callbacks.update(disconnected_cb=self._on_disconnected, reconnected_cb=self._on_reconnected)
        callbacks["closed_cb"] = self._on_closed
        if opts.discovered_servers_callback is not None:
            callbacks["discovered_server_cb"] = self._on_discovered
        kwargs = nats_py_keywords(opts, callbacks)
        self._connect_errors = []  # what nats-py reported while trying; see _on_error
        connected = True
        try:
            await self._nc.connect(**kwargs)
        except ImportError as exc:  # nats-py imports nkeys only when nkey or credentials auth is asked for
            field = opts.nkey_field()
            raise errors.InvalidArgumentError(field, f"needs the nkeys package: pip install nkeys ({exc})") from exc
        except Exception as exc:
            if type(exc).__module__.partition(".")[0] == "nkeys":  # a malformed seed; the text never holds it
                raise errors.InvalidArgumentError(opts.nkey_field(), f"is not a usable nkey seed: {exc}") from exc
            failure, cause = connect_failure(self._connect_errors, exc, opts.servers, self._nc.tls_required)
            if not opts.retry_on_failed_connect or isinstance(failure, errors.InvalidArgumentError):
                raise failure from cause
            log.warning("%s; retrying in the background (retry_on_failed_connect)", failure)
            for seen in self._connect_errors:
                self._state.note(seen, attempt=True)
            self._state.note(failure)
            connected = False
        self._first_round = False
        self._nc.set_reconnect_policy(opts.max_reconnect_attempts, opts.reconnect_wait)
        if connected:
            self.max_payload = self._nc.payload_limit
            self._state.connected()
            if opts.connected_callback is not None:
                self._callbacks.submit(opts.connected_callback)
        if not connected:
            self._nc.connect_in_background(opts.servers)
        # subscribed while reconnecting, the reply inbox is sent before anything buffered once connected
        await self._nc.fast_subscribe(self._mux.subject, "", self._mux.handle)
        self._nc.open_gate()  # requests may be written by their own threads now (the reply inbox is subscribed)
        self._sweeper = asyncio.get_running_loop().create_task(self._sweep_expired())

    async def _sweep_expired(self) -> None:
        """IO thread: expire asynchronous publishes whose ack did not come in time. Nothing may end this loop
        unseen: without it no publish_async future would ever time out."""
        while True:
            await asyncio.sleep(_SWEEP_INTERVAL)
            try:
                self._mux.expire(time.monotonic())
            except Exception:
                log.exception("expiring pending replies failed; the sweeper goes on")

    # -- nats-py callbacks (IO thread) ------------------------------------------------------------------
    async def _on_error(self, exc: Exception) -> None:
        self._nc.drop_failed_tls_transport()
        if self._first_round:
            log.debug("while connecting: %s", exc)  # the failure is raised from connect()
            self._connect_errors.append(exc)
            return
        self._state.note(exc, attempt=not self.is_connected)  # before report_error notes it again: no change
        self.report_error(translate_error(exc))

    @io_thread
    def _on_lost(self, exc: BaseException) -> None:  # IO thread: a read error, EOF, stale pings
        self._state.note(exc)

    async def _on_discovered(self) -> None:
        callback = self.options.discovered_servers_callback
        if callback is not None:
            self._callbacks.submit(callback)

    async def _on_disconnected(self) -> None:
        if self._closing or not self._state.ever_connected:
            return  # closing; or connecting in the background, where nothing was connected to lose
        self._state.disconnected()
        log.info("disconnected from NATS; reconnecting")
        self._nc.close_gate()
        self._mux.fail_all(
            lambda: errors.NotConnectedError(
                "the connection was lost before the reply came; a publish may or may not have been stored "
                "(publish again with the same msg_id to be safe)"
            )
        )
        for listener in list(self._listeners):
            try:
                listener.on_disconnected()
            except Exception:
                log.exception("disconnect listener failed")
        if self.options.disconnected_callback is not None:
            self._callbacks.submit(self.options.disconnected_callback)

    async def _on_reconnected(self) -> None:
        self._nc.open_gate()  # after nats-py replayed the subscriptions and flushed: nothing can be passed now
        self.max_payload = self._nc.payload_limit  # another server may allow another size
        if self._state.connected():  # the first connection, made in the background (retry_on_failed_connect)
            log.info("connected to %s", self.connected_url)
            if self.options.connected_callback is not None:
                self._callbacks.submit(self.options.connected_callback)
            return
        self.reconnects += 1
        log.info("reconnected to %s", self.connected_url)
        note_reconnected()
        for listener in list(self._listeners):
            try:
                listener.on_reconnected()
            except Exception:
                log.exception("reconnect listener failed")
        if self.options.reconnected_callback is not None:
            self._callbacks.submit(self.options.reconnected_callback)

    async def _on_closed(self) -> None:
        self._state.closed()
        if self._closing:
            return
        log.warning("the NATS connection closed (reconnect attempts exhausted); closing the client")
        self._watchdog.call_soon(self.close)  # library code: the watchdog, not behind a stuck user callback

    def report_error(self, exc: BaseException, *, user_code: bool = False) -> None:
        """Any thread: hand an asynchronous error to the user's error callback on the callbacks thread.

        ``user_code``: ``exc`` was raised by the user's code (a subscription's handler); without a callback its
        WARNING then carries the traceback, the line a person debugging it needs. Errors of the connection are
        logged by their message alone (their traceback is nats-py's, not the user's)."""
        if not isinstance(exc, errors.LameDuckModeEvent):
            self._state.note(exc)
        callback = self.options.error_callback
        if callback is None:
            log.warning("NATS error: %s", repr(exc) if user_code else exc, exc_info=exc if user_code else None)
            return
        self._callbacks.submit(callback, exc)

    # -- state ------------------------------------------------------------------------------------------
    @property
    def forked(self) -> bool:
        """True in a process forked after this client connected."""
        return self.fork_guard.inherited

    def check_usable(self) -> None:
        """Raise before anything is sent when the client is closed or was inherited through fork()."""
        if not self._alive[0]:  # the fork guard's mark, tested without a call: every ack and publish comes here
            raise errors.ForkedClientError()
        if self._closed:
            raise errors.ConnectionClosedError()

    @property
    def is_closed(self) -> bool:
        """Closed for good (by close() or after the reconnect attempts ran out)."""
        return self._closed

    @property
    def in_io_thread(self) -> bool:
        """Whether the calling thread is this client's IO thread, which must never wait for its own work."""
        return self._io.in_io_thread

    @property
    def is_connected(self) -> bool:
        """Connected right now; never in a forked child, where the connection is the parent's."""
        return not self._closed and not self.fork_guard.inherited and bool(self._nc.is_connected)

    @property
    def is_reconnecting(self) -> bool:
        """Not connected, and trying to (after a lost connection, or a first connect in the background)."""
        nc = self._nc
        return not self._closed and not self.fork_guard.inherited and not nc.is_closed and not nc.is_connected

    @property
    def is_draining(self) -> bool:
        """A drain() is under way (it ends closed); set by [`mark_draining`][jetstream_sync.Runtime.mark_draining]."""
        return self._draining and not self._closed

    def mark_draining(self) -> None:
        """Client.drain() has begun."""
        self._draining = True

    @property
    def last_error(self) -> errors.JetStreamError | None:
        """The last error that cost the connection or an attempt at one (a lost connection, a refused or failed
        attempt, a server's -ERR, an error reported to the error callback); None if there was none."""
        return self._state.last_error

    def wait_connected(self, timeout: float) -> bool:
        """Blocking: wait at most ``timeout`` seconds until connected; False if not by then. Raises
        ConnectionClosedError once closed (by close(), or when the reconnect attempts ran out)."""
        warn_if_in_event_loop("wait_connected")
        return self._state.wait_connected(timeout, lambda: self.is_connected)

    def force_reconnect(self) -> None:
        """Any thread: leave the server for the next one now (while reconnecting: end the delay now); returns
        at once."""
        self.check_usable()
        if not self.options.allow_reconnect:
            raise errors.InvalidArgumentError("allow_reconnect", "is False: force_reconnect() would close the client")
        self._io.post(lambda: self.spawn(self._nc.reconnect_now()))

    def rtt(self, timeout: float) -> float:
        """Blocking: the round trip to the server in seconds (a PING answered by a PONG)."""
        self.check_usable()
        return self._io.call(self._nc.round_trip(timeout), timeout + 1.0, "rtt")

    def server_info(self) -> dict[str, Any]:
        """A copy of the INFO of the server connected to."""
        return self._nc.server_info()

    @property
    def connected_url(self) -> str | None:
        """``scheme://host:port`` of the server connected to, without credentials; None while not connected."""
        return self._nc.connected_url_text()

    @property
    def server_urls(self) -> list[str]:
        """Every server in the reconnect pool (given and announced), without credentials."""
        return self._nc.server_urls()

    def stats(self) -> dict[str, int]:
        """The connection's counters (messages and bytes in and out, reconnects) and ``callbacks_dropped``
        (user callbacks dropped while the callbacks queue was full behind a stuck one)."""
        return {**self._nc.stats, "callbacks_dropped": self._callbacks.dropped}

    def new_token(self) -> str:
        """A unique token (NUID) for inboxes and generated names."""
        with self._nuid_lock:
            return self._nuid.next().decode()

    def new_inbox(self) -> str:
        """A unique inbox subject under this client's inbox prefix."""
        return f"{self.options.inbox_prefix}.{self.new_token()}"

    # -- sending ----------------------------------------------------------------------------------------
    @io_thread
    def send_now(self, command: Command) -> None:
        """IO thread: put a command straight into nats-py's write buffer (pull requests, resends)."""
        parts = [command] if isinstance(command, bytes) else list(command)
        self._nc.append_pending(parts, sum(len(part) for part in parts), 1)

    def respond(self, reply: str, data: bytes, headers: HeadersInput | None) -> None:
        """Any thread: publish a response to ``reply`` (``Msg.respond``), validated as a core publish."""
        self.check_usable()
        subject, header_block, payload = prepare_message(reply, data, headers, self.max_payload)
        self.send(encode_pub_parts(subject, b"", header_block, payload))

    def send_ack(self, subject: str, payload: bytes) -> None:
        """An acknowledgement (fire and forget), coalesced with other outbound traffic."""
        self.check_usable()
        self._outbound.put(encode_pub(subject.encode(), b"", None, payload))

    def request(self, encode: Callable[[bytes], Command], timeout: float, what: str) -> RawReply:
        """Send ``encode(reply_subject)`` and wait for the first reply; ``what`` names it in errors."""
        warn_if_in_event_loop(what)
        waiter = ReplyWaiter()
        reply = self._mux.register(waiter)
        deadline = time.monotonic() + timeout
        try:
            self._outbound.put_waiting(encode(reply), timeout)  # a stalled backlog spends part of the timeout
            return waiter.wait(max(0.0, deadline - time.monotonic()), what, timeout)
        except errors.NoRespondersError:
            # the mux knows only the reply inbox the 503 came on; the caller's ``what`` names the subject asked
            raise errors.NoRespondersError(f"no responders for the {what}: nobody subscribes to its subject") from None
        except errors.TimeoutError:
            if not self.is_connected and not self._closed:
                raise errors.TimeoutError(
                    f"{what} got no reply within {timeout:g}s: the connection is down and reconnecting"
                ) from None
            raise
        finally:
            self._mux.forget(reply)

    def send_waiting(self, command: Command, timeout: float) -> None:
        """Send a command whose answer the calling thread waits for next, by a route of its own (a pull of
        ``next()``): written on the calling thread when nothing is queued before it, as a request is."""
        self._outbound.put_waiting(command, timeout)

    def request_ack(self, subject: str, payload: bytes, timeout: float) -> None:
        """A double ack: returns once the server confirmed it."""
        self.check_usable()
        with self.health.ack_in_flight():
            self.request(lambda reply: encode_pub(subject.encode(), reply, None, payload), timeout, "ack_sync")

    @io_thread
    def request_async(self, encode: Callable[[bytes], Command], timeout: float, what: str) -> asyncio.Future[RawReply]:
        """IO thread: send ``encode(reply_subject)`` now; the future resolves with the reply or fails with
        TimeoutError (after ``timeout``), NoRespondersError, NotConnectedError (disconnect) or
        ConnectionClosedError. For engines that run on the loop (an ordered consumer recreating itself)."""
        future: asyncio.Future[RawReply] = asyncio.get_running_loop().create_future()
        self.send_now(encode(self._mux.register(FutureReply(future, what, timeout), timeout)))
        return future

    def expect_reply(self, handler: ReplyHandler, timeout: float | None) -> bytes:
        """A reply subject routed to ``handler`` on the IO thread; failed with TimeoutError after ``timeout``."""
        return self._mux.register(handler, timeout)

    def forget_reply(self, reply_subject: bytes) -> None:
        """Stop waiting for a reply on ``reply_subject`` (its request was not sent after all)."""
        self._mux.forget(reply_subject)

    def flush(self, timeout: float) -> None:
        """Wait until the server processed everything sent so far (PING/PONG)."""
        self._io.call(self._flush_async(timeout), timeout + 1.0, "flush")

    async def _flush_async(self, timeout: float) -> None:
        self._outbound.drain_now(everything=True)
        await self._nc.flush_or_raise(timeout)

    # -- subscriptions ----------------------------------------------------------------------------------
    def subscribe(self, subject: str, queue: str, handler: Handler, timeout: float) -> NatsSubscription:
        """Blocking: subscribe with ``handler`` called on the IO thread for each message."""
        check_control_line("queue" if queue else "subject", subject, queue)  # the SUB line, before it is sent
        return self._io.call(self._nc.fast_subscribe(subject, queue, handler), timeout, "subscribe")

    @io_thread
    async def subscribe_async(self, subject: str, handler: Handler, queue: str = "") -> NatsSubscription:
        """IO thread: the same, awaited by code already on the loop."""
        return await self._nc.fast_subscribe(subject, queue, handler)

    def unsubscribe(self, sub: NatsSubscription, timeout: float, *, deliver_in_flight: bool = False) -> None:
        """Blocking: stop the subscription. With ``deliver_in_flight`` its handler keeps receiving what the server
        sent before it processed the UNSUB, and this returns once the server confirmed it (a PING/PONG after the
        UNSUB: a drain); without, dispatching stops at once."""
        if deliver_in_flight:
            self._io.call(self._deliver_in_flight(sub), timeout, "unsubscribe")
        else:
            self._io.call(self._nc.fast_unsubscribe(sub), timeout, "unsubscribe")

    @io_thread
    async def _deliver_in_flight(self, sub: NatsSubscription) -> None:
        handler = self._nc.handler_of(sub)
        if handler is None:
            await self._nc.fast_unsubscribe(sub)
            return
        await self.retire(sub, handler)

    @io_thread
    def unsubscribe_soon(self, sub: NatsSubscription, label: str, late: Handler | None = None) -> None:
        """IO thread: stop dispatching now and send the UNSUB in the background (fire and forget).

        With ``late``, what the server sent before it saw the UNSUB goes to ``late`` instead of being dropped
        (a read that ends gives those messages back rather than leave them to their ack wait), until a
        PING/PONG after the UNSUB says nothing more can come (``NatsConnection.retire``).
        """
        if late is not None:
            self.retire(sub, late)
            return
        self._nc.drop_handler(sub)
        if not self._nc.is_closed:
            asyncio.get_running_loop().create_task(self._quiet_unsubscribe(sub, label))

    def send_unsub(self, sub: NatsSubscription, max_msgs: int = 0) -> None:
        """Any thread: queue the UNSUB of ``sub`` now, so it reaches the server before anything this thread sends
        next; the IO thread then ends the subscription as usual
        ([`unsubscribe_soon`][jetstream_sync.Runtime.unsubscribe_soon]: its own UNSUB finds nothing left to remove at
        the server).

        A read the user leaves ends this way: its pull must be gone before the user's next publish reaches the
        consumer, and a request the calling thread writes directly (``Outbound.put_waiting``) would pass an
        UNSUB that the IO thread has yet to write; it never passes what is queued before it. Raises as
        [`send`][jetstream_sync.Runtime.send] does (not connected with the reconnect buffer full, closed, forked). With
        ``max_msgs`` the server ends the subscription once it delivered that many messages in all (auto-unsubscribe),
        and this client keeps it until then.
        """
        self.send(self._nc.unsub_command(sub, max_msgs))

    @io_thread
    def retire(self, sub: NatsSubscription, late: Handler) -> asyncio.Task[None]:
        """IO thread: from now on what arrives for ``sub`` goes to ``late``; UNSUB it, and forget ``late`` once
        the server confirmed the UNSUB (or the connection cannot tell any more). The task ends then: a drain
        awaits it before it ends its reader. See ``NatsConnection.retire``."""
        self._nc.reroute(sub, late)
        return asyncio.get_running_loop().create_task(self._nc.retire(sub, late, self.default_timeout))

    async def _quiet_unsubscribe(self, sub: NatsSubscription, label: str) -> None:
        try:
            await self._nc.fast_unsubscribe(sub)
        except Exception:
            log.debug("unsubscribe of %s failed", label, exc_info=True)

    # -- crossing threads -------------------------------------------------------------------------------
    def call(self, coro: Coroutine[Any, Any, T], timeout: float, what: str) -> T:
        """Blocking: run ``coro`` on the IO loop and return its result (cancelled after ``timeout``)."""
        return self._io.call(coro, timeout, what)

    def post(self, fn: Callable[..., object], *args: Any) -> None:
        """Run ``fn(*args)`` on the IO thread soon; ConnectionClosedError once the loop is gone."""
        self._io.post(fn, *args)

    def post_if_open(self, fn: Callable[[], object]) -> None:
        """The same, doing nothing once the loop is gone (for work that a close makes moot)."""
        with contextlib.suppress(errors.ConnectionClosedError):
            self._io.post(fn)

    @io_thread
    def spawn(self, coro: Coroutine[Any, Any, object]) -> None:
        """IO thread: run ``coro`` as a task on the loop."""
        asyncio.get_running_loop().create_task(coro)

    @io_thread
    def call_later(self, delay: float, fn: Callable[[], object]) -> asyncio.TimerHandle:
        """IO thread: run ``fn`` on the IO thread after ``delay`` seconds."""
        return asyncio.get_running_loop().call_later(delay, fn)

    def new_buffer(self) -> MessageBuffer[Item]:
        """A hand-off buffer filled on the IO thread, whose readers wake once per burst of input."""
        return MessageBuffer(self._io.notify_later)

    def run_callback(self, fn: Callable[..., object], *args: Any) -> None:
        """Any thread (the IO thread too; it never waits): run the user callback ``fn(*args)`` on the client's
        callbacks thread, after the callbacks queued before it.

        The one way user code is called back (error handlers, connection callbacks). Not on the watchdog: a
        callback that blocks there would stop every heartbeat check of the client (``_callbacks.py``).
        """
        self._callbacks.submit(fn, *args)

    def watch(self, check: Callable[[float], object]) -> None:
        """Any thread: call the library function ``check(now)`` on the watchdog thread about every 0.25 s until
        [`unwatch`][jetstream_sync.Runtime.unwatch]. It must only look and post (never block, never call user code: that
        is [`run_callback`][jetstream_sync.Runtime.run_callback]'s); a function from outside this package is refused
        (``check_library_code``).

        One periodic tick serves every watcher, so a short-lived watcher (a fetch's heartbeat monitor) costs
        a set insertion, not a timer of its own.
        """
        check_library_code(check)
        with self._watchers_lock:
            self._watchers.add(check)
            if self._watch_timer is None:
                self._watch_timer = self._watchdog.call_later(_WATCH_INTERVAL, self._tick)

    def unwatch(self, check: Callable[[float], object]) -> None:
        """Remove a watcher added with ``watch`` (no effect if it is gone already)."""
        with self._watchers_lock:
            self._watchers.discard(check)

    def _tick(self) -> None:
        """Watchdog thread: run the watchers, then come back while there are any."""
        with self._watchers_lock:
            watchers = list(self._watchers)
        now = time.monotonic()
        for check in watchers:
            try:
                check(now)
            except Exception:
                log.exception("a watcher raised on the watchdog thread")
        with self._watchers_lock:
            self._watch_timer = (
                self._watchdog.call_later(_WATCH_INTERVAL, self._tick) if self._watchers and not self._closed else None
            )

    # -- what the client owns ---------------------------------------------------------------------------
    @io_thread
    def add_listener(self, listener: ConnectionListener) -> None:
        """IO thread: deliver connection events to ``listener`` until it is removed."""
        self._listeners.append(listener)

    def remove_listener(self, listener: ConnectionListener) -> None:
        """Remove a connection listener (no effect if it is gone already)."""
        with contextlib.suppress(ValueError):
            self._listeners.remove(listener)

    def track(self, closeable: Closeable) -> None:
        """Tell ``closeable`` when the client closes (held weakly)."""
        self._closeables.add(closeable)

    def untrack(self, closeable: Closeable) -> None:
        """Forget an object tracked for closing with the client."""
        self._closeables.discard(closeable)

    def tracked(self) -> list[Closeable]:
        """The objects closed with the client (a snapshot)."""
        return list(self._closeables)

    def track_thread(self, thread: threading.Thread) -> None:
        """A thread that runs user code for this client (a consume's handler); close() joins it."""
        self._threads.add(thread)

    # -- closing ----------------------------------------------------------------------------------------
    def close(self, timeout: float | timedelta = 5.0) -> None:
        """Any thread: close the connection. Threads blocked in calls raise ConnectionClosedError; our threads
        are joined (the callbacks thread for at most CLOSE_WAIT).

        ``timeout`` (seconds, >= 0) bounds each wait of the close; it is checked before anything changes, so a
        bad one leaves the client open and a later close() still works.
        """
        seconds = to_seconds("timeout", timeout, allow_zero=True)
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
            self._closing = True
        LIVE.discard(self)
        self._state.closed()  # threads in wait_connected() raise ConnectionClosedError now
        if self.forked:
            return  # the parent's threads do not exist here; the parent still owns the connection
        self._nc.calls.stop()
        closed = errors.ConnectionClosedError()
        for closeable in list(self._closeables):
            try:
                closeable.on_client_closed(closed)
            except Exception:
                log.exception("closing %r failed", closeable)
        # Every thread blocked in a call raises now, not once the connection has closed: those waiting behind a
        # stalled backlog, for a flush, or (at the start of _close_async) for a reply.
        self._outbound.close()
        self._io.wake_callers()
        if not self._io.closed and not self._io.in_io_thread:
            try:
                self._io.call(self._close_async(seconds), seconds, "close")
            except (errors.JetStreamError, OSError):
                log.debug("close: the connection did not close cleanly", exc_info=True)
            except Exception:  # a nats-py bug in its own close must not leave our threads running
                log.warning("close: nats-py failed while closing the connection", exc_info=True)
        self._shutdown_threads(seconds)
        self._nc.calls.join(seconds)  # after the IO thread: no attempt asks for a user function any more
        if not self._io.thread.is_alive():
            self._mux.fail_all(errors.ConnectionClosedError)  # whatever the IO thread did not get to
        self._join_threads(time.monotonic() + seconds)
        if self.options.closed_callback is not None:
            self._callbacks.submit(self.options.closed_callback, always=True)  # after every callback queued
        self._watchdog.stop(seconds)
        # A stuck user callback delays close() by CLOSE_WAIT at most: it is left on its daemon thread, which runs
        # the closed callback once it returns (_callbacks.py, "Closing").
        self._callbacks.stop(min(seconds, CLOSE_WAIT))

    async def _close_async(self, timeout: float) -> None:
        self._mux.fail_all(errors.ConnectionClosedError)
        self._outbound.drain_now(everything=True)
        if self._sweeper is not None:
            self._sweeper.cancel()
        try:
            await self._nc.close_promptly(timeout)
        finally:
            self._mux.fail_all(errors.ConnectionClosedError)

    def _join_threads(self, deadline: float) -> None:
        """Wait for consume handler threads to finish the message in hand; a handler that never returns is
        left behind (a daemon thread) with a warning rather than hanging close()."""
        current = threading.current_thread()
        for thread in list(self._threads):
            if thread is current:
                continue
            thread.join(max(0.0, deadline - time.monotonic()))
            if thread.is_alive():
                log.warning("close: the handler on %s is still running; its thread ends when it returns", thread.name)

    def _shutdown_threads(self, timeout: float) -> None:
        self._io.cancel_calls()
        self._io.stop(timeout)
        if self._io.thread.is_alive() and not self._io.in_io_thread:
            log.warning("the IO thread did not stop within %.1fs", timeout)
