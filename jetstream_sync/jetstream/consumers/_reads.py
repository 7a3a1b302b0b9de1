"""The reading calls that several consumer handles share, written once over one hook each.

- `FetchCalls`: ``fetch`` / ``fetch_bytes`` / ``fetch_no_wait`` over ``_fetch(FetchOptions)``
  (pull consumers and ordered consumers).
- `PushReads`: ``messages`` / ``consume`` over ``_engine(options, error_handler)`` (push consumers and
  ordered push consumers).
- `ServerConsumerHandle`: the name, ``cached_info``, ``info()`` and ``delete()`` of a handle on one
  named server-side consumer (pull and push).

The handles differ in how a read starts (one pull, a continuous pull, a push engine, a chain of ordered
links), not in how the user asks for one, so the asking lives here.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

from ... import _telemetry, errors
from ..._runtime import ProcessLocal, Runtime
from ..._validate import check_callable, check_int, options_from
from ...codecs._payload import check_codec
from ...errors import PayloadDecodeError
from ...message import Msg
from ...models import ConsumerConfig, ConsumerInfo, ConsumerLag, ConsumerPauseState
from ...models.cluster import clustered_leader
from ...models.reads import FetchOptions
from ._progress import ProgressKeeper, acks_checked, progress_keeper
from .delivery import ConsumeContext, DeliverySource, ErrorHandler, MessageBatch, MessagesIterator, decoded_with

if TYPE_CHECKING:
    from ...codecs import Codec
    from ..context import JetStream
    from .push import PushOptions

__all__ = ["FetchCalls", "PushReads", "ServerConsumerHandle", "check_callable", "raised_by_user_code", "reporter"]

log = logging.getLogger("jetstream_sync")


def reporter(label: str, handler: ErrorHandler | None, runtime: Runtime) -> Callable[[BaseException], None]:
    """Where a consume's asynchronous errors go: the user's handler on the client's callbacks thread, or the log."""
    if handler is None:
        return lambda exc: log.warning("consume %s: %s", label, exc, exc_info=raised_by_user_code(exc))
    return lambda exc: runtime.run_callback(handler, exc)


def raised_by_user_code(exc: BaseException) -> BaseException | None:
    """``exc`` when a log record of it should carry its traceback: it was raised (it has one) and is not one of
    this package's errors, so it came from user code (a handler), where the failing line is the news; None for
    the library's own statuses and warnings, which one line says in full."""
    return exc if exc.__traceback__ is not None and not isinstance(exc, errors.JetStreamError) else None


class ServerConsumerHandle(ProcessLocal):
    """A handle on one named consumer. ``cached_info`` is what the last call saw; ``info()`` asks the server."""

    def __init__(self, js: JetStream, info: ConsumerInfo) -> None:
        #: the JetStream context this handle was made by
        self.jetstream = js
        self._runtime: Runtime = js.runtime
        self.stream_name: str = info.stream_name
        self.name: str = info.name
        self.cached_info = info

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.stream_name!r}/{self.name!r}>"

    def info(self) -> ConsumerInfo:
        """The consumer's state, asked of the server now
        ([`JetStream.consumer_info`][jetstream_sync.JetStream.consumer_info]); kept in ``cached_info`` too."""
        self.cached_info = self.jetstream.consumer_info(self.stream_name, self.name)
        return self.cached_info

    def lag(self) -> ConsumerLag:
        """How far behind the consumer is now: pending, ack pending, redelivered, waiting and last active, from a
        fresh [`info`][jetstream_sync.Consumer.info] (one request; ``cached_info`` is updated too). See
        [`ConsumerLag`][jetstream_sync.models.ConsumerLag] for what each figure means."""
        return ConsumerLag.from_info(self.info())

    def leader(self) -> str | None:
        """The name of the server leading the consumer now: asks the server (a fresh
        [`info`][jetstream_sync.Consumer.info], which also updates ``cached_info``). None when JetStream is not
        clustered, and while the consumer elects a leader."""
        return clustered_leader(self.info().cluster)

    def delete(self) -> None:
        """Delete the consumer on the server; see
        [`JetStream.delete_consumer`][jetstream_sync.JetStream.delete_consumer]."""
        self.jetstream.delete_consumer(self.stream_name, self.name)

    def pause(self, until: datetime) -> ConsumerPauseState:
        """Stop delivery until ``until`` (timezone-aware); see
        [`JetStream.pause_consumer`][jetstream_sync.JetStream.pause_consumer]."""
        return self.jetstream.pause_consumer(self.stream_name, self.name, until)

    def resume(self) -> ConsumerPauseState:
        """End the pause now; see [`JetStream.resume_consumer`][jetstream_sync.JetStream.resume_consumer]."""
        return self.jetstream.resume_consumer(self.stream_name, self.name)

    def unpin(self, group: str) -> None:
        """Move the pin of priority group ``group`` away from the client holding it; see
        [`JetStream.unpin_consumer`][jetstream_sync.JetStream.unpin_consumer]. Refused before sending when the consumer
        has no such group."""
        groups = self.cached_info.config.priority_groups or []
        if group not in groups:
            have = f"its groups are {groups}" if groups else "it has no priority groups"
            raise errors.InvalidArgumentError(
                "group", f"{group!r} is not a group of {self.stream_name}/{self.name}: {have}"
            )
        self.jetstream.unpin_consumer(self.stream_name, self.name, group)

    def reset(self, sequence: int | None = None) -> ConsumerInfo:
        """Deliver from ``sequence`` next (None: from just after the ack floor); see
        [`JetStream.reset_consumer`][jetstream_sync.JetStream.reset_consumer]."""
        self.cached_info = self.jetstream.reset_consumer(self.stream_name, self.name, sequence)
        return self.cached_info


_Source = TypeVar("_Source", bound=DeliverySource)


def start_consume(
    source_for: Callable[[], _Source],
    handler: Callable[[Msg], object],
    progress: ProgressKeeper | None,
    workers: int,
    ordered_by: Callable[[Msg], Hashable] | None,
    start_source: Callable[[_Source], None] | None = None,
    *,
    check_acks: bool = False,
    codec: Codec[Any] | None = None,
    lag_of: Callable[[], ConsumerLag] | None = None,
) -> ConsumeContext:
    """What every ``consume(handler, workers=, ordered_by=, auto_in_progress=, codec=)`` does, pull, push or
    ordered: check the arguments, make the source (only then: a refused call starts nothing), run the context."""
    check_callable("handler", handler)
    check_int("workers", workers, minimum=1)
    if ordered_by is not None:
        check_callable("ordered_by", ordered_by)
    check_codec(codec)
    if codec is not None:
        handler, ordered_by = with_decoding(codec, handler, ordered_by)
    telemetry = _telemetry.ACTIVE
    if telemetry is not None:
        handler = telemetry.handler(handler)  # each message processed inside a span (the otel extra)
    source = source_for()
    context = ConsumeContext(
        source, handler, progress, workers=workers, ordered_by=ordered_by, check_acks=check_acks, lag_of=lag_of
    )
    if telemetry is not None:
        telemetry.consume_started(context)
    if start_source is not None:
        start_source(source)
    context.start()
    return context


def with_decoding(
    codec: Codec[Any], handler: Callable[[Msg], object], ordered_by: Callable[[Msg], Hashable] | None
) -> tuple[Callable[[Msg], object], Callable[[Msg], Hashable] | None]:
    """``handler`` and ``ordered_by`` given messages whose ``value`` ``codec`` decodes (lazily: a decode error
    raises in the user's code, with the message still unanswered). Only a consume with ``codec=`` pays for this.

    A PayloadDecodeError of its own message that the handler lets escape terminates that message (when
    nothing answered it yet) before the error goes on to the consume's error handler: the same bytes will
    not decode on a redelivery, so waiting out ack_wait only to fail again (up to max_deliver times) helps
    nobody; a terminated message stays in the stream and its advisory is what ``js.dead_letter`` moves."""

    def typed_handler(msg: Msg) -> object:
        msg._codec = codec
        try:
            return handler(msg)
        except PayloadDecodeError as exc:
            if exc.message is msg and not msg._acked:
                _terminate_undecodable(msg, exc)
            raise

    if ordered_by is None:
        return typed_handler, None
    key_of = ordered_by

    def typed_key(msg: Msg) -> Hashable:
        msg._codec = codec
        return key_of(msg)

    return typed_handler, typed_key


def _terminate_undecodable(msg: Msg, exc: PayloadDecodeError) -> None:
    """A handler thread: term ``msg``, whose payload did not decode, with the reason in the server's advisory."""
    cause = exc.__cause__
    what = f"{type(cause).__name__}: {cause}" if cause is not None else "undecodable"
    first_line = what.splitlines()[0] if what.strip() else "undecodable"
    reason = f"payload not decodable by {type(exc.codec).__name__} ({first_line})"[:200]
    try:
        msg.term(reason)
    except errors.JetStreamError as failed:  # closed meanwhile: the server redelivers it after ack_wait
        log.warning("consume: could not terminate an undecodable message on %r: %r", msg.subject, failed)


class FetchCalls(ProcessLocal, ABC):
    """``fetch``, ``fetch_bytes`` and ``fetch_no_wait``; the class provides ``_fetch``."""

    @abstractmethod
    def _fetch(self, options: FetchOptions) -> MessageBatch:
        """Start one pull with these (validated) options and return its batch."""

    def fetch(
        self,
        max_messages: int | None = None,
        *,
        options: FetchOptions | None = None,
        codec: Codec[Any] | None = None,
        **kwargs: Any,
    ) -> MessageBatch:
        """One pull for up to ``max_messages`` (and ``max_bytes``); messages are yielded as they arrive.

        Keywords: ``max_bytes``, ``expires`` (30 s), ``idle_heartbeat`` (5 s for pulls of 10 s or longer),
        ``no_wait``; or ``options=FetchOptions(...)``. An expired or empty pull is a normal, possibly empty batch.
        With ``codec`` each message's ``value`` is its payload decoded (see `jetstream_sync.codecs`).
        """
        check_codec(codec)  # refused before a pull starts
        if options is None:
            kwargs["max_messages"] = max_messages
        elif max_messages is not None:
            raise errors.InvalidArgumentError("max_messages", "give it inside options= or as the argument, not both")
        return decoded_with(self._fetch(options_from(FetchOptions, options, kwargs, "fetch")), codec)

    def fetch_bytes(self, max_bytes: int, *, codec: Codec[Any] | None = None, **kwargs: Any) -> MessageBatch:
        """One pull for up to ``max_bytes`` bytes of messages (size as the server counts it)."""
        check_codec(codec)  # refused before a pull starts
        batch = self._fetch(options_from(FetchOptions, None, {"max_bytes": max_bytes, **kwargs}, "fetch"))
        return decoded_with(batch, codec)

    def fetch_no_wait(self, max_messages: int, *, codec: Codec[Any] | None = None) -> MessageBatch:
        """What is available now, up to ``max_messages``, without waiting for more."""
        check_codec(codec)  # refused before a pull starts
        return decoded_with(self._fetch(FetchOptions(max_messages=max_messages, no_wait=True)), codec)


class PushReads(ProcessLocal, ABC):
    """``messages`` and ``consume`` of a push delivery; the class provides ``_engine``."""

    _runtime: Runtime

    @abstractmethod
    def _engine(self, options: PushOptions, error_handler: ErrorHandler | None) -> DeliverySource:
        """Start the delivery (one at a time per handle) with these options and return it running."""

    def _start(
        self, options: PushOptions | None, kwargs: dict[str, Any], error_handler: ErrorHandler | None
    ) -> DeliverySource:
        from .push import PushOptions  # push.py defines the options and subclasses this

        self._runtime.check_usable()
        if error_handler is not None:
            check_callable("error_handler", error_handler)
        return self._engine(options_from(PushOptions, options, kwargs, "consume"), error_handler)

    def messages(
        self,
        *,
        options: PushOptions | None = None,
        error_handler: ErrorHandler | None = None,
        codec: Codec[Any] | None = None,
        **kwargs: Any,
    ) -> MessagesIterator:
        """An iterator over what the server pushes; keywords (or ``options=``) as
        [`PushOptions`][jetstream_sync.PushOptions]; ``codec`` decodes ``msg.value``.

        Heartbeat alarms, gaps, dropped messages and error statuses go to ``error_handler`` (or the log).
        """
        check_codec(codec)  # refused before a pull starts
        return decoded_with(MessagesIterator(self._start(options, kwargs, error_handler)), codec)

    def _ack_config(self) -> ConsumerConfig | None:
        """The consumer's configuration, for ``auto_in_progress`` (None: an ordered push consumer, no acks)."""
        return None

    @abstractmethod
    def lag(self) -> ConsumerLag:
        """How far behind the server-side consumer read is now (one consumer info request)."""

    def consume(
        self,
        handler: Callable[[Msg], object],
        *,
        options: PushOptions | None = None,
        error_handler: ErrorHandler | None = None,
        auto_in_progress: bool = False,
        workers: int = 1,
        ordered_by: Callable[[Msg], Hashable] | None = None,
        deferred_ack: bool = False,
        codec: Codec[Any] | None = None,
        **kwargs: Any,
    ) -> ConsumeContext:
        """Run ``handler(msg)`` for every message, serially on the consume's own thread, or with ``workers=N``
        on N threads (``ordered_by``: one key at a time, in order); ``auto_in_progress``, ``deferred_ack`` and
        ``codec`` as the pull consume."""
        config = self._ack_config()
        progress = progress_keeper(self._runtime, config, auto_in_progress)
        check_acks = acks_checked(config, deferred_ack)
        return start_consume(
            lambda: self._start(options, kwargs, error_handler),
            handler,
            progress,
            workers,
            ordered_by,
            check_acks=check_acks,
            codec=codec,
            lag_of=self.lag,
        )
