"""Consumer: a handle on one consumer, its info, and the ADR-37 ways to read it: fetch, next, messages, consume.

Each reading method takes its options as keywords or as one ``options=`` object
([`FetchOptions`][jetstream_sync.FetchOptions], [`ConsumeOptions`][jetstream_sync.ConsumeOptions]), validated before
anything is sent.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Hashable
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import attrs

from ..._delivery import ContinuousPull, FetchPull, PinTracker, PullTarget, SinglePull, read_timed_out
from ..._validate import check_callable, options_from, to_seconds
from ...codecs._payload import check_codec
from ...message import Msg
from ...models import AckPolicy, ConsumerInfo, PriorityPolicy
from ...models.reads import (
    DEFAULT_EXPIRES,
    MIN_EXPIRES,
    MIN_HEARTBEAT,
    ConsumeOptions,
    FetchOptions,
    PullPlan,
    check_priority,
)
from ._progress import acks_checked, progress_keeper
from ._reads import FetchCalls, ServerConsumerHandle, reporter, start_consume
from .delivery import ConsumeContext, ErrorHandler, MessageBatch, MessagesIterator, decoded_with

if TYPE_CHECKING:
    from ...codecs import Codec
    from ..context import JetStream

__all__ = ["Consumer"]

log = logging.getLogger("jetstream_sync")

_SERVER_PIN_TIMEOUT = 120.0  # the server's priority_timeout of a pinned-client group left unset


def _pull_within_pin_timeout(plan: PullPlan, pin_timeout: float) -> PullPlan:
    """A pinned client keeps its pin only while it pulls at least every ``priority_timeout`` (the server's
    timer restarts on a pull carrying the pin, not on a delivery): pulls of an idle consume expire, and are
    sent again, within half of it."""
    limit = max(MIN_EXPIRES, pin_timeout / 2)
    if plan.expires <= limit:
        return plan
    log.debug("consume: expires %gs -> %gs, within the pin timeout of %gs", plan.expires, limit, pin_timeout)
    heartbeat = min(plan.idle_heartbeat, max(MIN_HEARTBEAT, limit / 2))
    return attrs.evolve(plan, expires=limit, idle_heartbeat=heartbeat)


class Consumer(ServerConsumerHandle, FetchCalls):
    """A handle on one pull consumer. ``cached_info`` is what the last call saw; ``info()`` asks the server."""

    def __init__(self, js: JetStream, info: ConsumerInfo) -> None:
        super().__init__(js, info)
        self._pull_target = PullTarget(
            stream=self.stream_name,
            consumer=self.name,
            next_subject=js.api.subject(f"CONSUMER.MSG.NEXT.{self.stream_name}.{self.name}").encode(),
            ack_none=info.config.ack_policy == AckPolicy.NONE,  # a consumer's ack policy cannot change
            # one pin per handle, shared by its pulls (as nats.go); a policy changed later needs a new handle
            pin=PinTracker() if info.config.priority_policy is PriorityPolicy.PINNED_CLIENT else None,
        )
        self._single = SinglePull(self._runtime, self._pull_target)

    @property
    def pin_id(self) -> str | None:
        """With a PINNED_CLIENT priority group: the pin this handle holds (None when not pinned)."""
        pin = self._pull_target.pin
        return pin.id or None if pin is not None else None

    # -- one pull at a time -----------------------------------------------------------------------------
    def next(
        self,
        timeout: float | timedelta = DEFAULT_EXPIRES,
        *,
        idle_heartbeat: float | timedelta | None = None,
        codec: Codec[Any] | None = None,
        **priority: Any,
    ) -> Msg:
        """One message, pulled when called; TimeoutError when none comes within ``timeout`` seconds. On a
        consumer with priority groups: ``priority_group`` and the policy's ``min_pending``, ``min_ack_pending``
        or ``priority``.

        A disconnect does not end the call: the pull is asked again once reconnected and the call waits out
        ``timeout`` (a message published meanwhile is returned); the TimeoutError of a call whose time included
        a disconnect says so. With ``codec`` the message's ``value`` is its payload decoded."""
        check_codec(codec)
        msg = self._next(to_seconds("timeout", timeout), idle_heartbeat, priority)
        if codec is not None:
            msg._codec = codec
        return msg

    def _next(self, seconds: float, idle_heartbeat: float | timedelta | None, priority: dict[str, Any]) -> Msg:
        options = options_from(
            FetchOptions,
            None,
            {"max_messages": 1, "expires": seconds, "idle_heartbeat": idle_heartbeat, **priority},
            "next",
        )
        single = self._single
        if options.pull_priority is None and single.target.pin is None and single.busy.acquire(blocking=False):
            try:  # ADR-13's Pull(1) on the handle's reusable subscription (_single.py)
                self._runtime.check_usable()
                check_priority(None, self.cached_info.config, single.label)
                return single.next(options)
            finally:
                single.busy.release()
        reconnects = self._runtime.reconnects
        for msg in self._fetch(options):  # another thread's next() holds it, or a priority group
            return msg
        connected = self._runtime.is_connected
        interrupted = self._runtime.reconnects != reconnects or not connected
        raise read_timed_out(self._pull_target.label, seconds, interrupted, connected)

    def _fetch(self, options: FetchOptions) -> MessageBatch:
        self._runtime.check_usable()
        check_priority(options.pull_priority, self.cached_info.config, self._pull_target.label)
        wait = self.jetstream.timeout if options.no_wait else options.expires + options.grace
        pull = FetchPull(self._runtime, self._pull_target, options)
        pull.start()
        return MessageBatch(pull, time.monotonic() + wait)

    # -- continuous pulls -------------------------------------------------------------------------------
    def _continuous(
        self, options: ConsumeOptions | None, kwargs: dict[str, Any], error_handler: ErrorHandler | None
    ) -> ContinuousPull:
        runtime = self._runtime
        runtime.check_usable()
        if error_handler is not None:
            check_callable("error_handler", error_handler)
        plan = options_from(ConsumeOptions, options, kwargs, "consume").plan()
        target = self._pull_target
        config = self.cached_info.config
        check_priority(plan.priority, config, target.label)
        if target.pin is not None:
            plan = _pull_within_pin_timeout(plan, config.priority_timeout or _SERVER_PIN_TIMEOUT)
        return ContinuousPull(runtime, target, plan, reporter(target.label, error_handler, runtime))

    def messages(
        self,
        *,
        options: ConsumeOptions | None = None,
        error_handler: ErrorHandler | None = None,
        codec: Codec[Any] | None = None,
        **kwargs: Any,
    ) -> MessagesIterator:
        """An iterator over a continuous pull (ADR-37 consume) that keeps a bounded buffer filled.

        Keywords (or ``options=ConsumeOptions(...)``): max_messages (500) or max_bytes, expires (30 s),
        idle_heartbeat (expires/2, 0.5-30 s), threshold_messages / threshold_bytes (50%). With ``codec`` each
        message's ``value`` is its payload decoded (see `jetstream_sync.codecs`).
        """
        check_codec(codec)
        pull = self._continuous(options, kwargs, error_handler)
        pull.start(self.jetstream.timeout)
        return decoded_with(MessagesIterator(pull), codec)

    def consume(
        self,
        handler: Callable[[Msg], object],
        *,
        options: ConsumeOptions | None = None,
        error_handler: ErrorHandler | None = None,
        auto_in_progress: bool = False,
        workers: int = 1,
        ordered_by: Callable[[Msg], Hashable] | None = None,
        deferred_ack: bool = False,
        codec: Codec[Any] | None = None,
        **kwargs: Any,
    ) -> ConsumeContext:
        """Run ``handler(msg)`` for every message, serially, on the consume's own thread.

        Takes the options of [`messages`][jetstream_sync.Consumer.messages]. Errors and warnings (status warnings,
        missed heartbeats, exceptions from the handler) go to ``error_handler`` on the client's callbacks thread;
        terminal ones end the consume. With ``auto_in_progress`` a handler that works longer than half the consumer's
        ack_wait has its message kept alive (+WPI every ack_wait/2, from the watchdog) until it acks or returns, so it
        is not redelivered meanwhile. With ``workers=N`` the handler runs on N threads; with ``ordered_by``
        (a function of the message, e.g. ``lambda m: m.subject``) messages of one key go to one worker, in
        order, never two at once (see ``_dispatch/_pool.py``).

        On an AckExplicit consumer the handler answers each message (``ack``, ``nak``, ``term``, or
        ``in_progress`` for more time); one that returns without doing so is logged at WARNING, once per
        consume, since the server will deliver that message again after ack_wait. An application that acks
        later on another thread on purpose passes ``deferred_ack=True``, which turns that warning off. The
        ack rules of every API are in the Consuming guide, "Who acks, and when".

        With ``codec`` (see `jetstream_sync.codecs`) ``msg.value`` is the payload decoded, on first access:
        a payload that does not decode raises PayloadDecodeError there, in the handler, which may nak or term
        the message; let it escape and it is one more exception from the handler (the message is not acked).
        """
        config = self.cached_info.config
        progress = progress_keeper(self._runtime, config, auto_in_progress)
        check_acks = acks_checked(config, deferred_ack)
        return start_consume(
            lambda: self._continuous(options, kwargs, error_handler),
            handler,
            progress,
            workers,
            ordered_by,
            lambda pull: pull.start(self.jetstream.timeout),
            check_acks=check_acks,
            codec=codec,
            lag_of=self.lag,
        )
