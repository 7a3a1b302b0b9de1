"""Consumer: a handle on one consumer, its info, and the ADR-37 ways to read it: fetch, next, messages, consume."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING

from . import errors
from ._pull import (
    BATCH_FOR_MAX_BYTES,
    DEFAULT_EXPIRES,
    ContinuousPull,
    FetchPull,
    consume_options,
    fetch_heartbeat,
)
from ._validate import check_int, to_seconds
from .consume import ConsumeContext, MessageBatch, MessagesIterator, _Reporter
from .message import Msg
from .models import ConsumerInfo

if TYPE_CHECKING:
    from .jetstream import JetStream

__all__ = ["Consumer"]

ErrorHandler = Callable[[BaseException], object]


class Consumer:
    """A handle on one pull consumer. ``cached_info`` is what the last call saw; ``info()`` asks the server."""

    def __init__(self, js: JetStream, info: ConsumerInfo) -> None:
        self._js = js
        self.stream_name: str = info.stream_name
        self.name: str = info.name
        self.cached_info = info

    def __repr__(self) -> str:
        return f"<Consumer {self.stream_name!r}/{self.name!r}>"

    def info(self) -> ConsumerInfo:
        self.cached_info = self._js.consumer_info(self.stream_name, self.name)
        return self.cached_info

    def delete(self) -> None:
        self._js.delete_consumer(self.stream_name, self.name)

    # -- one pull at a time -----------------------------------------------------------------------------
    def fetch(
        self,
        max_messages: int,
        *,
        max_bytes: int | None = None,
        expires: float | timedelta = DEFAULT_EXPIRES,
        idle_heartbeat: float | timedelta | None = None,
    ) -> MessageBatch:
        """One pull for up to ``max_messages`` (and ``max_bytes``); messages are yielded as they arrive.

        An expired or empty pull is a normal, possibly empty batch. Heartbeats default to 5 s for pulls
        of 10 s or longer.
        """
        batch = check_int("max_messages", max_messages, minimum=1)
        limit = 0 if max_bytes is None else check_int("max_bytes", max_bytes, minimum=1)
        return self._fetch(batch, limit, expires, idle_heartbeat, no_wait=False)

    def fetch_bytes(
        self,
        max_bytes: int,
        *,
        expires: float | timedelta = DEFAULT_EXPIRES,
        idle_heartbeat: float | timedelta | None = None,
    ) -> MessageBatch:
        """One pull for up to ``max_bytes`` bytes of messages (size as the server counts it)."""
        limit = check_int("max_bytes", max_bytes, minimum=1)
        return self._fetch(BATCH_FOR_MAX_BYTES, limit, expires, idle_heartbeat, no_wait=False)

    def fetch_no_wait(self, max_messages: int) -> MessageBatch:
        """What is available now, up to ``max_messages``, without waiting for more."""
        batch = check_int("max_messages", max_messages, minimum=1)
        return self._fetch(batch, 0, None, 0.0, no_wait=True)

    def _fetch(
        self,
        batch: int,
        max_bytes: int,
        expires: float | timedelta | None,
        idle_heartbeat: float | timedelta | None,
        *,
        no_wait: bool,
    ) -> MessageBatch:
        js = self._js
        js.client._check_usable()
        if no_wait:
            expires_s, heartbeat = 0.0, 0.0
            deadline = time.monotonic() + js.timeout
        else:
            expires_s = to_seconds("expires", expires if expires is not None else DEFAULT_EXPIRES)
            heartbeat = fetch_heartbeat(expires_s, idle_heartbeat)
            deadline = time.monotonic() + expires_s + 1.0  # the client-side deadline outlives the server expiry
        pull = FetchPull(self, batch, max_bytes, expires_s, heartbeat, no_wait)
        pull.start()
        return MessageBatch(pull, deadline)

    def next(
        self, timeout: float | timedelta = DEFAULT_EXPIRES, *, idle_heartbeat: float | timedelta | None = None
    ) -> Msg:
        """One message, pulled when called; TimeoutError when none comes within ``timeout`` seconds."""
        seconds = to_seconds("timeout", timeout)
        for msg in self._fetch(1, 0, seconds, idle_heartbeat, no_wait=False):
            return msg
        raise errors.TimeoutError(f"no message from {self.stream_name}/{self.name} within {seconds:g}s")

    # -- continuous pulls -------------------------------------------------------------------------------
    def _continuous(
        self,
        error_handler: ErrorHandler | None,
        max_messages: int | None,
        max_bytes: int | None,
        expires: float | timedelta | None,
        idle_heartbeat: float | timedelta | None,
        threshold_messages: int | None,
        threshold_bytes: int | None,
    ) -> tuple[ContinuousPull, _Reporter]:
        client = self._js.client
        client._check_usable()
        if error_handler is not None:
            _check_callable("error_handler", error_handler)
        options = consume_options(max_messages, max_bytes, expires, idle_heartbeat, threshold_messages, threshold_bytes)
        reporter = _Reporter(f"{self.stream_name}/{self.name}", error_handler, client._watchdog.call_soon)
        return ContinuousPull(self, options, reporter), reporter

    def messages(
        self,
        *,
        max_messages: int | None = None,
        max_bytes: int | None = None,
        expires: float | timedelta | None = None,
        idle_heartbeat: float | timedelta | None = None,
        threshold_messages: int | None = None,
        threshold_bytes: int | None = None,
        error_handler: ErrorHandler | None = None,
    ) -> MessagesIterator:
        """An iterator over a continuous pull (ADR-37 consume) that keeps a bounded buffer filled.

        Defaults: max_messages 500, expires 30 s, idle_heartbeat expires/2 (0.5-30 s), thresholds 50%.
        """
        pull, _ = self._continuous(
            error_handler, max_messages, max_bytes, expires, idle_heartbeat, threshold_messages, threshold_bytes
        )
        pull.start(self._js.timeout)
        return MessagesIterator(pull)

    def consume(
        self,
        handler: Callable[[Msg], object],
        *,
        error_handler: ErrorHandler | None = None,
        max_messages: int | None = None,
        max_bytes: int | None = None,
        expires: float | timedelta | None = None,
        idle_heartbeat: float | timedelta | None = None,
        threshold_messages: int | None = None,
        threshold_bytes: int | None = None,
    ) -> ConsumeContext:
        """Run ``handler(msg)`` for every message, serially, on the consume's own thread.

        Errors and warnings (status warnings, missed heartbeats, exceptions from the handler) go to
        ``error_handler`` on the client's watchdog thread; terminal ones end the consume.
        """
        _check_callable("handler", handler)
        pull, reporter = self._continuous(
            error_handler, max_messages, max_bytes, expires, idle_heartbeat, threshold_messages, threshold_bytes
        )
        context = ConsumeContext(pull, handler, reporter)
        pull.start(self._js.timeout)
        context._start()
        return context


def _check_callable(field: str, fn: object) -> None:
    if not callable(fn):
        raise errors.InvalidTypeError(field, "must be callable")
    if asyncio.iscoroutinefunction(fn):
        raise errors.InvalidTypeError(field, "must be a plain function; jetstream_sync runs no user coroutines")
