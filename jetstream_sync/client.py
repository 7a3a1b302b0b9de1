"""connect() and Client: the connection's lifecycle and core NATS publish, request and subscribe."""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import logging
import os
import ssl
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Protocol

import attrs
import nats.errors
from nats.nuid import NUID

from . import errors
from ._connection import Command, NatsClient, Outbound, RequestMux, encode_pub, encode_pub_parts
from ._io import IOLoop
from ._validate import check_payload, check_queue, check_subject, check_timeout, to_seconds
from ._watchdog import Watchdog
from .headers import HeadersInput, encode_headers
from .message import Msg
from .subscription import Subscription

if TYPE_CHECKING:
    from .jetstream import JetStream

__all__ = ["Client", "ConnectOptions", "connect"]

log = logging.getLogger("jetstream_sync")

ErrorCallback = Callable[[BaseException], object]
EventCallback = Callable[[], object]

_DEFAULT_PENDING_SIZE = 2 * 1024 * 1024
_OUTBOUND_HIGH_WATER = 1024 * 1024


@lru_cache(maxsize=4096)
def _publish_subject(subject: str) -> bytes:
    return check_subject("subject", subject).encode()


def subject_bytes(subject: object, field: str = "subject") -> bytes:
    """Validate and encode a publish subject; cached, because hot loops publish to few subjects."""
    if type(subject) is not str:
        check_subject(field, subject)  # raises the typed error
    try:
        return _publish_subject(subject)
    except errors.InvalidArgumentError as exc:
        raise errors.InvalidArgumentError(field, str(exc).partition(": ")[2]) from None


@attrs.frozen(kw_only=True)
class ConnectOptions:
    """Everything connect() accepts. Secrets are kept out of repr() and logs."""

    servers: tuple[str, ...] = attrs.field(repr=lambda servers: repr(tuple(_redact_url(url) for url in servers)))
    name: str | None = None
    user: str | None = None
    password: str | None = attrs.field(default=None, repr=False)
    token: str | None = attrs.field(default=None, repr=False)
    credentials: str | None = None
    nkey_seed: str | None = attrs.field(default=None, repr=False)
    nkey_seed_file: str | None = None
    tls: ssl.SSLContext | None = None
    tls_hostname: str | None = None
    connect_timeout: float = 2.0
    allow_reconnect: bool = True
    max_reconnect_attempts: int = 60
    reconnect_wait: float = 2.0
    ping_interval: float = 120.0
    max_outstanding_pings: int = 2
    pending_size: int = _DEFAULT_PENDING_SIZE
    inbox_prefix: str = "_INBOX"
    no_echo: bool = False
    default_timeout: float = 5.0
    error_callback: ErrorCallback | None = None
    disconnected_callback: EventCallback | None = None
    reconnected_callback: EventCallback | None = None
    closed_callback: EventCallback | None = None


class _Closeable(Protocol):
    def _client_closed(self, exc: BaseException) -> None: ...


class _ConnectionListener(Protocol):
    """IO-thread listeners of connection events (pull consumers re-pull on reconnect)."""

    def on_disconnected(self) -> None: ...

    def on_reconnected(self) -> None: ...


_live_clients: weakref.WeakSet[Client] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for client in list(_live_clients):
        client._forked = True


def _close_all_at_exit() -> None:
    for client in list(_live_clients):
        try:
            client.close(timeout=2.0)
        except Exception:
            log.debug("closing a client at exit failed", exc_info=True)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
atexit.register(_close_all_at_exit)


# -ERR texts after which the same credentials will not work: retrying cannot help.
_AUTH_FAILURES = ("authorization violation", "authentication expired", "authentication revoked")


def _server_text(exc: BaseException) -> str:
    """The server's words from a nats-py error: ``nats: 'Authorization Violation'`` -> ``Authorization Violation``."""
    text = str(exc).strip()
    text = text.removeprefix("nats: ").strip()
    return text.strip("'").strip() or type(exc).__name__


def _translate_error(exc: BaseException) -> BaseException:
    """nats-py's errors as ours, so users catch one hierarchy."""
    text = str(exc)
    lowered = text.lower()
    if isinstance(exc, nats.errors.AuthorizationError) or any(failure in lowered for failure in _AUTH_FAILURES):
        return errors.AuthorizationError(
            f"the server rejected the credentials ({_server_text(exc)}); "
            "fix user/password, token, nkey or credentials: retrying will not help"
        )
    if "permissions violation" in lowered:
        return errors.PermissionViolationError(f"the server refused: {_server_text(exc)}")
    if isinstance(exc, nats.errors.SlowConsumerError):
        return errors.SlowConsumerError(text)
    return exc


def _is_tls_failure(exc: BaseException) -> bool:
    """A TLS handshake or certificate failure (ssl.SSLCertVerificationError is also an OSError)."""
    return isinstance(exc, ssl.SSLError) or "ssl" in type(exc).__name__.lower()


def _redact_url(url: str) -> str:
    """A server URL without the user:password@ or token@ part, for messages and logs."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        scheme, rest = "", url
    userinfo, at, hostport = rest.rpartition("@")
    if not at:
        return url
    return f"{scheme}{sep}***@{hostport}" if userinfo else url


def _nkey_field(opts: ConnectOptions) -> str:
    """The connect() argument that made nats-py use nkeys."""
    if opts.credentials is not None:
        return "credentials"
    return "nkey_seed" if opts.nkey_seed is not None else "nkey_seed_file"


_TLS_HINT = (
    "check the tls= SSLContext: the CA it trusts (load_verify_locations), its client certificate if the server "
    "verifies clients (load_cert_chain), and tls_hostname against the server's certificate"
)


def _connect_failure(
    seen: Sequence[BaseException], raised: BaseException, servers: Sequence[str], tls: bool
) -> tuple[errors.JetStreamError, BaseException]:
    """What connect() raises, and its cause, from every error nats-py reported while it tried the servers.

    nats-py ends a failed first connect with a bare NoServersError; the reason is in what it reported before.
    Rejected credentials win (retrying cannot help), then a TLS failure, then the last error seen. ``tls``:
    the server asked for TLS, so a connection it dropped was most likely refused in the handshake (with TLS 1.3
    a server that wants a client certificate may close the connection before the client sees its alert).
    """
    where = [_redact_url(url) for url in servers]
    for exc in seen:
        translated = _translate_error(exc)
        if isinstance(translated, errors.AuthorizationError):
            return translated, exc
    for exc in seen:
        if _is_tls_failure(exc):
            return errors.NoServersError(f"TLS handshake with {where} failed: {exc}; {_TLS_HINT}"), exc
    cause = seen[-1] if seen else raised
    if tls and isinstance(cause, ConnectionError) and not isinstance(cause, ConnectionRefusedError):
        message = f"TLS handshake with {where} failed: the server closed the connection ({cause}); {_TLS_HINT}"
        return errors.NoServersError(message), cause
    message = f"could not connect to {where}: {cause or type(cause).__name__}; check the URL and that nats-server runs"
    return errors.NoServersError(message), cause


class _ReplyWaiter:
    """One synchronous request's reply: a pre-acquired lock is the cheapest one-shot wake-up between threads
    (a concurrent.futures.Future costs a Condition per call, and js.publish pays it on every message)."""

    __slots__ = ("_lock", "client", "done", "error", "msg")

    def __init__(self, client: Client) -> None:
        self.client = client
        self.msg: Msg | None = None
        self.error: BaseException | None = None
        self.done = False
        self._lock = threading.Lock()
        self._lock.acquire()

    def resolve(self, subject: bytes, data: bytes, headers: bytes | None) -> None:
        if not self.done:
            self.msg = Msg(subject.decode(), "", data, headers, self.client)
            self.done = True
            self._lock.release()

    def fail(self, exc: BaseException) -> None:
        if not self.done:
            self.error = exc
            self.done = True
            self._lock.release()

    def wait(self, timeout: float, what: str) -> Msg:
        if not self._lock.acquire(timeout=timeout):
            raise errors.TimeoutError(f"{what} did not complete within {timeout:g}s")
        if self.error is not None:
            raise self.error
        assert self.msg is not None
        return self.msg


class Client:
    """A NATS connection usable from any number of threads. Create it with :func:`connect`."""

    def __init__(self, options: ConnectOptions) -> None:
        self.options = options
        self.default_timeout = options.default_timeout
        self._forked = False
        self._closed = False
        self._closing = False
        self._close_lock = threading.Lock()
        self._closeables: weakref.WeakSet[Any] = weakref.WeakSet()
        self._listeners: list[_ConnectionListener] = []
        self._dispatchers: weakref.WeakSet[threading.Thread] = weakref.WeakSet()
        self._io = IOLoop()
        self._watchdog = Watchdog()
        self._nc = NatsClient()
        self._mux = RequestMux(options.inbox_prefix)
        self._outbound = Outbound(
            self._io, self._nc, high_water=_OUTBOUND_HIGH_WATER, reconnect_buffer=options.pending_size
        )
        self._sweeper: asyncio.Task[None] | None = None
        self._nuid = NUID()
        self._nuid_lock = threading.Lock()
        self.reconnects = 0

    def __repr__(self) -> str:
        state = "closed" if self._closed else ("connected" if self.is_connected else "disconnected")
        servers = [_redact_url(url) for url in self.options.servers]
        return f"<jetstream_sync.Client {self.options.name or ''} {state} servers={servers}>"

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- connecting -------------------------------------------------------------------------------------
    def _connect(self) -> None:
        opts = self.options
        budget = opts.connect_timeout * max(1, len(opts.servers)) * 2 + 5.0
        try:
            self._io.call(self._connect_async(), budget, "connect")
        except BaseException:
            self._closed = True
            self._shutdown_threads(timeout=2.0)
            self._watchdog.stop(timeout=2.0)
            raise
        _live_clients.add(self)

    async def _connect_async(self) -> None:
        opts = self.options
        kwargs: dict[str, Any] = {
            "servers": list(opts.servers),
            "name": opts.name,
            "connect_timeout": opts.connect_timeout,
            "allow_reconnect": opts.allow_reconnect,
            # The first connect fails fast, as nats.go's does: each server is tried at most twice, without a
            # wait in between; the reconnect policy the user asked for applies once connected (set below).
            "max_reconnect_attempts": 1,
            "reconnect_time_wait": 0,
            "ping_interval": opts.ping_interval,
            "max_outstanding_pings": opts.max_outstanding_pings,
            "pending_size": opts.pending_size,
            "inbox_prefix": opts.inbox_prefix,
            "no_echo": opts.no_echo,
            "error_cb": self._on_error,
            "disconnected_cb": self._on_disconnected,
            "reconnected_cb": self._on_reconnected,
            "closed_cb": self._on_closed,
        }
        optional = {
            "user": opts.user,
            "password": opts.password,
            "token": opts.token,
            "user_credentials": opts.credentials,
            "nkeys_seed": opts.nkey_seed_file,
            "nkeys_seed_str": opts.nkey_seed,
            "tls": opts.tls,
            "tls_hostname": opts.tls_hostname,
        }
        kwargs.update({k: v for k, v in optional.items() if v is not None})
        self._connect_errors: list[BaseException] = []  # what nats-py reported while trying; see _on_error
        try:
            await self._nc.connect(**kwargs)
        except ImportError as exc:  # nats-py imports nkeys only when nkey or credentials auth is asked for
            field = _nkey_field(opts)
            raise errors.InvalidArgumentError(field, f"needs the nkeys package: pip install nkeys ({exc})") from exc
        except Exception as exc:
            if type(exc).__module__.partition(".")[0] == "nkeys":  # a malformed seed; the text never holds it
                raise errors.InvalidArgumentError(_nkey_field(opts), f"is not a usable nkey seed: {exc}") from exc
            tls = bool(self._nc._server_info.get("tls_required"))
            failure, cause = _connect_failure(self._connect_errors, exc, opts.servers, tls)
            raise failure from cause
        self._nc.options["max_reconnect_attempts"] = opts.max_reconnect_attempts
        self._nc.options["reconnect_time_wait"] = opts.reconnect_wait
        await self._nc.fast_subscribe(self._mux.subject, "", self._mux.handle)
        self._sweeper = asyncio.get_running_loop().create_task(self._sweep_expired())

    async def _sweep_expired(self) -> None:
        """Expire asynchronous publishes whose ack did not come in time."""
        while True:
            await asyncio.sleep(0.05)
            self._mux.expire(time.monotonic())

    # -- nats-py callbacks (IO thread) ------------------------------------------------------------------
    async def _on_error(self, exc: Exception) -> None:
        self._nc.drop_failed_tls_transport()
        if self._sweeper is None:
            log.debug("while connecting: %s", exc)  # the failure is raised from connect()
            self._connect_errors.append(exc)
            return
        self._report_error(_translate_error(exc))

    async def _on_disconnected(self) -> None:
        if self._closing:
            return
        log.info("disconnected from NATS; reconnecting")
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
            self._watchdog.call_soon(self.options.disconnected_callback)

    async def _on_reconnected(self) -> None:
        self.reconnects += 1
        log.info("reconnected to %s", self.connected_url)
        for listener in list(self._listeners):
            try:
                listener.on_reconnected()
            except Exception:
                log.exception("reconnect listener failed")
        if self.options.reconnected_callback is not None:
            self._watchdog.call_soon(self.options.reconnected_callback)

    async def _on_closed(self) -> None:
        if self._closing:
            return
        log.warning("the NATS connection closed (reconnect attempts exhausted); closing the client")
        self._watchdog.call_soon(self.close)

    def _report_error(self, exc: BaseException) -> None:
        """Any thread: hand an asynchronous error to the user's error callback on the watchdog thread."""
        callback = self.options.error_callback
        if callback is None:
            log.warning("NATS error: %s", exc)
            return
        self._watchdog.call_soon(callback, exc)

    # -- state ------------------------------------------------------------------------------------------
    def _check_usable(self) -> None:
        if self._forked:
            raise errors.ForkedClientError()
        if self._closed:
            raise errors.ConnectionClosedError()

    def _forget(self, closeable: object) -> None:
        self._closeables.discard(closeable)

    @property
    def is_connected(self) -> bool:
        return not self._closed and bool(self._nc.is_connected)

    @property
    def is_closed(self) -> bool:
        return self._closed

    @property
    def server_info(self) -> dict[str, Any]:
        """The INFO the server sent (version, max_payload, jetstream, ...)."""
        return dict(self._nc._server_info)

    @property
    def max_payload(self) -> int:
        return int(self._nc.max_payload)

    @property
    def connected_url(self) -> str | None:
        url = self._nc.connected_url
        return None if url is None else f"{url.scheme}://{url.hostname}:{url.port}"

    @property
    def stats(self) -> dict[str, int]:
        return dict(self._nc.stats)

    def new_inbox(self) -> str:
        """A unique inbox subject under this client's inbox prefix."""
        with self._nuid_lock:
            token = self._nuid.next().decode()
        return f"{self.options.inbox_prefix}.{token}"

    # -- core NATS --------------------------------------------------------------------------------------
    def publish(
        self, subject: str, data: bytes = b"", headers: HeadersInput | None = None, reply: str | None = None
    ) -> None:
        """Publish a core NATS message. Coalesced with other publishes; ``flush()`` waits for the server."""
        self._check_usable()
        reply_b = subject_bytes(reply, "reply") if reply else b""
        subj, hdr, payload = self.prepare_message(subject, data, headers)
        self._outbound.put(encode_pub_parts(subj, reply_b, hdr, payload))

    def post_publish(self, subject: str, payload: bytes) -> None:
        """Internal: a publish to a known-good subject (acks)."""
        self._check_usable()
        self._outbound.put(encode_pub(subject.encode(), b"", None, payload))

    def request(
        self,
        subject: str,
        data: bytes = b"",
        timeout: float | None = None,
        headers: HeadersInput | None = None,
    ) -> Msg:
        """Send a request and wait for the first reply."""
        self._check_usable()
        seconds = check_timeout(timeout, self.default_timeout)
        return self._request(self.prepare_publish(subject, data, headers), seconds, f"request on {subject!r}")

    def prepare_publish(
        self, subject: str, data: bytes, headers: HeadersInput | None, extra: Sequence[tuple[bytes, bytes]] = ()
    ) -> Callable[[bytes], Command]:
        """Validate everything now, before anything is sent; encode once the reply subject is known."""
        subj, hdr, payload = self.prepare_message(subject, data, headers, extra)
        return lambda reply: encode_pub_parts(subj, reply, hdr, payload)

    def prepare_message(
        self, subject: str, data: bytes, headers: HeadersInput | None, extra: Sequence[tuple[bytes, bytes]] = ()
    ) -> tuple[bytes, bytes | None, bytes]:
        """The validated (subject, header block, payload) of a message; raises before anything is sent."""
        subj = subject_bytes(subject)
        payload = data if type(data) is bytes else check_payload("data", data)
        hdr = encode_headers(headers, extra) if (headers or extra) else None
        size = len(payload) + (len(hdr) if hdr else 0)
        limit = self._nc._max_payload
        if size > limit:
            raise errors.MaxPayloadError(
                "data", f"message of {size} bytes exceeds the server's max_payload of {limit} bytes"
            )
        return subj, hdr, payload

    def _request(self, encode: Callable[[bytes], Command], timeout: float, what: str) -> Msg:
        waiter = _ReplyWaiter(self)
        reply = self._mux.register(waiter)
        try:
            self._outbound.put(encode(reply))
            return waiter.wait(timeout, what)
        except errors.TimeoutError:
            if not self.is_connected and not self._closed:
                raise errors.TimeoutError(
                    f"{what} got no reply within {timeout:g}s: the connection is down and reconnecting"
                ) from None
            raise
        finally:
            self._mux.forget(reply)

    def ack_request(self, subject: str, payload: bytes, timeout: float) -> None:
        """Internal: a double ack; the server answers once the ack is recorded."""
        self._check_usable()
        self._request(lambda reply: encode_pub(subject.encode(), reply, None, payload), timeout, "ack_sync")

    def subscribe(self, subject: str, queue: str | None = None, *, max_pending: int = 65536) -> Subscription:
        """Subscribe; read with ``next_msg(timeout)`` or by iterating. Wildcards are allowed."""
        self._check_usable()
        check_subject("subject", subject, wildcards=True)
        if queue is not None:
            check_queue("queue", queue)
        if isinstance(max_pending, bool) or not isinstance(max_pending, int) or max_pending < 1:
            raise errors.InvalidArgumentError("max_pending", f"must be a positive int, got {max_pending!r}")
        sub = Subscription(self, subject, queue, max_pending)
        sub._nats_sub = self._io.call(
            self._nc.fast_subscribe(subject, queue or "", sub._on_message), self.default_timeout, "subscribe"
        )
        self._closeables.add(sub)
        return sub

    def flush(self, timeout: float | None = None) -> None:
        """Wait until the server has processed everything published so far (PING/PONG)."""
        self._check_usable()
        seconds = check_timeout(timeout, self.default_timeout)
        self._io.call(self._flush_async(seconds), seconds + 1.0, "flush")

    async def _flush_async(self, timeout: float) -> None:
        self._outbound._drain()
        try:
            await self._nc.flush(timeout)  # type: ignore[arg-type]  # nats-py annotates int, takes float
        except nats.errors.FlushTimeoutError:
            raise errors.TimeoutError(f"flush: no PONG from the server within {timeout:g}s") from None
        except nats.errors.ConnectionClosedError:
            raise errors.ConnectionClosedError() from None

    def jetstream(
        self,
        *,
        timeout: float | None = None,
        domain: str | None = None,
        api_prefix: str | None = None,
        publish_retry: Any = None,
    ) -> JetStream:
        """A JetStream context; ``domain`` or ``api_prefix`` select another JetStream API."""
        from .jetstream import JetStream

        self._check_usable()
        return JetStream(self, timeout=timeout, domain=domain, api_prefix=api_prefix, publish_retry=publish_retry)

    def add_listener(self, listener: _ConnectionListener) -> None:
        """Internal: IO-thread connection events for pull consumers."""
        self._listeners.append(listener)

    def remove_listener(self, listener: _ConnectionListener) -> None:
        with contextlib.suppress(ValueError):
            self._listeners.remove(listener)

    def register_closeable(self, closeable: _Closeable) -> None:
        self._closeables.add(closeable)

    def register_dispatcher(self, thread: threading.Thread) -> None:
        """Internal: a consume's handler thread, joined by close()."""
        self._dispatchers.add(thread)

    # -- closing ----------------------------------------------------------------------------------------
    def drain(self, timeout: float | None = None) -> None:
        """Stop receiving, let readers take what is buffered, flush what was published, then close."""
        self._check_usable()
        seconds = check_timeout(timeout, 30.0)
        deadline = time.monotonic() + seconds
        subs = [c for c in list(self._closeables) if isinstance(c, Subscription)]
        try:
            for sub in subs:
                self._io.call(self._nc.fast_unsubscribe(sub._nats_sub), max(0.1, deadline - time.monotonic()), "drain")
            self._io.call(self._flush_async(max(0.1, deadline - time.monotonic())), seconds, "drain")
        except errors.JetStreamError:
            log.debug("drain: unsubscribe or flush failed", exc_info=True)
        for sub in subs:
            sub._drained()
        while any(sub.pending for sub in subs) and time.monotonic() < deadline:
            time.sleep(0.01)
        left = sum(sub.pending for sub in subs)
        self.close(timeout=max(0.5, deadline - time.monotonic()))
        if left:
            raise errors.TimeoutError(
                f"drain: {left} buffered messages were not read within {seconds:g}s and were dropped"
            )

    def close(self, timeout: float = 5.0) -> None:
        """Close the connection. Threads blocked in calls raise ConnectionClosedError; our threads are joined."""
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
            self._closing = True
        _live_clients.discard(self)
        if self._forked:
            return  # the parent's threads do not exist here; the parent still owns the connection
        closed = errors.ConnectionClosedError()
        for closeable in list(self._closeables):
            try:
                closeable._client_closed(closed)
            except Exception:
                log.exception("closing %r failed", closeable)
        if not self._io.closed and not self._io.in_io_thread:
            try:
                self._io.call(self._close_async(), timeout, "close")
            except (errors.JetStreamError, OSError):
                log.debug("close: the connection did not close cleanly", exc_info=True)
        self._shutdown_threads(timeout)
        if not self._io.thread.is_alive():
            self._mux.fail_all(errors.ConnectionClosedError)  # whatever the IO thread did not get to
        self._join_dispatchers(time.monotonic() + timeout)
        if self.options.closed_callback is not None:
            self._watchdog.call_soon(self.options.closed_callback)
        self._watchdog.stop(timeout)

    async def _close_async(self) -> None:
        self._outbound._drain()
        if self._sweeper is not None:
            self._sweeper.cancel()
        try:
            await self._nc.close()
        finally:
            self._mux.fail_all(errors.ConnectionClosedError)

    def _join_dispatchers(self, deadline: float) -> None:
        """Wait for consume handler threads to finish the message in hand; a handler that never returns is
        left behind (a daemon thread) with a warning rather than hanging close()."""
        current = threading.current_thread()
        for thread in list(self._dispatchers):
            if thread is current:
                continue
            thread.join(max(0.0, deadline - time.monotonic()))
            if thread.is_alive():
                log.warning("close: the handler on %s is still running; its thread ends when it returns", thread.name)

    def _shutdown_threads(self, timeout: float) -> None:
        self._io.cancel_calls()
        self._outbound.wake_all()
        self._io.stop(timeout)
        if self._io.thread.is_alive() and not self._io.in_io_thread:
            log.warning("the IO thread did not stop within %.1fs", timeout)


def connect(
    servers: str | Sequence[str] = "nats://127.0.0.1:4222",
    *,
    name: str | None = None,
    user: str | None = None,
    password: str | None = None,
    token: str | None = None,
    credentials: str | os.PathLike[str] | None = None,
    nkey_seed: str | None = None,
    nkey_seed_file: str | os.PathLike[str] | None = None,
    tls: ssl.SSLContext | None = None,
    tls_hostname: str | None = None,
    connect_timeout: float = 2.0,
    allow_reconnect: bool = True,
    max_reconnect_attempts: int = 60,
    reconnect_wait: float = 2.0,
    ping_interval: float = 120.0,
    max_outstanding_pings: int = 2,
    pending_size: int = _DEFAULT_PENDING_SIZE,
    inbox_prefix: str = "_INBOX",
    no_echo: bool = False,
    timeout: float = 5.0,
    error_callback: ErrorCallback | None = None,
    disconnected_callback: EventCallback | None = None,
    reconnected_callback: EventCallback | None = None,
    closed_callback: EventCallback | None = None,
) -> Client:
    """Connect to NATS and return a thread-safe :class:`Client` (a context manager).

    ``timeout`` is the default for blocking calls that are not given one. Callbacks run on the client's
    watchdog thread, never on the IO thread. ``max_reconnect_attempts=-1`` reconnects forever.
    """
    server_list = (servers,) if isinstance(servers, str) else tuple(servers)
    if not server_list or not all(isinstance(s, str) and s.strip() for s in server_list):
        raise errors.InvalidArgumentError("servers", f"must be a URL or a list of URLs, got {servers!r}")
    if tls is not None and not isinstance(tls, ssl.SSLContext):
        raise errors.InvalidTypeError("tls", f"must be an ssl.SSLContext, got {type(tls).__name__}")
    for field, value in (("credentials", credentials), ("nkey_seed_file", nkey_seed_file)):
        if value is not None and not os.path.isfile(value):
            raise errors.InvalidArgumentError(field, f"file {os.fspath(value)!r} does not exist")
    if user is None and password is not None:
        raise errors.InvalidArgumentError("password", "given without user")
    for field, callback in (
        ("error_callback", error_callback),
        ("disconnected_callback", disconnected_callback),
        ("reconnected_callback", reconnected_callback),
        ("closed_callback", closed_callback),
    ):
        if callback is not None and not callable(callback):
            raise errors.InvalidTypeError(field, "must be callable")
        if callback is not None and asyncio.iscoroutinefunction(callback):
            raise errors.InvalidTypeError(field, "must be a plain function; jetstream_sync runs no user coroutines")
    if isinstance(max_reconnect_attempts, bool) or not isinstance(max_reconnect_attempts, int):
        raise errors.InvalidTypeError("max_reconnect_attempts", "must be an int (-1 for forever)")
    if isinstance(pending_size, bool) or not isinstance(pending_size, int) or pending_size < 0:
        raise errors.InvalidArgumentError("pending_size", "must be an int >= 0")
    options = ConnectOptions(
        servers=server_list,
        name=name,
        user=user,
        password=password,
        token=token,
        credentials=os.fspath(credentials) if credentials is not None else None,
        nkey_seed=nkey_seed,
        nkey_seed_file=os.fspath(nkey_seed_file) if nkey_seed_file is not None else None,
        tls=tls,
        tls_hostname=tls_hostname,
        connect_timeout=to_seconds("connect_timeout", connect_timeout),
        allow_reconnect=bool(allow_reconnect),
        max_reconnect_attempts=max_reconnect_attempts,
        reconnect_wait=to_seconds("reconnect_wait", reconnect_wait, allow_zero=True),
        ping_interval=to_seconds("ping_interval", ping_interval),
        max_outstanding_pings=max_outstanding_pings,
        pending_size=pending_size,
        inbox_prefix=check_subject("inbox_prefix", inbox_prefix),
        no_echo=bool(no_echo),
        default_timeout=to_seconds("timeout", timeout),
        error_callback=error_callback,
        disconnected_callback=disconnected_callback,
        reconnected_callback=reconnected_callback,
        closed_callback=closed_callback,
    )
    client = Client(options)
    client._connect()
    return client
