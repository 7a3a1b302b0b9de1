"""JetStream publishing: synchronous publish with a retry policy, and pipelined asynchronous publish."""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import re
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING

import tenacity

from . import errors
from ._connection import Command, encode_pub_parts
from ._future import LightFuture
from ._validate import check_int, check_str_or_none, check_timeout
from .models import PubAck

if TYPE_CHECKING:
    from .client import Client

__all__ = ["AsyncPublisher", "default_publish_retry", "js_publish_headers", "parse_pub_ack"]

DEFAULT_MAX_PENDING = 4000
NO_RESPONDERS_ATTEMPTS = 4  # publish_async: tries, 50 ms apart and doubling, while JetStream does not answer


def default_publish_retry() -> tenacity.Retrying:
    """Retry "no responders" a few times: right after a server restart JetStream answers a moment late."""
    return tenacity.Retrying(
        retry=tenacity.retry_if_exception_type(errors.NoRespondersError),
        stop=tenacity.stop_after_attempt(4),
        wait=tenacity.wait_exponential(multiplier=0.05, max=1.0),
        reraise=True,
    )


def js_publish_headers(
    msg_id: str | None,
    expected_stream: str | None,
    expected_last_sequence: int | None,
    expected_last_subject_sequence: int | None,
    expected_last_msg_id: str | None,
) -> list[tuple[bytes, bytes]]:
    """The Nats-* headers that carry dedup and optimistic-concurrency checks."""
    if (
        msg_id is None
        and expected_stream is None
        and expected_last_sequence is None
        and expected_last_subject_sequence is None
        and expected_last_msg_id is None
    ):
        return []
    extra: list[tuple[bytes, bytes]] = []
    for field, key, text in (
        ("msg_id", b"Nats-Msg-Id", msg_id),
        ("expected_stream", b"Nats-Expected-Stream", expected_stream),
        ("expected_last_msg_id", b"Nats-Expected-Last-Msg-Id", expected_last_msg_id),
    ):
        check_str_or_none(field, text)
        if text is not None:
            if not text or "\r" in text or "\n" in text:
                raise errors.InvalidArgumentError(field, "must be non-empty text without CR or LF")
            extra.append((key, text.encode()))
    for field, key, number in (
        ("expected_last_sequence", b"Nats-Expected-Last-Sequence", expected_last_sequence),
        ("expected_last_subject_sequence", b"Nats-Expected-Last-Subject-Sequence", expected_last_subject_sequence),
    ):
        if number is not None:
            extra.append((key, b"%d" % check_int(field, number, minimum=0)))
    return extra


_PUB_ACK_KEYS = frozenset({"stream", "seq", "duplicate", "domain"})
# The server's usual PubAck, read without a JSON parser: it arrives once per publish on the IO thread.
_PLAIN_PUB_ACK = re.compile(rb'\{"stream":"([^"\\]+)","seq":(\d+)(,"duplicate":true)?\}')


def parse_pub_ack(data: bytes) -> PubAck:
    """A PubAck, or the APIError the stream answered with."""
    plain = _PLAIN_PUB_ACK.fullmatch(data)
    if plain is not None:
        return PubAck(stream=plain[1].decode(), seq=int(plain[2]), duplicate=plain[3] is not None)
    try:
        body = json.loads(data)
    except ValueError as exc:
        raise errors.JetStreamError(f"invalid PubAck from the server: {data[:200]!r}") from exc
    if not isinstance(body, dict):
        raise errors.JetStreamError(f"invalid PubAck from the server: {data[:200]!r}")
    error = body.get("error")
    if error:
        raise errors.api_error(int(error.get("code", 0)), int(error.get("err_code", 0)), str(error.get("description")))
    if "stream" not in body or "seq" not in body:
        raise errors.JetStreamError(f"invalid PubAck from the server: {data[:200]!r}")
    if body.keys() <= _PUB_ACK_KEYS:  # the usual shape: skip the generic mapper, this runs once per publish
        return PubAck(
            stream=body["stream"], seq=body["seq"], duplicate=body.get("duplicate", False), domain=body.get("domain")
        )
    return PubAck.from_json(body)


class _InflightGate:
    """Caps in-flight asynchronous publishes; ``wait_empty`` backs publish_async_complete()."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.count = 0
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._waiters = 0

    def acquire(self, timeout: float, closed: Callable[[], bool]) -> None:
        lock = self._lock
        lock.acquire()  # the plain lock on the hot path: a Condition's context manager costs more than the work
        if self.count < self.limit:
            self.count += 1
            lock.release()
            return
        lock.release()
        with self._cond:
            deadline = time.monotonic() + timeout
            self._waiters += 1
            try:
                while self.count >= self.limit:
                    if closed():
                        raise errors.ConnectionClosedError()
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        raise errors.PublishBackpressureError(
                            f"{self.count} asynchronous publishes stayed in flight for {timeout:g}s; the server "
                            "is not keeping up (wait with publish_async_complete() or raise max_pending)"
                        )
                    self._cond.wait(min(remaining, 0.25))
                self.count += 1
            finally:
                self._waiters -= 1

    def release(self) -> None:
        lock = self._lock
        lock.acquire()
        self.count -= 1
        waiters = self._waiters
        lock.release()
        if waiters:
            with self._cond:
                self._cond.notify_all()

    def wait_empty(self, timeout: float, closed: Callable[[], bool]) -> None:
        deadline = time.monotonic() + timeout
        with self._cond:
            self._waiters += 1
            try:
                while self.count > 0:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        raise errors.TimeoutError(
                            f"{self.count} asynchronous publishes were still in flight after {timeout:g}s"
                        )
                    if closed():
                        raise errors.ConnectionClosedError()
                    self._cond.wait(min(remaining, 0.25))
            finally:
                self._waiters -= 1

    def wake(self) -> None:
        with self._cond:
            self._cond.notify_all()


class _PubAckReply:
    """Resolves a publish_async future from the IO thread, and frees its in-flight slot.

    "No responders" right after a restart means JetStream is not answering yet: the publish is sent again a
    few times, backing off, before the future fails (the same idea as publish()'s retry policy).
    """

    __slots__ = ("attempts", "future", "headers", "payload", "publisher", "subject", "timeout")

    def __init__(self, publisher: AsyncPublisher, message: tuple[bytes, bytes | None, bytes], timeout: float) -> None:
        self.publisher = publisher
        self.subject, self.headers, self.payload = message
        self.timeout = timeout
        self.attempts = 1
        self.future: concurrent.futures.Future[PubAck] = LightFuture()

    def encode(self, reply: bytes) -> Command:
        return encode_pub_parts(self.subject, reply, self.headers, self.payload)

    def resolve(self, subject: bytes, data: bytes, headers: bytes | None) -> None:
        try:
            result = parse_pub_ack(data)
        except errors.JetStreamError as exc:
            self.fail(exc)
            return
        self.publisher._gate.release()
        if not self.future.done():
            self.future.set_result(result)

    def fail(self, exc: BaseException) -> None:
        if isinstance(exc, errors.NoRespondersError) and self.publisher._retry_later(self):
            return
        self.publisher._gate.release()
        if not self.future.done():
            self.future.set_exception(exc)


class AsyncPublisher:
    """publish_async's state for one JetStream context: the gate and the ack timeout."""

    def __init__(self, client: Client, *, max_pending: int, ack_timeout: float, stall_timeout: float) -> None:
        self._client = client
        self._gate = _InflightGate(max_pending)
        self.ack_timeout = ack_timeout
        self.stall_timeout = stall_timeout
        client.register_closeable(self)

    def _closed(self) -> bool:
        return self._client.is_closed

    def submit(
        self, message: tuple[bytes, bytes | None, bytes], timeout: float | timedelta | None
    ) -> concurrent.futures.Future[PubAck]:
        client = self._client
        ack_timeout = self.ack_timeout if timeout is None else check_timeout(timeout, self.ack_timeout)
        self._gate.acquire(self.stall_timeout, self._closed)
        reply = _PubAckReply(self, message, ack_timeout)
        subject = client._mux.register(reply, ack_timeout)
        try:
            client._outbound.put(reply.encode(subject))
        except BaseException:
            client._mux.forget(subject)
            self._gate.release()
            raise
        return reply.future

    def _retry_later(self, reply: _PubAckReply) -> bool:
        """IO thread: schedule another attempt of a publish that met "no responders"; False when out of tries."""
        if reply.attempts >= NO_RESPONDERS_ATTEMPTS or self._client.is_closed:
            return False
        delay = 0.05 * 2 ** (reply.attempts - 1)
        reply.attempts += 1
        asyncio.get_running_loop().call_later(delay, self._resend, reply)
        return True

    def _resend(self, reply: _PubAckReply) -> None:
        client = self._client
        if client.is_closed:
            reply.fail(errors.ConnectionClosedError())
            return
        subject = client._mux.register(reply, reply.timeout)
        command = reply.encode(subject)
        parts = [command] if isinstance(command, bytes) else list(command)
        client._nc.append_pending(parts, sum(len(part) for part in parts), 1)

    @property
    def pending(self) -> int:
        return self._gate.count

    def complete(self, timeout: float) -> None:
        self._gate.wait_empty(timeout, self._closed)

    def _client_closed(self, exc: BaseException) -> None:
        self._gate.wake()
