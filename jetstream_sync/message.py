"""Received messages, their JetStream metadata (ADR-15 ack subjects) and acknowledgements."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol, SupportsIndex, runtime_checkable

import attrs

from ._protocol import (
    ACK,
    ACK_PREFIX_TEXT,
    WPI,
    ack_fields,
    datetime_from_nanos,
    nak_payload,
    nanos,
    not_numeric_ack_subject,
    term_payload,
)
from ._validate import check_line, check_timeout, to_seconds
from .errors import (
    ClientNotPicklableError,
    CodecError,
    InvalidAckSubjectError,
    InvalidArgumentError,
    PayloadDecodeError,
)
from .headers import Headers, HeadersInput, parse_header_block

if TYPE_CHECKING:
    from collections.abc import Callable
    from datetime import timedelta

    from .codecs import Codec
    from .jetstream.consumers.delivery import MessageBatch

__all__ = ["AckNextSender", "AckSender", "Msg", "MsgMetadata", "SequencePair"]

_EMPTY_HEADERS = Headers()


class AckSender(Protocol):
    """What a message needs to acknowledge: a coalesced publish, a request, and the default timeout.

    The client's runtime port is the one implementation; tests may pass a recorder.
    """

    default_timeout: float

    def send_ack(self, subject: str, payload: bytes) -> None:
        """Send an ack payload to ``subject`` without waiting (coalesced with other acks)."""

    def request_ack(self, subject: str, payload: bytes, timeout: float) -> None:
        """Send an ack payload to ``subject`` and wait for the server to confirm it (``ack_sync``)."""


@runtime_checkable
class AckNextSender(AckSender, Protocol):
    """An [`AckSender`][jetstream_sync.AckSender] that can also start the pull of
    [`Msg.ack_next`][jetstream_sync.Msg.ack_next]: what the JetStream layer's consumers give their messages
    (``_delivery/_acks.py``), so that this module needs none of their engines."""

    def ack_next(
        self, msg: Msg, batch: int, expires: float, max_bytes: int | None, plain: bool
    ) -> Callable[[], MessageBatch]:
        """Check and build the pull that acks ``msg`` and asks for the next ``batch`` message(s), sending
        nothing (``plain``: the ``+NXT <batch>`` form); the function returned sends it and returns its batch."""


@attrs.frozen
class SequencePair:
    """A message's position: in the consumer's delivery order and in the stream (as nats.go and nats-py)."""

    consumer: int
    stream: int


@attrs.frozen(kw_only=True)
class MsgMetadata:
    """What the ack subject says about a JetStream message; field names as nats-py's ``Metadata``."""

    sequence: SequencePair
    num_pending: int
    num_delivered: int
    timestamp: datetime
    stream: str
    consumer: str
    domain: str | None = None

    @property
    def stream_sequence(self) -> int:
        """The same as ``sequence.stream`` (the name earlier releases used)."""
        return self.sequence.stream

    @property
    def consumer_sequence(self) -> int:
        """The same as ``sequence.consumer`` (the name earlier releases used)."""
        return self.sequence.consumer

    @classmethod
    def parse(cls, reply: str) -> MsgMetadata:
        """Parse v1 (9 tokens) and v2 (11 or more tokens) ack subjects; anything else is an error."""
        domain, (stream, consumer, delivered, sseq, cseq, ts, pending) = ack_fields(reply)
        try:
            return cls(
                sequence=SequencePair(consumer=int(cseq), stream=int(sseq)),
                num_pending=int(pending),
                num_delivered=int(delivered),
                timestamp=datetime_from_nanos(int(ts)),
                stream=stream,
                consumer=consumer,
                domain=domain,
            )
        except ValueError as exc:
            raise not_numeric_ack_subject(reply) from exc


class Msg:
    """A message received from NATS. JetStream messages carry metadata and can be acknowledged.

    Acks are fire-and-forget and coalesced with other outbound traffic; ``ack_sync`` waits for the server.
    After a terminal ack (ack, nak, term) further acks do nothing, as ADR-15 asks; on an AckNone consumer
    acks do nothing at all.
    """

    __slots__ = (
        "_ack_unconfirmed",
        "_acked",
        "_codec",  # set only by a read given codec= (never in __init__: a read without one pays nothing)
        "_header_block",
        "_headers",
        "_in_progress",
        "_metadata",
        "_sender",
        "_value",  # the decoded payload, once msg.value was read
        "data",
        "reply",
        "size",
        "subject",
    )

    _codec: Codec[Any]  # unset unless a read with codec= handed the message out
    _value: Any  # unset until msg.value decoded the payload

    def __init__(
        self,
        subject: str,
        reply: str,
        data: bytes,
        raw_headers: bytes | None,
        sender: AckSender | None,
        *,
        size: int = -1,
        ack_none: bool = False,
    ) -> None:
        self.subject = subject
        self.reply = reply
        self.data = data
        self._header_block = raw_headers
        self._headers: Headers | None = None
        self._metadata: MsgMetadata | None = None
        self._sender = sender
        self._acked = ack_none
        self._ack_unconfirmed = False  # acked by a coalesced ack() that the server has not confirmed
        self._in_progress = False  # in_progress() was sent: a consume does not warn that it returned unacked
        if size < 0:
            size = len(subject) + len(reply) + len(data) + (len(raw_headers) if raw_headers else 0)
        #: the size the server counts against max_bytes: subject + reply + headers + payload (ADR-37)
        self.size = size

    def __reduce_ex__(self, protocol: SupportsIndex) -> Any:
        """A received message acks through the client that received it, which no other process can use: pickling
        one says so (rather than naming the client's internals); pass ``data``, ``subject`` and ``headers``
        instead, and ack in this process. A message that was never received (no client) pickles as usual."""
        if self._sender is not None:
            raise ClientNotPicklableError(
                "a received Msg (it acks through the client that received it: pass msg.data, msg.subject and "
                "msg.headers to the other process and ack here)"
            )
        return super().__reduce_ex__(protocol)

    @property
    def headers(self) -> Headers:
        """The message's headers, parsed on first use."""
        headers = self._headers
        if headers is None:
            block = self._header_block
            headers = parse_header_block(block)[2] if block else _EMPTY_HEADERS
            self._headers = headers
        return headers

    @property
    def value(self) -> Any:
        """The payload decoded by the codec of the read that handed the message out (``codec=`` on
        ``consume``, ``messages``, ``fetch``, ``next``, ``request``), on first access, then kept.

        A payload the codec cannot decode raises PayloadDecodeError (carrying this message) here, in your
        code, where the message can still be nak'd or terminated; a handler that lets it escape is treated as
        any exception from the handler. A message read without a codec raises CodecError: use
        [`decode`][jetstream_sync.Msg.decode] with a codec, or read ``data``."""
        try:
            return self._value
        except AttributeError:
            pass
        try:
            codec = self._codec
        except AttributeError:
            raise CodecError(
                f"the message on {self.subject!r} was read without a codec: pass codec= to the read, "
                "or call msg.decode(codec)"
            ) from None
        value = self._value = self.decode(codec)
        return value

    def decode(self, codec: Codec[Any]) -> Any:
        """The payload decoded by ``codec`` (not kept: ``value`` keeps what the read's codec decoded).
        PayloadDecodeError, carrying this message, when the payload does not decode."""
        try:
            return codec.decode(self.data)
        except Exception as exc:
            raise PayloadDecodeError(self, codec, exc) from exc

    @property
    def raw_headers(self) -> bytes | None:
        """The header block as received (``NATS/1.0[ status]`` line included), or None: for readers that parse
        bytes themselves (direct get, bulk readers) without building a Headers object."""
        return self._header_block

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

    def _ack_sender(self) -> AckSender:
        if self._sender is None or not self.reply:
            raise InvalidAckSubjectError(
                f"message on {self.subject!r} has no reply subject; only JetStream messages can be acknowledged"
            )
        if not self.reply.startswith(ACK_PREFIX_TEXT):
            raise InvalidAckSubjectError(f"{self.reply!r} is not a JetStream ack subject; this message cannot be acked")
        return self._sender

    def _terminal(self, payload: bytes) -> None:
        if self._acked:
            return
        sender = self._ack_sender()
        sender.send_ack(self.reply, payload)  # marked only once it was handed over: a failed send can be retried
        self._acked = True
        self._ack_unconfirmed = payload == ACK

    @property
    def is_acked(self) -> bool:
        """True once a terminal acknowledgement was sent (or the consumer does not take acks)."""
        return self._acked

    def ack(self) -> None:
        """Acknowledge; coalesced with other acks into one write."""
        # `_terminal(ACK)` written out: the call nearly every consumed message makes (two calls fewer: 166
        # against 224 ns of Python on 3.11)
        if self._acked:
            return
        sender, reply = self._sender, self.reply
        if sender is None or not reply.startswith(ACK_PREFIX_TEXT):
            sender = self._ack_sender()  # raises InvalidAckSubjectError, saying why
        sender.send_ack(reply, ACK)  # marked only once it was handed over: a failed send can be retried
        self._acked = True
        self._ack_unconfirmed = True

    def respond(self, data: bytes = b"", headers: HeadersInput | None = None) -> None:
        """Reply to a request: publish ``data`` (and ``headers``) to this message's reply subject, coalesced with
        other publishes, as nats.go's ``Msg.Respond``. The reply is validated as any publish (max_payload,
        headers) before anything is sent.

        Raises InvalidArgumentError when the message has no reply subject (nobody waits for an answer), and
        InvalidAckSubjectError for a JetStream message, whose reply subject is its ack subject (use ``ack()``).
        """
        if not self.reply:
            raise InvalidArgumentError(
                "reply", f"the message on {self.subject!r} has no reply subject: nobody waits for a response"
            )
        if self.reply.startswith(ACK_PREFIX_TEXT):
            raise InvalidAckSubjectError(
                f"the message on {self.subject!r} came from a JetStream consumer: its reply subject is its ack "
                "subject; acknowledge it with ack() (or publish a response to a subject of your own)"
            )
        respond = getattr(self._sender, "respond", None)
        if respond is None:
            raise InvalidArgumentError("reply", f"the message on {self.subject!r} was not received by a client")
        respond(self.reply, data, headers)

    def nak(self, delay: float | timedelta | None = None) -> None:
        """Ask for redelivery, after ``delay`` seconds when given."""
        delay_ns = None if delay is None else nanos(to_seconds("delay", delay, allow_zero=True))
        self._terminal(nak_payload(delay_ns))

    def term(self, reason: str | None = None) -> None:
        """Stop redelivery of this message for good. ``reason`` (one line of text) is recorded in the server's
        advisory."""
        if reason is not None:
            check_line("reason", reason)
        self._terminal(term_payload(reason))

    def in_progress(self) -> None:
        """Reset the ack-wait timer: work goes on. Not terminal; may be sent many times."""
        if self._acked:
            return
        self._ack_sender().send_ack(self.reply, WPI)
        self._in_progress = True

    def ack_next(
        self, batch: int = 1, *, expires: float | timedelta | None = 5.0, max_bytes: int | None = None
    ) -> MessageBatch:
        """Ack this message and have the server deliver the consumer's next ``batch`` message(s) (``+NXT``,
        pull consumers): they arrive on a private inbox and come back as a MessageBatch, like a fetch that
        expires after ``expires`` seconds (the JSON pull-request form). ``expires=None`` sends the short form
        ``+NXT <batch>``, which the server holds until the batch is filled; the batch then waits at most the
        client's default timeout. One round trip instead of an ack and a pull."""
        sender = self._ack_sender()
        if self._acked:
            raise InvalidAckSubjectError("ack_next: this message was already acknowledged (or takes no acks)")
        if not isinstance(sender, AckNextSender):
            raise InvalidAckSubjectError("ack_next needs a message received by this client's consumers")
        plain = expires is None
        if plain and max_bytes is not None:
            raise InvalidAckSubjectError("ack_next: max_bytes needs the JSON form; give expires too")
        wait = sender.default_timeout if expires is None else to_seconds("expires", expires)
        send = sender.ack_next(self, batch, wait, max_bytes, plain)
        self._acked = True
        return send()

    def ack_sync(self, timeout: float | timedelta | None = None) -> None:
        """Acknowledge and wait until the server confirms it (double ack).

        After an ``ack()`` it still asks the server (the coalesced ack may not have reached it, and the server
        answers a repeated ack); after a ``nak`` or ``term``, or a confirmed ack, it does nothing.
        """
        if self._acked and not self._ack_unconfirmed:
            return
        sender = self._ack_sender()
        seconds = check_timeout(timeout, sender.default_timeout)
        sender.request_ack(self.reply, ACK, seconds)
        self._acked = True
        self._ack_unconfirmed = False
