"""Fast ingest (nats-server 2.14+, a stream with ``allow_batched``): a batch of publishes acknowledged in bulk.

``js.publish_async`` waits for one PubAck per message; a fast batch gets one *flow ack* every ``flow``
messages ("everything up to sequence N is stored"), so a producer streams at the speed of the link while
the server still tells it, in order, what it has. Unlike an atomic batch, messages are stored as they
arrive: ending early keeps what was stored.

The protocol lives in each message's reply subject, ``<inbox>.<batch id>.<flow>.<gap mode>.<seq>.<op>.$FI``
(op 0 start, 1 append, 2 commit with this message, 3 commit without one, 4 ping); every answer of the server
arrives on one wildcard subscription of the publisher's inbox:

- ``{"type":"ack","seq":N,"msgs":M}``: stored up to N; the next ack comes after M more (the server adapts M);
- ``{"type":"gap","last_seq":E,"seq":R}``: sequence E never arrived (lost on the way);
- ``{"type":"err","seq":N,"error":{...}}``: message N was refused (a failed ``expected_*`` check, ...);
- the final ``{"stream":...,"seq":...,"batch":...,"count":...}`` (a [`BatchAck`][jetstream_sync.models.BatchAck]) or an
  error.

Flow control: ``add`` blocks while more than ``flow * max_outstanding_acks`` messages are unacknowledged; if
no ack comes for a third of ``timeout`` it pings (the server answers with its latest ack), and after
``timeout`` it raises TimeoutError (nothing of that message was sent; the publisher stays usable). With
``continue_on_gap=False`` (the default) a gap or a refused message ends the batch: the server stores nothing
after it, and the next call raises it (``ack`` holds the final BatchAck: what was stored). With
``continue_on_gap=True`` they go to ``error_handler`` (or the log) and the batch goes on.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from types import TracebackType
from typing import TYPE_CHECKING, Any

import attrs

from .. import errors
from .._runtime import NatsSubscription, encode_pub_parts, io_thread
from .._validate import check_int, check_timeout, options_from, prepare_message
from ..headers import HeadersInput
from ..models import BatchAck
from ._features import require_server
from .publish import PublishOptions

if TYPE_CHECKING:
    from .context import JetStream

__all__ = ["FastPubAck", "FastPublisher"]

log = logging.getLogger("jetstream_sync")

_OP_START, _OP_APPEND, _OP_COMMIT, _OP_END, _OP_PING = 0, 1, 2, 3, 4
MAX_FLOW = 65_535


@attrs.frozen
class FastPubAck:
    """What ``add`` returns: this message's sequence in the batch, and the highest one the server has stored
    so far (from its flow acks; a message at or below it is stored)."""

    batch_sequence: int
    ack_sequence: int


class FastPublisher:
    """One fast-ingest batch (see the module docstring); made by ``js.fast_publisher()``. One thread adds and
    commits at a time (calls are serialised); a ``with`` block ends it with
    [`close`][jetstream_sync.FastPublisher.close]."""

    def __init__(
        self,
        js: JetStream,
        *,
        flow: int = 100,
        max_outstanding_acks: int = 2,
        continue_on_gap: bool = False,
        timeout: float | timedelta | None = None,
        error_handler: Callable[[BaseException], object] | None = None,
    ) -> None:
        check_int("flow", flow, minimum=1)
        if flow > MAX_FLOW:
            raise errors.InvalidArgumentError("flow", f"must be at most {MAX_FLOW}, got {flow}")
        check_int("max_outstanding_acks", max_outstanding_acks, minimum=1)
        if max_outstanding_acks > 3:
            raise errors.InvalidArgumentError("max_outstanding_acks", f"must be 1 to 3, got {max_outstanding_acks}")
        if not isinstance(continue_on_gap, bool):
            raise errors.InvalidTypeError("continue_on_gap", f"must be a bool, got {type(continue_on_gap).__name__}")
        if error_handler is not None and not callable(error_handler):
            raise errors.InvalidTypeError("error_handler", "must be callable")
        require_server(js.runtime.server_info(), "the fast-ingest publisher", (2, 14, 0))
        self._runtime = js.runtime
        self.timeout = check_timeout(timeout, js.timeout)
        self.flow = flow
        self.max_outstanding_acks = max_outstanding_acks
        self.continue_on_gap = continue_on_gap
        self._error_handler = error_handler
        #: the batch id (the server's name for this batch)
        self.batch_id = self._runtime.new_token()
        self._inbox = f"{self._runtime.options.inbox_prefix}.{self.batch_id}"
        self._reply_head = f"{self._inbox}.{flow}.{'ok' if continue_on_gap else 'fail'}.".encode()
        #: the final acknowledgement, once the batch ended (also after a failure: what was stored)
        self.ack: BatchAck | None = None
        self._use = threading.Lock()  # one add/commit at a time
        self._cond = threading.Condition()
        # written under _cond (by the IO thread for what the server says)
        self._sent = 0
        self._acked = 0
        self._server_flow = flow
        self._first_answered = False
        self._final_seen = False  # the final BatchAck or error arrived
        self._failure: BaseException | None = None
        self._ended = False
        self._last_subject: bytes | None = None
        self._sub: NatsSubscription | None = self._runtime.subscribe(
            f"{self._inbox}.>", "", self._on_reply, self.timeout
        )
        self._runtime.track(self)

    def __repr__(self) -> str:
        return f"<FastPublisher {self.batch_id} sent={self._sent} acked={self._acked}>"

    def __enter__(self) -> FastPublisher:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        """End the batch ([`close`][jetstream_sync.FastPublisher.close]). When the block raised, that exception goes on
        and a failure to end the batch is only logged."""
        if exc_type is None:
            self.close()
            return
        try:
            self.close()
        except errors.JetStreamError as failure:
            log.warning("fast publisher %s: ending the batch after %r failed: %s", self.batch_id, exc, failure)

    @property
    def closed(self) -> bool:
        """Committed, closed or ended by an error: no more messages may be added."""
        return self._ended

    @property
    def sent(self) -> int:
        """Messages sent so far."""
        return self._sent

    @property
    def acked(self) -> int:
        """The highest batch sequence the server has confirmed stored."""
        return self._acked

    # -- the calls --------------------------------------------------------------------------------------
    def add(
        self,
        subject: str,
        data: bytes = b"",
        headers: HeadersInput | None = None,
        *,
        options: PublishOptions | None = None,
        **checks: Any,
    ) -> FastPubAck:
        """Send one message of the batch; blocks while too many are unacknowledged (flow control). The first
        ``add`` waits for the server's go-ahead, so a stream without ``allow_batched`` refuses it here
        (BatchPublishNotEnabledError)."""
        with self._use:
            message = self._prepare(subject, data, headers, options, checks)
            seq = self._sent + 1
            if seq > 1:
                self._wait_for_room(seq)
            self._send(message, seq, _OP_START if seq == 1 else _OP_APPEND)
            if seq == 1:
                self._wait(
                    lambda: self._first_answered or self._failure is not None or self._ended,
                    "the server's go-ahead for the batch",
                )
                self._raise_failure()
            return FastPubAck(seq, self._acked)

    def commit(
        self,
        subject: str,
        data: bytes = b"",
        headers: HeadersInput | None = None,
        *,
        options: PublishOptions | None = None,
        **checks: Any,
    ) -> BatchAck:
        """Send the last message and wait for the batch's [`BatchAck`][jetstream_sync.models.BatchAck] (``batch_size``
        messages stored)."""
        with self._use:
            message = self._prepare(subject, data, headers, options, checks)
            if self._sent:
                self._wait_for_room(self._sent + 1)
            self._send(message, self._sent + 1, _OP_COMMIT)
            return self._finish()

    def close(self) -> BatchAck | None:
        """End the batch without another message and wait for its BatchAck (None when nothing was added)."""
        with self._use:
            if self._ended:
                if self._failure is not None and self.ack is None:
                    raise self._failure
                return self.ack
            if not self._sent or self._last_subject is None:
                self._end()
                return None
            self._raise_failure()
            self._send((self._last_subject, None, b""), self._sent + 1, _OP_END)
            return self._finish()

    # -- the wire -----------------------------------------------------------------------------------------
    def _prepare(
        self,
        subject: str,
        data: bytes,
        headers: HeadersInput | None,
        options: PublishOptions | None,
        checks: dict[str, Any],
    ) -> tuple[bytes, bytes | None, bytes]:
        if self._ended:
            self._raise_failure()
            raise errors.InvalidArgumentError("publisher", f"batch {self.batch_id!r} has ended; make a new one")
        self._raise_failure()
        extra = options_from(PublishOptions, options, checks, "publish").headers() if options or checks else ()
        return prepare_message(subject, data, headers, self._runtime.max_payload, extra)

    def _send(self, message: tuple[bytes, bytes | None, bytes], seq: int, op: int) -> None:
        subject, headers, payload = message
        reply = self._reply_head + b"%d.%d.$FI" % (seq, op)
        self._runtime.send(encode_pub_parts(subject, reply, headers, payload), self.timeout)
        with self._cond:
            if op != _OP_PING:
                self._sent = seq
                self._last_subject = subject

    def _ping(self) -> None:
        if self._last_subject is not None:
            reply = self._reply_head + b"%d.%d.$FI" % (self._sent, _OP_PING)
            self._runtime.send(encode_pub_parts(self._last_subject, reply, None, b""), self.timeout)

    def _wait_for_room(self, seq: int) -> None:
        """Flow control: at most ``flow * max_outstanding_acks`` unacknowledged messages; ping when stalled."""

        def room() -> bool:
            return self._ended or seq <= self._acked + self._server_flow * self.max_outstanding_acks

        if room():
            self._raise_failure()
            return
        deadline = time.monotonic() + self.timeout
        while not room():
            left = deadline - time.monotonic()
            if left <= 0:
                raise errors.TimeoutError(
                    f"fast publisher {self.batch_id}: no flow ack for {self.timeout:g}s "
                    f"({self._sent} sent, {self._acked} acknowledged); nothing of this message was sent"
                )
            with self._cond:
                self._cond.wait_for(room, min(left, self.timeout / 3))
            if not room():
                self._ping()
        self._raise_failure()

    def _wait(self, done: Callable[[], bool], what: str) -> None:
        with self._cond:
            if not self._cond.wait_for(done, self.timeout):
                raise errors.TimeoutError(
                    f"fast publisher {self.batch_id}: no answer within {self.timeout:g}s for {what}"
                )

    def _finish(self) -> BatchAck:
        """Wait for the final answer; after a failure (fail mode) it still comes, saying what was stored."""
        try:
            self._wait(lambda: self._final_seen or self._ended, "the commit")
        finally:
            self._end()
        self._raise_failure()
        if self.ack is None:
            raise errors.JetStreamError(f"fast publisher {self.batch_id}: the batch ended without an acknowledgement")
        return self.ack

    def _raise_failure(self) -> None:
        failure = self._failure
        if failure is not None:
            self._end()
            raise failure

    def _end(self) -> None:
        """Stop listening (any thread but the IO thread)."""
        with self._cond:
            self._ended = True
            sub, self._sub = self._sub, None
        if sub is not None:
            self._runtime.untrack(self)
            if not self._runtime.is_closed:
                self._runtime.unsubscribe(sub, self.timeout)

    # -- what the server says (IO thread) -------------------------------------------------------------------
    @io_thread
    def _on_reply(self, subject: bytes, reply: bytes, data: bytes, headers: bytes | None) -> None:
        try:
            body = json.loads(data)
        except (ValueError, RecursionError):
            log.warning("fast publisher %s: unreadable answer %r", self.batch_id, data[:200])
            return
        if not isinstance(body, dict):
            return
        try:
            self._on_answer(body)
        except (TypeError, ValueError, AttributeError, OverflowError, errors.ProtocolError) as exc:
            # an answer of the wrong shape (a broken server): the batch ends with it rather than wait unanswered
            failure = errors.ProtocolError(f"fast batch {self.batch_id}: the server's answer {data[:200]!r}: {exc}")
            with self._cond:
                if self._failure is None:
                    self._failure = failure
                self._first_answered = self._final_seen = True
                self._cond.notify_all()

    @io_thread
    def _on_answer(self, body: dict[str, Any]) -> None:
        """IO thread: one decoded answer of the server's (a flow ack, a gap, an error, the final ack)."""
        report: BaseException | None = None
        with self._cond:
            kind = body.get("type")
            if kind == "ack":
                self._acked = max(self._acked, int(body.get("seq", 0)))
                self._server_flow = max(1, int(body.get("msgs", self._server_flow)))
                self._first_answered = True
            elif kind == "gap":
                report = errors.BatchPublishError(
                    409,
                    0,
                    f"fast batch {self.batch_id}: message {body.get('last_seq')} never arrived "
                    f"(the server received {body.get('seq')} next)",
                )
            elif kind == "err":
                error = body.get("error") or {}
                report = errors.api_error(
                    int(error.get("code", 400)),
                    int(error.get("err_code", 0)),
                    f"fast batch {self.batch_id}, message {body.get('seq')}: {error.get('description', '')}",
                )
            elif "error" in body:
                error = body["error"] or {}
                if self._failure is None:
                    self._failure = errors.api_error(
                        int(error.get("code", 400)), int(error.get("err_code", 0)), str(error.get("description", ""))
                    )
                self._first_answered = self._final_seen = True
            elif "batch" in body:
                self.ack = BatchAck.from_json(body)
                self._first_answered = self._final_seen = True
            if report is not None and not self.continue_on_gap and self._failure is None:
                self._failure = report  # the batch ends: the final ack that follows says what was stored
                report = None
            self._cond.notify_all()
        if report is not None:
            if self._error_handler is not None:
                self._runtime.run_callback(self._error_handler, report)
            else:
                log.warning("%s", report)

    def on_client_closed(self, exc: BaseException) -> None:
        """The client closed: fail what waits for an ack (called by the client)."""
        with self._cond:
            if self._failure is None and self.ack is None:
                self._failure = exc
            self._ended = True
            self._sub = None
            self._cond.notify_all()
