"""``js.subscribe`` and ``js.pull_subscribe``: the ADR-15 / ADR-13 subscribe API, as blocking versions of
nats-py's calls, so code ported from nats-py keeps its shape.

The workflow is ADR-15's: find the stream from the subject (``STREAM.NAMES``, exactly one match), look the
consumer up and run every binding check (push_bound, deliver groups, filter subject, push against pull,
configuration drift, flow control and heartbeats over queues), subscribe *before* creating the consumer,
handle the "already exists" race by looking up and checking again, and delete on ``unsubscribe()`` /
``drain()`` only a consumer this subscription created. Delivery runs on the push engine
(``_delivery/_push.py``) with ADR-15's automatic status management; ``pull_subscribe(...).fetch`` follows
ADR-13 (a no-wait pull first, then a long pull expiring 100 ms before the client's timeout).

Each call's signature is stated once, on `_SubscribeCalls` (a base of the JetStream context), and runs in three
steps: check the arguments (all of them before anything is sent), look the consumer up (the ADR-15 rules of
``_binding.py``), open the subscription (`_open`, `_open_ordered`, `_open_pull`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import attrs

from .. import errors
from .._delivery import FetchPull, OrderedPush, PullTarget, PushEngine, PushLimits
from .._protocol import status_of
from .._runtime import BufferFinished, ProcessLocal
from .._validate import check_callable, check_int, check_name, check_queue, check_subject, check_timeout, to_seconds
from ..codecs._payload import check_codec
from ..message import Msg
from ..models import AckPolicy, ConsumerConfig, ConsumerInfo, ConsumerLag, DeliverPolicy
from ..models.reads import FetchOptions
from ..subscription import Subscription
from ._binding import (
    check_drift,
    check_pull_binding,
    check_push_binding,
    create_if_absent,
    find_stream,
    lookup,
    settle_unbound,
)
from ._bucket import as_jetstream
from .consumers import OrderedConsumerConfig
from .consumers._chain import ConsumerChain
from .consumers._reads import reporter, with_decoding
from .consumers.delivery import ConsumeContext, MessagesIterator, decoded_with
from .consumers.push import DEFAULT_PENDING_BYTES, DEFAULT_PENDING_MSGS

if TYPE_CHECKING:
    from ..codecs import Codec
    from .context import JetStream

__all__ = ["JetStreamSubscription", "PullSubscription"]

log = logging.getLogger("jetstream_sync")

# ADR-13: the long pull expires this long before the client gives up, so the server's 408 comes first.
_PULL_MARGIN = 0.1
_NO_WAIT_ONE = b'{"batch":1,"no_wait":true}'


# -- push ---------------------------------------------------------------------------------------------------
class JetStreamSubscription(ProcessLocal):
    """A push subscription made by ``js.subscribe``: ``next_msg(timeout)`` and iteration, or ``cb`` on its own
    thread. ``unsubscribe()`` and ``drain()`` delete the consumer only if this subscription created it."""

    def __init__(
        self,
        js: JetStream,
        engine: PushEngine,
        *,
        stream: str,
        consumer: str | None,
        created: bool,
        cb: Callable[[Msg], object] | None,
        manual_ack: bool,
        error_cb: Callable[[BaseException], object] | None,
        codec: Codec[Any] | None = None,
    ) -> None:
        self.jetstream = js
        self.stream = stream
        self.consumer = consumer
        #: True when this subscription created the consumer (and so deletes it on unsubscribe/drain)
        self.created = created
        self._engine = engine
        self._error_cb = error_cb
        self._iterator = decoded_with(MessagesIterator(engine), codec)
        self._context: ConsumeContext | None = None
        self._deleted = False
        self.drained = threading.Event()
        if cb is not None:
            handler = cb if manual_ack else _acking(cb)
            if codec is not None:  # msg.value decodes; an undecodable message the callback lets escape is term'd
                handler, _ = with_decoding(codec, handler, None)
            self._context = ConsumeContext(engine, handler)
            self._context.start()

    def __repr__(self) -> str:
        return f"<JetStreamSubscription {self.stream}/{self.consumer} created={self.created}>"

    @property
    def delivery(self) -> PushEngine:
        """The push engine under this subscription (its ``stats()``)."""
        return self._engine

    def consumer_info(self) -> ConsumerInfo:
        if self.consumer is None:
            raise errors.ConsumerNotFoundError(404, 10014, "this subscription has no server-side consumer now")
        return self.jetstream.consumer_info(self.stream, self.consumer)

    def lag(self) -> ConsumerLag:
        """How far behind this subscription's consumer is now (from a fresh ``consumer_info()``; see
        [`ConsumerLag`][jetstream_sync.models.ConsumerLag])."""
        return ConsumerLag.from_info(self.consumer_info())

    def next_msg(self, timeout: float | timedelta | None = 1.0) -> Msg:
        """The next message within ``timeout`` seconds (None: until one comes); TimeoutError otherwise."""
        if self._context is not None:
            raise errors.InvalidArgumentError("next_msg", "this subscription has a callback (cb=); messages go there")
        try:
            return self._iterator.next(timeout)
        except errors.IteratorClosedError:
            raise errors.SubscriptionClosedError("the subscription was unsubscribed or drained") from None

    def __iter__(self) -> Iterator[Msg]:
        return iter(self._iterator)

    def unsubscribe(self) -> None:
        """Stop at once, then delete the consumer if this subscription created it (errors are raised). What
        was received and not handed out is given back (nak'd), so the next subscriber gets it now, not after
        the ack wait: the engine's buffer, and the burst ``next_msg`` took from it and had not yet handed out
        (the iterator's ``stop()`` gives those back; stopping only the engine left them to their ack wait)."""
        self._engine.runtime.fork_guard.check()
        if self._context is None:
            self._iterator.stop()
        else:
            self._context.stop()
        self._delete_created()

    def drain(self) -> None:
        """Stop receiving; buffered messages are still delivered (to ``cb`` or the reader); when the last one
        was handed out the consumer is deleted if this subscription created it, and ``drained`` is set. A failed
        delete goes to ``error_cb`` (or the log)."""
        engine = self._engine
        engine.runtime.fork_guard.check()
        engine.drain()
        runtime = engine.runtime

        def check(_now: float) -> None:
            if engine.finished or runtime.is_closed:
                runtime.unwatch(check)
                worker = threading.Thread(target=self._after_drain, name="jetstream-sync-drain", daemon=True)
                runtime.track_thread(worker)
                worker.start()

        runtime.watch(check)

    def _after_drain(self) -> None:
        try:
            self._delete_created()
        except errors.JetStreamError as exc:
            if self._error_cb is not None:
                self._error_cb(exc)
            else:
                log.warning("drain of %s/%s: deleting the consumer failed: %s", self.stream, self.consumer, exc)
        finally:
            self.drained.set()

    def _delete_created(self) -> None:
        if not self.created or self._deleted or self.consumer is None:
            return
        self._deleted = True
        self.jetstream.delete_consumer(self.stream, self.consumer)


def _acking(cb: Callable[[Msg], object]) -> Callable[[Msg], object]:
    """nats-py's default: ack once the callback returned (not when it raised: the message comes back)."""

    def handler(msg: Msg) -> None:
        cb(msg)
        msg.ack()

    return handler


def _check_push(
    js: JetStream,
    subject: str | None,
    queue: str | None,
    cb: Callable[[Msg], object] | None,
    error_cb: Callable[[BaseException], object] | None,
    config: ConsumerConfig | None,
) -> None:
    """The arguments of every kind of push subscription (the rest are checked where they are read)."""
    js.runtime.check_usable()
    if subject is not None:
        check_subject("subject", subject, wildcards=True)
    if queue is not None:
        check_queue("queue", queue)
    if cb is not None:
        check_callable("cb", cb)
    if error_cb is not None:
        check_callable("error_cb", error_cb)
    if config is not None and not isinstance(config, ConsumerConfig):
        raise errors.InvalidTypeError("config", f"must be a ConsumerConfig, got {type(config).__name__}")


@attrs.frozen(kw_only=True)
class _PushPlan:
    """What a checked ``js.subscribe`` asks for, as its look-up and open steps read it."""

    js: JetStream
    stream: str
    subject: str | None
    queue: str | None
    #: the consumer to bind to or create (None: an ephemeral one)
    name: str | None
    #: the config given (None: none), and the one to build on (the given one or the default)
    config: ConsumerConfig | None
    cfg: ConsumerConfig
    heartbeat: float | None
    flow: bool
    limits: PushLimits
    deliver_policy: DeliverPolicy | None
    headers_only: bool | None
    inactive_threshold: float | timedelta | None
    cb: Callable[[Msg], object] | None
    manual_ack: bool
    error_cb: Callable[[BaseException], object] | None
    report: Callable[[BaseException], None]
    codec: Codec[Any] | None

    def subscription(self, engine: PushEngine, info: ConsumerInfo, created: bool) -> JetStreamSubscription:
        return JetStreamSubscription(
            self.js,
            engine,
            stream=self.stream,
            consumer=info.name,
            created=created,
            cb=self.cb,
            manual_ack=self.manual_ack,
            error_cb=self.error_cb,
            codec=self.codec,
        )


def _open_ordered(plan: _PushPlan) -> JetStreamSubscription:
    """Open: an ordered push consumer over a chain of ephemeral links (no look-up: nothing to bind to)."""
    cfg, inactive = plan.cfg, plan.inactive_threshold
    ordered = OrderedConsumerConfig(
        filter_subjects=[plan.subject] if plan.subject else None,
        deliver_policy=plan.deliver_policy or cfg.deliver_policy,
        opt_start_seq=cfg.opt_start_seq,
        opt_start_time=cfg.opt_start_time,
        headers_only=bool(plan.headers_only or cfg.headers_only),
        inactive_threshold=to_seconds("inactive_threshold", inactive) if inactive else 300.0,
    )
    engine = OrderedPush(
        plan.js.runtime,
        ConsumerChain(plan.js.api, plan.stream, ordered, push=True),
        start_seq=0,
        heartbeat=plan.heartbeat or 5.0,
        limits=plan.limits,
        report=plan.report,
    )
    engine.start(plan.js.timeout)
    return JetStreamSubscription(
        plan.js,
        engine,
        stream=plan.stream,
        consumer=None,
        created=False,
        cb=plan.cb,
        manual_ack=True,
        error_cb=plan.error_cb,
        codec=plan.codec,
    )


def _look_up(plan: _PushPlan, bind: bool) -> ConsumerInfo | None:
    """Look up: the consumer to bind to, after every ADR-15 binding check; None when it is to be created."""
    js, name = plan.js, plan.name
    info = lookup(js, plan.stream, name) if name is not None else None
    if info is not None:
        info = settle_unbound(js, info, plan.queue)
    if info is None and bind:
        raise errors.ConsumerNotFoundError(404, 10014, "consumer not found", plan.stream, name, push=True)
    if info is not None:
        check_push_binding(info, plan.queue, plan.subject)
        if plan.config is not None:
            check_drift(plan.config, info.config)
    return info


def _open_engine(plan: _PushPlan, deliver_subject: str, consumer_config: ConsumerConfig) -> PushEngine:
    push = PushEngine(
        plan.js.runtime,
        label=f"{plan.stream}/{plan.name or 'ephemeral'}",
        deliver_subject=deliver_subject,
        queue=plan.queue or "",
        ack_none=consumer_config.ack_policy == AckPolicy.NONE,
        heartbeat=consumer_config.idle_heartbeat or 0.0,
        limits=plan.limits,
        gap_detection=plan.queue is None,
        report=plan.report,
    )
    push.start(plan.js.timeout)
    return push


def _open(plan: _PushPlan, info: ConsumerInfo | None) -> JetStreamSubscription:
    """Open: the NATS subscription first, then (when none was found) the consumer, which may appear meanwhile."""
    js, cfg, name = plan.js, plan.cfg, plan.name
    deliver = (
        (info.config.deliver_subject if info is not None else None) or cfg.deliver_subject or js.runtime.new_inbox()
    )
    if info is not None:
        return plan.subscription(_open_engine(plan, deliver, info.config), info, created=False)
    inactive = plan.inactive_threshold
    wanted = attrs.evolve(
        cfg,
        durable_name=name if name is not None and cfg.name is None else cfg.durable_name,
        deliver_subject=deliver,
        deliver_group=plan.queue,
        filter_subject=plan.subject if plan.subject and not cfg.filter_subjects else cfg.filter_subject,
        flow_control=True if plan.flow else None,
        idle_heartbeat=plan.heartbeat,
        deliver_policy=plan.deliver_policy or cfg.deliver_policy,
        headers_only=plan.headers_only if plan.headers_only is not None else cfg.headers_only,
        inactive_threshold=to_seconds("inactive_threshold", inactive)
        if inactive is not None
        else cfg.inactive_threshold,
    )
    engine = _open_engine(plan, deliver, wanted)
    try:
        made = create_if_absent(js, plan.stream, wanted)
        if made is None:  # the race: someone created it between our lookup and our create
            assert name is not None
            existing = js.consumer_info(plan.stream, name)
            check_push_binding(existing, plan.queue, plan.subject)
            if existing.config.deliver_subject != deliver:
                engine.stop()
                assert existing.config.deliver_subject is not None
                engine = _open_engine(plan, existing.config.deliver_subject, existing.config)
            info, created = existing, False
        else:
            info, created = made, True
    except BaseException:
        engine.stop()
        raise
    return plan.subscription(engine, info, created)


# -- pull ---------------------------------------------------------------------------------------------------
class PullSubscription(ProcessLocal):
    """A pull subscription made by ``js.pull_subscribe``: ``fetch(batch, timeout)`` as nats-py's."""

    def __init__(self, js: JetStream, stream: str, info: ConsumerInfo, created: bool) -> None:
        self.jetstream = js
        self.stream = stream
        self.consumer = info.name
        #: True when this subscription created the consumer (and so deletes it on unsubscribe)
        self.created = created
        self._runtime = js.runtime
        self._target = PullTarget(
            stream=stream,
            consumer=info.name,
            next_subject=js.api.subject(f"CONSUMER.MSG.NEXT.{stream}.{info.name}").encode(),
            ack_none=info.config.ack_policy == AckPolicy.NONE,
        )
        self._closed = False
        # ADR-13's Pull(1): a wildcard inbox of this subscription's own, made at the first fetch(1) and kept,
        # so a single-message fetch costs one PUB instead of a SUB, a PUB and an UNSUB.
        self._single: Subscription | None = None
        self._single_prefix = ""
        self._single_token = 0
        self._single_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"<PullSubscription {self.stream}/{self.consumer} created={self.created}>"

    def consumer_info(self) -> ConsumerInfo:
        return self.jetstream.consumer_info(self.stream, self.consumer)

    def lag(self) -> ConsumerLag:
        """How far behind this subscription's consumer is now (from a fresh ``consumer_info()``; see
        [`ConsumerLag`][jetstream_sync.models.ConsumerLag])."""
        return ConsumerLag.from_info(self.consumer_info())

    def fetch(
        self,
        batch: int = 1,
        timeout: float | timedelta | None = 5.0,
        heartbeat: float | timedelta | None = None,
        *,
        codec: Codec[Any] | None = None,
    ) -> list[Msg]:
        """Up to ``batch`` messages (ADR-13): what is there now (a no-wait pull), else a long pull expiring
        100 ms before ``timeout``. Returns the messages that came; TimeoutError when none did. With ``codec``
        each message's ``value`` is its payload decoded (lazily: see `jetstream_sync.codecs`)."""
        if self._closed:
            raise errors.SubscriptionClosedError("the pull subscription was unsubscribed")
        self._runtime.check_usable()
        check_codec(codec)
        msgs = self._fetch(batch, timeout, heartbeat)
        if codec is not None:
            for msg in msgs:
                msg._codec = codec
        return msgs

    def _fetch(self, batch: int, timeout: float | timedelta | None, heartbeat: float | timedelta | None) -> list[Msg]:
        size = check_int("batch", batch, minimum=1)
        seconds = check_timeout(timeout, 5.0)
        deadline = time.monotonic() + seconds
        if size == 1:
            msgs = self._pull_one_now(deadline)
        else:
            msgs = self._pull(FetchOptions(max_messages=size, no_wait=True), deadline)
        if msgs:
            return msgs
        expires = seconds - _PULL_MARGIN
        if expires > 0.001:
            hb = None if heartbeat is None else to_seconds("heartbeat", heartbeat)
            if hb is not None and hb * 2 > expires:
                raise errors.InvalidArgumentError(
                    "heartbeat", f"must be at most half of the timeout ({expires / 2:g}s)"
                )
            msgs = self._pull(FetchOptions(max_messages=size, expires=expires, idle_heartbeat=hb), deadline)
        if not msgs:
            raise errors.TimeoutError(f"no message from {self.stream}/{self.consumer} within {seconds:g}s")
        return msgs

    def _pull_one_now(self, deadline: float) -> list[Msg]:
        """Pull(1) (ADR-13): a no-wait request for one message through this subscription's wildcard inbox.

        Pulled messages arrive under their own subjects, so the inbox cannot tell requests apart by subject;
        it needs none: one request is out at a time (the lock), a status answers the request whose token its
        subject carries (an older one is skipped), and any message is this consumer's message, also one that
        answered an earlier request too late (handing it out beats leaving it to redelivery).
        """
        with self._single_lock:
            if self._single is None:
                self._single_prefix = self._runtime.new_inbox()
                self._single = self.jetstream.api.subscribe_replies(f"{self._single_prefix}.*", max_pending=64)
            single = self._single
            self._single_token += 1
            reply = f"{self._single_prefix}.{self._single_token}"
            self.jetstream.api.publish(self._target.next_subject.decode(), _NO_WAIT_ONE, reply=reply)
            while (remaining := deadline - time.monotonic()) > 0:
                try:
                    msg = single.next_msg(remaining)
                except errors.TimeoutError:
                    return []
                status, _ = status_of(msg.raw_headers)
                if status is None and msg.reply.startswith("$JS.ACK."):
                    return [msg]  # pull subscriptions use explicit acks (ADR-15), so a core Msg acks as it should
                if msg.subject == reply:
                    return []  # 404 / 408 (nothing now) or another status: the long pull that follows reports it
            return []

    def _pull(self, options: FetchOptions, deadline: float) -> list[Msg]:
        pull = FetchPull(self._runtime, self._target, options)
        pull.start()
        msgs: list[Msg] = []
        try:
            while len(msgs) < options.batch:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                try:
                    msgs.append(pull.take(remaining))
                except errors.TimeoutError:
                    break
        except BufferFinished:  # the pull ended cleanly (batch done, expired, 404/408)
            pass
        finally:
            pull.cancel()
        return msgs

    def unsubscribe(self) -> None:
        """Stop; delete the consumer if this subscription created it."""
        self._runtime.fork_guard.check()
        self._closed = True
        with self._single_lock:
            single, self._single = self._single, None
        if single is not None:
            single.unsubscribe()
        if self.created:
            self.created = False
            self.jetstream.delete_consumer(self.stream, self.consumer)


def _check_pull(
    js: JetStream,
    subject: str | None,
    durable: str | None,
    stream: str | None,
    config: ConsumerConfig | None,
    bind: bool,
) -> tuple[ConsumerConfig, str | None]:
    """The arguments of ``js.pull_subscribe``: the config to build on and the consumer's name (None: ephemeral)."""
    js.runtime.check_usable()
    if subject is not None:
        check_subject("subject", subject, wildcards=True)
    if durable is not None:
        check_name("durable", durable)
    if config is not None and not isinstance(config, ConsumerConfig):
        raise errors.InvalidTypeError("config", f"must be a ConsumerConfig, got {type(config).__name__}")
    cfg = config or ConsumerConfig()
    if cfg.ack_policy in (AckPolicy.NONE, AckPolicy.ALL):
        raise errors.InvalidArgumentError(
            "config.ack_policy", f"a pull subscription needs explicit acks, not {cfg.ack_policy.value!r} (ADR-15)"
        )
    if cfg.deliver_subject:
        raise errors.PullSubscribeToPushConsumerError("a pull subscription's config cannot have a deliver_subject")
    if subject is None and stream is None:
        raise errors.InvalidArgumentError("subject", "give a subject, or stream= and the consumer to bind to")
    name = cfg.durable_name or cfg.name or durable
    if bind and (name is None or stream is None):
        raise errors.InvalidArgumentError("bind", "binding needs both stream= and durable=")
    return cfg, name


def _open_pull(
    js: JetStream, stream: str, subject: str | None, name: str | None, cfg: ConsumerConfig
) -> PullSubscription:
    """Create the consumer a pull subscription asked for (nothing to subscribe first: fetch pulls on its own)."""
    wanted = attrs.evolve(
        cfg,
        durable_name=name if name is not None and cfg.name is None else cfg.durable_name,
        filter_subject=subject if subject and not cfg.filter_subjects else cfg.filter_subject,
    )
    made = create_if_absent(js, stream, wanted)
    if made is None:
        assert name is not None
        existing = js.consumer_info(stream, name)
        check_pull_binding(existing, subject)
        return PullSubscription(js, stream, existing, created=False)
    return PullSubscription(js, stream, made, created=True)


# -- the calls, mixed into JetStream --------------------------------------------------------------------------
class _SubscribeCalls:
    """``js.subscribe`` and ``js.pull_subscribe``: their signatures, stated here once, and each call's three
    steps: check the arguments (before anything is sent), look the consumer up, open the subscription."""

    def subscribe(
        self,
        subject: str | None,
        queue: str | None = None,
        cb: Callable[[Msg], object] | None = None,
        durable: str | None = None,
        stream: str | None = None,
        config: ConsumerConfig | None = None,
        manual_ack: bool = False,
        ordered_consumer: bool = False,
        idle_heartbeat: float | timedelta | None = None,
        flow_control: bool = False,
        pending_msgs_limit: int = DEFAULT_PENDING_MSGS,
        pending_bytes_limit: int = DEFAULT_PENDING_BYTES,
        deliver_policy: DeliverPolicy | None = None,
        headers_only: bool | None = None,
        inactive_threshold: float | timedelta | None = None,
        *,
        bind: bool = False,
        consumer: str | None = None,
        error_cb: Callable[[BaseException], object] | None = None,
        codec: Codec[Any] | None = None,
    ) -> JetStreamSubscription:
        """A push subscription as nats-py's ``js.subscribe`` (same arguments and order), per ADR-15.

        Finds the stream from ``subject`` unless ``stream`` is given; binds to ``durable`` / ``consumer`` (the
        ``queue`` name when neither is given) after ADR-15's checks, or creates the consumer (after subscribing)
        and then deletes it on ``unsubscribe()`` / ``drain()``. ``bind=True`` only binds. With ``cb`` the
        callback runs on the subscription's own thread and each message is acked when it returns unless
        ``manual_ack``; without it read with ``next_msg(timeout)`` or iteration. Asynchronous errors (heartbeat
        alarms, gaps, statuses, a failed delete after drain) go to ``error_cb`` (or the log). With ``codec``
        each message's ``value`` is its payload decoded (see `jetstream_sync.codecs`); a PayloadDecodeError
        that ``cb`` lets escape terminates its message, as a consume's handler does.
        """
        js = as_jetstream(self)
        _check_push(js, subject, queue, cb, error_cb, config)
        check_codec(codec)
        limits = PushLimits(
            max_messages=check_int("pending_msgs_limit", pending_msgs_limit, minimum=1),
            max_bytes=check_int("pending_bytes_limit", pending_bytes_limit, minimum=1),
            alarm_after=None,
        )
        cfg = config or ConsumerConfig()
        heartbeat = to_seconds("idle_heartbeat", idle_heartbeat) if idle_heartbeat is not None else cfg.idle_heartbeat
        flow = bool(flow_control or cfg.flow_control)
        name = consumer or cfg.durable_name or cfg.name or durable
        if durable is not None:
            check_name("durable", durable)
        if ordered_consumer:
            if queue is not None or name is not None or bind:
                raise errors.InvalidArgumentError(
                    "ordered_consumer",
                    "an ordered consumer is ephemeral and single: no queue, durable, consumer or bind",
                )
            if manual_ack:
                raise errors.InvalidArgumentError("manual_ack", "an ordered consumer takes no acks")
        if queue is not None:
            if flow:
                raise errors.QueueFlowControlError("flow_control cannot be used with a queue subscription (ADR-15)")
            if heartbeat:
                raise errors.QueueHeartbeatError("idle_heartbeat cannot be used with a queue subscription (ADR-15)")
            if name is None:
                name = queue  # ADR-15: the queue name is the durable when neither consumer nor durable is given
        if bind and (name is None or stream is None):
            raise errors.InvalidArgumentError(
                "bind", "binding needs both stream= and a consumer (consumer= or durable=)"
            )
        if subject is None and stream is None:
            raise errors.InvalidArgumentError("subject", "give a subject, or stream= and the consumer to bind to")
        stream_name = check_name("stream", stream) if stream is not None else find_stream(js, subject or "")
        plan = _PushPlan(
            js=js,
            stream=stream_name,
            subject=subject,
            queue=queue,
            name=name,
            config=config,
            cfg=cfg,
            heartbeat=heartbeat,
            flow=flow,
            limits=limits,
            deliver_policy=deliver_policy,
            headers_only=headers_only,
            inactive_threshold=inactive_threshold,
            cb=cb,
            manual_ack=manual_ack,
            error_cb=error_cb,
            report=reporter(f"{stream_name}/{name or 'ephemeral'}", error_cb, js.runtime),
            codec=codec,
        )
        if ordered_consumer:
            return _open_ordered(plan)
        return _open(plan, _look_up(plan, bind))

    def pull_subscribe(
        self,
        subject: str | None,
        durable: str | None = None,
        stream: str | None = None,
        config: ConsumerConfig | None = None,
        *,
        bind: bool = False,
    ) -> PullSubscription:
        """A pull subscription as nats-py's ``js.pull_subscribe`` (ADR-13 fetch): ``fetch(batch, timeout)``
        returns a list, or raises TimeoutError when no message came."""
        js = as_jetstream(self)
        cfg, name = _check_pull(js, subject, durable, stream, config, bind)
        stream_name = check_name("stream", stream) if stream is not None else find_stream(js, subject or "")
        info = lookup(js, stream_name, name) if name is not None else None
        if info is None and bind:
            raise errors.ConsumerNotFoundError(404, 10014, "consumer not found", stream_name, name)
        if info is None:
            return _open_pull(js, stream_name, subject, name, cfg)
        check_pull_binding(info, subject)
        if config is not None:
            check_drift(config, info.config)
        return PullSubscription(js, stream_name, info, created=False)
