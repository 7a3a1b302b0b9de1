"""ServiceInstance: a service definition running on a client, with an id of its own.

Who runs what (docs/ARCHITECTURE.md, "Threads and ownership"):

- **The IO thread** receives every request and discovery request through fast handlers. A request is offered to
  the instance's `LanePool` (its endpoint's lane); when the lane is full (its
  ``max_pending`` requests or ``max_pending_bytes`` wait) or the instance is stopping, the IO thread answers at
  once with a 503 error reply, built from bytes made in advance: no user code, no wait. PING and INFO are
  answered from bytes made in advance too, and STATS from the counters (a short lock), so discovery is prompt
  however busy the handlers are. A STATS with a stats handler (user code) is answered from the client's
  callbacks thread.
- **The worker threads** ``jetstream-sync-service-<name>-w<i>`` run the handlers, encode the reply (or the error
  reply) and count the request in the endpoint's stats. They queue the replies without waking the IO thread and
  write a burst of them to the socket themselves, in one send, when the socket is free (``_handle``).
- **Stopping** (any thread): the subscriptions are retired, so the requests the server sent before it saw the
  UNSUBs still reach the lanes; the pool takes no more and the workers finish what waits; past the timeout what
  still waits is answered 503 and ``stop`` raises TimeoutError. The client's close stops the instance at once.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from datetime import datetime, timedelta, timezone
from types import TracebackType
from typing import TYPE_CHECKING, Any

import attrs

from .. import errors
from .._dispatch import Lane, LanePool
from .._protocol import Command, encode_pub
from .._runtime import NatsSubscription, Runtime, io_thread
from .._validate import check_timeout
from ..headers import encode_headers
from ._checks import API_PREFIX
from ._errors import ServiceError
from ._models import EndpointInfo, EndpointStats, PingResponse, ServiceInfo, ServiceStats
from ._request import Request, encode_reply

if TYPE_CHECKING:
    from ..client import Client
    from .service import Endpoint, Service

__all__ = ["ServiceInstance", "control_subject"]

log = logging.getLogger("jetstream_sync")

#: how long stop() waits for the handlers in flight unless told
DEFAULT_STOP_TIMEOUT = 30.0

_VERBS = ("PING", "INFO", "STATS")
#: a fast handler: called on the IO thread with (subject, reply, data, headers) of each message
_Fast = Callable[[bytes, bytes, bytes, "bytes | None"], None]
_Item = tuple["_Live", bytes, bytes, bytes, "bytes | None"]


def control_subject(
    verb: str,
    name: str | None = None,
    id: str | None = None,  # noqa: A002 - ADR-32 says id
    prefix: str = API_PREFIX,
) -> str:
    """The discovery subject ``$SRV.<verb>[.<name>[.<id>]]`` (``verb``: PING, INFO or STATS)."""
    if verb not in _VERBS:
        raise errors.InvalidArgumentError("verb", f"must be one of {', '.join(_VERBS)}, got {verb!r}")
    if id is not None and name is None:
        raise errors.InvalidArgumentError("id", "an instance id needs the service's name too")
    return ".".join(part for part in (prefix, verb, name, id) if part is not None)


class _Live:
    """One endpoint of a running instance: its lane, its subscription, its counters (under the instance's
    stats lock) and the 503 replies made in advance."""

    __slots__ = (
        "busy",
        "endpoint",
        "errors",
        "handler",
        "lane",
        "last_error",
        "nanos",
        "refusing",
        "requests",
        "typical",
    )

    def __init__(self, endpoint: Endpoint, lane: Lane[_Item]) -> None:
        self.endpoint = endpoint
        self.handler = endpoint.handler
        self.lane = lane
        self.requests = 0
        self.errors = 0
        self.last_error = ""
        self.nanos = 0
        #: a running average of the handler's time (ns; the stats lock held to change it): above _QUICK, the
        #: replies waiting to go out are sent before the handler runs rather than after it (see _handle)
        self.typical = 0
        self.refusing = False  # IO thread only: a refusal was logged, until a request is taken again
        why = f"endpoint {endpoint.name!r} is busy: {lane.max_pending} requests wait already; try again later"
        self.busy = ServiceError(503, why)

    def stats(self) -> EndpointStats:
        """Stats lock held."""
        requests = self.requests
        return EndpointStats(
            name=self.endpoint.name,
            subject=self.endpoint.subject,
            queue_group=self.endpoint.queue_group,
            num_requests=requests,
            num_errors=self.errors,
            last_error=self.last_error,
            processing_time=self.nanos / 1e9,
            average_processing_time=(self.nanos // requests) / 1e9 if requests else 0.0,
        )


_STOPPING = ServiceError(503, "the service is stopping")

#: a handler whose running average is under this (ns) is quick: the replies of earlier requests may wait for it
#: to go out in one write with its own (a thread wake-up costs more than that on a busy machine)
_QUICK = 50_000
#: replies a worker queues at most before it writes them, however quick its handlers
_BURST = 32


class ServiceInstance:
    """A service running on a client (made by [`Service.start`][jetstream_sync.services.Service.start]); ``id`` tells it
    from other instances.

    Discovery is answered by the client's IO thread and requests are handled by the instance's worker threads
    (see the module docstring). Use it as a context manager, or call
    [`stop`][jetstream_sync.services.ServiceInstance.stop]; [`wait`][jetstream_sync.services.ServiceInstance.wait]
    blocks until it stopped (for whatever reason: ``stop()``, a handler's SystemExit, the client's close, kept in
    ``error``).
    """

    def __init__(
        self,
        service: Service,
        client: Client,
        workers: int,
        around: Callable[[], AbstractContextManager[object]] | None,
        endpoints: list[Endpoint],
    ) -> None:
        self.service = service
        self._client = client
        self._runtime = client.runtime
        self._runtime.check_usable()
        #: this instance's unique id (a NUID), the last token of its discovery subjects
        self.id = self._runtime.new_token()
        self.name = service.name
        self.version = service.version
        self._around = around
        self._lock = threading.Lock()  # the state, the endpoints list and the cached INFO
        self._stats_lock = threading.Lock()  # every endpoint's counters and started
        self._state = "new"
        self._done = threading.Event()
        #: what stopped the instance other than stop(): a handler's SystemExit, the client's close
        self.error: BaseException | None = None
        self.started = datetime.now(timezone.utc)
        self._pool: LanePool[_Item] = LanePool(
            f"jetstream-sync-service-{service.name}", workers, self._handle, self._flush
        )
        self._subs: list[tuple[NatsSubscription, _Fast]] = []
        self._live = [self._new_live(endpoint) for endpoint in endpoints]
        self._ping = json.dumps(self.ping().to_wire()).encode()
        self._info = b""
        self._wake_scheduled = False  # IO thread only: a wake-up of the workers is due after this burst
        self._send_failing = False  # worker threads: a failed reply was logged, until one goes out again
        # worker threads: replies queued since the last write. A hint only (an unlocked count: two workers may
        # both add one and one is lost): it says when a burst is long enough to write; every worker writes what
        # is queued before it waits anyway (``_flush``, the pool's idle hook)
        self._unsent = 0

    def __repr__(self) -> str:
        return f"<ServiceInstance {self.name} {self.version} id={self.id} {self._state}>"

    def __enter__(self) -> ServiceInstance:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._state in ("running", "stopping") and not self._runtime.is_closed:
            self.stop()

    # -- starting ----------------------------------------------------------------------------------------
    def _new_live(self, endpoint: Endpoint) -> _Live:
        service = self.service
        lane: Lane[_Item] = self._pool.lane(
            endpoint.name,
            limit=min(endpoint.concurrency or self._pool.workers, self._pool.workers),
            max_pending=endpoint.max_pending or service.max_pending,
            max_bytes=endpoint.max_pending_bytes or service.max_pending_bytes,
        )
        return _Live(endpoint, lane)

    def _start(self, timeout: float | timedelta | None) -> None:
        """Start the workers, subscribe everything and wait until the server has it (see Service.start)."""
        runtime = self._runtime
        seconds = check_timeout(timeout, runtime.default_timeout)
        self._info = self._check_info()
        entries: list[tuple[str, str, _Fast]] = []
        for verb, handler in (("PING", self._on_ping), ("INFO", self._on_info), ("STATS", self._on_stats)):
            for subject in (
                control_subject(verb),
                control_subject(verb, self.name),
                control_subject(verb, self.name, self.id),
            ):
                entries.append((subject, "", handler))
        entries.extend(
            (live.endpoint.subject, live.endpoint.queue_group, self._request_handler(live)) for live in self._live
        )
        self._pool.start(runtime.track_thread)
        self._state = "running"
        try:
            runtime.call(self._subscribe(entries), seconds, f"start of service {self.name}")
            runtime.flush(seconds)
        except BaseException:
            self._state = "stopped"
            self._pool.halt()
            subs = list(self._subs)
            runtime.post_if_open(lambda: _unsubscribe_all(runtime, subs, self.name))
            self._done.set()
            raise
        runtime.track(self)
        runtime.watch(self._send_held)
        log.info("service %s %s started as %s with %d endpoint(s)", self.name, self.version, self.id, len(self._live))

    @io_thread
    async def _subscribe(self, entries: list[tuple[str, str, _Fast]]) -> None:
        """IO thread."""
        for subject, queue, handler in entries:
            sub = await self._runtime.subscribe_async(subject, handler, queue)
            self._subs.append((sub, handler))

    def _check_info(self) -> bytes:
        info = json.dumps(self.info().to_wire()).encode()
        if len(info) > self._runtime.max_payload - 1024:
            raise errors.InvalidArgumentError(
                "metadata",
                f"the service's INFO reply would be {len(info)} bytes, over the server's max_payload of "
                f"{self._runtime.max_payload}: shorten the metadata or descriptions",
            )
        return info

    def _add(self, endpoint: Endpoint) -> None:
        """An endpoint added to the definition while running (under the definition's lock): subscribe it."""
        with self._lock:
            if self._state != "running":
                return
            live = self._new_live(endpoint)
            self._live.append(live)
            self._info = self._check_info()
            handler = self._request_handler(live)
            runtime = self._runtime
            sub = runtime.subscribe(endpoint.subject, endpoint.queue_group, handler, runtime.default_timeout)
            self._subs.append((sub, handler))
        runtime.flush(runtime.default_timeout)

    # -- the IO thread ----------------------------------------------------------------------------------
    def _request_handler(self, live: _Live) -> _Fast:
        offer = self._pool.offer
        lane = live.lane

        def on_request(subject: bytes, reply: bytes, data: bytes, headers: bytes | None) -> None:
            size = len(data) + (len(headers) if headers else 0)
            if offer(lane, (live, subject, reply, data, headers), size, wake=False):
                if not self._wake_scheduled:  # one wake-up per burst of input, once the IO thread is done with it
                    self._wake_scheduled = True
                    self._runtime.after_input(self._wake)
                if live.refusing:
                    live.refusing = False
                    log.info("service %s: endpoint %s takes requests again", self.name, live.endpoint.name)
                return
            self._refuse(live, reply)

        return on_request

    @io_thread
    def _wake(self) -> None:
        """IO thread, after a burst of requests: wake a worker for them. Replies a worker queued and has not
        written yet (it is running a handler of its burst) go out now, in this loop turn's write: a handler that
        takes unexpectedly long holds the replies before it at most until the next request comes in."""
        self._wake_scheduled = False
        self._runtime.drain_sends()
        self._pool.wake()

    @io_thread
    def _refuse(self, live: _Live, reply: bytes) -> None:
        """IO thread: the lane is full or the pool closed: a 503 error reply at once, counted as an error."""
        error = _STOPPING if self._pool.closed else live.busy
        with self._stats_lock:
            live.requests += 1
            live.errors += 1
            live.last_error = f"{error.code}:{error.description}"
        if not live.refusing and error is live.busy:
            live.refusing = True
            log.warning(
                "service %s: endpoint %s has %d requests waiting for its %d worker thread(s); answering new ones "
                "503 until it catches up (raise workers, concurrency or max_pending)",
                self.name,
                live.endpoint.name,
                live.lane.waiting,
                live.lane.limit,
            )
        if reply:
            self._runtime.send_now(encode_pub(reply, b"", encode_headers(error.headers), b""))

    @io_thread
    def _on_ping(self, subject: bytes, reply: bytes, data: bytes, headers: bytes | None) -> None:
        if reply:
            self._runtime.send_now(encode_pub(reply, b"", None, self._ping))

    @io_thread
    def _on_info(self, subject: bytes, reply: bytes, data: bytes, headers: bytes | None) -> None:
        if reply:
            self._runtime.send_now(encode_pub(reply, b"", None, self._info))

    @io_thread
    def _on_stats(self, subject: bytes, reply: bytes, data: bytes, headers: bytes | None) -> None:
        if not reply:
            return
        if self.service.stats_handler is not None:  # user code: not here
            self._runtime.run_callback(self._answer_stats, reply)
            return
        self._runtime.send_now(self._stats_reply(reply, self.stats()))

    def _stats_reply(self, reply: bytes, stats: ServiceStats) -> Command:
        body = json.dumps(stats.to_wire()).encode()
        if len(body) > self._runtime.max_payload:
            error = ServiceError(500, f"the STATS reply would be {len(body)} bytes, over the server's max_payload")
            log.warning("service %s: %s", self.name, error.description)
            return encode_pub(reply, b"", encode_headers(error.headers), b"")
        return encode_pub(reply, b"", None, body)

    def _answer_stats(self, reply: bytes) -> None:
        """The callbacks thread: STATS with the stats handler's data."""
        try:
            self._runtime.send(self._stats_reply(reply, self.stats()))
        except errors.JetStreamError as exc:
            log.debug("service %s: the STATS reply was not sent: %s", self.name, exc)

    # -- the worker threads -----------------------------------------------------------------------------
    def _handle(self, item: _Item) -> None:
        """A worker thread: run the handler on one request and queue its reply.

        Replies are queued without waking the IO thread (``send(later=True)``): the worker writes them itself
        once it has run the requests it found waiting (the pool calls `_flush` before the worker waits),
        after ``_BURST`` of them, or before a handler that usually takes longer than ``_QUICK``, so that a quick
        reply does not wait for a slow handler. A burst of quick requests costs one write and no IO-thread
        wake-up: on the echo benchmark the wake-up per burst was as much as the rest of the round trip."""
        live, subject, reply, data, headers = item
        if self._unsent and live.typical > _QUICK:
            self._flush()
        began = time.perf_counter_ns()
        error: ServiceError | None = None
        command: Command | None = None
        try:
            request = Request(live.endpoint.name, subject.decode(), reply.decode(), data, headers)
            if self._around is None:
                value = live.handler(request)
            else:
                with self._around():
                    value = live.handler(request)
            if reply:
                command = encode_reply(reply, value, self._runtime.max_payload)
        except ServiceError as exc:
            error = exc
        except Exception as exc:
            log.error(
                "service %s: endpoint %s failed on %s; answered 500",
                self.name,
                live.endpoint.name,
                subject.decode(errors="replace"),
                exc_info=exc,
            )
            error = ServiceError(500, type(exc).__name__)
        except BaseException as exc:  # SystemExit, KeyboardInterrupt: the handler asks the service to stop
            log.warning("service %s: endpoint %s raised %r; the service stops", self.name, live.endpoint.name, exc)
            error = ServiceError(500, type(exc).__name__)
            self._stop_soon(exc)
        if error is not None and reply:
            command = self._error_reply(reply, error)
        elapsed = time.perf_counter_ns() - began
        with self._stats_lock:  # counted before the reply goes: a caller's next STATS includes its request
            live.requests += 1
            live.nanos += elapsed
            live.typical += (elapsed - live.typical) // 8
            if error is not None:
                live.errors += 1
                live.last_error = f"{error.code}:{error.description}"
        if command is not None:
            self._send(command, later=True)
            self._unsent += 1
            if self._unsent >= _BURST:
                self._flush()

    def _flush(self) -> None:
        """A worker thread (the pool's idle hook, and _handle): write the replies queued with ``later``."""
        self._unsent = 0
        try:
            self._runtime.flush_sends()
        except errors.JetStreamError as exc:  # closed meanwhile: nothing more can be sent
            log.debug("service %s: the queued replies were not sent: %s", self.name, exc)

    def _send_held(self, now: float) -> None:
        """Watchdog thread, about every 0.25 s: replies a worker queued and has not written yet (a handler of an
        endpoint that is usually quick is taking long, and no request came in to take them along) go out now, so
        no reply waits for another request's handler longer than a tick. Never blocks (``Outbound.flush``)."""
        if self._unsent:
            self._flush()

    def _error_reply(self, reply: bytes, error: ServiceError) -> Command:
        try:
            return encode_reply(reply, error.data, self._runtime.max_payload, error.headers)
        except errors.MaxPayloadError:  # the error's data does not fit: the headers alone still say it
            return encode_reply(reply, b"", self._runtime.max_payload, error.headers)

    def _send(self, command: Command, *, later: bool = False) -> None:
        try:
            self._runtime.send(command, None, later=later)
        except errors.JetStreamError as exc:
            if not self._send_failing:
                self._send_failing = True
                log.warning(
                    "service %s: a reply could not be sent (%s); more such failures are logged at DEBUG", self.name, exc
                )
            else:
                log.debug("service %s: a reply could not be sent: %s", self.name, exc)
            return
        self._send_failing = False

    def _stop_soon(self, exc: BaseException) -> None:
        """A worker thread: stop the instance from a thread of its own (a worker cannot wait for itself)."""
        self.error = exc
        thread = threading.Thread(
            target=self._stop_quietly, name=f"jetstream-sync-service-{self.name}-stop", daemon=True
        )
        self._runtime.track_thread(thread)
        thread.start()

    def _stop_quietly(self) -> None:
        try:
            self.stop()
        except errors.JetStreamError as exc:
            log.warning("service %s: stopping after %r: %s", self.name, self.error, exc)

    # -- any thread -------------------------------------------------------------------------------------
    @property
    def is_running(self) -> bool:
        """Started and taking requests (not stopping or stopped)."""
        return self._state == "running"

    @property
    def endpoints(self) -> list[Endpoint]:
        """The endpoints this instance serves."""
        with self._lock:
            return [live.endpoint for live in self._live]

    def ping(self) -> PingResponse:
        """What this instance answers to PING."""
        return PingResponse(name=self.name, id=self.id, version=self.version, metadata=dict(self.service.metadata))

    def info(self) -> ServiceInfo:
        """What this instance answers to INFO."""
        return ServiceInfo(
            name=self.name,
            id=self.id,
            version=self.version,
            description=self.service.description,
            metadata=dict(self.service.metadata),
            endpoints=[
                EndpointInfo(
                    name=live.endpoint.name,
                    subject=live.endpoint.subject,
                    queue_group=live.endpoint.queue_group,
                    metadata=dict(live.endpoint.metadata),
                )
                for live in self._live
            ],
        )

    def stats(self) -> ServiceStats:
        """What this instance answers to STATS now: each endpoint's counters since the start or the last
        [`reset`][jetstream_sync.services.ServiceInstance.reset]. With a stats handler, it runs on the calling thread
        for each endpoint (what it raises is logged and that endpoint's ``data`` is None)."""
        with self._stats_lock:
            endpoints = [live.stats() for live in list(self._live)]
            started = self.started
        handler = self.service.stats_handler
        if handler is not None:
            endpoints = [self._with_data(handler, stats) for stats in endpoints]
        return ServiceStats(
            name=self.name,
            id=self.id,
            version=self.version,
            started=started,
            metadata=dict(self.service.metadata),
            endpoints=endpoints,
        )

    def _with_data(self, handler: Callable[[EndpointStats], object], stats: EndpointStats) -> EndpointStats:
        try:
            data: Any = handler(stats)
            json.dumps(data)
        except Exception:
            log.warning("service %s: the stats handler failed for endpoint %s", self.name, stats.name, exc_info=True)
            return stats
        return attrs.evolve(stats, data=data)

    def reset(self) -> None:
        """Zero every endpoint's counters and set ``started`` to now (as STATS reports it)."""
        with self._stats_lock:
            for live in self._live:
                live.requests = live.errors = live.nanos = 0
                live.last_error = ""
            self.started = datetime.now(timezone.utc)

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the instance stopped (False when ``timeout`` seconds passed first)."""
        return self._done.wait(timeout)

    def stop(self, timeout: float | timedelta | None = None) -> None:
        """Stop gracefully: take no new requests (the subscriptions end; what the server had sent already is
        still handled), let the handlers finish what was taken, then return.

        Past ``timeout`` (30 s by default) the requests still waiting are answered 503 and TimeoutError is raised
        (the instance is stopped all the same; a handler still running finishes on its thread, and its reply is
        still sent). Any thread; a second call waits for the first. Called from a handler, it does not wait for
        that handler.
        """
        seconds = check_timeout(timeout, DEFAULT_STOP_TIMEOUT)
        deadline = time.monotonic() + seconds
        with self._lock:
            first = self._state == "running"
            if first:
                self._state = "stopping"
        if not first:
            if not self._done.wait(seconds):
                raise errors.TimeoutError(f"service {self.name} ({self.id}) did not stop within {seconds:g}s")
            return
        runtime = self._runtime
        log.info("service %s (%s) stopping", self.name, self.id)
        try:
            runtime.call(self._retire(), max(0.1, deadline - time.monotonic()), f"stop of service {self.name}")
        except errors.JetStreamError as exc:  # closed or cut off: nothing more can arrive on the connection
            log.debug("service %s: the UNSUBs were not confirmed: %s", self.name, exc)
        self._pool.close()
        finished = self._pool.wait(max(0.0, deadline - time.monotonic()))
        left = [] if finished else self._pool.halt()
        for live, _, reply, _, _ in left:
            self._refuse_left(live, reply)
        running = sum(live.lane.running for live in self._live)
        self._finish()
        if not finished:
            raise errors.TimeoutError(
                f"service {self.name} ({self.id}) stopped with {running} handler(s) still running after {seconds:g}s "
                f"and {len(left)} waiting request(s) answered 503"
            )
        log.info("service %s (%s) stopped", self.name, self.id)

    @io_thread
    async def _retire(self) -> None:
        """IO thread: UNSUB everything; what the server sent before it saw the UNSUBs still arrives.

        The endpoints go first, discovery after (the UNSUBs are written in this order, and the server reads them
        in order): once PING finds no instance, none of its endpoints takes a request any more. The other way
        round, a caller who saw the service gone from discovery could still have a request taken for a while."""
        discovery = (self._on_ping, self._on_info, self._on_stats)
        subs = sorted(self._subs, key=lambda entry: entry[1] in discovery)  # stable: endpoints, then discovery
        await asyncio.gather(*(self._runtime.retire(sub, handler) for sub, handler in subs))

    def _refuse_left(self, live: _Live, reply: bytes) -> None:
        with self._stats_lock:
            live.requests += 1
            live.errors += 1
            live.last_error = f"{_STOPPING.code}:{_STOPPING.description}"
        if reply:
            self._send(encode_pub(reply, b"", encode_headers(_STOPPING.headers), b""))

    def _finish(self) -> None:
        with self._lock:
            self._state = "stopped"
        self._runtime.untrack(self)
        self._runtime.unwatch(self._send_held)
        self._done.set()

    def on_client_closed(self, exc: BaseException) -> None:
        """The client closed (called by it): the instance stops at once; requests waiting are dropped (there is
        no connection left to answer them on) and handlers in flight finish on their threads."""
        with self._lock:
            if self._state == "stopped":
                return
            self._state = "stopped"
        if self.error is None:
            self.error = exc
        self._runtime.unwatch(self._send_held)
        self._pool.halt()
        self._done.set()


def _unsubscribe_all(runtime: Runtime, subs: Sequence[tuple[NatsSubscription, object]], label: str) -> None:
    """IO thread: end subscriptions made by a start that failed."""
    for sub, _ in subs:
        runtime.unsubscribe_soon(sub, label)
