"""connect() and Client: the public facade of a connection, with core NATS publish, request and subscribe.

Client validates what the user passes and delegates to the runtime port (``client.runtime``), which owns the
threads and the nats-py connection; see docs/ARCHITECTURE.md, "The runtime port".
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Hashable, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from . import errors
from ._environment import check_environment
from ._protocol import reply_encoder
from ._runtime import ProcessLocal, Runtime, encode_pub_parts, redact_url
from ._validate import (
    MAX_SUBJECT_BYTES,
    check_callable,
    check_control_line,
    check_int,
    check_queue,
    check_subject,
    check_timeout,
    options_from,
    prepare_message,
    subject_bytes,
    to_seconds,
)
from .codecs._payload import Codec, payload_of
from .headers import HeadersInput
from .health import ClientStats, StatsReporter, take_snapshot
from .message import Msg
from .options import DEFAULT_URL, ConnectOptions
from .replies import Replies
from .subscription import DEFAULT_MAX_PENDING_BYTES, Subscription

if TYPE_CHECKING:
    import tenacity

    from .jetstream import JetStream

__all__ = ["Client", "connect"]

log = logging.getLogger("jetstream_sync")


class Client(ProcessLocal):
    """A NATS connection usable from any number of threads: ``Client(ConnectOptions(...))`` or
    [`connect`][jetstream_sync.connect].

    Constructing it connects (NoServersError, AuthorizationError or InvalidArgumentError when it cannot;
    ThreadsDisabledError under uWSGI without Python threads, before anything starts). With
    ``retry_on_failed_connect=True`` a first connect that finds no server returns anyway (or after
    ``first_connect_wait``) and the client connects in the background: see
    [`wait_connected`][jetstream_sync.Client.wait_connected]; use it as a context manager, or call
    [`close`][jetstream_sync.Client.close]. Its threads: "jetstream-sync-io" (the connection), "jetstream-sync-watchdog"
    (heartbeat checks and other timers of the library) and, from the first callback on, "jetstream-sync-callbacks" (your
    callbacks and error handlers, in order); each consume has its own.
    """

    def __init__(self, options: ConnectOptions) -> None:
        if not isinstance(options, ConnectOptions):
            raise errors.InvalidTypeError("options", f"must be a ConnectOptions, got {type(options).__name__}")
        self.options = options
        check_environment()  # before any thread starts: uWSGI without threads is refused, gevent/eventlet noted
        self._runtime = Runtime(options)
        self._runtime.connect()
        if options.stats_callback is not None:
            self._stats_reporter = StatsReporter(self._runtime, options.stats_callback, options.stats_interval)

    def __repr__(self) -> str:
        state = "closed" if self.is_closed else ("connected" if self.is_connected else "reconnecting")
        servers = [redact_url(url) for url in self.options.servers]
        return f"<jetstream_sync.Client {self.options.name or ''} {state} servers={servers}>"

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- state ------------------------------------------------------------------------------------------
    @property
    def runtime(self) -> Runtime:
        """The runtime port this client is a facade over: the thread boundary the JetStream layer and the
        integrations build on (docs/ARCHITECTURE.md, "The runtime port"). Application code does not need it."""
        return self._runtime

    @property
    def default_timeout(self) -> float:
        """The timeout of blocking calls that are not given one (connect()'s ``timeout``)."""
        return self.options.timeout

    @property
    def is_connected(self) -> bool:
        """Connected right now (False while reconnecting and once closed)."""
        return self._runtime.is_connected

    @property
    def is_closed(self) -> bool:
        """Closed for good: by [`close`][jetstream_sync.Client.close], [`drain`][jetstream_sync.Client.drain], or after
        the reconnect attempts ran out."""
        return self._runtime.is_closed

    @property
    def is_reconnecting(self) -> bool:
        """Not connected and trying to: after a lost connection, or while a first connect made with
        ``retry_on_failed_connect`` goes on in the background. Publishes are buffered meanwhile (up to
        ``pending_size``); requests and flushes wait at most their timeout."""
        return self._runtime.is_reconnecting

    @property
    def is_draining(self) -> bool:
        """[`drain`][jetstream_sync.Client.drain] is under way (the client is closed once it ends)."""
        return self._runtime.is_draining

    @property
    def last_error(self) -> errors.JetStreamError | None:
        """The last error that cost the connection or an attempt at one (a lost connection, a refused or failed
        attempt, an error reported to ``error_callback``), or None. It is not cleared by a reconnect: read
        [`is_connected`][jetstream_sync.Client.is_connected] for the health of the connection, this for why it was lost
        (nats.go's LastError)."""
        return self._runtime.last_error

    def wait_connected(self, timeout: float | timedelta | None = None) -> None:
        """Block until connected, at most ``timeout`` seconds (the client's default timeout when None).

        For a client made with ``retry_on_failed_connect=True`` that connects in the background (and after any
        lost connection). Returns at once when connected; raises TimeoutError when the time is up (the client
        goes on trying) and ConnectionClosedError when it closed (by [`close`][jetstream_sync.Client.close], or because
        the reconnect attempts ran out: [`last_error`][jetstream_sync.Client.last_error] says why).
        """
        seconds = check_timeout(timeout, self.default_timeout)
        if not self._runtime.wait_connected(seconds):
            reason = f" (last error: {self.last_error})" if self.last_error else ""
            raise errors.TimeoutError(f"not connected within {seconds:g}s; the client goes on trying{reason}")

    def force_reconnect(self) -> None:
        """Drop the connection and connect again now, to the next server in the pool when there is another
        (nats.go's ForceReconnect, nats.js's reconnect()); while reconnecting, try now instead of after the
        reconnect delay. Returns at once; what was published before goes out first. Subscriptions are replayed
        and pull consumers re-pull as after any reconnect. Raises ConnectionClosedError once closed, and
        InvalidArgumentError with ``allow_reconnect=False``."""
        self._runtime.force_reconnect()

    def rtt(self, timeout: float | timedelta | None = None) -> float:
        """The round-trip time to the server in seconds: a PING answered by a PONG (nats.go's RTT, nats.js's
        rtt()). Raises TimeoutError when no PONG comes within ``timeout`` and NotConnectedError when not
        connected."""
        return self._runtime.rtt(check_timeout(timeout, self.default_timeout))

    @property
    def reconnects(self) -> int:
        """How many times the connection was re-established."""
        return self._runtime.reconnects

    @property
    def server_info(self) -> dict[str, Any]:
        """The INFO the server sent (version, max_payload, jetstream, ...)."""
        return self._runtime.server_info()

    @property
    def max_payload(self) -> int:
        """The largest message the server takes (its INFO ``max_payload``), headers included."""
        return self._runtime.max_payload

    @property
    def connected_url(self) -> str | None:
        """``scheme://host:port`` of the server connected to now (no credentials), or None while not connected."""
        return self._runtime.connected_url

    @property
    def servers(self) -> list[str]:
        """Every server this client may reconnect to: the URLs given to ``connect`` and those a cluster
        announced since, as ``nats://host:port`` (no credentials). A client given one node of a cluster learns
        the others from it, and reconnects to any of them."""
        return self._runtime.server_urls

    @property
    def stats(self) -> dict[str, int]:
        """Counters of this connection: messages and bytes in and out, reconnects, and ``callbacks_dropped``:
        callbacks (error, connection, consume error handlers) dropped because 10,000 were waiting behind one
        that did not return (a warning is logged when that starts)."""
        return self._runtime.stats()

    def stats_snapshot(self) -> ClientStats:
        """The client's health now, as ``stats_callback`` receives it every ``stats_interval``: messages and bytes
        in and out, acks awaiting the server, reconnects, the last round trip measured, each running consume's
        buffer fill. Any thread; never waits. It sends a PING whose PONG the next snapshot reports as ``rtt`` (the
        first has None). See [`ClientStats`][jetstream_sync.ClientStats]. ForkedClientError in a forked child."""
        self._runtime.fork_guard.check()
        stats = take_snapshot(self._runtime)
        self._runtime.health.measure_rtt(self.default_timeout)
        return stats

    def new_inbox(self) -> str:
        """A unique inbox subject under this client's inbox prefix."""
        return self._runtime.new_inbox()

    # -- core NATS --------------------------------------------------------------------------------------
    def publish(
        self,
        subject: str,
        data: object = b"",
        headers: HeadersInput | None = None,
        reply: str | None = None,
        *,
        codec: Codec[Any] | None = None,
    ) -> None:
        """Publish a core NATS message. Coalesced with other publishes; ``flush()`` waits for the server.
        With ``codec`` (see `jetstream_sync.codecs`) ``data`` is an object, sent encoded."""
        runtime = self._runtime
        runtime.check_usable()
        data = payload_of(data, codec)
        reply_b = subject_bytes(reply, "reply") if reply else b""
        subj, hdr, payload = prepare_message(subject, data, headers, runtime.max_payload)
        if len(subj) + len(reply_b) > MAX_SUBJECT_BYTES:  # each fits alone; together they must fit one line
            check_control_line("reply", subject, reply or "")
        runtime.send(encode_pub_parts(subj, reply_b, hdr, payload))

    def request(
        self,
        subject: str,
        data: object = b"",
        timeout: float | None = None,
        headers: HeadersInput | None = None,
        *,
        codec: Codec[Any] | None = None,
    ) -> Msg:
        """Send a request and wait for the first reply. With ``codec`` ``data`` is an object, sent encoded,
        and the reply's ``value`` is its payload decoded by the same codec."""
        runtime = self._runtime
        runtime.check_usable()
        seconds = check_timeout(timeout, self.default_timeout)
        payload = payload_of(data, codec)
        encode = reply_encoder(*prepare_message(subject, payload, headers, runtime.max_payload))
        reply = runtime.request(encode, seconds, f"request on {subject!r}")
        msg = Msg(reply.subject.decode(), "", reply.data, reply.headers, runtime)
        if codec is not None:
            msg._codec = codec
        return msg

    def request_many(
        self,
        subject: str,
        data: bytes = b"",
        *,
        headers: HeadersInput | None = None,
        max_replies: int | None = None,
        timeout: float | timedelta | None = None,
        stall: float | timedelta | None = None,
        sentinel: bool = False,
    ) -> Replies:
        """Send one request and yield every reply as it arrives (scatter-gather), until ``max_replies`` came,
        ``timeout`` passed (default: the client's timeout), ``stall`` passed without a reply once the first came,
        or (``sentinel=True``) an empty reply came. None of those is an error; NoRespondersError when nobody
        subscribes to ``subject``. The request is sent before this returns; iterate the result, or ``list()``
        it, or use it as a context manager (leaving early unsubscribes). See `jetstream_sync.replies`."""
        runtime = self._runtime
        runtime.check_usable()
        seconds = check_timeout(timeout, self.default_timeout)
        stall_seconds = None if stall is None else to_seconds("stall", stall)
        if max_replies is not None:
            check_int("max_replies", max_replies, minimum=1)
        if not isinstance(sentinel, bool):
            raise errors.InvalidTypeError("sentinel", f"must be a bool, got {type(sentinel).__name__}")
        subj, hdr, payload = prepare_message(subject, data, headers, runtime.max_payload)
        replies = Replies(
            runtime, subject, max_replies=max_replies, timeout=seconds, stall=stall_seconds, sentinel=sentinel
        )
        return replies.send(encode_pub_parts(subj, replies.inbox.encode(), hdr, payload))

    def subscribe(
        self,
        subject: str,
        queue: str | None = None,
        *,
        handler: Callable[[Msg], object] | None = None,
        error_handler: Callable[[BaseException], object] | None = None,
        workers: int = 1,
        ordered_by: Callable[[Msg], Hashable] | None = None,
        max_msgs: int = 0,
        max_pending: int = 65536,
        max_pending_bytes: int = DEFAULT_MAX_PENDING_BYTES,
    ) -> Subscription:
        """Subscribe (wildcards allowed); read with ``next_msg(timeout)`` or by iterating, or give a ``handler``.

        ``handler(msg)`` runs on the subscription's own thread, ``jetstream-sync-sub-<subject>``, one message at a
        time in order; with ``workers=N`` on N threads (``ordered_by``: one key at a time, in order). What it
        raises goes to ``error_handler`` (on the callbacks thread; default: the client's error callback, else
        the log) and the next message is handled. ``max_msgs`` ends the subscription after that many messages
        (nats.go's AutoUnsubscribe). At most ``max_pending`` messages and ``max_pending_bytes`` bytes (payload
        and headers, 64 MiB by default) wait unread or unhandled; past either, new messages are dropped and a
        SlowConsumerError is reported.
        """
        self._runtime.check_usable()
        check_subject("subject", subject, wildcards=True)
        if queue is not None:
            check_queue("queue", queue)
        for name, fn in (("handler", handler), ("error_handler", error_handler), ("ordered_by", ordered_by)):
            if fn is not None:
                check_callable(name, fn)
        if handler is None and (workers != 1 or ordered_by is not None or error_handler is not None):
            raise errors.InvalidArgumentError(
                "handler", "workers, ordered_by and error_handler need a handler (without one, read the messages)"
            )
        check_int("workers", workers, minimum=1)
        check_int("max_msgs", max_msgs, minimum=0)
        check_int("max_pending", max_pending, minimum=1)
        check_int("max_pending_bytes", max_pending_bytes, minimum=1)
        return Subscription.open(
            self._runtime,
            subject,
            queue,
            max_pending,
            self.default_timeout,
            max_pending_bytes,
            handler=handler,
            error_handler=error_handler,
            workers=workers,
            ordered_by=ordered_by,
            max_msgs=max_msgs,
        )

    def flush(self, timeout: float | None = None) -> None:
        """Wait until the server has processed everything published so far (PING/PONG).

        Raises TimeoutError when no PONG comes within ``timeout`` (the connection carries on; the late PONG is
        ignored), and NotConnectedError at once when the connection is down or is lost while waiting: what was
        written before may not have reached the server, and a flush cannot confirm it across a reconnect.
        """
        self._runtime.check_usable()
        self._runtime.flush(check_timeout(timeout, self.default_timeout))

    def jetstream(
        self,
        *,
        timeout: float | None = None,
        domain: str | None = None,
        api_prefix: str | None = None,
        publish_retry: tenacity.Retrying | None = None,
        api_retry: tenacity.Retrying | None = None,
        max_pending: int | None = None,
        stall_timeout: float | timedelta | None = None,
        max_pending_bytes: int | None = None,
    ) -> JetStream:
        """A JetStream context; ``domain`` or ``api_prefix`` select another JetStream API. ``publish_retry``
        and ``api_retry`` replace the retry policies of publishes and of idempotent API requests. ``max_pending``
        (4,000) and ``max_pending_bytes`` (128 MiB of payloads and headers, kept for resends until acked) cap the
        context's publish_async calls in flight (a publish larger than the byte cap goes when nothing else is in
        flight), and ``stall_timeout`` (10 s) bounds how long one waits for room or behind a stalled link before
        PublishBackpressureError."""
        from .jetstream import JetStream

        self._runtime.check_usable()
        limits: dict[str, Any] = {}
        if max_pending is not None:
            limits["max_pending"] = max_pending
        if stall_timeout is not None:
            limits["stall_timeout"] = stall_timeout
        if max_pending_bytes is not None:
            limits["max_pending_bytes"] = max_pending_bytes
        return JetStream(
            self,
            timeout=timeout,
            domain=domain,
            api_prefix=api_prefix,
            publish_retry=publish_retry,
            api_retry=api_retry,
            **limits,
        )

    # -- closing ----------------------------------------------------------------------------------------
    def drain(self, timeout: float | None = None) -> None:
        """Stop receiving, let readers take what is buffered, flush what was published, then close."""
        runtime = self._runtime
        runtime.check_usable()
        seconds = check_timeout(timeout, 30.0)
        runtime.mark_draining()
        deadline = time.monotonic() + seconds
        subs = [c for c in runtime.tracked() if isinstance(c, Subscription)]
        try:
            for sub in subs:  # what the server sent before it saw each UNSUB is delivered too
                sub.stop_receiving(max(0.1, deadline - time.monotonic()), deliver_in_flight=True)
            runtime.flush(max(0.1, deadline - time.monotonic()))
        except errors.JetStreamError:
            log.debug("drain: unsubscribe or flush failed", exc_info=True)
        for sub in subs:  # handlers handle what is buffered
            sub.wait_handled(max(0.0, deadline - time.monotonic()))
        while any(sub.pending for sub in subs) and time.monotonic() < deadline:
            time.sleep(0.01)  # readers are taking what is buffered; nothing to wait on but their progress
        left = sum(sub.pending for sub in subs)
        self.close(timeout=max(0.5, deadline - time.monotonic()))
        if left:
            raise errors.TimeoutError(
                f"drain: {left} buffered messages were not read within {seconds:g}s and were dropped"
            )

    def close(self, timeout: float | timedelta = 5.0) -> None:
        """Close the connection. Threads blocked in calls raise ConnectionClosedError; our threads are joined.

        ``timeout`` (seconds or a timedelta, >= 0) bounds each wait of the close; a bad one raises
        InvalidArgumentError / InvalidTypeError before anything changes. The callbacks still queued run, the
        closed callback last; close() waits for them half a second at most, so a callback that does not return
        is left running on its thread (a daemon, with a warning) instead of holding close() up.
        """
        self._runtime.close(timeout)


def connect(servers: str | Sequence[str] = DEFAULT_URL, **options: Any) -> Client:
    """Connect to NATS and return a thread-safe [`Client`][jetstream_sync.Client] (a context manager).

    ``servers``: one URL (``nats://host:4222``, ``tls://`` for TLS, ``ws://`` or ``wss://`` for websockets, or a
    bare ``host:port``), a list of them, or a comma-separated string of them (``"nats://a:4222,nats://b:4222"``,
    as the integrations' ``SERVERS`` setting takes it). Any other scheme, or text that is no URL, raises
    InvalidServerURLError naming the accepted schemes before any connection attempt.

    The keywords are the fields of [`ConnectOptions`][jetstream_sync.ConnectOptions] (name, credentials and their
    callbacks, TLS, websockets, a socket factory, timeouts, the reconnect policy, callbacks, ...), validated there; an
    unknown keyword raises InvalidArgumentError listing the known ones. Every option, with its nats.go and nats.js
    name, is in the Connecting guide.

    A worker that may start before NATS (a Kubernetes pod, a gunicorn or Celery worker) passes
    ``retry_on_failed_connect=True``: connect() returns at once (or waits up to ``first_connect_wait``) and
    the client connects in the background; [`Client.wait_connected`][jetstream_sync.Client.wait_connected] waits for it.
    """
    return Client(options_from(ConnectOptions, None, {"servers": servers, **options}, "connect"))
