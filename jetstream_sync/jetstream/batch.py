"""Atomic batch publish (ADR-50, nats-server 2.12+): several messages stored all together, or not at all.

``with js.atomic_batch() as batch: batch.add(...)`` commits when the block ends and discards when it raises.
On the wire each message carries ``Nats-Batch-Id`` and ``Nats-Batch-Sequence`` (1, 2, ...); the last one also
``Nats-Batch-Commit: 1``. The server stages the messages and stores them only at the commit, after checking
every message's conditions (``expected_*``, ``msg_id``, limits); any failure stores nothing.

How the messages travel:

- the first is a request, so a stream that does not take batches (or is not there) answers at the first
  ``add`` instead of at the commit;
- the later ones are plain publishes on the same connection, in order, with no reply to wait for;
- one message is always held back: at the commit it goes out as the commit message, so every server that
  knows atomic batches (2.12+) takes it (the newer end-of-batch marker is not needed).

A message lost on the way (a disconnect midway) leaves a gap in the sequence, and the server refuses the
commit as incomplete (``BatchPublishError``, err_code 10176): still all or nothing. A discarded batch is
never committed; the server drops what it staged after its batch timeout (10 s by default).

What the server refuses in a batch is refused here before anything is sent: more than 1,000 messages (its
default limit), a batch id over 64 characters, ``expected_last_sequence`` on any message but the first, and
``expected_last_msg_id``. All messages must belong to one stream.
"""

from __future__ import annotations

import logging
import threading
from datetime import timedelta
from types import TracebackType
from typing import TYPE_CHECKING, Any

from .. import errors
from .._protocol import api_response, reply_encoder
from .._runtime import encode_pub_parts
from .._validate import PreparedMessage, check_timeout, options_from, prepare_message
from ..headers import HeadersInput
from ..models import BatchAck
from ._features import require_server
from .publish import PublishOptions

if TYPE_CHECKING:
    from .context import JetStream

__all__ = ["MAX_BATCH_ID", "MAX_BATCH_MESSAGES", "AtomicBatch"]

log = logging.getLogger("jetstream_sync")

#: the server's default ``max_msgs`` of a batch (``jetstream { limits { batch { max_msgs } } }``)
MAX_BATCH_MESSAGES = 1000
#: the longest batch id the server takes
MAX_BATCH_ID = 64


def _check_batch_id(batch_id: object) -> str:
    if not isinstance(batch_id, str):
        raise errors.InvalidTypeError("batch_id", f"must be a str, got {type(batch_id).__name__}")
    if not batch_id or len(batch_id) > MAX_BATCH_ID or not batch_id.isprintable() or " " in batch_id:
        raise errors.InvalidArgumentError(
            "batch_id", f"must be 1 to {MAX_BATCH_ID} printable characters without spaces, got {batch_id!r}"
        )
    return batch_id


class AtomicBatch:
    """One atomic batch (see the module docstring); made by ``js.atomic_batch()``. Not shared between threads:
    one thread adds and commits (a lock makes misuse raise rather than corrupt the sequence)."""

    def __init__(self, js: JetStream, *, batch_id: str | None = None, timeout: float | timedelta | None = None) -> None:
        require_server(js.runtime.server_info(), "atomic batch publish", (2, 12, 0))
        self._js = js
        self._runtime = js.runtime
        self.batch_id = js.runtime.new_token() if batch_id is None else _check_batch_id(batch_id)
        self.timeout = check_timeout(timeout, js.timeout)
        #: the server's acknowledgement, once committed
        self.ack: BatchAck | None = None
        self._held: PreparedMessage | None = None  # the latest message: sent at the next add, or as the commit
        self._size = 0  # messages added (the held one included)
        self._sent = 0
        self._closed = False
        self._lock = threading.Lock()
        # what _send adds to a message at most: its batch headers (the last sequence, the commit flag) and, for a
        # message without headers, the header block around them
        self._batch_headers_room = len(
            b"NATS/1.0\r\n\r\nNats-Batch-Id: %s\r\nNats-Batch-Sequence: %d\r\nNats-Batch-Commit: 1\r\n"
            % (self.batch_id.encode(), MAX_BATCH_MESSAGES)
        )

    def __repr__(self) -> str:
        state = "committed" if self.ack is not None else "closed" if self._closed else "open"
        return f"<AtomicBatch {self.batch_id} {self._size} messages {state}>"

    def __enter__(self) -> AtomicBatch:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        """Commit when the block ends normally (raising what the commit raises); discard when it raised."""
        if self._closed:
            return
        if exc_type is None:
            self.commit()
        else:
            self.discard()

    @property
    def size(self) -> int:
        """How many messages were added."""
        return self._size

    @property
    def closed(self) -> bool:
        """Committed, failed or discarded: no more ``add``."""
        return self._closed

    def add(
        self,
        subject: str,
        data: bytes = b"",
        headers: HeadersInput | None = None,
        *,
        options: PublishOptions | None = None,
        **checks: Any,
    ) -> None:
        """Add a message. Takes the checks of ``js.publish`` (``msg_id``, ``expected_stream``,
        ``expected_last_sequence`` on the first message only, ``expected_last_subject_sequence``, ``ttl``), which
        the server applies at the commit. Raises BatchPublishError (BatchPublishNotEnabledError when the stream
        does not allow atomic publish) when the server refuses the first message."""
        with self._lock:
            self._check_open()
            if self._size >= MAX_BATCH_MESSAGES:
                raise errors.InvalidArgumentError(
                    "batch",
                    f"holds at most {MAX_BATCH_MESSAGES} messages (the server's limit); commit this one "
                    "and start another",
                )
            extra = self._checks(options, checks)
            # the batch headers are added when the message is sent: leave room for them in max_payload, or a
            # message that fits alone would make the server close the connection (Maximum Payload Violation)
            limit = self._runtime.max_payload - self._batch_headers_room
            message = prepare_message(subject, data, headers, limit, extra)
            previous, self._held = self._held, message
            self._size += 1
            if previous is not None:
                self._send(previous, commit=False)

    def commit(self) -> BatchAck:
        """Send the last message as the commit and wait for the server's BatchAck. On any refusal
        (BatchPublishError, WrongLastSequenceError, ...) nothing of the batch is stored."""
        with self._lock:
            self._check_open()
            held = self._held
            if held is None:
                raise errors.InvalidArgumentError("batch", "is empty: add at least one message before commit()")
            self._closed = True
            ack = self._send(held, commit=True)
            assert ack is not None
            if ack.batch_id != self.batch_id or ack.batch_size != self._size:
                raise errors.JetStreamError(
                    f"the server acknowledged batch {ack.batch_id!r} with {ack.batch_size} messages; "
                    f"{self.batch_id!r} has {self._size}"
                )
            self.ack = ack
            return ack

    def discard(self) -> None:
        """Give the batch up: nothing more is sent and nothing is stored (the server drops what it staged)."""
        with self._lock:
            self._closed = True
            self._held = None

    # -- the wire -----------------------------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._closed:
            raise errors.InvalidArgumentError(
                "batch", f"{self.batch_id!r} is already {'committed' if self.ack else 'closed'}; start a new one"
            )

    def _checks(self, options: PublishOptions | None, checks: dict[str, Any]) -> list[tuple[bytes, bytes]]:
        opts = options_from(PublishOptions, options, checks, "publish")
        if opts.expected_last_msg_id is not None:
            raise errors.InvalidArgumentError(
                "expected_last_msg_id", "is not allowed in a batch (the server refuses it)"
            )
        if opts.expected_last_sequence is not None and self._size > 0:
            raise errors.InvalidArgumentError(
                "expected_last_sequence",
                "is only allowed on the first message of a batch (it checks the stream before the batch)",
            )
        return opts.headers()

    def _send(self, message: PreparedMessage, *, commit: bool) -> BatchAck | None:
        """Send one message with its batch headers: a request for the first and for the commit."""
        subject, headers, payload = message
        self._sent += 1
        batch_headers = b"Nats-Batch-Id: %s\r\nNats-Batch-Sequence: %d\r\n" % (self.batch_id.encode(), self._sent)
        if commit:
            batch_headers += b"Nats-Batch-Commit: 1\r\n"
        if headers is None:
            headers = b"NATS/1.0\r\n" + batch_headers + b"\r\n"
        else:
            headers = headers[:-2] + batch_headers + b"\r\n"  # before the block's closing empty line
        if not commit and self._sent > 1:
            self._runtime.send(encode_pub_parts(subject, b"", headers, payload))
            return None
        try:
            reply = self._runtime.request(
                reply_encoder(subject, headers, payload), self.timeout, f"batch publish to {subject.decode()!r}"
            )
        except errors.JetStreamError:
            self._closed = True
            raise
        if not reply.data:  # a staged message (not the commit): the server answers with nothing
            if commit:
                raise errors.JetStreamError(f"empty answer to the commit of batch {self.batch_id!r}")
            return None
        try:
            body = api_response(reply.data, "the server's batch acknowledgement")
        except errors.APIError:
            self._closed = True
            raise
        if commit:
            return BatchAck.from_json(body)
        return None
