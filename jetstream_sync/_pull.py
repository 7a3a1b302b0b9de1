"""The ADR-37 pull machinery: pull requests, pending counts, status handling and heartbeats.

IO-thread state is written only on the IO thread; the user side writes only its delivery counters (which the
IO thread reads) and the watchdog only reads (DESIGN.md rule 3). A message counts as processed when it is
handed to the user, so at most ``max_messages`` (or ``max_bytes``) unprocessed messages are held per consume.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import json
import logging
import time
from collections import Counter
from collections.abc import Callable
from datetime import timedelta
from enum import Enum
from typing import TYPE_CHECKING, Any

import attrs

from . import errors
from ._connection import encode_pub, status_of
from ._validate import check_int, to_seconds
from .buffer import BufferFinished, MessageBuffer
from .headers import parse_header_block
from .message import Msg
from .models import AckPolicy

if TYPE_CHECKING:
    from .client import Client
    from .consumer import Consumer

log = logging.getLogger("jetstream_sync")

# A pull limited by bytes asks for this many messages, so the server does not stop at one (ADR-37).
BATCH_FOR_MAX_BYTES = 1_000_000
DEFAULT_EXPIRES = 30.0
DEFAULT_MAX_MESSAGES = 500
MIN_EXPIRES = 1.0
MIN_HEARTBEAT = 0.5
MAX_HEARTBEAT = 30.0
_ACK_PREFIX = b"$JS.ACK."
_NS = 1_000_000_000


# -- options ------------------------------------------------------------------------------------------------
@attrs.frozen(kw_only=True)
class PullOptions:
    """Validated options of one continuous pull (messages() or consume())."""

    max_messages: int
    max_bytes: int  # 0: not limited by bytes
    expires: float
    idle_heartbeat: float
    threshold_messages: int
    threshold_bytes: int

    @property
    def by_bytes(self) -> bool:
        return self.max_bytes > 0


def _seconds_or_none(field: str, value: float | timedelta | None) -> float | None:
    return None if value is None else to_seconds(field, value)


def consume_options(
    max_messages: int | None,
    max_bytes: int | None,
    expires: float | timedelta | None,
    idle_heartbeat: float | timedelta | None,
    threshold_messages: int | None,
    threshold_bytes: int | None,
) -> PullOptions:
    """ADR-37 "Consume" defaults and constraints; every violation names its option."""
    if max_messages is not None and max_bytes is not None:
        raise errors.InvalidArgumentError("max_bytes", "max_messages and max_bytes are exclusive; set only one")
    expires_s = DEFAULT_EXPIRES if expires is None else to_seconds("expires", expires)
    if expires_s < MIN_EXPIRES:
        raise errors.InvalidArgumentError("expires", f"must be at least {MIN_EXPIRES:g}s, got {expires_s:g}s")
    heartbeat = _seconds_or_none("idle_heartbeat", idle_heartbeat)
    if heartbeat is None:
        heartbeat = max(MIN_HEARTBEAT, min(expires_s / 2, MAX_HEARTBEAT))
    elif not MIN_HEARTBEAT <= heartbeat <= MAX_HEARTBEAT:
        raise errors.InvalidArgumentError(
            "idle_heartbeat", f"must be between {MIN_HEARTBEAT:g}s and {MAX_HEARTBEAT:g}s, got {heartbeat:g}s"
        )
    if heartbeat > expires_s / 2:
        raise errors.InvalidArgumentError(
            "idle_heartbeat", f"must be at most half of expires ({expires_s / 2:g}s), got {heartbeat:g}s"
        )
    if max_bytes is not None:
        limit_bytes = check_int("max_bytes", max_bytes, minimum=1)
        limit_msgs = BATCH_FOR_MAX_BYTES
    else:
        limit_bytes = 0
        limit_msgs = (
            DEFAULT_MAX_MESSAGES if max_messages is None else check_int("max_messages", max_messages, minimum=1)
        )
    if threshold_messages is None:
        thr_msgs = limit_msgs // 2
    else:
        thr_msgs = check_int("threshold_messages", threshold_messages, minimum=0)
        if thr_msgs > limit_msgs:
            raise errors.InvalidArgumentError(
                "threshold_messages", f"cannot exceed max_messages ({limit_msgs}), got {thr_msgs}"
            )
    if threshold_bytes is None:
        thr_bytes = limit_bytes // 2
    else:
        if not limit_bytes:
            raise errors.InvalidArgumentError("threshold_bytes", "needs max_bytes")
        thr_bytes = check_int("threshold_bytes", threshold_bytes, minimum=0)
        if thr_bytes > limit_bytes:
            raise errors.InvalidArgumentError(
                "threshold_bytes", f"cannot exceed max_bytes ({limit_bytes}), got {thr_bytes}"
            )
    return PullOptions(
        max_messages=limit_msgs,
        max_bytes=limit_bytes,
        expires=expires_s,
        idle_heartbeat=heartbeat,
        threshold_messages=thr_msgs,
        threshold_bytes=thr_bytes,
    )


def fetch_heartbeat(expires: float, idle_heartbeat: float | timedelta | None) -> float:
    """Heartbeats on by default for long fetches (5 s from 10 s expiry, as nats.go); checked against expires."""
    if idle_heartbeat is None:
        return 5.0 if expires >= 10.0 else 0.0
    heartbeat = to_seconds("idle_heartbeat", idle_heartbeat)
    if heartbeat * 2 > expires:
        raise errors.InvalidArgumentError(
            "idle_heartbeat", f"must be at most half of expires ({expires / 2:g}s), got {heartbeat:g}s"
        )
    return heartbeat


def pull_request(
    batch: int, expires: float, max_bytes: int = 0, heartbeat: float = 0.0, no_wait: bool = False
) -> bytes:
    body: dict[str, Any] = {"batch": batch}
    if expires > 0:
        body["expires"] = int(expires * _NS)
    if max_bytes > 0:
        body["max_bytes"] = max_bytes
    if heartbeat > 0:
        body["idle_heartbeat"] = int(heartbeat * _NS)
    if no_wait:
        body["no_wait"] = True
    return json.dumps(body, separators=(",", ":")).encode()


# -- statuses -----------------------------------------------------------------------------------------------
class StatusKind(Enum):
    HEARTBEAT = "heartbeat"
    QUIET = "quiet"  # 404, 408, 409 Message Size Exceeds MaxBytes / Batch Completed: the pull simply ended
    WARNING = "warning"  # 409 Exceeded ...: reported, not terminal
    RESET = "reset"  # 409 Leadership Change: the pull's state is gone, start over
    TERMINAL = "terminal"  # 400, 409 Consumer Deleted / Consumer is push based
    NO_RESPONDERS = "no_responders"  # 503: the consumer (or JetStream) is not there right now


def classify(status: int, description: str) -> tuple[StatusKind, errors.JetStreamError | None]:
    """ADR-37's status table, with the error each status raises or reports."""
    lowered = description.lower()
    if status == 100:
        return StatusKind.HEARTBEAT, None
    if status in (404, 408):
        return StatusKind.QUIET, None
    if status == 400:
        return StatusKind.TERMINAL, errors.BadRequestError(status, description, "check the pull options")
    if status == 503:
        return StatusKind.NO_RESPONDERS, errors.NoRespondersError(
            "no responders for the pull request: the consumer or JetStream is not available"
        )
    if status == 409:
        if "consumer deleted" in lowered:
            return StatusKind.TERMINAL, errors.ConsumerDeletedError(status, description)
        if "push based" in lowered:
            return StatusKind.TERMINAL, errors.PushConsumerError(status, description)
        if "message size exceeds maxbytes" in lowered or "batch completed" in lowered:
            return StatusKind.QUIET, None
        if "leadership change" in lowered or "server shutdown" in lowered:
            return StatusKind.RESET, None
        return StatusKind.WARNING, errors.PullWarning(status, description)
    return StatusKind.WARNING, errors.PullWarning(status, description or "unexpected status")


def pending_left(headers: bytes | None) -> tuple[int, int]:
    """The Nats-Pending-Messages / Nats-Pending-Bytes of a terminating status (0 when absent)."""
    if not headers or b"Nats-Pending" not in headers:
        return 0, 0
    _, _, parsed = parse_header_block(headers)
    try:
        return int(parsed.get("Nats-Pending-Messages", 0)), int(parsed.get("Nats-Pending-Bytes", 0))
    except ValueError:
        return 0, 0


# -- the common part ----------------------------------------------------------------------------------------
class _Pull(abc.ABC):
    """One inbox subscription for one consumer's pulls; builds messages on the IO thread."""

    def __init__(self, consumer: Consumer) -> None:
        js = consumer._js
        client = js.client
        self.client: Client = client
        self.consumer_label = f"{consumer.stream_name}/{consumer.name}"
        self.inbox = client.new_inbox()
        self._inbox_b = self.inbox.encode()
        self._next_subject = f"{js.api_prefix}.CONSUMER.MSG.NEXT.{consumer.stream_name}.{consumer.name}".encode()
        self._ack_none = consumer.cached_info.config.ack_policy == AckPolicy.NONE
        self.buffer: MessageBuffer[Msg] = MessageBuffer(client._io.notify_later)
        self.last_activity = time.monotonic()
        self._nats_sub: Any = None
        self.statuses: Counter[int] = Counter()

    def _make_msg(self, subject: bytes, reply: bytes, data: bytes, headers: bytes | None) -> Msg:
        size = len(subject) + len(reply) + len(data) + (len(headers) if headers else 0)
        return Msg(subject.decode(), reply.decode(), data, headers, self.client, size=size, ack_none=self._ack_none)

    def _send_pull(self, body: bytes) -> None:
        """IO thread: publish a pull request with our inbox as the reply."""
        command = encode_pub(self._next_subject, self._inbox_b, None, body)
        self.client._nc.append_pending([command], len(command))

    async def _subscribe(self) -> None:
        self._nats_sub = await self.client._nc.fast_subscribe(self.inbox, "", self._on_message)

    def _unsubscribe(self) -> None:
        """IO thread: drop the subscription (fire and forget)."""
        sub, self._nats_sub = self._nats_sub, None
        if sub is not None:
            nc = self.client._nc
            nc.fast_handlers.pop(sub._id, None)
            if not nc.is_closed:
                asyncio.get_running_loop().create_task(self._quiet_unsubscribe(sub))

    async def _quiet_unsubscribe(self, sub: Any) -> None:
        try:
            await self.client._nc.fast_unsubscribe(sub)
        except Exception:
            log.debug("unsubscribe of %s failed", self.inbox, exc_info=True)

    @abc.abstractmethod
    def _on_message(self, subject: bytes, reply: bytes, data: bytes, headers: bytes | None) -> None:
        """IO thread: one message, status or heartbeat on the inbox."""


# -- fetch and next -----------------------------------------------------------------------------------------
class FetchPull(_Pull):
    """One pull request: ends when the batch or byte limit is met, or a status ends it."""

    def __init__(
        self, consumer: Consumer, batch: int, max_bytes: int, expires: float, heartbeat: float, no_wait: bool
    ) -> None:
        super().__init__(consumer)
        self.batch = batch
        self.max_bytes = max_bytes
        self.expires = expires
        self.heartbeat = heartbeat
        self.no_wait = no_wait
        self.received = 0
        self.received_bytes = 0
        self.done = False

    def start(self) -> None:
        """Fire and forget: the caller does not wait for the IO thread; a failure to start ends the batch.

        A pull needs its own subscription: JetStream delivers with the stored subject in the MSG line, so
        only the subscription id can route a message to its fetch.
        """
        self.client.register_closeable(self)
        self.client._io.post(self._begin)

    def _begin(self) -> None:
        asyncio.get_running_loop().create_task(self._start())

    async def _start(self) -> None:
        try:
            await self._subscribe()
        except Exception as exc:
            self._finish(errors.ConnectionClosedError() if self.client._nc.is_closed else exc)
            return
        self.client.add_listener(self)
        self.last_activity = time.monotonic()
        self._send_pull(pull_request(self.batch, self.expires, self.max_bytes, self.heartbeat, self.no_wait))
        log.debug(
            "fetch %s: pull batch=%d max_bytes=%d expires=%gs",
            self.consumer_label,
            self.batch,
            self.max_bytes,
            self.expires,
        )

    def _on_message(self, subject: bytes, reply: bytes, data: bytes, headers: bytes | None) -> None:
        if self.done:
            return
        self.last_activity = time.monotonic()
        if reply.startswith(_ACK_PREFIX):
            msg = self._make_msg(subject, reply, data, headers)
            self.received += 1
            self.received_bytes += msg.size
            self.buffer.put(msg)
            if self.received >= self.batch or (self.max_bytes and self.received_bytes >= self.max_bytes):
                self._finish(None)
            return
        status, description = status_of(headers)
        if status is None:
            return
        self.statuses[status] += 1
        kind, exc = classify(status, description)
        log.debug("fetch %s: status %d %s", self.consumer_label, status, description)
        if kind is StatusKind.HEARTBEAT:
            return
        if kind is StatusKind.QUIET or kind is StatusKind.RESET:
            self._finish(None)
        elif kind is StatusKind.NO_RESPONDERS:
            self._finish(
                errors.ConsumerNotFoundError(
                    503,
                    10014,
                    f"no responders for a pull on {self.consumer_label}: the consumer does not exist "
                    "or JetStream is not available",
                )
            )
        else:
            self._finish(exc)

    def _finish(self, exc: BaseException | None) -> None:
        """IO thread."""
        if self.done:
            return
        self.done = True
        self.buffer.finish(exc)
        self.client.remove_listener(self)
        self._unsubscribe()
        self.client._forget(self)

    def on_disconnected(self) -> None:
        """The request is most likely gone with the connection: end the batch now, so a fetch loop's next
        fetch goes out as soon as the connection is back instead of waiting out this one's deadline."""
        log.debug("fetch %s: disconnected, ending the batch", self.consumer_label)
        self._finish(None)

    def on_reconnected(self) -> None:
        return

    def cancel(self) -> None:
        """Any thread: end the fetch (deadline passed or the caller gave up)."""
        if not self.done:
            with contextlib.suppress(errors.ConnectionClosedError):
                self.client._io.post(self._finish, None)

    def missed_heartbeat(self, now: float) -> bool:
        return self.heartbeat > 0 and not self.done and now - self.last_activity > 2 * self.heartbeat

    def _client_closed(self, exc: BaseException) -> None:
        self.done = True
        self.buffer.abort(exc)


# -- messages() and consume() -------------------------------------------------------------------------------
@attrs.frozen(kw_only=True)
class ConsumeStats:
    """A snapshot of one consume's counters."""

    pulls_sent: int
    messages_delivered: int
    bytes_delivered: int
    pending_messages: int
    pending_bytes: int
    buffered: int
    heartbeats_missed: int
    reconnect_pulls: int
    warnings: int
    statuses: dict[int, int]


class ContinuousPull(_Pull):
    """The ADR-37 consume algorithm: keep the buffer filled, re-pull at the thresholds, survive reconnects."""

    def __init__(self, consumer: Consumer, options: PullOptions, report: Callable[[BaseException], None]) -> None:
        super().__init__(consumer)
        self.options = options
        self._report = report
        # IO thread only
        self.pending_msgs = 0
        self.pending_bytes = 0
        self.received = 0
        self.applied = 0
        self.applied_bytes = 0
        self.connected = True
        self.pulls_sent = 0
        self.heartbeats_missed = 0
        self.reconnect_pulls = 0
        self.warnings = 0
        self._retry_handle: asyncio.TimerHandle | None = None
        self._retry_delay = 0.25
        # user side only (the thread handing out messages)
        self.delivered = 0
        self.delivered_bytes = 0
        self._apply_posted = False
        # any thread, only ever set: stopped ends pulling; halted (stop() or client close) also ends delivery
        self.stopped = False
        self.halted = False
        self.draining = False
        self._hb_posted = False

    # -- lifecycle --------------------------------------------------------------------------------------
    def start(self, timeout: float) -> None:
        client = self.client
        client.register_closeable(self)
        client._io.call(self._start(), timeout, "consume")
        client._watchdog.call_later(self._check_interval(), self._check_heartbeat)

    async def _start(self) -> None:
        await self._subscribe()
        self.client.add_listener(self)
        self.connected = bool(self.client._nc.is_connected)
        self.last_activity = time.monotonic()
        self._pull()

    def stop(self) -> None:
        """Any thread: end delivery at once; buffered messages are dropped (they will be redelivered)."""
        if self.halted:
            return
        self.halted = self.stopped = True
        self.buffer.abort(BufferFinished())
        self._post(self._shutdown)

    def drain(self) -> None:
        """Any thread: stop pulling; what is buffered is still delivered, then the iteration ends."""
        if self.stopped or self.draining:
            return
        self.draining = True
        self._post(self._drain)

    def _post(self, fn: Callable[[], None]) -> None:
        with contextlib.suppress(errors.ConnectionClosedError):
            self.client._io.post(fn)

    def _shutdown(self) -> None:
        """IO thread."""
        if self._retry_handle is not None:
            self._retry_handle.cancel()
        self.client.remove_listener(self)
        self._unsubscribe()
        self.client._forget(self)

    def _drain(self) -> None:
        self._shutdown()
        self.buffer.finish()

    def _end(self, exc: BaseException) -> None:
        """IO thread: a terminal status; readers get the buffered messages, then ``exc``."""
        log.debug("consume %s: ended by %s", self.consumer_label, exc)
        self.stopped = True
        self.buffer.finish(exc)
        self._shutdown()

    def _client_closed(self, exc: BaseException) -> None:
        self.halted = self.stopped = True
        self.buffer.abort(exc)

    # -- pulling (IO thread) ----------------------------------------------------------------------------
    def _sync_delivered(self) -> None:
        """Apply what the user side has taken since the last time: a handed-out message is processed."""
        delivered, delivered_bytes = self.delivered, self.delivered_bytes
        self.pending_msgs = max(0, self.pending_msgs - (delivered - self.applied))
        if self.options.by_bytes:
            self.pending_bytes = max(0, self.pending_bytes - (delivered_bytes - self.applied_bytes))
        self.applied, self.applied_bytes = delivered, delivered_bytes

    def _pull(self) -> None:
        """Publish a pull when the pending counts reached their threshold, sized to fill the buffer."""
        if self.stopped or self.draining or not self.connected or self._nats_sub is None:
            return
        self._sync_delivered()
        opts = self.options
        if opts.by_bytes:
            if self.pending_bytes > opts.threshold_bytes:
                return
            max_bytes = opts.max_bytes - self.pending_bytes
            batch = opts.max_messages - self.pending_msgs
            if max_bytes < 1 or batch < 1:
                return
        else:
            if self.pending_msgs > opts.threshold_messages:
                return
            batch = opts.max_messages - self.pending_msgs
            max_bytes = 0
            if batch < 1:
                return
        if self.outstanding() <= 0:
            # Nothing was outstanding, so the server owed us nothing until now: the heartbeat clock starts here,
            # not at the last message before the user's own (possibly long) processing time.
            self.last_activity = time.monotonic()
        self.pending_msgs += batch
        self.pending_bytes += max_bytes
        self.pulls_sent += 1
        self._send_pull(pull_request(batch, opts.expires, max_bytes, opts.idle_heartbeat))
        log.debug(
            "consume %s: pull batch=%d max_bytes=%d (pending %d msgs, %d bytes)",
            self.consumer_label,
            batch,
            max_bytes,
            self.pending_msgs,
            self.pending_bytes,
        )

    def _apply_delivered(self) -> None:
        """IO thread, posted by the user side when a threshold was crossed."""
        self._apply_posted = False
        self._pull()

    def _reset_pending(self) -> None:
        """Forget outstanding requests (they are gone after a reconnect or missed heartbeat); keep the buffer."""
        self._sync_delivered()
        buffered = self.received - self.applied
        self.pending_msgs = buffered
        if self.options.by_bytes:
            self.pending_bytes = min(self.pending_bytes, sum(m.size for m in self.buffer.snapshot()))

    def _on_message(self, subject: bytes, reply: bytes, data: bytes, headers: bytes | None) -> None:
        if self.stopped:
            return
        self.last_activity = time.monotonic()
        if reply.startswith(_ACK_PREFIX):
            self.received += 1
            self.buffer.put(self._make_msg(subject, reply, data, headers))
            return
        status, description = status_of(headers)
        if status is None:
            return
        self.statuses[status] += 1
        if status == 100:
            return
        msgs_left, bytes_left = pending_left(headers)
        self.pending_msgs = max(0, self.pending_msgs - msgs_left)
        if self.options.by_bytes:
            self.pending_bytes = max(0, self.pending_bytes - bytes_left)
        kind, exc = classify(status, description)
        log.debug(
            "consume %s: status %d %s (pending %d msgs)", self.consumer_label, status, description, self.pending_msgs
        )
        if kind is StatusKind.TERMINAL:
            assert exc is not None
            self._report(exc)
            self._end(exc)
            return
        if kind is StatusKind.WARNING:
            self.warnings += 1
            assert exc is not None
            self._report(exc)
        elif kind is StatusKind.RESET:
            self._reset_pending()
        elif kind is StatusKind.NO_RESPONDERS:
            self._retry_later(exc)
            return
        self._pull()

    def _retry_later(self, exc: BaseException | None) -> None:
        """503 on a pull: the consumer or JetStream is not there (yet, after a restart); try again, backing off."""
        self.warnings += 1
        if exc is not None:
            self._report(exc)
        self._reset_pending()
        if self._retry_handle is None or self._retry_handle.cancelled():
            delay = self._retry_delay
            self._retry_delay = min(self._retry_delay * 2, 5.0)
            self._retry_handle = asyncio.get_running_loop().call_later(delay, self._retry_now)

    def _retry_now(self) -> None:
        self._retry_handle = None
        self._pull()

    # -- connection events (IO thread) ------------------------------------------------------------------
    def on_disconnected(self) -> None:
        self.connected = False

    def on_reconnected(self) -> None:
        self.connected = True
        self.last_activity = time.monotonic()
        self._retry_delay = 0.25
        self._reset_pending()
        self.reconnect_pulls += 1
        log.debug("consume %s: reconnected, pulling again", self.consumer_label)
        self._pull()

    # -- heartbeats (watchdog thread reads, IO thread acts) ---------------------------------------------
    def _check_interval(self) -> float:
        return min(self.options.idle_heartbeat / 2, 1.0)

    def outstanding(self) -> int:
        """Messages asked for and not yet arrived: only then must the server send something."""
        return self.pending_msgs - (self.received - self.applied)

    def _check_heartbeat(self) -> None:
        if self.stopped or self.draining or self.client.is_closed:
            return
        if (
            self.connected
            and not self._hb_posted
            and self.outstanding() > 0
            and time.monotonic() - self.last_activity > 2 * self.options.idle_heartbeat
        ):
            self._hb_posted = True
            self._post(self._on_missed_heartbeat)
        self.client._watchdog.call_later(self._check_interval(), self._check_heartbeat)

    def _on_missed_heartbeat(self) -> None:
        self._hb_posted = False
        now = time.monotonic()
        if (
            self.stopped
            or not self.connected
            or self.outstanding() <= 0
            or now - self.last_activity <= 2 * self.options.idle_heartbeat
        ):
            return
        self.heartbeats_missed += 1
        self.last_activity = now
        self._report(
            errors.MissedHeartbeatError(
                f"consume {self.consumer_label}: nothing from the server for {2 * self.options.idle_heartbeat:g}s "
                "(twice the idle heartbeat); pulling again"
            )
        )
        self._reset_pending()
        self._pull()

    # -- the user side ----------------------------------------------------------------------------------
    def handed_out(self, msg: Msg) -> None:
        """User side: ``msg`` goes to the user now; post to the IO thread when that crosses a threshold."""
        self.delivered += 1
        self.delivered_bytes += msg.size
        if self._apply_posted or self.stopped or self.draining:
            return
        opts = self.options
        if opts.by_bytes:
            crossed = self.pending_bytes - (self.delivered_bytes - self.applied_bytes) <= opts.threshold_bytes
        else:
            crossed = self.pending_msgs - (self.delivered - self.applied) <= opts.threshold_messages
        if crossed:
            self._apply_posted = True
            self._post(self._apply_delivered)

    def stats(self) -> ConsumeStats:
        unapplied = self.delivered - self.applied
        return ConsumeStats(
            pulls_sent=self.pulls_sent,
            messages_delivered=self.delivered,
            bytes_delivered=self.delivered_bytes,
            pending_messages=max(0, self.pending_msgs - unapplied),
            pending_bytes=max(0, self.pending_bytes - (self.delivered_bytes - self.applied_bytes))
            if self.options.by_bytes
            else 0,
            buffered=max(0, self.received - self.delivered),  # received, not yet handed to the user
            heartbeats_missed=self.heartbeats_missed,
            reconnect_pulls=self.reconnect_pulls,
            warnings=self.warnings,
            statuses=dict(self.statuses),
        )
