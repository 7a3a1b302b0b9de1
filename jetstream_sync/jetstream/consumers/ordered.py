"""OrderedConsumer: read a stream in order, without gaps or duplicates, without acks, through any fault.

As nats.go's ``OrderedConsumer``: the client owns a chain of ephemeral server-side consumers and replaces the
live one after the last message it delivered whenever order cannot be guaranteed (a consumer-sequence gap, a
missed heartbeat, a deleted consumer, "no responders", a reconnect). Reading works as on a
[`Consumer`][jetstream_sync.Consumer] (fetch, fetch_bytes, fetch_no_wait, next, messages, consume), one read at a time;
``until_drained=True`` turns ``messages()`` and ``consume()`` into a snapshot that ends when caught up (what KV
``keys()`` and ``history()`` are built on).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Hashable
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from ... import errors
from ..._delivery import RESET_BACKOFF_FIRST, FetchPull, OrderedPull, PullTarget, next_backoff, read_timed_out
from ..._runtime import Runtime
from ..._validate import check_callable, check_timeout, options_from, to_seconds
from ...codecs._payload import check_codec
from ...message import Msg
from ...models import ConsumerInfo, ConsumerLag
from ...models.reads import DEFAULT_EXPIRES, ConsumeOptions, FetchOptions, OrderedConsumerConfig, PullPriority
from ._chain import ConsumerChain
from ._ordered_fetch import OrderedBatch, OrderedFetchState
from ._progress import progress_keeper
from ._reads import FetchCalls, reporter, start_consume
from .delivery import ConsumeContext, ErrorHandler, MessageBatch, MessagesIterator, decoded_with

if TYPE_CHECKING:
    from ...codecs import Codec
    from ..context import JetStream

__all__ = ["OrderedConsumer"]

log = logging.getLogger("jetstream_sync")


def _no_priority(priority: PullPriority | None) -> None:
    if priority is not None:
        raise errors.InvalidArgumentError(
            "priority_group", "an ordered consumer makes its own consumers, which have no priority groups"
        )


class OrderedConsumer(FetchCalls):
    """A handle on an ordered read of one stream. Thread-safe; reads one place at a time.

    ``stream_sequence`` is the stream sequence of the last message handed out; the next read (of any kind)
    continues after it. A second concurrent read raises OrderedConsumerInUseError, as in nats.go.
    """

    def __init__(
        self, js: JetStream, stream: str, config: OrderedConsumerConfig, *, timeout: float | timedelta | None = None
    ) -> None:
        """User thread. Creates the first server-side consumer within ``timeout`` seconds (default: the
        context's), so a bucket walk under one deadline gives it only what is left of that deadline."""
        if not isinstance(config, OrderedConsumerConfig):
            raise errors.InvalidTypeError("config", f"must be an OrderedConsumerConfig, got {type(config).__name__}")
        seconds = check_timeout(timeout, js.timeout)
        #: the JetStream context this handle was made by
        self.jetstream = js
        self.stream_name = stream
        self.config = config
        self._runtime: Runtime = js.runtime
        self._chain = ConsumerChain(js.api, stream, config)
        self._lock = threading.Lock()
        self._cursor = OrderedFetchState()
        # The first link is created now, so a missing stream or a bad config fails here; the first read uses it.
        self._fresh: ConsumerInfo | None = self._adopt_start(self._create_first(seconds))
        self.cached_info: ConsumerInfo = self._fresh
        self._fetch_target: PullTarget | None = None
        self._reconnects = self._runtime.reconnects
        self._batch: OrderedBatch | None = None
        self._pull: OrderedPull | None = None

    def __repr__(self) -> str:
        return f"<OrderedConsumer {self.stream_name!r} at stream sequence {self._cursor.stream_seq}>"

    @property
    def name(self) -> str | None:
        """The name of the live server-side consumer (it changes with every reset)."""
        return self._chain.current

    @property
    def stream_sequence(self) -> int:
        """The stream sequence of the last message handed out (0 before the first), by any kind of read."""
        pull = self._pull
        if pull is not None and pull.last_handed is not None:
            return pull.next_start(0) - 1
        return self._cursor.stream_seq

    @property
    def caught_up(self) -> bool:
        """True once the running continuous read (messages/consume) had nothing pending past what it
        received: from a delivered message's pending count, or, when the last pending messages vanished
        before delivery (a TTL, a purge), from the server-side consumer's info after a second of silence."""
        pull = self._pull
        return pull is not None and pull.caught_up

    def info(self) -> ConsumerInfo:
        """The live server-side consumer's info (ConsumerNotFoundError between a reset and the next read)."""
        name = self._chain.current
        if name is None:
            raise errors.ConsumerNotFoundError(404, 10014, "the ordered consumer has no live server-side consumer now")
        self.cached_info = self.jetstream.consumer_info(self.stream_name, name)
        return self.cached_info

    def lag(self) -> ConsumerLag:
        """How far behind the live server-side consumer is (from a fresh [`info`][jetstream_sync.OrderedConsumer.info]):
        ``pending`` is what the stream holds past the read's position. ConsumerNotFoundError between a reset and
        the next read."""
        return ConsumerLag.from_info(self.info())

    def close(self) -> None:
        """Stop a running ``messages()``/``consume()`` and delete the live server-side consumer now, instead of
        leaving it to ``inactive_threshold``. The handle stays usable: a later read starts a new consumer after
        ``stream_sequence``."""
        self._runtime.fork_guard.check()
        with self._lock:
            pull = self._pull
            if pull is not None:
                pull.stop()
            self._fresh = None
            self._fetch_target = None
            self._chain.delete_current_soon()

    def stop_soon(self) -> None:
        """Any thread, never waits (the watchdog's deadline check of a bucket walk calls it): end a running
        ``messages()``/``consume()`` now. Its pull deletes the live server-side consumer from the IO thread;
        unlike [`close`][jetstream_sync.OrderedConsumer.close], no lock is taken and nothing is sent from the calling
        thread."""
        pull = self._pull
        if pull is not None:
            pull.stop()

    def _create_first(self, timeout: float) -> ConsumerInfo:
        """User thread: the first link. Unanswered, its create may still reach the server (a link that went
        silent delivers it later), so that consumer is deleted by name too rather than left for
        ``inactive_threshold``: a timed-out walk leaves nothing behind."""
        chain = self._chain
        try:
            return chain.create(0, timeout)
        except errors.TimeoutError:
            with contextlib.suppress(errors.JetStreamError):  # best effort: the TimeoutError is what matters
                self.jetstream.api.forget_soon(f"CONSUMER.DELETE.{self.stream_name}.{chain.prefix}_{chain.serial}")
            raise

    def _adopt_start(self, info: ConsumerInfo) -> ConsumerInfo:
        """Before anything was delivered, the cursor starts where the first link does (see start_floor)."""
        if self._cursor.stream_seq == 0:
            self._cursor.stream_seq = self._chain.start_floor(info)
        return info

    def _start_seq(self) -> int:
        seq = self._cursor.stream_seq
        return seq + 1 if seq else 0

    # -- one read at a time -----------------------------------------------------------------------------
    def _claim(self) -> None:
        """With the lock held: refuse a second concurrent read; take over the cursor of a finished one."""
        pull = self._pull
        if pull is not None:
            if not pull.finished:
                raise errors.OrderedConsumerInUseError(
                    f"ordered consumer on {self.stream_name!r}: messages()/consume() is still running; stop it "
                    "before reading again"
                )
            self._cursor.stream_seq = pull.next_start(self._cursor.stream_seq + 1) - 1
            self._cursor.consumer_seq = 0
            self._fetch_target = None  # the pull's links are gone (deleted when it ended)
            self._pull = None
        batch = self._batch
        if batch is not None:
            if batch.in_progress:
                raise errors.OrderedConsumerInUseError(
                    f"ordered consumer on {self.stream_name!r}: a fetch is still in progress; read it to the end "
                    "(or let it expire) before the next one"
                )
            batch.superseded = True
            self._batch = None

    def _locked(self) -> threading.Lock:
        if not self._lock.acquire(blocking=False):
            raise errors.OrderedConsumerInUseError(
                f"ordered consumer on {self.stream_name!r}: another thread is starting a read right now"
            )
        return self._lock

    # -- fetch ------------------------------------------------------------------------------------------
    def next(
        self,
        timeout: float | timedelta = DEFAULT_EXPIRES,
        *,
        idle_heartbeat: float | timedelta | None = None,
        codec: Codec[Any] | None = None,
    ) -> Msg:
        """The next message in order; TimeoutError when none comes within ``timeout`` seconds.

        A disconnect does not end the call: its pull is asked again once reconnected (a new link if order needs
        one) and the call waits out ``timeout``; the TimeoutError of a call whose time included a disconnect
        says so. With ``codec`` the message's ``value`` is its payload decoded."""
        check_codec(codec)
        msg = self._next(to_seconds("timeout", timeout), idle_heartbeat)
        if codec is not None:
            msg._codec = codec
        return msg

    def _next(self, seconds: float, idle_heartbeat: float | timedelta | None) -> Msg:
        deadline = time.monotonic() + seconds
        reconnects = self._runtime.reconnects
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0.001:
                break
            opts = FetchOptions(max_messages=1, expires=remaining, idle_heartbeat=idle_heartbeat)
            for msg in self._fetch(opts):
                return msg
            if self._cursor.needs_reset is None and self._runtime.reconnects == self._reconnects:
                break  # the pull expired normally: nothing came in time
        connected = self._runtime.is_connected
        interrupted = self._runtime.reconnects != reconnects or not connected
        raise read_timed_out(f"the ordered consumer on {self.stream_name!r}", seconds, interrupted, connected)

    def _fetch(self, options: FetchOptions) -> MessageBatch:
        runtime = self._runtime
        runtime.check_usable()
        _no_priority(options.pull_priority)
        wait = self.jetstream.timeout if options.no_wait else options.expires + options.grace
        deadline = time.monotonic() + wait
        lock = self._locked()
        try:
            self._claim()
            target = self._link_for_fetch(deadline)
            pull = FetchPull(runtime, target, options)
            batch = OrderedBatch(
                self._cursor, pull, lambda left, left_bytes: self._renew(batch, left, left_bytes), deadline
            )
            self._batch = batch
            pull.start()
        finally:
            lock.release()
        return MessageBatch(batch, deadline)

    def _renew(self, batch: OrderedBatch, left: int, left_bytes: int) -> FetchPull | None:
        """Reader thread, in the middle of ``batch``: a new link and a pull for what is left of the fetch."""
        options = batch.pull.options
        with self._lock:
            if batch.superseded or batch.ended:
                return None
            deadline = batch.deadline
            remaining = deadline - time.monotonic() - options.grace
            if not options.no_wait and remaining < 0.05:
                return None
            try:
                target = self._link_for_fetch(deadline)
            except errors.JetStreamError as exc:
                log.debug("ordered %s: the fetch ends early: %s", self.stream_name, exc)
                return None
            heartbeat = options.idle_heartbeat
            if heartbeat is not None and heartbeat * 2 > remaining:
                heartbeat = None
            rest = FetchOptions(
                max_messages=left if options.max_messages is not None else None,
                max_bytes=left_bytes or None,
                expires=max(remaining, 0.05),
                idle_heartbeat=heartbeat,
                no_wait=options.no_wait,
            )
            pull = FetchPull(self._runtime, target, rest)
            pull.start()
            return pull

    def _link_for_fetch(self, deadline: float) -> PullTarget:
        """The live link to pull from, recreated first when order could not be guaranteed any more."""
        fresh, self._fresh = self._fresh, None
        if fresh is not None:
            self._fetch_target = self._chain.pull_target(fresh)
            self._cursor.consumer_seq = 0
            return self._fetch_target
        cursor = self._cursor
        target = self._fetch_target
        reason = cursor.needs_reset
        if target is None or self._chain.current != target.consumer:
            reason = reason or "new read"
        elif self._runtime.reconnects != self._reconnects:
            reason = "reconnect"
        if reason is None:
            assert target is not None
            return target
        log.debug("ordered %s: new consumer after stream sequence %d (%s)", self.stream_name, cursor.stream_seq, reason)
        self._reconnects = self._runtime.reconnects
        info = self._recreate(deadline)
        cursor.needs_reset = None
        cursor.consumer_seq = 0
        self._fetch_target = self._chain.pull_target(info)
        return self._fetch_target

    def _recreate(self, deadline: float) -> ConsumerInfo:
        """User thread: replace the live link, retrying with backoff until ``deadline`` or max_reset_attempts."""
        chain = self._chain
        delay = RESET_BACKOFF_FIRST
        attempts = 0
        while True:
            chain.delete_current_soon()
            timeout = max(0.1, min(self.jetstream.timeout, deadline - time.monotonic()))
            try:
                self._check_stream(timeout)
                return self._adopt_start(chain.create(self._start_seq(), timeout))
            except errors.JetStreamError as exc:
                if isinstance(
                    exc, (errors.InvalidArgumentError, errors.ConnectionClosedError, errors.StreamReplacedError)
                ):
                    raise
                attempts += 1
                limit = chain.max_attempts
                if limit is not None and attempts >= limit:
                    raise errors.OrderedConsumerResetError(
                        f"ordered consumer on {self.stream_name!r}: could not recreate its consumer in {attempts} "
                        f"attempt(s) (max_reset_attempts={limit}); last error: {exc}"
                    ) from exc
                if time.monotonic() + delay >= deadline:
                    raise
                log.debug("ordered %s: recreating failed (%s); retrying in %gs", self.stream_name, exc, delay)
                self._pause(delay)
                delay = next_backoff(delay)

    def _check_stream(self, timeout: float) -> None:
        """User thread, before a fetch's or next()'s new link: is the stream still the one read so far? A stream
        deleted and created anew is read from its beginning (reported in the log; a fetch has no error handler)
        or, with ``on_stream_replaced="error"``, ends the read with StreamReplacedError (see _chain.py)."""
        cursor = self._cursor
        why = self._chain.replaced(cursor.stream_seq, timeout)
        if why is not None:
            self._chain.replacement(f"ordered consumer on {self.stream_name!r}", why, cursor.stream_seq)
            cursor.stream_seq = 0

    def _pause(self, seconds: float) -> None:
        """Back off between attempts, waking within 0.25 s when the client closes."""
        end = time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0:
            self._runtime.check_usable()
            time.sleep(min(left, 0.25))

    # -- continuous reads -------------------------------------------------------------------------------
    def _continuous(
        self,
        options: ConsumeOptions | None,
        kwargs: dict[str, Any],
        error_handler: ErrorHandler | None,
        until_drained: bool,
    ) -> OrderedPull:
        runtime = self._runtime
        runtime.check_usable()
        if error_handler is not None:
            check_callable("error_handler", error_handler)
        if not isinstance(until_drained, bool):
            raise errors.InvalidTypeError("until_drained", f"must be a bool, got {type(until_drained).__name__}")
        plan = options_from(ConsumeOptions, options, kwargs, "consume").plan()
        _no_priority(plan.priority)
        lock = self._locked()
        try:
            self._claim()
            fresh, self._fresh = self._fresh, None
            if until_drained and fresh is not None and fresh.num_pending == 0:
                # "Nothing pending" is from when it was made: whether that is still so needs a count made now.
                # With messages pending, each one delivered carries the live count, so the link can serve.
                fresh = None
            if fresh is None:
                self._chain.delete_current_soon()  # an earlier link; the pull makes its own from the cursor
            pull = OrderedPull(
                runtime,
                self._chain,
                fresh,
                self._start_seq(),
                plan,
                reporter(f"ordered {self.stream_name}", error_handler, runtime),
                until_drained=until_drained,
            )
            pull.start(self.jetstream.timeout)
            self._pull = pull
        finally:
            lock.release()
        return pull

    def messages(
        self,
        *,
        until_drained: bool = False,
        options: ConsumeOptions | None = None,
        error_handler: ErrorHandler | None = None,
        codec: Codec[Any] | None = None,
        **kwargs: Any,
    ) -> MessagesIterator:
        """An iterator over the stream in order (options as [`Consumer.messages`][jetstream_sync.Consumer.messages]).

        With ``until_drained=True`` the iteration ends once every message pending when it caught up was
        delivered (a snapshot); otherwise it runs until stopped. Resets are reported to ``error_handler`` only
        when recreating the consumer fails; ``stats()`` counts them with their reasons.
        """
        check_codec(codec)
        return decoded_with(MessagesIterator(self._continuous(options, kwargs, error_handler, until_drained)), codec)

    def consume(
        self,
        handler: Callable[[Msg], object],
        *,
        until_drained: bool = False,
        options: ConsumeOptions | None = None,
        error_handler: ErrorHandler | None = None,
        workers: int = 1,
        ordered_by: Callable[[Msg], Hashable] | None = None,
        auto_in_progress: bool = False,
        codec: Codec[Any] | None = None,
        **kwargs: Any,
    ) -> ConsumeContext:
        """Run ``handler(msg)`` for every message in order on the consume's own thread (see
        [`messages`][jetstream_sync.OrderedConsumer.messages]). With ``workers=N`` on N threads: give ``ordered_by``
        (e.g. the subject) to keep each key's order. ``auto_in_progress`` is refused: an ordered consumer takes no
        acks."""
        progress = progress_keeper(self._runtime, None, auto_in_progress)
        return start_consume(
            lambda: self._continuous(options, kwargs, error_handler, until_drained),
            handler,
            progress,
            workers,
            ordered_by,
            codec=codec,
            lag_of=self.lag,
        )
