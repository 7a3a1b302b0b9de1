"""Received messages, their JetStream metadata (ADR-15 ack subjects) and acknowledgements."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Protocol

import attrs

from ._validate import check_timeout, to_seconds
from .errors import InvalidAckSubjectError
from .headers import Headers, parse_header_block

if TYPE_CHECKING:
    from datetime import timedelta

__all__ = ["Msg", "MsgMetadata"]

_ACK_PREFIX = "$JS.ACK."
_ACK = b"+ACK"
_NAK = b"-NAK"
_WPI = b"+WPI"
_TERM = b"+TERM"
_EMPTY_HEADERS = Headers()


class _AckSender(Protocol):
    """What a message needs from its client to acknowledge: a coalesced publish and a request."""

    def post_publish(self, subject: str, payload: bytes) -> None: ...

    def ack_request(self, subject: str, payload: bytes, timeout: float) -> None: ...

    default_timeout: float


@attrs.frozen(kw_only=True)
class MsgMetadata:
    """What the ack subject says about a JetStream message."""

    stream: str
    consumer: str
    num_delivered: int
    stream_sequence: int
    consumer_sequence: int
    timestamp: datetime
    num_pending: int
    domain: str | None = None

    @classmethod
    def parse(cls, reply: str) -> MsgMetadata:
        """Parse v1 (9 tokens) and v2 (11 or more tokens) ack subjects; anything else is an error."""
        if not reply.startswith(_ACK_PREFIX):
            raise InvalidAckSubjectError(
                f"{reply!r} is not a JetStream ack subject; only messages delivered by a consumer have metadata"
            )
        tokens = reply.split(".")
        if len(tokens) == 9:
            domain: str | None = None
            fields = tokens[2:9]
        elif len(tokens) >= 11:
            domain = None if tokens[2] == "_" else tokens[2]
            fields = tokens[4:11]
        else:
            raise InvalidAckSubjectError(f"{reply!r} has {len(tokens)} tokens; an ack subject has 9 or 11 or more")
        stream, consumer, delivered, sseq, cseq, ts, pending = fields
        try:
            nanos = int(ts)
            return cls(
                stream=stream,
                consumer=consumer,
                num_delivered=int(delivered),
                stream_sequence=int(sseq),
                consumer_sequence=int(cseq),
                timestamp=datetime.fromtimestamp(nanos // 1_000_000_000, tz=timezone.utc).replace(
                    microsecond=(nanos % 1_000_000_000) // 1000
                ),
                num_pending=int(pending),
                domain=domain,
            )
        except ValueError as exc:
            raise InvalidAckSubjectError(f"{reply!r} has a non-numeric sequence, count or timestamp token") from exc


class Msg:
    """A message received from NATS. JetStream messages carry metadata and can be acknowledged.

    Acks are fire-and-forget and coalesced with other outbound traffic; ``ack_sync`` waits for the server.
    After a terminal ack (ack, nak, term) further acks do nothing, as ADR-15 asks; on an AckNone consumer
    acks do nothing at all.
    """

    __slots__ = (
        "_acked",
        "_client",
        "_headers",
        "_metadata",
        "_raw_headers",
        "data",
        "reply",
        "size",
        "subject",
    )

    def __init__(
        self,
        subject: str,
        reply: str,
        data: bytes,
        raw_headers: bytes | None,
        client: _AckSender | None,
        *,
        size: int = -1,
        ack_none: bool = False,
    ) -> None:
        self.subject = subject
        self.reply = reply
        self.data = data
        self._raw_headers = raw_headers
        self._headers: Headers | None = None
        self._metadata: MsgMetadata | None = None
        self._client = client
        self._acked = ack_none
        if size < 0:
            size = len(subject) + len(reply) + len(data) + (len(raw_headers) if raw_headers else 0)
        #: the size the server counts against max_bytes: subject + reply + headers + payload (ADR-37)
        self.size = size

    @property
    def headers(self) -> Headers:
        headers = self._headers
        if headers is None:
            headers = parse_header_block(self._raw_headers)[2] if self._raw_headers else _EMPTY_HEADERS
            self._headers = headers
        return headers

    @property
    def metadata(self) -> MsgMetadata:
        """JetStream metadata; raises InvalidAckSubjectError for a message that did not come from a consumer."""
        meta = self._metadata
        if meta is None:
            meta = self._metadata = MsgMetadata.parse(self.reply)
        return meta

    def __repr__(self) -> str:
        data = self.data if len(self.data) <= 32 else self.data[:32] + b"..."
        return f"Msg(subject={self.subject!r}, reply={self.reply!r}, data={data!r}, size={self.size})"

    def _sender(self) -> _AckSender:
        if self._client is None or not self.reply:
            raise InvalidAckSubjectError(
                f"message on {self.subject!r} has no reply subject; only JetStream messages can be acknowledged"
            )
        if not self.reply.startswith(_ACK_PREFIX):
            raise InvalidAckSubjectError(f"{self.reply!r} is not a JetStream ack subject; this message cannot be acked")
        return self._client

    def _terminal(self, payload: bytes) -> None:
        if self._acked:
            return
        sender = self._sender()
        self._acked = True
        sender.post_publish(self.reply, payload)

    @property
    def is_acked(self) -> bool:
        """True once a terminal acknowledgement was sent (or the consumer does not take acks)."""
        return self._acked

    def ack(self) -> None:
        """Acknowledge; coalesced with other acks into one write."""
        self._terminal(_ACK)

    def nak(self, delay: float | timedelta | None = None) -> None:
        """Ask for redelivery, after ``delay`` seconds when given."""
        if delay is None:
            self._terminal(_NAK)
            return
        nanos = int(to_seconds("delay", delay, allow_zero=True) * 1_000_000_000)
        self._terminal(_NAK + b" " + json.dumps({"delay": nanos}).encode())

    def term(self, reason: str | None = None) -> None:
        """Stop redelivery of this message for good."""
        self._terminal(_TERM + b" " + reason.encode() if reason else _TERM)

    def in_progress(self) -> None:
        """Reset the ack-wait timer: work goes on. Not terminal; may be sent many times."""
        if self._acked:
            return
        self._sender().post_publish(self.reply, _WPI)

    def ack_sync(self, timeout: float | timedelta | None = None) -> None:
        """Acknowledge and wait until the server confirms it (double ack)."""
        if self._acked:
            return
        sender = self._sender()
        seconds = check_timeout(timeout, sender.default_timeout)
        sender.ack_request(self.reply, _ACK, seconds)
        self._acked = True
