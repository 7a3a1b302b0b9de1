"""Core NATS subscriptions: read by a thread (``next_msg``, iteration) or handed to a handler on threads of their own.

Either way the messages wait in one bounded buffer that the IO thread fills; past ``max_pending`` messages or
``max_pending_bytes`` bytes new ones are dropped and a SlowConsumerError is reported once per episode, so a stalled
reader can never exhaust memory. With ``handler=`` a `Dispatcher` reads that
buffer: the handler runs on the subscription's own thread, ``jetstream-sync-sub-<subject>``, one message at a time
in order (with ``workers=N``, on N threads, ``ordered_by`` keeping one key in order), and what it raises is
reported, never the end of the subscription.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable, Hashable, Iterator
from datetime import timedelta

from . import errors
from ._dispatch import Dispatcher
from ._runtime import BufferFinished, MessageBuffer, NatsSubscription, ProcessLocal, Runtime, io_thread
from ._validate import check_int, check_timeout
from .message import Msg

__all__ = ["DEFAULT_MAX_PENDING_BYTES", "Subscription"]

#: a core subscription's default bound on the bytes it buffers unread (nats.go's default too)
DEFAULT_MAX_PENDING_BYTES = 64 * 1024 * 1024

#: what a subscription's handler is: a plain function of the message (its return value is ignored)
Handler = Callable[[Msg], object]

log = logging.getLogger("jetstream_sync")


class Subscription(ProcessLocal):
    """A core NATS subscription (see the module docstring). Made by
    [`Client.subscribe`][jetstream_sync.Client.subscribe].

    ``delivered`` counts the messages the server delivered to it (dropped ones included), ``dropped`` those
    dropped over the limits. Without a handler, read it with ``next_msg(timeout)`` or by iterating; with one,
    those raise InvalidArgumentError and ``handled`` counts the handler's calls.
    """

    def __init__(
        self, runtime: Runtime, subject: str, queue: str | None, max_pending: int, max_pending_bytes: int
    ) -> None:
        self.subject = subject
        self.queue = queue
        self._runtime = runtime
        self._max_pending = max_pending
        self._max_pending_bytes = max_pending_bytes
        self._buffer: MessageBuffer[Msg] = runtime.new_buffer()
        self._nats_sub: NatsSubscription | None = None
        self._slow = False
        self._dispatcher: Dispatcher | None = None
        #: messages the server delivered to this subscription (IO thread)
        self.delivered = 0
        self.dropped = 0
        # auto-unsubscribe: the subscription ends after this many messages (0: never); IO thread once started
        self._max_msgs = 0
        # bytes buffered = what the IO thread put in (only it writes _bytes_in) - what readers took out (under
        # the lock: several threads may read)
        self._bytes_in = 0
        self._bytes_out = 0
        self._bytes_lock = threading.Lock()
        # any thread, only ever set: unsubscribed at once (a handler's buffered messages are not handled)
        self._halted = False

    @classmethod
    def open(
        cls,
        runtime: Runtime,
        subject: str,
        queue: str | None,
        max_pending: int,
        timeout: float,
        max_pending_bytes: int = DEFAULT_MAX_PENDING_BYTES,
        *,
        handler: Handler | None = None,
        error_handler: Callable[[BaseException], object] | None = None,
        workers: int = 1,
        ordered_by: Callable[[Msg], Hashable] | None = None,
        max_msgs: int = 0,
    ) -> Subscription:
        """Subscribe on the server (arguments already validated) and return the live subscription; with
        ``handler``, its dispatcher runs from the first message on."""
        sub = cls(runtime, subject, queue, max_pending, max_pending_bytes)
        sub._max_msgs = max_msgs
        if handler is not None:
            report: Callable[[BaseException], None] = functools.partial(runtime.report_error, user_code=True)
            if error_handler is not None:
                report = functools.partial(runtime.run_callback, error_handler)
            sub._dispatcher = Dispatcher(
                f"jetstream-sync-sub-{subject}", _Feed(sub), handler, report, workers=workers, ordered_by=ordered_by
            )
            sub._dispatcher.start(runtime.track_thread)
        try:
            sub._nats_sub = runtime.subscribe(subject, queue or "", sub._on_message, timeout)
            if max_msgs:
                runtime.send_unsub(sub._nats_sub, max_msgs)  # the server ends it after max_msgs, as we do
        except BaseException:
            sub._buffer.abort(BufferFinished())  # the dispatcher, if any, ends
            raise
        runtime.track(sub)
        return sub

    def __repr__(self) -> str:
        mode = "handler" if self._dispatcher is not None else "read"
        return (
            f"Subscription(subject={self.subject!r}, queue={self.queue!r}, {mode}, delivered={self.delivered}, "
            f"pending={len(self._buffer)})"
        )

    # -- IO thread --------------------------------------------------------------------------------------
    @io_thread
    def _on_message(self, subject: bytes, reply: bytes, data: bytes, headers: bytes | None) -> None:
        max_msgs = self._max_msgs
        if max_msgs and self.delivered >= max_msgs:
            return  # past the auto-unsubscribe limit: the server's UNSUB will follow any moment
        self.delivered += 1
        buffer = self._buffer
        size = len(data) + (len(headers) if headers else 0)
        full = len(buffer) >= self._max_pending
        if full or (self._bytes_in - self._bytes_out + size > self._max_pending_bytes and len(buffer)):
            self.dropped += 1
            if not self._slow:
                self._slow = True
                held = f"{self._max_pending} unread messages" if full else f"over {self._max_pending_bytes} bytes"
                self._runtime.report_error(
                    errors.SlowConsumerError(
                        f"subscription on {self.subject!r} holds {held}; dropping new ones until it is read "
                        "(raise max_pending / max_pending_bytes, or read faster)"
                    )
                )
        else:
            self._slow = False
            self._bytes_in += size
            buffer.put(Msg(subject.decode(), reply.decode(), data, headers, self._runtime))
        if max_msgs and self.delivered >= max_msgs:
            self._reached_max()

    @io_thread
    def _reached_max(self) -> None:
        """IO thread: the auto-unsubscribe limit was reached: readers take what is buffered, then the end."""
        self._buffer.finish()
        sub, self._nats_sub = self._nats_sub, None
        if sub is not None:
            self._runtime.unsubscribe_soon(sub, self.subject)  # the server ended it already; this forgets it here
        self._runtime.untrack(self)

    # -- the dispatcher's side ----------------------------------------------------------------------------
    def _take_many(self, limit: int, timeout: float | None) -> list[Msg]:
        msgs = self._buffer.get_many(limit, timeout)
        for msg in msgs:
            self._taken(msg)
        return msgs

    def _stop_by_handler(self) -> None:
        """The handler asked to stop (SystemExit, KeyboardInterrupt): unsubscribe, dropping what is buffered."""
        self._halted = True
        self._buffer.abort(BufferFinished())
        self._runtime.post_if_open(self._unsubscribe_from_io)

    @io_thread
    def _unsubscribe_from_io(self) -> None:
        sub, self._nats_sub = self._nats_sub, None
        if sub is not None:
            self._runtime.unsubscribe_soon(sub, self.subject)
        self._runtime.untrack(self)

    # -- user threads -----------------------------------------------------------------------------------
    @property
    def pending(self) -> int:
        """Messages received and not yet read (or handed to the handler)."""
        return len(self._buffer)

    @property
    def pending_bytes(self) -> int:
        """Bytes (payload and headers) of the messages received and not yet read."""
        return self._bytes_in - self._bytes_out

    @property
    def is_active(self) -> bool:
        """Subscribed and not yet drained, unsubscribed or closed."""
        return not self._buffer.ended

    @property
    def handled(self) -> int:
        """With a handler: the messages it was called with (0 without one)."""
        return self._dispatcher.handled if self._dispatcher is not None else 0

    @property
    def error(self) -> BaseException | None:
        """With a handler: what ended it (a handler's SystemExit/KeyboardInterrupt, or the client's close)."""
        return self._dispatcher.error if self._dispatcher is not None else None

    def _taken(self, msg: Msg) -> Msg:
        """A reader took ``msg`` from the buffer: its bytes no longer count against max_pending_bytes."""
        size = len(msg.data) + len(msg.raw_headers or b"")
        with self._bytes_lock:
            self._bytes_out += size
        return msg

    def _check_readable(self) -> None:
        if self._dispatcher is not None:
            raise errors.InvalidArgumentError(
                "handler",
                f"the subscription on {self.subject!r} hands its messages to its handler; next_msg() and iteration "
                "are for subscriptions made without one",
            )

    def next_msg(self, timeout: float | None = 1.0) -> Msg:
        """The next message, waiting at most ``timeout`` seconds (None waits until one comes or the end)."""
        self._runtime.check_usable()
        self._check_readable()
        wait = None if timeout is None else check_timeout(timeout, 1.0)
        try:
            return self._taken(self._buffer.get(wait))
        except BufferFinished:
            raise errors.SubscriptionClosedError(
                f"subscription on {self.subject!r} was unsubscribed and has no more messages"
            ) from None

    def __iter__(self) -> Iterator[Msg]:
        """Messages as they come; ends after unsubscribe() or drain(), raises ConnectionClosedError on close."""
        self._runtime.fork_guard.check()
        self._check_readable()
        while True:
            try:
                yield self._taken(self._buffer.get(None))
            except BufferFinished:
                return

    def auto_unsubscribe(self, max_msgs: int) -> None:
        """End the subscription once it has received ``max_msgs`` messages in all (counting those received so
        far), as nats.go's AutoUnsubscribe: the server stops delivering after them, and readers (or the handler)
        get the ones buffered, then the end. At or below ``delivered`` already, it ends at once."""
        runtime = self._runtime
        runtime.check_usable()
        check_int("max_msgs", max_msgs, minimum=1)
        sub = self._nats_sub
        if sub is None or self._buffer.ended:
            return
        runtime.send_unsub(sub, max_msgs)
        runtime.post(lambda: self._set_max(max_msgs))

    @io_thread
    def _set_max(self, max_msgs: int) -> None:
        """IO thread."""
        self._max_msgs = max_msgs
        if self.delivered >= max_msgs and not self._buffer.ended:
            self._reached_max()

    def unsubscribe(self, timeout: float | None = None) -> None:
        """Stop receiving at once. Without a handler, messages already buffered can still be read, then iteration
        ends; with one, the message in hand finishes and buffered ones are not handled
        ([`drain`][jetstream_sync.Subscription.drain] handles them)."""
        if self._buffer.ended:
            return
        runtime = self._runtime
        runtime.check_usable()
        if self._dispatcher is not None:
            self._halted = True
            self._buffer.abort(BufferFinished())
        self.stop_receiving(check_timeout(timeout, runtime.default_timeout), deliver_in_flight=False)

    def drain(self, timeout: float | timedelta | None = None) -> None:
        """Stop receiving without losing a message: what the server sent before it saw the UNSUB is delivered
        too, then readers (or the handler) take everything buffered; with a handler, returns once it handled the
        last one. TimeoutError when that takes longer than ``timeout`` (default: the client's timeout)."""
        runtime = self._runtime
        runtime.check_usable()
        seconds = check_timeout(timeout, runtime.default_timeout)
        if not self._buffer.ended:
            self.stop_receiving(seconds, deliver_in_flight=True)
        dispatcher = self._dispatcher
        if dispatcher is not None and not dispatcher.wait(seconds):
            raise errors.TimeoutError(
                f"drain of the subscription on {self.subject!r}: its handler had {self.pending} messages left "
                f"after {seconds:g}s"
            )

    def stop_receiving(self, timeout: float, *, deliver_in_flight: bool = True) -> None:
        """Unsubscribe on the server; readers take what is buffered, then iteration ends (also client.drain).

        With ``deliver_in_flight`` what the server sent before it processed the UNSUB is buffered too
        (``Runtime.unsubscribe``): a drain loses nothing a publisher sent before it."""
        try:
            sub, self._nats_sub = self._nats_sub, None
            if sub is not None:
                self._runtime.unsubscribe(sub, timeout, deliver_in_flight=deliver_in_flight)
        finally:
            self._buffer.finish()
            self._runtime.untrack(self)

    def wait_handled(self, timeout: float | None) -> bool:
        """With a handler: block until its dispatcher ended (after an unsubscribe, a drain, or the client's close);
        True without one."""
        return self._dispatcher is None or self._dispatcher.wait(timeout)

    def on_client_closed(self, exc: BaseException) -> None:
        """The client closed: wake every reader (called by the client)."""
        if not self._buffer.ended:  # a drained subscription ends quietly once read
            self._halted = self._dispatcher is not None
            self._buffer.abort(exc)


class _Feed:
    """A subscription as its dispatcher reads it (``_dispatch.HandlerSource``), kept off the public class."""

    __slots__ = ("_sub",)

    def __init__(self, sub: Subscription) -> None:
        self._sub = sub

    @property
    def halted(self) -> bool:
        return self._sub._halted

    def take_many(self, limit: int, timeout: float | None) -> list[Msg]:
        return self._sub._take_many(limit, timeout)

    def stop(self) -> None:
        self._sub._stop_by_handler()
