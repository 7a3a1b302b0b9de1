"""JetStream publishing: synchronous publish with a retry policy, and pipelined asynchronous publish."""

from __future__ import annotations

import concurrent.futures
import re
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import attrs

from .. import errors
from .._durations import message_ttl, ttl_header
from .._protocol import Command, api_response
from .._runtime import LightFuture, Runtime, encode_pub_parts, io_thread, wait_while
from .._validate import PreparedMessage, check_int, check_str_or_none, check_subject, check_timeout
from ..models import PubAck
from .schedule import Schedule

__all__ = [
    "NO_CHECKS",
    "AsyncPublisher",
    "PublishOptions",
    "parse_pub_ack",
]

DEFAULT_MAX_PENDING = 4000
#: publish_async's default bound on the bytes held in flight (payloads and headers kept for resends until acked)
DEFAULT_MAX_PENDING_BYTES = 128 * 1024 * 1024
NO_RESPONDERS_ATTEMPTS = 4  # publish_async: tries, 50 ms apart and doubling, while JetStream does not answer
_RETRY_MAX_DELAY = 1.0  # past those, tries go on 1 s apart while they fit the ack timeout (a cluster election)


def _optional_text(_inst: object, attr: attrs.Attribute[Any], value: object) -> None:
    check_str_or_none(attr.name, value)
    if value is not None and (not value or "\r" in value or "\n" in value):  # type: ignore[operator]
        raise errors.InvalidArgumentError(attr.name, "must be non-empty text without CR or LF")


def _optional_filter(_inst: object, attr: attrs.Attribute[Any], value: object) -> None:
    if value is not None:
        check_subject(attr.name, value, wildcards=True)


def _optional_subject(_inst: object, attr: attrs.Attribute[Any], value: object) -> None:
    if value is not None:
        check_subject(attr.name, value)


def _optional_sequence(_inst: object, attr: attrs.Attribute[Any], value: object) -> None:
    if value is not None:
        check_int(attr.name, value, minimum=0)


def _optional_schedule(_inst: object, attr: attrs.Attribute[Any], value: object) -> None:
    if value is not None and not isinstance(value, Schedule):
        raise errors.InvalidTypeError(
            attr.name, f"must be a Schedule (Schedule.at / every / cron), got {type(value).__name__}"
        )


@attrs.frozen(kw_only=True)
class PublishOptions:
    """The checks a JetStream publish can carry, sent as ``Nats-*`` headers and enforced by the stream.

    ``msg_id`` deduplicates inside the stream's duplicate window (so a retried publish is stored once); the
    ``expected_*`` fields make the publish fail with a typed error (WrongLastSequenceError, ...) when the
    stream is not in the state the publisher assumed (optimistic concurrency). With
    ``expected_last_subject_sequence_subject`` (nats-server 2.12+; a subject, wildcards allowed) the
    ``expected_last_subject_sequence`` check looks at the last message on those subjects rather than on the
    published one. ``ttl`` (nats-server 2.11+, on a stream with ``allow_msg_ttl``) removes this message after
    that many seconds, or ``"never"``.

    ``trace_dest`` (nats-server 2.11+, ADR-41 message tracing) is sent as ``Nats-Trace-Dest``: every server the
    message passes publishes a trace event (JSON) to that subject, saying how it came in, where it went, and,
    from the stream's server, a ``js`` event naming the stream that stored it (or the error that refused it).
    The message is stored and acknowledged as usual, its header switched to ``trace disabled`` by the stream
    (reading it back is not traced again). (``Nats-Trace-Only``, tracing without delivering, is not
    offered: a stream neither stores nor acknowledges such a message, so the publish could only time out.)
    """

    msg_id: str | None = attrs.field(default=None, validator=_optional_text)
    expected_stream: str | None = attrs.field(default=None, validator=_optional_text)
    expected_last_sequence: int | None = attrs.field(default=None, validator=_optional_sequence)
    expected_last_subject_sequence: int | None = attrs.field(default=None, validator=_optional_sequence)
    expected_last_msg_id: str | None = attrs.field(default=None, validator=_optional_text)
    expected_last_subject_sequence_subject: str | None = attrs.field(default=None, validator=_optional_filter)
    ttl: float | str | None = attrs.field(default=None, converter=message_ttl)
    #: a message schedule (ADR-51, `Schedule`): the stream publishes this message later to its target
    schedule: Schedule | None = attrs.field(default=None, validator=_optional_schedule)
    #: where the servers send this message's trace events (ADR-41, nats-server 2.11+): a subject, no wildcards
    trace_dest: str | None = attrs.field(default=None, validator=_optional_subject)

    def __attrs_post_init__(self) -> None:
        if self.expected_last_subject_sequence_subject is not None and self.expected_last_subject_sequence is None:
            raise errors.InvalidArgumentError(
                "expected_last_subject_sequence_subject", "only narrows expected_last_subject_sequence: set that too"
            )

    def headers(self) -> list[tuple[bytes, bytes]]:
        """The ``Nats-*`` headers that carry these checks (none for the default options)."""
        extra: list[tuple[bytes, bytes]] = []
        for key, value in (
            (b"Nats-Msg-Id", self.msg_id),
            (b"Nats-Expected-Stream", self.expected_stream),
            (b"Nats-Expected-Last-Msg-Id", self.expected_last_msg_id),
            (b"Nats-Expected-Last-Subject-Sequence-Subject", self.expected_last_subject_sequence_subject),
            (b"Nats-Trace-Dest", self.trace_dest),
        ):
            if value is not None:
                extra.append((key, value.encode()))
        for key, number in (
            (b"Nats-Expected-Last-Sequence", self.expected_last_sequence),
            (b"Nats-Expected-Last-Subject-Sequence", self.expected_last_subject_sequence),
        ):
            if number is not None:
                extra.append((key, b"%d" % number))
        if self.ttl is not None:
            extra.append((b"Nats-TTL", ttl_header(self.ttl)))
        if self.schedule is not None:
            extra.extend(self.schedule.headers())
        return extra


#: the options of a publish without checks (shared: building one per publish would cost on the hot path)
NO_CHECKS = PublishOptions()


# The server's usual PubAck, read without a JSON parser: it arrives once per publish on the IO thread.
_PLAIN_PUB_ACK = re.compile(rb'\{"stream":"([^"\\]+)","seq":(\d{1,19})(,"duplicate":true)?\}')  # < 2**64


def parse_pub_ack(data: bytes) -> PubAck:
    """A PubAck, or the APIError the stream answered with."""
    plain = _PLAIN_PUB_ACK.fullmatch(data)
    if plain is not None:
        return PubAck(stream=plain[1].decode(), seq=int(plain[2]), duplicate=plain[3] is not None)
    body = api_response(data, "the server's PubAck")
    stream, seq = body.get("stream"), body.get("seq")
    if not isinstance(stream, str) or not stream or not _is_sequence(seq):
        raise errors.ProtocolError(
            f"invalid PubAck from the server (it needs a stream name and a sequence): {data[:200]!r}"
        )
    return PubAck.from_json(body)  # the generic mapper checks the other members' types


def message_size(message: PreparedMessage) -> int:
    """What a prepared publish holds in memory until its ack: its payload and header block."""
    _subject, headers, payload = message
    return len(payload) + (len(headers) if headers else 0)


def _is_sequence(value: object) -> bool:
    """A stream sequence as JSON gives it: an unsigned 64-bit integer."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**64


class _InflightGate:
    """Caps in-flight asynchronous publishes by count and by bytes (payload and headers, held for resends until
    the ack); ``wait_empty`` backs publish_async_complete().

    The byte cap exists because the count alone let 600 publishes of 1 MiB with their acks held cost 607 MB,
    and the default count allowed about 4 GiB. A publish larger than the whole byte cap still goes when nothing
    else is in flight, so no size can wait forever.
    """

    def __init__(self, limit: int, max_bytes: int) -> None:
        self.limit = limit
        self.max_bytes = max_bytes
        self.count = 0
        self.size = 0
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._waiters = 0

    def _fits(self, size: int) -> bool:
        """Lock held: a publish of ``size`` bytes may go now."""
        return self.count < self.limit and (self.size + size <= self.max_bytes or self.count == 0)

    def acquire(self, size: int, timeout: float, closed: Callable[[], bool]) -> float:
        """Take an in-flight slot for ``size`` bytes, waiting at most ``timeout``; returns what is left of it (the
        whole of it on the hot path, which reads no clock)."""
        lock = self._lock
        lock.acquire()  # the plain lock on the hot path: a Condition's context manager costs more than the work
        if self._fits(size):
            self.count += 1
            self.size += size
            lock.release()
            return timeout
        lock.release()
        deadline = time.monotonic() + timeout
        with self._cond:
            self._waiters += 1
            try:
                wait_while(
                    self._cond,
                    lambda: not self._fits(size),
                    timeout,
                    closed=closed,
                    timed_out=lambda: errors.PublishBackpressureError(
                        f"{self.count} asynchronous publishes ({self.size} bytes) stayed in flight for {timeout:g}s; "
                        "the server is not keeping up (wait with publish_async_complete() or raise max_pending / "
                        "max_pending_bytes)"
                    ),
                )
                self.count += 1
                self.size += size
            finally:
                self._waiters -= 1
        return max(0.0, deadline - time.monotonic())

    def release(self, size: int) -> None:
        lock = self._lock
        lock.acquire()
        self.count -= 1
        self.size -= size
        waiters = self._waiters
        lock.release()
        if waiters:
            with self._cond:
                self._cond.notify_all()

    def wait_empty(self, timeout: float, closed: Callable[[], bool]) -> None:
        with self._cond:
            self._waiters += 1
            try:
                wait_while(
                    self._cond,
                    lambda: self.count > 0,
                    timeout,
                    closed=closed,
                    timed_out=lambda: errors.TimeoutError(
                        f"{self.count} asynchronous publishes were still in flight after {timeout:g}s"
                    ),
                )
            finally:
                self._waiters -= 1

    def wake(self) -> None:
        with self._cond:
            self._cond.notify_all()


class _PubAckReply:
    """Resolves a publish_async future from the IO thread, and frees its in-flight slot.

    "No responders" right after a restart, or while a cluster elects the stream's leader, means JetStream is
    not answering yet: the publish is sent again, backing off, within its ack timeout (see ``retry_later``).
    """

    __slots__ = ("attempts", "future", "headers", "payload", "publisher", "sent", "size", "subject", "timeout")

    def __init__(self, publisher: AsyncPublisher, message: PreparedMessage, timeout: float) -> None:
        self.publisher = publisher
        self.subject, self.headers, self.payload = message
        self.size = message_size(message)
        self.timeout = timeout
        self.attempts = 1
        self.sent = time.monotonic()  # the first try: retries fit the ack timeout from here
        self.future: concurrent.futures.Future[PubAck] = LightFuture()

    def encode(self, reply: bytes) -> Command:
        return encode_pub_parts(self.subject, reply, self.headers, self.payload)

    @io_thread
    def resolve(self, subject: bytes, data: bytes, headers: bytes | None) -> None:
        """IO thread: the reply came. Whatever it is, the future resolves and the in-flight slot is freed: a
        reply that cannot be read fails the future rather than escape and leave it pending for good."""
        try:
            result = parse_pub_ack(data)
        except errors.JetStreamError as exc:
            self.fail(exc)
            return
        except Exception as exc:  # a decoder's bug: still no pending future, and the reason kept
            self.fail(errors.ProtocolError(f"the PubAck could not be read ({type(exc).__name__}: {exc})"))
            return
        self.publisher.release(self.size)
        if not self.future.done():
            self.future.set_result(result)

    def fail(self, exc: BaseException) -> None:
        if isinstance(exc, errors.NoRespondersError) and self.publisher.retry_later(self):
            return
        self.publisher.release(self.size)
        if not self.future.done():
            self.future.set_exception(exc)


class AsyncPublisher:
    """publish_async's state for one JetStream context: the in-flight gate and the ack timeout."""

    def __init__(
        self, runtime: Runtime, *, max_pending: int, max_pending_bytes: int, ack_timeout: float, stall_timeout: float
    ) -> None:
        self._runtime = runtime
        self._gate = _InflightGate(max_pending, max_pending_bytes)
        self.ack_timeout = ack_timeout
        self.stall_timeout = stall_timeout
        runtime.track(self)

    def _closed(self) -> bool:
        return self._runtime.is_closed

    def submit(self, message: PreparedMessage, timeout: float | timedelta | None) -> concurrent.futures.Future[PubAck]:
        runtime = self._runtime
        ack_timeout = self.ack_timeout if timeout is None else check_timeout(timeout, self.ack_timeout)
        reply = _PubAckReply(self, message, ack_timeout)
        left = self._gate.acquire(reply.size, self.stall_timeout, self._closed)  # one stall timeout bounds both waits
        subject = runtime.expect_reply(reply, ack_timeout)
        try:
            runtime.send(reply.encode(subject), left)
        except BaseException as exc:
            runtime.forget_reply(subject)
            self._gate.release(reply.size)
            if isinstance(exc, errors.TimeoutError):  # the outbound backlog did not move: the same back-pressure
                raise errors.PublishBackpressureError(
                    f"the connection took nothing for {self.stall_timeout:g}s (a stalled link or a slow server); "
                    "this publish was not sent"
                ) from exc
            raise
        return reply.future

    @io_thread
    def retry_later(self, reply: _PubAckReply) -> bool:
        """IO thread: schedule another attempt of a publish that met "no responders"; False when out of time.

        No responders means no stream took the message, so sending it again cannot store it twice. The tries
        go on, backing off to 1 s apart, while they fit the publish's ack timeout: a stream whose leader is
        being elected in a cluster answers again within a few seconds."""
        if self._runtime.is_closed:
            return False
        delay = min(_RETRY_MAX_DELAY, 0.05 * 2 ** (reply.attempts - 1))
        if reply.attempts >= NO_RESPONDERS_ATTEMPTS and time.monotonic() - reply.sent + delay >= reply.timeout:
            return False
        reply.attempts += 1
        self._runtime.call_later(delay, lambda: self._resend(reply))
        return True

    @io_thread
    def _resend(self, reply: _PubAckReply) -> None:
        runtime = self._runtime
        if runtime.is_closed:
            reply.fail(errors.ConnectionClosedError())
            return
        left = max(0.05, reply.timeout - (time.monotonic() - reply.sent))  # one ack timeout for all the tries
        runtime.send_now(reply.encode(runtime.expect_reply(reply, left)))

    def release(self, size: int) -> None:
        """One in-flight publish of ``size`` bytes resolved: on the IO thread, or on the closing thread for what the
        IO thread did not get to (``Runtime.close`` fails those once it ended)."""
        self._gate.release(size)

    @property
    def pending(self) -> int:
        return self._gate.count

    @property
    def pending_bytes(self) -> int:
        return self._gate.size

    def complete(self, timeout: float) -> None:
        self._gate.wait_empty(timeout, self._closed)

    def on_client_closed(self, exc: BaseException) -> None:
        self._gate.wake()
