"""The kombu transport: ``Transport`` (one per ``kombu.Connection``) and its ``Channel`` and ``QoS``.

Built on kombu's virtual transport for what every kombu transport shares (the message class, exchange
declarations kept in the process, channel ids), with the parts a broker does given to JetStream: routing by
subject (``_layout``), queues as durable consumers (``_queues``), delivery by puller threads into an inbox
(``_delivery``), acks as JetStream acks. kombu calls a transport from one thread; the pullers and the keeper
are this module's own threads, and acks may come from any thread (Celery's pool result handler acks).

A channel belongs to the process that made it: after ``fork()`` the child's kombu makes its own connection
(Celery resets its pools in a forked child), and a parent's channel used in a child raises
[`ForkedClientError`][jetstream_sync.errors.ForkedClientError], one of the transport's ``connection_errors``, so kombu's
``ensure`` reconnects in the child with the child's own client.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import socket
import threading
import time
import uuid
from typing import Any

from amqp.protocol import queue_declare_ok_t
from kombu.exceptions import ChannelError
from kombu.transport import virtual
from kombu.transport.base import to_rabbitmq_queue_arguments

from ... import errors
from ...jetstream import JetStream, PublishOptions
from ...message import Msg
from .._clients import process_client
from . import _wire
from ._delivery import Delivery, Inbox, Keeper, Puller, Quota
from ._layout import Binding, band_of, message_subject
from ._qos import QoS
from ._queues import Queues, QueueSpec, ensure_dead_stream, ensure_streams, ttl_supported
from ._settings import Options, connection_settings, options_from

__all__ = ["Channel", "QoS", "Transport"]

log = logging.getLogger("jetstream_sync.integrations")

#: how long a consume started on a queue with priority bands waits for each band's first pull before it
#: delivers, so that a backlog comes out highest band first
_FIRST_PULL_WAIT = 1.0


_QoSClass = QoS


class _Reader:
    """One ``basic_consume``: a queue, its callback, and a puller per consumer of the queue."""

    def __init__(self, tag: str, spec: QueueSpec, no_ack: bool, callback: Any) -> None:
        self.tag = tag
        self.spec = spec
        self.no_ack = no_ack
        self.callback = callback
        self.pullers: list[Puller] = []
        self.cancelled = False


class Channel(virtual.Channel):  # type: ignore[misc]
    """A kombu channel on JetStream (see the package docstring for the layout and what each call does)."""

    QoS = QoS
    supports_fanout = True
    do_restore = True
    from_transport_options = ()

    connection: Transport

    def __init__(self, connection: Transport, **kwargs: Any) -> None:
        super().__init__(connection, **kwargs)
        self._pid = os.getpid()
        self.options: Options = connection.options
        self.js: JetStream = connection.jetstream()
        self.queues = Queues(self.js, self.options)
        self.inbox = Inbox(connection.wake, connection.arrivals)
        self.quota = Quota(
            lambda: len(self.inbox) + len(self.qos),
            unlimited=self.options.unlimited_prefetch,
            batch=self.options.pull_batch,
        )
        self._qos: _QoSClass | None = None
        self.closed: bool = False
        self._readers: dict[str, _Reader] = {}
        self._specs: dict[str, QueueSpec] = {}
        self._keeper: Keeper | None = None
        self._starting: list[Puller] = []
        self._dead_letters: dict[str, Any] = {}

    # -- checks ---------------------------------------------------------------------------------------------
    def _check_process(self) -> None:
        if os.getpid() != self._pid:
            raise errors.ForkedClientError()

    # -- queues and exchanges -------------------------------------------------------------------------------
    def _spec(self, queue: str) -> QueueSpec:
        spec = self._specs.get(queue)
        if spec is None:
            spec = self.queues.lookup(queue)
            if spec is None:
                raise ChannelError(
                    f"NOT_FOUND - no queue {queue!r} in stream {self.options.stream!r}",
                    (50, 10),
                    "Channel.queue_declare",
                    "404",
                )
            self._specs[queue] = spec
        return spec

    def queue_declare(self, queue: str | None = None, passive: bool = False, **kwargs: Any) -> Any:
        """Declare ``queue`` (its consumers), or with ``passive`` check that it exists (ChannelError 404)."""
        self._check_process()
        queue = queue or f"amq.gen-{uuid.uuid4()}"
        if passive:
            self._specs.pop(queue, None)
            spec = self._spec(queue)
        else:
            spec = self.queues.declare(
                queue,
                durable=bool(kwargs.get("durable", True)),
                auto_delete=bool(kwargs.get("auto_delete", False)) or bool(kwargs.get("exclusive", False)),
                arguments=kwargs.get("arguments"),
            )
            self._specs[queue] = spec
        return queue_declare_ok_t(queue, self.queues.size(spec), 0)

    def prepare_queue_arguments(self, arguments: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        """A Queue's ``expires``, ``message_ttl`` and ``max_priority`` as AMQP's ``x-`` arguments (read back
        by ``_queues.Queues.declare``)."""
        prepared: dict[str, Any] = to_rabbitmq_queue_arguments(arguments, **kwargs)
        return prepared

    def _has_queue(self, queue: str, **kwargs: Any) -> bool:
        return self.queues.lookup(queue) is not None

    def _new_queue(self, queue: str, **kwargs: Any) -> None:
        self.queue_declare(queue, **kwargs)

    def _type_of(self, exchange: str) -> str:
        declared = self.state.exchanges.get(exchange)
        return str(declared["type"]) if declared else "direct"

    def queue_bind(
        self, queue: str, exchange: str | None = None, routing_key: str = "", arguments: Any = None, **kwargs: Any
    ) -> None:
        """Bind: the queue's consumers get the binding's filter subjects."""
        self._check_process()
        exchange = exchange or ""
        if exchange == "":  # every queue is bound to the default exchange under its own name
            return
        spec = self._spec(queue)
        self._specs[queue] = self.queues.rebind(spec, Binding(exchange, routing_key, self._type_of(exchange)), add=True)

    def queue_unbind(
        self, queue: str, exchange: str | None = None, routing_key: str = "", arguments: Any = None, **kwargs: Any
    ) -> None:
        """Unbind: the binding's filter subjects leave the queue's consumers."""
        self._check_process()
        exchange = exchange or ""
        if exchange == "":
            return
        spec = self._spec(queue)
        self._specs[queue] = self.queues.rebind(
            spec, Binding(exchange, routing_key, self._type_of(exchange)), add=False
        )

    def queue_delete(self, queue: str, if_unused: bool = False, if_empty: bool = False, **kwargs: Any) -> None:
        """Delete the queue's consumers (with ``if_empty``, only when it holds no ready message)."""
        self._check_process()
        spec = self.queues.lookup(queue)
        self._specs.pop(queue, None)
        if spec is None:
            return
        if if_empty and self.queues.size(spec):
            return
        for reader in [r for r in self._readers.values() if r.spec.name == queue]:
            self.basic_cancel(reader.tag)
        self.queues.delete(spec)

    def queue_purge(self, queue: str, **kwargs: Any) -> int:
        """Remove the queue's ready messages; its consumers, and whoever reads them, go on (``Queues.purge``)."""
        self._check_process()
        return self.queues.purge(self._spec(queue))

    def _size(self, queue: str) -> int:
        return self.queues.size(self._spec(queue))

    def exchange_delete(self, exchange: str, if_unused: bool = False, nowait: bool = False) -> None:
        """Forget the exchange in this process. Bindings to it stay on the queues that have them (queues are
        shared by processes; unbind them to stop the routing)."""
        self.state.exchanges.pop(exchange, None)

    def get_table(self, exchange: str) -> list[Any]:
        return []

    # -- publishing ------------------------------------------------------------------------------------------
    def basic_publish(self, message: dict[str, Any], exchange: str, routing_key: str, **kwargs: Any) -> None:
        """Publish once to the exchange's subject and wait for the stream's ack; the server routes it to the
        queues bound to it. A message no queue is bound for is dropped (interest retention)."""
        self._check_process()
        exchange = exchange or ""
        routing_key = routing_key or ""
        band = band_of((message.get("properties") or {}).get("priority"), self.options.priority_steps)
        subject = message_subject(self.options.prefix, exchange, routing_key, band)
        data, headers = _wire.encode(message, exchange, routing_key)
        ttl = _wire.ttl_seconds(message)
        options = PublishOptions(
            msg_id=_wire.message_id(message, exchange, routing_key),
            ttl=_wire.server_ttl(ttl) if ttl is not None and self.connection.msg_ttl else None,
        )
        try:
            self.js.publish(subject, data, headers, options=options)
        except errors.NoStreamResponseError:  # the stream was deleted: make it again, once
            self.connection.ensure_streams(force=True)
            self.js.publish(subject, data, headers, options=options)

    # -- receiving ------------------------------------------------------------------------------------------
    def _to_kombu(self, msg: Msg, no_ack: bool) -> Any:
        tag = uuid.uuid4().hex
        message = self.Message(_wire.decode(msg, tag), channel=self)
        if no_ack:
            msg.ack()
        else:
            self.qos.append(tag, msg)
        return message

    def decode_body(self, body: Any, encoding: Any = None) -> Any:
        """The body as it came: the payload is the body's bytes (no base64 on the wire, see ``_wire``)."""
        return body

    def basic_get(self, queue: str, no_ack: bool = False, **kwargs: Any) -> Any:
        """One message of ``queue`` if one is ready (highest priority band first), else None."""
        self._check_process()
        spec = self._spec(queue)
        for _band, consumer in spec.consumers:
            while True:
                with consumer.fetch_no_wait(1) as batch:
                    msg = next(iter(batch), None)
                if msg is None:
                    break
                if _wire.expired(msg, spec.message_ttl):
                    msg.ack()  # expired while it waited: dropped, as a broker drops it
                    continue
                self._ensure_keeper(spec)
                return self._to_kombu(msg, no_ack)
        return None

    def basic_consume(self, queue: str, no_ack: bool, callback: Any, consumer_tag: str, **kwargs: Any) -> str:
        """Start a puller per consumer of ``queue``; what they receive is delivered by ``drain_events``."""
        self._check_process()
        spec = self._spec(queue)
        tag = consumer_tag or uuid.uuid4().hex
        reader = _Reader(tag, spec, no_ack, callback)
        for band, consumer in spec.consumers:
            reader.pullers.append(
                Puller(
                    consumer,
                    band if band is not None else 0,
                    self.quota,
                    lambda puller, msg, reader=reader: self._sink(reader, puller, msg),  # type: ignore[misc]
                    self._on_puller_failure,
                    expires=self.options.pull_expires,
                    label=f"{self.options.stream}/{consumer.name}",
                )
            )
        self._readers[tag] = reader
        self._consumers.add(tag)
        self._ensure_keeper(spec)
        self._ensure_dead_letters(spec)
        if len(reader.pullers) > 1:
            self._starting.extend(reader.pullers)
        for puller in reader.pullers:
            puller.start()
        return tag

    def basic_cancel(self, consumer_tag: str) -> None:
        """Stop the consume: its pullers end their pulls, and what it received and kombu did not take is given
        back (nak), so another consumer gets it now."""
        reader = self._readers.pop(consumer_tag, None)
        self._consumers.discard(consumer_tag)
        if reader is None:
            return
        reader.cancelled = True
        for puller in reader.pullers:
            puller.stop()
        for puller in reader.pullers:
            puller.join(5.0)
        for delivery in self.inbox.take_reader(reader):
            _give_back(delivery.msg)
        self.quota.changed()

    def _sink(self, reader: _Reader, puller: Puller, msg: Msg) -> None:
        """A puller's thread: a received message goes into the inbox (or is dropped when expired)."""
        if reader.cancelled:
            _give_back(msg)
        elif _wire.expired(msg, reader.spec.message_ttl):
            msg.ack()
        else:
            self.inbox.put(Delivery(reader, msg, puller.rank))

    def _on_puller_failure(self, puller: Puller, exc: BaseException) -> None:
        self.connection.fail(exc)

    def deliver_ready(self, most: int | None = None) -> int:
        """The consuming thread: hand kombu what the inbox holds (at most ``most`` taken from it), within the
        prefetch; returns the count delivered."""
        if self._starting:
            deadline = time.monotonic() + _FIRST_PULL_WAIT
            for puller in self._starting:
                puller.first_done.wait(max(0.0, deadline - time.monotonic()))
            self._starting.clear()
        delivered = 0
        taken = 0
        while self.qos.can_consume() and (most is None or taken < most):
            delivery = self.inbox.pop()
            taken += 1
            if delivery is None:
                break
            reader = delivery.reader
            assert isinstance(reader, _Reader)
            if reader.cancelled:
                _give_back(delivery.msg)
                continue
            if _wire.expired(delivery.msg, reader.spec.message_ttl):
                delivery.msg.ack()
                continue
            message = self._to_kombu(delivery.msg, reader.no_ack)
            delivered += 1
            reader.callback(message)
        if delivered:
            self.quota.changed()
        return delivered

    def flush(self) -> None:
        """Wait until the server has what this client sent (acks, naks); a failure is logged, not raised: the
        acks go out with the reconnect."""
        try:
            self.js.client.flush(timeout=self.js.timeout)
        except errors.JetStreamError as exc:
            log.debug("flush failed: %s", exc)

    def room_freed(self) -> None:
        """An ack or reject (any thread): pullers may pull again, and a waiting inbox may be delivered."""
        self.quota.changed()
        if len(self.inbox):
            self.connection.wake()

    def basic_ack(self, delivery_tag: str, multiple: bool = False) -> None:
        self.qos.ack(delivery_tag, multiple)

    def basic_reject(self, delivery_tag: str, requeue: bool = False) -> None:
        self.qos.reject(delivery_tag, requeue=requeue)

    def basic_recover(self, requeue: bool = False) -> None:
        """Give back every unacked message (``requeue=False`` is not a thing JetStream can do: the server
        always redelivers what is not acked)."""
        self.qos.restore_unacked()

    def basic_qos(self, prefetch_size: int = 0, prefetch_count: int = 0, apply_global: bool = False) -> None:
        self.quota.set_prefetch(prefetch_count)
        if len(self.inbox):
            self.connection.wake()

    @property
    def qos(self) -> _QoSClass:
        if self._qos is None:
            self._qos = QoS(self)
        return self._qos

    def _ensure_keeper(self, spec: QueueSpec) -> None:
        ack_wait = min((c.cached_info.config.ack_wait or self.options.ack_wait) for _, c in spec.consumers)
        interval = max(0.5, ack_wait / 3)
        if self._keeper is None:
            self._keeper = Keeper(
                lambda: [*self.inbox.messages(), *self.qos.held()],
                interval,
                f"{self.options.stream} ch{self.channel_id}",
            )
            self._keeper.start()
        elif interval < self._keeper.interval:
            self._keeper.interval = interval

    def _ensure_dead_letters(self, spec: QueueSpec) -> None:
        """A durable queue's messages given up on after ``max_deliver`` are moved to the dead-letter stream
        by a mover in each consuming process (they dedupe by the message's sequence)."""
        if not self.options.dead_letters or not spec.durable or self.options.max_deliver < 1:
            return
        for _band, consumer in spec.consumers:
            if consumer.name in self._dead_letters:
                continue
            try:
                ensure_dead_stream(self.js, self.options)
                self._dead_letters[consumer.name] = self.js.dead_letter(
                    self.options.stream,
                    consumer.name,
                    to=f"{self.options.dead_prefix}.{consumer.name}",
                    delete=True,
                    durable=False,
                )
            except errors.JetStreamError as exc:
                log.warning("no dead-letter mover for %s/%s: %s", self.options.stream, consumer.name, exc)

    def dead_letter(self, msg: Msg) -> None:
        """A message rejected without requeue (any thread): copied to the dead-letter stream, then acked.

        A RabbitMQ queue with a dead-letter exchange dead-letters a rejected message, and that is what a Celery
        app relies on when it rejects (``Reject(requeue=False)``, ``task_acks_on_failure_or_timeout=False``):
        the task is kept where an operator finds it. So with ``dead_letters`` on (the default), a durable
        queue's rejected message goes to ``<stream>_DEAD`` as one given up on after ``max_deliver`` does, with
        the same headers (``Dead-Letter-Reason: rejected``) and the mover's message id, so that a copy made
        twice is stored once. It is copied here rather than left to the mover: ``term()`` on an interest stream
        removes the message before a mover could read it back. Without ``dead_letters``, or for a transient
        queue (remote-control replies), the message is discarded (``term``), as kombu's Redis transport does.
        If the copy fails, the message is given back (nak) rather than lost, and the failure logged."""
        meta = msg.metadata
        if not self.options.dead_letters or not self._durable_consumer(meta.consumer):
            msg.term("rejected by kombu consumer")
            return
        headers: dict[str, list[str]] = {}
        for key, value in msg.headers.multi_items() if msg.headers is not None else []:
            if not key.lower().startswith("nats-"):
                headers.setdefault(key, []).append(value)
        seq = meta.sequence.stream
        headers.update(
            {
                "Dead-Letter-Stream": [meta.stream],
                "Dead-Letter-Consumer": [meta.consumer],
                "Dead-Letter-Sequence": [str(seq)],
                "Dead-Letter-Subject": [msg.subject],
                "Dead-Letter-Deliveries": [str(meta.num_delivered)],
                "Dead-Letter-Reason": ["rejected"],
            }
        )
        try:
            ensure_dead_stream(self.js, self.options)
            self.js.publish(
                f"{self.options.dead_prefix}.{meta.consumer}",
                msg.data,
                headers,
                msg_id=f"dlq.{meta.stream}.{meta.consumer}.{seq}",
            )
        except errors.JetStreamError as exc:
            log.warning("a rejected message of %s/%s could not be dead-lettered (%s); given back", meta.stream,
                        meta.consumer, exc)  # fmt: skip
            _give_back(msg)
            return
        msg.ack()

    def _durable_consumer(self, name: str) -> bool:
        return any(spec.durable for spec in list(self._specs.values()) for _, c in spec.consumers if c.name == name)

    def close(self) -> None:
        """Cancel every consume, give back what is unacked, stop the keeper and the dead-letter movers."""
        if self.closed:
            return
        self.closed = True
        same_process = os.getpid() == self._pid
        if same_process:
            for tag in list(self._readers):
                self.basic_cancel(tag)
            if self._qos is not None:
                self.qos.restore_unacked_once()
        if self._keeper is not None:
            self._keeper.stop()
        for mover in self._dead_letters.values():
            try:
                mover.stop()
            except errors.JetStreamError:
                log.debug("stopping a dead-letter mover failed", exc_info=True)
        self._dead_letters.clear()
        if self.connection is not None:
            self.connection.close_channel(self)


def _give_back(msg: Msg) -> None:
    try:
        msg.nak()
    except errors.JetStreamError as exc:  # redelivered after its ack wait instead
        log.debug("giving back %s failed: %s", msg.subject, exc)


class Transport(virtual.Transport):  # type: ignore[misc]
    """kombu's transport for JetStream: ``kombu.Connection(url, transport="jetstream_sync.integrations.kombu.
    Transport")``, or the ``jetstream://`` scheme once this package is imported."""

    Channel = Channel
    driver_type = "jetstream"
    driver_name = "jetstream_sync"
    default_port = 4222
    can_parse_url = False
    #: nothing polls: the pullers wake the consuming thread
    polling_interval = None
    implements = virtual.Transport.implements.extend(
        asynchronous=True,
        exchange_type=frozenset(["direct", "topic", "fanout"]),
        heartbeats=False,
    )
    connection_errors = (
        *virtual.Transport.connection_errors,
        errors.NoServersError,
        errors.ConnectionClosedError,
        errors.NotConnectedError,
        errors.ForkedClientError,
        errors.TimeoutError,
        errors.NoRespondersError,
        errors.ClusterUnavailableError,
        errors.JetStreamNotEnabledError,
        errors.ConsumerNotFoundError,
        errors.ConsumerDeletedError,
        errors.MissedHeartbeatError,
        socket.error,
    )
    channel_errors = (*virtual.Transport.channel_errors, errors.APIError, errors.InvalidArgumentError)

    def __init__(self, client: Any, **kwargs: Any) -> None:
        self.options = options_from(client.transport_options or {})
        self.settings = connection_settings(client)
        super().__init__(client, **kwargs)
        self._cond = threading.Condition()
        self._generation = 0
        self._pipe: tuple[int, int] | None = None
        self._failure: BaseException | None = None
        self._js: JetStream | None = None
        self.msg_ttl = False
        self.arrivals = itertools.count()  # numbers what every channel's inbox receives (see _deliver_all)

    def driver_version(self) -> str:
        """jetstream_sync's version (kombu reports it as the driver's)."""
        from ... import __version__

        return __version__

    # -- connection -----------------------------------------------------------------------------------------
    def jetstream(self) -> JetStream:
        """The JetStream context of this process's client for the connection (connecting first if needed)."""
        if self._js is None:
            self.establish_connection()
        assert self._js is not None
        return self._js

    def ensure_streams(self, *, force: bool = False) -> None:
        """Make the queues' stream again if it is gone (a publish found no stream), or check it."""
        js = self.jetstream()
        ensure_streams(js, self.options, allow_msg_ttl=self.msg_ttl)

    def establish_connection(self) -> Any:
        """This process's client for the connection's settings (connected on first use; NoServersError when
        no server answers), and the queues' stream made or checked."""
        client = process_client(self.settings)
        self._js = client.jetstream()
        self.msg_ttl = ttl_supported(client.server_info)
        self._failure = None
        ensure_streams(self._js, self.options, allow_msg_ttl=self.msg_ttl)
        return super().establish_connection()

    def verify_connection(self, connection: Any) -> bool:
        """Whether the process's client is still open (kombu asks before it reuses a pooled connection)."""
        return self._js is not None and not self._js.client.is_closed

    def close_connection(self, connection: Any) -> None:
        """Close the channels (their consumes end, unacked messages are given back). The process's client
        stays: other connections and integrations of the process share it; it closes at exit."""
        super().close_connection(connection)
        if self._pipe is not None:
            for fd in self._pipe:
                os.close(fd)
            self._pipe = None
        self._js = None

    # -- waking and failing ---------------------------------------------------------------------------------
    def wake(self) -> None:
        """Any thread: something may be deliverable now."""
        with self._cond:
            self._generation += 1
            self._cond.notify_all()
        pipe = self._pipe
        if pipe is not None:
            with contextlib.suppress(BlockingIOError, OSError):  # full: the reader is awake; closed: closing
                os.write(pipe[1], b"!")

    def fail(self, exc: BaseException) -> None:
        """A puller's thread: its consume cannot go on (consumer deleted, client closed). The consuming thread
        raises it from drain_events, so kombu (Celery) reconnects and declares its queues again."""
        log.warning("kombu consume failed: %r; the connection is reported lost", exc)
        self._failure = exc
        self.wake()

    def _raise_failure(self) -> None:
        failure = self._failure
        if failure is not None:
            self._failure = None
            raise failure

    def _deliver_all(self) -> int:
        """Hand kombu what arrived on any channel, in the order it arrived across channels.

        Celery's worker reads tasks on one channel and remote control on another: a revoke broadcast just
        before a task must reach the worker first, or the task runs (Celery's
        ``test_revoked_by_headers_complex_canvas`` found that when channels were served one after the other)."""
        channels = list(self.channels)
        if len(channels) < 2:
            return sum(channel.deliver_ready() for channel in channels)
        delivered = 0
        while True:
            heads = [(head, n) for n, channel in enumerate(channels)
                     if (head := channel.inbox.head()) is not None and channel.qos.can_consume()]  # fmt: skip
            if not heads:
                return delivered
            delivered += channels[min(heads)[1]].deliver_ready(most=1)

    def drain_events(self, connection: Any, timeout: float | None = None, **kwargs: Any) -> None:
        """Deliver what arrived on any channel, waiting up to ``timeout`` for something (socket.timeout then)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            self._raise_failure()
            with self._cond:
                generation = self._generation
            if self._deliver_all():
                return
            with self._cond:
                while self._generation == generation:
                    left = None if deadline is None else deadline - time.monotonic()
                    if left is not None and left <= 0:
                        raise TimeoutError()
                    self._cond.wait(left)

    # -- an event loop (Celery's worker) --------------------------------------------------------------------
    def register_with_event_loop(self, connection: Any, loop: Any) -> None:
        """Make kombu's hub wake us through a pipe the pullers write to (and deliver what is there already)."""
        if self._pipe is None:
            read, write = os.pipe()
            os.set_blocking(read, False)
            os.set_blocking(write, False)
            self._pipe = (read, write)
        loop.add_reader(self._pipe[0], self.on_readable, connection, loop)
        self.wake()

    def on_readable(self, connection: Any, loop: Any) -> None:
        """The event loop's thread: the pipe was written (a puller received something); deliver it."""
        pipe = self._pipe
        if pipe is not None:
            try:
                while os.read(pipe[0], 4096):
                    pass
            except (BlockingIOError, OSError):  # emptied (non-blocking), or closed with the channel: nothing to read
                pass
        self._raise_failure()
        self._deliver_all()
