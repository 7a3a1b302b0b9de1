"""Wire-protocol helpers: PUB/HPUB encoding, inline statuses, ack payloads, pull requests, nanoseconds.

Everything here is a pure function of bytes and numbers, shared by the runtime (which writes commands) and
the JetStream layer (which builds them). Nothing here knows about threads or nats-py; see
docs/ARCHITECTURE.md, "Layout".
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta, timezone
from typing import Any, NamedTuple

from . import errors
from ._not_found import named_by_subject
from .headers import parse_header_block

__all__ = [
    "ACK",
    "ACK_PREFIX",
    "ACK_PREFIX_TEXT",
    "LARGE_PAYLOAD",
    "NAK",
    "NS_PER_SECOND",
    "TERM",
    "WPI",
    "AckPosition",
    "Command",
    "ack_fields",
    "ack_position",
    "api_payload",
    "api_response",
    "datetime_from_nanos",
    "encode_pub",
    "encode_pub_parts",
    "filter_covers",
    "is_no_responders",
    "nak_payload",
    "nanos",
    "not_numeric_ack_subject",
    "pending_counts",
    "pull_request",
    "reply_encoder",
    "seconds",
    "status_of",
    "stream_position",
    "term_payload",
]

#: One protocol command ready for the socket: bytes, or (head, payload, CRLF) for a large payload.
Command = bytes | tuple[bytes, ...]

_CRLF = b"\r\n"
_NO_RESPONDERS = b"NATS/1.0 503"

# Above this payload size a publish is queued as (control line, payload, CRLF), so the payload is copied once,
# when the socket write joins the burst, instead of once more into a formatted command.
LARGE_PAYLOAD = 4096

# -- acknowledgements (ADR-15) -------------------------------------------------------------------------------
#: Messages delivered by a consumer carry a reply subject with this prefix; it is also how they are told apart
#: from statuses and heartbeats on a pull inbox.
ACK_PREFIX = b"$JS.ACK."
ACK_PREFIX_TEXT = "$JS.ACK."
ACK = b"+ACK"
NAK = b"-NAK"
WPI = b"+WPI"
TERM = b"+TERM"

NS_PER_SECOND = 1_000_000_000


class AckPosition(NamedTuple):
    """Where a delivered message sits, read from its ack subject (ADR-15, v1 and v2 formats)."""

    consumer: bytes
    consumer_seq: int
    stream_seq: int
    num_pending: int


_new_tuple = tuple.__new__


def ack_position(reply: bytes) -> AckPosition | None:
    """The consumer name, sequences and pending count of an ack subject; None when it is not one.

    The IO thread calls this for every message of an ordered or push consumer (gap detection), so it splits
    the bytes once and builds nothing else: [`MsgMetadata`][jetstream_sync.MsgMetadata] is the full, lazy parse.
    """
    tokens = reply.split(b".")
    count = len(tokens)
    if count == 9:
        base = 2
    elif count >= 11:
        base = 4
    else:
        return None
    try:
        fields = (tokens[base + 1], int(tokens[base + 4]), int(tokens[base + 3]), int(tokens[base + 6]))
    except ValueError:
        return None
    return _new_tuple(AckPosition, fields)  # skips the NamedTuple's generated __new__: a fifth of the cost


def ack_fields(reply: str) -> tuple[str | None, list[str]]:
    """An ack subject's domain and its seven fields as text: stream, consumer, delivered count, stream
    sequence, consumer sequence, timestamp (ns), pending. For readers that want one or two of them per
    message (KV entries) without building a MsgMetadata; InvalidAckSubjectError for anything else."""
    if not reply.startswith(ACK_PREFIX_TEXT):
        raise errors.InvalidAckSubjectError(
            f"{reply!r} is not a JetStream ack subject; only messages delivered by a consumer have metadata"
        )
    tokens = reply.split(".")
    if len(tokens) == 9:
        return None, tokens[2:9]
    if len(tokens) >= 11:
        return (None if tokens[2] == "_" else tokens[2]), tokens[4:11]
    raise errors.InvalidAckSubjectError(f"{reply!r} has {len(tokens)} tokens; an ack subject has 9 or 11 or more")


def stream_position(reply: str) -> tuple[int, datetime, int]:
    """(stream sequence, timestamp, pending) from an ack subject: what a KV entry needs, at a third of the cost
    of ``MsgMetadata.parse``."""
    fields = ack_fields(reply)[1]
    try:
        return int(fields[3]), datetime_from_nanos(int(fields[5])), int(fields[6])
    except ValueError as exc:
        raise not_numeric_ack_subject(reply) from exc


def not_numeric_ack_subject(reply: str) -> errors.InvalidAckSubjectError:
    return errors.InvalidAckSubjectError(f"{reply!r} has a non-numeric sequence, count or timestamp token")


def nanos(seconds: float) -> int:
    """Float seconds to integer nanoseconds; the whole seconds are converted exactly, so large values stay exact."""
    if isinstance(seconds, int):
        return seconds * NS_PER_SECOND
    whole = int(seconds)
    return whole * NS_PER_SECOND + round((seconds - whole) * NS_PER_SECOND)


def seconds(ns: int) -> float:
    """Integer nanoseconds to float seconds (int / int is correctly rounded, unlike ns * 1e-9)."""
    return ns / NS_PER_SECOND


_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def datetime_from_nanos(ns: int) -> datetime:
    """Unix nanoseconds as an aware UTC datetime (microsecond precision, truncated toward the past).

    The epoch plus a timedelta: exact for any time, and a third of the cost of fromtimestamp().replace(),
    which matters at one call per KV entry."""
    return _EPOCH + timedelta(microseconds=ns // 1000)


def nak_payload(delay_ns: int | None) -> bytes:
    """``-NAK``, or ``-NAK {"delay": ns}`` to ask for redelivery after a delay."""
    if delay_ns is None:
        return NAK
    return NAK + b" " + json.dumps({"delay": delay_ns}).encode()


def term_payload(reason: str | None) -> bytes:
    """``+TERM``, with the reason the server records in its advisory when one is given."""
    return TERM + b" " + reason.encode() if reason else TERM


# -- publishing ----------------------------------------------------------------------------------------------
def encode_pub(subject: bytes, reply: bytes, headers: bytes | None, payload: bytes) -> bytes:
    """One PUB or HPUB protocol command."""
    if headers is None:
        if reply:
            return b"PUB %b %b %d\r\n%b\r\n" % (subject, reply, len(payload), payload)
        return b"PUB %b %d\r\n%b\r\n" % (subject, len(payload), payload)
    hlen = len(headers)
    if reply:
        return b"HPUB %b %b %d %d\r\n%b%b\r\n" % (subject, reply, hlen, hlen + len(payload), headers, payload)
    return b"HPUB %b %d %d\r\n%b%b\r\n" % (subject, hlen, hlen + len(payload), headers, payload)


def encode_pub_parts(subject: bytes, reply: bytes, headers: bytes | None, payload: bytes) -> Command:
    """A PUB or HPUB command, as one bytes or, for a large payload, as parts that avoid copying it.

    The small case is formatted in one go by `encode_pub`: one allocation per message on the hot path.
    """
    if len(payload) <= LARGE_PAYLOAD:
        return encode_pub(subject, reply, headers, payload)
    if headers is None:
        head = (
            b"PUB %b %b %d\r\n" % (subject, reply, len(payload))
            if reply
            else b"PUB %b %d\r\n" % (subject, len(payload))
        )
        return (head, payload, _CRLF)
    hlen = len(headers)
    total = hlen + len(payload)
    head = (
        b"HPUB %b %b %d %d\r\n" % (subject, reply, hlen, total)
        if reply
        else b"HPUB %b %d %d\r\n" % (subject, hlen, total)
    )
    return (head + headers, payload, _CRLF)


def reply_encoder(subject: bytes, headers: bytes | None, payload: bytes) -> Callable[[bytes], Command]:
    """A request's command, encoded once its reply subject is known (the runtime picks the reply inbox)."""
    return lambda reply: encode_pub_parts(subject, reply, headers, payload)


def api_payload(body: dict[str, Any] | None) -> bytes:
    """A JetStream API request body: compact JSON, or empty for requests that take none."""
    return b"" if body is None else json.dumps(body, separators=(",", ":")).encode()


def api_response(data: bytes, what: str) -> dict[str, Any]:
    """A JetStream API response (or PubAck) as a dict; its ``error`` member raised as the matching APIError.

    ``what`` names the source in the JetStreamError raised for a reply that is not a JSON object; when it is the
    request's API subject, a not-found error names the stream or consumer it asked for (and how to create it).
    """
    try:
        response = json.loads(data)
    except (ValueError, RecursionError) as exc:  # RecursionError: nesting deeper than the parser goes
        raise errors.ProtocolError(f"invalid JSON from {what}: {data[:200]!r}") from exc
    if not isinstance(response, dict):
        raise errors.ProtocolError(f"unexpected reply from {what}, not a JSON object: {data[:200]!r}")
    error = response.get("error")
    if error:
        raise _api_error(error, what, data)
    return response


def _api_error(error: object, what: str, data: bytes) -> errors.JetStreamError:
    """The APIError an ``error`` member stands for; ProtocolError when it is not the object the API defines
    (``{"code": int, "err_code": int, "description": str}``, each optional)."""
    if isinstance(error, dict):
        code, err_code, description = error.get("code", 0), error.get("err_code", 0), error.get("description", "")
        if _is_code(code) and _is_code(err_code) and isinstance(description, str):
            return named_by_subject(errors.api_error(code, err_code, description), what)
    return errors.ProtocolError(f"{what} has an error member of the wrong shape: {data[:200]!r}")


def _is_code(value: object) -> bool:
    """An error code as the server sends them: a JSON integer (not true/false, not 1e400)."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**31


def pull_request(
    batch: int,
    expires: float,
    max_bytes: int = 0,
    heartbeat: float = 0.0,
    no_wait: bool = False,
    extra: Mapping[str, object] | None = None,
) -> bytes:
    """The body of a ``CONSUMER.MSG.NEXT`` request (ADR-13), durations in nanoseconds; zero fields are left out.
    ``extra``: further members (a priority group's, ADR-42)."""
    body: dict[str, Any] = {"batch": batch}
    if extra:
        body.update(extra)
    if expires > 0:
        body["expires"] = nanos(expires)
    if max_bytes > 0:
        body["max_bytes"] = max_bytes
    if heartbeat > 0:
        body["idle_heartbeat"] = nanos(heartbeat)
    if no_wait:
        body["no_wait"] = True
    return api_payload(body)


# -- statuses ------------------------------------------------------------------------------------------------
def status_of(headers: bytes | None) -> tuple[int | None, str]:
    """The inline status of a message (e.g. 404, 408, 409, 100), or (None, '') for a normal message."""
    if not headers or headers[8:9] != b" ":
        return None, ""
    status, description, _ = parse_header_block(headers)
    return status, description


def is_no_responders(headers: bytes | None) -> bool:
    """The server's "no responders" status: nobody subscribes to the subject a request went to."""
    return headers is not None and headers.startswith(_NO_RESPONDERS)


def pending_counts(headers: bytes | None) -> tuple[int, int]:
    """The Nats-Pending-Messages / Nats-Pending-Bytes of a status that ends a pull (0 when absent)."""
    if not headers or b"Nats-Pending" not in headers:
        return 0, 0
    _, _, parsed = parse_header_block(headers)
    try:
        return int(parsed.get("Nats-Pending-Messages", 0)), int(parsed.get("Nats-Pending-Bytes", 0))
    except ValueError:
        return 0, 0


def filter_covers(wide: str, narrow: str) -> bool:
    """Whether every subject the filter ``narrow`` matches is matched by the filter ``wide`` as well (``*`` one
    token, ``>`` the rest): the test that keeps a consumer's ``filter_subjects`` from overlapping, which the
    server refuses."""
    w, n = wide.split("."), narrow.split(".")
    for i, token in enumerate(w):
        if token == ">":
            return len(n) > i
        if i >= len(n) or n[i] == ">" or token not in ("*", n[i]):
            return False
    return len(w) == len(n)
