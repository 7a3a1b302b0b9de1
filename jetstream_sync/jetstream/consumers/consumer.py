"""Consumer: a handle on one consumer, its info, and the ADR-37 ways to read it: fetch, next, messages, consume.

Each reading method takes its options as keywords or as one ``options=`` object (:class:`FetchOptions`,
:class:`ConsumeOptions`), validated before anything is sent.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from ... import errors
from ..._runtime import Runtime
from ..._validate import options_from, to_seconds
from ...message import Msg
from ...models import AckPolicy, ConsumerInfo
from ._pull import ContinuousPull, FetchPull, PullTarget
from .delivery import ConsumeContext, ErrorHandler, MessageBatch, MessagesIterator
from .options import DEFAULT_EXPIRES, ConsumeOptions, FetchOptions

if TYPE_CHECKING:
    from ..context import JetStream

__all__ = ["Consumer", "check_callable", "reporter"]

log = logging.getLogger("jetstream_sync")

# The client-side deadline of a fetch outlives the server's expiry by this much, so the server's own
# "expired" status normally ends the batch.
_FETCH_GRACE = 1.0


class Consumer:
    """A handle on one pull consumer. ``cached_info`` is what the last call saw; ``info()`` asks the server."""

    def __init__(self, js: JetStream, info: ConsumerInfo) -> None:
        #: the JetStream context this handle was made by
        self.jetstream = js
        self._runtime: Runtime = js.client.runtime
        self.stream_name: str = info.stream_name
        self.name: str = info.name
        self.cached_info = info
        self._pull_target = PullTarget(
            stream=self.stream_name,
            consumer=self.name,
            next_subject=js.api.subject(f"CONSUMER.MSG.NEXT.{self.stream_name}.{self.name}").encode(),
            ack_none=info.config.ack_policy == AckPolicy.NONE,  # a consumer's ack policy cannot change
        )

    def __repr__(self) -> str:
        return f"<Consumer {self.stream_name!r}/{self.name!r}>"

    def info(self) -> ConsumerInfo:
        self.cached_info = self.jetstream.consumer_info(self.stream_name, self.name)
        return self.cached_info

    def delete(self) -> None:
        self.jetstream.delete_consumer(self.stream_name, self.name)

    # -- one pull at a time -----------------------------------------------------------------------------
    def fetch(
        self, max_messages: int | None = None, *, options: FetchOptions | None = None, **kwargs: Any
    ) -> MessageBatch:
        """One pull for up to ``max_messages`` (and ``max_bytes``); messages are yielded as they arrive.

        Keywords: ``max_bytes``, ``expires`` (30 s), ``idle_heartbeat`` (5 s for pulls of 10 s or longer),
        ``no_wait``; or ``options=FetchOptions(...)``. An expired or empty pull is a normal, possibly empty batch.
        """
        if options is None:
            kwargs["max_messages"] = max_messages
        elif max_messages is not None:
            raise errors.InvalidArgumentError("max_messages", "give it inside options= or as the argument, not both")
        return self._fetch(options_from(FetchOptions, options, kwargs, "fetch"))

    def fetch_bytes(self, max_bytes: int, **kwargs: Any) -> MessageBatch:
        """One pull for up to ``max_bytes`` bytes of messages (size as the server counts it)."""
        return self._fetch(options_from(FetchOptions, None, {"max_bytes": max_bytes, **kwargs}, "fetch"))

    def fetch_no_wait(self, max_messages: int) -> MessageBatch:
        """What is available now, up to ``max_messages``, without waiting for more."""
        return self._fetch(FetchOptions(max_messages=max_messages, no_wait=True))

    def next(
        self, timeout: float | timedelta = DEFAULT_EXPIRES, *, idle_heartbeat: float | timedelta | None = None
    ) -> Msg:
        """One message, pulled when called; TimeoutError when none comes within ``timeout`` seconds."""
        seconds = to_seconds("timeout", timeout)
        for msg in self._fetch(FetchOptions(max_messages=1, expires=seconds, idle_heartbeat=idle_heartbeat)):
            return msg
        raise errors.TimeoutError(f"no message from {self.stream_name}/{self.name} within {seconds:g}s")

    def _fetch(self, options: FetchOptions) -> MessageBatch:
        self._runtime.check_usable()
        wait = self.jetstream.timeout if options.no_wait else options.expires + _FETCH_GRACE
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
        return ContinuousPull(runtime, target, plan, reporter(target.label, error_handler, runtime))

    def messages(
        self,
        *,
        options: ConsumeOptions | None = None,
        error_handler: ErrorHandler | None = None,
        **kwargs: Any,
    ) -> MessagesIterator:
        """An iterator over a continuous pull (ADR-37 consume) that keeps a bounded buffer filled.

        Keywords (or ``options=ConsumeOptions(...)``): max_messages (500) or max_bytes, expires (30 s),
        idle_heartbeat (expires/2, 0.5-30 s), threshold_messages / threshold_bytes (50%).
        """
        pull = self._continuous(options, kwargs, error_handler)
        pull.start(self.jetstream.timeout)
        return MessagesIterator(pull)

    def consume(
        self,
        handler: Callable[[Msg], object],
        *,
        options: ConsumeOptions | None = None,
        error_handler: ErrorHandler | None = None,
        **kwargs: Any,
    ) -> ConsumeContext:
        """Run ``handler(msg)`` for every message, serially, on the consume's own thread.

        Takes the options of :meth:`messages`. Errors and warnings (status warnings, missed heartbeats,
        exceptions from the handler) go to ``error_handler`` on the client's watchdog thread; terminal ones end
        the consume.
        """
        check_callable("handler", handler)
        pull = self._continuous(options, kwargs, error_handler)
        context = ConsumeContext(pull, handler)
        pull.start(self.jetstream.timeout)
        context.start()
        return context


def reporter(label: str, handler: ErrorHandler | None, runtime: Runtime) -> Callable[[BaseException], None]:
    """Where a consume's asynchronous errors go: the user's handler on the watchdog thread, or the log."""
    if handler is None:
        return lambda exc: log.warning("consume %s: %s", label, exc)
    return lambda exc: runtime.run_on_watchdog(handler, exc)


def check_callable(field: str, fn: object) -> None:
    if not callable(fn):
        raise errors.InvalidTypeError(field, "must be callable")
    if asyncio.iscoroutinefunction(fn):
        raise errors.InvalidTypeError(field, "must be a plain function; jetstream_sync runs no user coroutines")
