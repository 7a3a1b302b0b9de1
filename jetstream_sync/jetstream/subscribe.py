"""``js.subscribe`` and ``js.pull_subscribe``: the ADR-15 / ADR-13 subscribe API, as blocking versions of
nats-py's calls, so code ported from nats-py keeps its shape.

The workflow is ADR-15's: find the stream from the subject (``STREAM.NAMES``, exactly one match), look the
consumer up and run every binding check (push_bound, deliver groups, filter subject, push against pull,
configuration drift, flow control and heartbeats over queues), subscribe *before* creating the consumer,
handle the "already exists" race by looking up and checking again, and delete on ``unsubscribe()`` /
``drain()`` only a consumer this subscription created. Delivery runs on the push engine
(``consumers/_push.py``) with ADR-15's automatic status management; ``pull_subscribe(...).fetch`` follows
ADR-13 (a no-wait pull first, then a long pull expiring 100 ms before the client's timeout).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import TYPE_CHECKING

import attrs

from .. import errors
from .._protocol import status_of
from .._runtime import BufferFinished, ProcessLocal
from .._validate import check_callable, check_int, check_name, check_queue, check_subject, check_timeout, to_seconds
from ..message import Msg
from ..models import AckPolicy, ConsumerConfig, ConsumerInfo, ConsumerLag, DeliverPolicy
from ..subscription import Subscription
from .consumers import OrderedConsumerConfig
from .consumers._chain import ConsumerChain
from .consumers._fetch import FetchPull
from .consumers._push import OrderedPush, PushEngine, PushLimits
from .consumers._reads import reporter
from .consumers._target import PullTarget
from .consumers.delivery import ConsumeContext, MessagesIterator
from .consumers.options import FetchOptions
from .consumers.push import DEFAULT_PENDING_BYTES, DEFAULT_PENDING_MSGS

if TYPE_CHECKING:
    from .context import JetStream

__all__ = ["JetStreamSubscription", "PullSubscription", "pull_subscribe", "subscribe"]

log = logging.getLogger("jetstream_sync")

# ADR-13: the long pull expires this long before the client gives up, so the server's 408 comes first.
_PULL_MARGIN = 0.1
_NO_WAIT_ONE = b'{"batch":1,"no_wait":true}'
# Fields of a ConsumerConfig that are about binding, not the consumer's behaviour (never "drift").
# Checked by their own ADR-15 rules (or naming the consumer); deliver_subject is compared like the rest: a
# config asking for delivery to one subject must not silently bind to a consumer delivering to another.
_BINDING_FIELDS = frozenset({"name", "durable_name", "deliver_group", "filter_subject", "filter_subjects", "metadata"})
_DEFAULTS = {f.name: f.default for f in attrs.fields(ConsumerConfig)}
# How long a subscribe waits for the server to drop a previous subscriber's binding, and its first pause
# between asking (doubled each time): about 7 requests when the binding is real.
_UNBIND_GRACE = 1.0
_UNBIND_FIRST_PAUSE = 0.01


# -- the ADR-15 checks --------------------------------------------------------------------------------------
def find_stream(js: JetStream, subject: str) -> str:
    """The one stream capturing ``subject`` (ADR-15 "Stream name"); an error for none or several."""
    names = list(js.stream_names(subject))
    if not names:
        raise errors.StreamNotFoundError(
            404,
            10059,
            f"no stream captures subject {subject!r}; create one whose subjects include it (js.create_stream("
            f"StreamConfig(name=..., subjects=[{subject!r}]))) or pass stream=",
        )
    if len(names) > 1:
        raise errors.SubscribeError(
            f"subject {subject!r} is captured by several streams ({', '.join(sorted(names))}); pass stream="
        )
    return str(names[0])


def check_drift(given: ConsumerConfig, existing: ConsumerConfig) -> None:
    """ADR-15: a configuration that differs from the existing consumer's is an error (subscribe never updates
    a consumer). Only fields the caller set (different from the default) are compared."""
    drifted = []
    for field in attrs.fields(ConsumerConfig):
        if field.name in _BINDING_FIELDS:
            continue
        mine = getattr(given, field.name)
        if mine is None or mine == _DEFAULTS[field.name]:
            continue
        if mine != getattr(existing, field.name):
            drifted.append(f"{field.name}={mine!r} (the consumer has {getattr(existing, field.name)!r})")
    if drifted:
        raise errors.ConsumerConfigMismatchError(
            "the configuration given differs from the existing consumer's: " + "; ".join(drifted) + ". Subscribe does"
            " not change consumers: update it with js.update_consumer, or drop the differing options"
        )


def check_filter(info: ConsumerInfo, subject: str | None) -> None:
    config = info.config
    filters = [config.filter_subject] if config.filter_subject else list(config.filter_subjects or [])
    if subject and filters and subject not in filters:
        raise errors.SubjectMismatchError(
            f"consumer {info.name!r} filters {', '.join(filters)}, not {subject!r}; subscribe to its subject or use "
            "another consumer"
        )


def check_push_binding(info: ConsumerInfo, queue: str | None, subject: str | None) -> None:
    """Every ADR-15 check of binding a push subscription to an existing consumer."""
    config = info.config
    if not config.deliver_subject:
        raise errors.PullSubscribeRequiredError(
            f"consumer {info.name!r} is a pull consumer (no deliver_subject); use js.pull_subscribe"
        )
    check_filter(info, subject)
    group = config.deliver_group
    if queue is None:
        if group:
            raise errors.ConsumerIsQueueBoundError(
                f"consumer {info.name!r} was created for queue group {group!r}; subscribe with queue={group!r}"
            )
        if info.push_bound:
            raise errors.DuplicateSubscriptionError(
                f"consumer {info.name!r} is already bound to a subscriber and has no deliver group; a second "
                "subscriber would receive every message again"
            )
        return
    if not group:
        raise errors.ConsumerNotQueueError(
            f"consumer {info.name!r} was created without a deliver group; it cannot serve queue {queue!r}"
        )
    if group != queue:
        raise errors.DeliverGroupMismatchError(f"consumer {info.name!r} serves queue group {group!r}, not {queue!r}")
    if config.flow_control:
        raise errors.QueueFlowControlError(f"consumer {info.name!r} has flow control, which queue groups cannot use")
    if config.idle_heartbeat:
        raise errors.QueueHeartbeatError(f"consumer {info.name!r} has idle heartbeats, which queue groups cannot use")


def check_pull_binding(info: ConsumerInfo, subject: str | None) -> None:
    if info.config.deliver_subject:
        raise errors.PullSubscribeToPushConsumerError(
            f"consumer {info.name!r} is a push consumer (deliver_subject {info.config.deliver_subject!r}); use "
            "js.subscribe"
        )
    check_filter(info, subject)


def _lookup(js: JetStream, stream: str, name: str) -> ConsumerInfo | None:
    try:
        return js.consumer_info(stream, name)
    except errors.ConsumerNotFoundError:
        return None


def _settle_unbound(js: JetStream, info: ConsumerInfo, queue: str | None) -> ConsumerInfo | None:
    """Give the server a moment to see that a previous subscriber of this consumer went away.

    The server clears ``push_bound`` when it notices the deliver subject lost its interest, which happens
    asynchronously after the UNSUB: a subscribe right after an unsubscribe (nats.go #1269) would otherwise
    see the old binding and fail with DuplicateSubscriptionError. A genuine second subscriber still fails,
    ``_UNBIND_GRACE`` later.
    """
    if queue is not None or info.config.deliver_group or not info.push_bound:
        return info
    deadline = time.monotonic() + _UNBIND_GRACE
    pause = _UNBIND_FIRST_PAUSE
    current: ConsumerInfo | None = info
    while current is not None and current.push_bound and (remaining := deadline - time.monotonic()) > 0:
        time.sleep(min(pause, remaining))
        pause *= 2
        current = _lookup(js, info.stream_name, info.name)
    return current


def _create(js: JetStream, stream: str, config: ConsumerConfig) -> ConsumerInfo | None:
    """Create the consumer; None when it appeared meanwhile (the "already exists" race)."""
    try:
        return js._consumer_request(stream, config, "create")
    except errors.ConsumerExistsError:
        return None


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
    ) -> None:
        self.jetstream = js
        self.stream = stream
        self.consumer = consumer
        #: True when this subscription created the consumer (and so deletes it on unsubscribe/drain)
        self.created = created
        self._engine = engine
        self._error_cb = error_cb
        self._iterator = MessagesIterator(engine)
        self._context: ConsumeContext | None = None
        self._deleted = False
        self.drained = threading.Event()
        if cb is not None:
            handler = cb if manual_ack else _acking(cb)
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


def subscribe(
    js: JetStream,
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
) -> JetStreamSubscription:
    """See [`JetStream.subscribe`][jetstream_sync.JetStream.subscribe]."""
    js.runtime.check_usable()
    # -- arguments, all checked before anything is sent ---------------------------------------------------
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
                "ordered_consumer", "an ordered consumer is ephemeral and single: no queue, durable, consumer or bind"
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
        raise errors.InvalidArgumentError("bind", "binding needs both stream= and a consumer (consumer= or durable=)")
    if subject is None and stream is None:
        raise errors.InvalidArgumentError("subject", "give a subject, or stream= and the consumer to bind to")
    stream_name = check_name("stream", stream) if stream is not None else find_stream(js, subject or "")
    runtime = js.runtime
    label = f"{stream_name}/{name or 'ephemeral'}"
    report = reporter(label, error_cb, runtime)

    if ordered_consumer:
        ordered = OrderedConsumerConfig(
            filter_subjects=[subject] if subject else None,
            deliver_policy=deliver_policy or cfg.deliver_policy,
            opt_start_seq=cfg.opt_start_seq,
            opt_start_time=cfg.opt_start_time,
            headers_only=bool(headers_only or cfg.headers_only),
            inactive_threshold=to_seconds("inactive_threshold", inactive_threshold) if inactive_threshold else 300.0,
        )
        engine: PushEngine = OrderedPush(
            runtime,
            ConsumerChain(js.api, stream_name, ordered, push=True),
            start_seq=0,
            heartbeat=heartbeat or 5.0,
            limits=limits,
            report=report,
        )
        engine.start(js.timeout)
        return JetStreamSubscription(
            js, engine, stream=stream_name, consumer=None, created=False, cb=cb, manual_ack=True, error_cb=error_cb
        )

    # -- look the consumer up ---------------------------------------------------------------------------
    info = _lookup(js, stream_name, name) if name is not None else None
    if info is not None:
        info = _settle_unbound(js, info, queue)
    if info is None and bind:
        raise errors.ConsumerNotFoundError(404, 10014, "consumer not found", stream_name, name)
    if info is not None:
        check_push_binding(info, queue, subject)
        if config is not None:
            check_drift(config, info.config)

    # -- the NATS subscription first, then the consumer -------------------------------------------------
    deliver = (info.config.deliver_subject if info is not None else None) or cfg.deliver_subject or runtime.new_inbox()

    def open_engine(deliver_subject: str, consumer_config: ConsumerConfig) -> PushEngine:
        push = PushEngine(
            runtime,
            label=label,
            deliver_subject=deliver_subject,
            queue=queue or "",
            ack_none=consumer_config.ack_policy == AckPolicy.NONE,
            heartbeat=consumer_config.idle_heartbeat or 0.0,
            limits=limits,
            gap_detection=queue is None,
            report=report,
        )
        push.start(js.timeout)
        return push

    created = False
    if info is not None:
        engine = open_engine(deliver, info.config)
    else:
        wanted = attrs.evolve(
            cfg,
            durable_name=name if name is not None and cfg.name is None else cfg.durable_name,
            deliver_subject=deliver,
            deliver_group=queue,
            filter_subject=subject if subject and not cfg.filter_subjects else cfg.filter_subject,
            flow_control=True if flow else None,
            idle_heartbeat=heartbeat,
            deliver_policy=deliver_policy or cfg.deliver_policy,
            headers_only=headers_only if headers_only is not None else cfg.headers_only,
            inactive_threshold=to_seconds("inactive_threshold", inactive_threshold)
            if inactive_threshold is not None
            else cfg.inactive_threshold,
        )
        engine = open_engine(deliver, wanted)
        try:
            made = _create(js, stream_name, wanted)
            if made is None:  # the race: someone created it between our lookup and our create
                assert name is not None
                existing = js.consumer_info(stream_name, name)
                check_push_binding(existing, queue, subject)
                if existing.config.deliver_subject != deliver:
                    engine.stop()
                    assert existing.config.deliver_subject is not None
                    engine = open_engine(existing.config.deliver_subject, existing.config)
                info = existing
            else:
                info, created = made, True
        except BaseException:
            engine.stop()
            raise
    return JetStreamSubscription(
        js,
        engine,
        stream=stream_name,
        consumer=info.name,
        created=created,
        cb=cb,
        manual_ack=manual_ack,
        error_cb=error_cb,
    )


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
        self, batch: int = 1, timeout: float | timedelta | None = 5.0, heartbeat: float | timedelta | None = None
    ) -> list[Msg]:
        """Up to ``batch`` messages (ADR-13): what is there now (a no-wait pull), else a long pull expiring
        100 ms before ``timeout``. Returns the messages that came; TimeoutError when none did."""
        if self._closed:
            raise errors.SubscriptionClosedError("the pull subscription was unsubscribed")
        self._runtime.check_usable()
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


def pull_subscribe(
    js: JetStream,
    subject: str | None,
    durable: str | None = None,
    stream: str | None = None,
    config: ConsumerConfig | None = None,
    *,
    bind: bool = False,
) -> PullSubscription:
    """See [`JetStream.pull_subscribe`][jetstream_sync.JetStream.pull_subscribe]."""
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
    stream_name = check_name("stream", stream) if stream is not None else find_stream(js, subject or "")
    info = _lookup(js, stream_name, name) if name is not None else None
    if info is None and bind:
        raise errors.ConsumerNotFoundError(404, 10014, "consumer not found", stream_name, name)
    if info is not None:
        check_pull_binding(info, subject)
        if config is not None:
            check_drift(config, info.config)
        return PullSubscription(js, stream_name, info, created=False)
    wanted = attrs.evolve(
        cfg,
        durable_name=name if name is not None and cfg.name is None else cfg.durable_name,
        filter_subject=subject if subject and not cfg.filter_subjects else cfg.filter_subject,
    )
    made = _create(js, stream_name, wanted)
    if made is None:
        assert name is not None
        existing = js.consumer_info(stream_name, name)
        check_pull_binding(existing, subject)
        return PullSubscription(js, stream_name, existing, created=False)
    return PullSubscription(js, stream_name, made, created=True)
