"""Batched direct get (ADR-31, nats-server 2.11+): many stored messages per request, served by any replica.

One request ``$JS.API.DIRECT.GET.<stream>`` with a JSON body such as
``{"seq": 100, "batch": 500, "next_by_subj": "orders.>", "max_bytes": 1048576}`` makes the server stream the
messages at or after ``seq`` to the reply inbox, in sequence order, then end with a status message::

    NATS/1.0                                  one per stored message; the message's own headers come first,
    H: v                                      then what the server adds:
    Nats-Stream: S                            the stream,
    Nats-Subject: orders.new                  the message's subject,
    Nats-Sequence: 104                        its sequence,
    Nats-Time-Stamp: 2026-...T05:35:04.6Z     its store time (RFC 3339, nanoseconds),
    Nats-Num-Pending: 5                       matching messages left after this one,
    Nats-Last-Sequence: 102                   the previous message of this batch (0 for the first)

    NATS/1.0 204 EOB                          end of batch: Nats-Num-Pending (matching messages left after the
    Nats-Num-Pending: 5                       last one sent) and Nats-Last-Sequence (the last sequence sent)
    Nats-Last-Sequence: 104

Observed on nats-server 2.15: deleted sequences are skipped; ``max_bytes`` counts payload bytes and stops after
the message that reaches it (at least one message is sent); ``up_to_seq`` is ignored for a plain batch (it bounds
``multi_last`` only), so [`direct_get_batch`][jetstream_sync.direct.direct_get_batch] enforces it here; nothing at or
after ``seq`` is a single ``404 Message Not Found`` and no EOB; a stream without ``allow_direct`` has no responder
(``503``). A request without ``batch`` gets one message and no EOB, which is also what a server older than 2.11 sends
back.
"""

from __future__ import annotations

import calendar
import contextlib
import heapq
import time
from collections.abc import Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any, NamedTuple

from .. import errors
from .._protocol import NS_PER_SECOND, api_payload, datetime_from_nanos, status_of
from .._validate import check_int, check_subject, check_timeout
from ..headers import Headers, parse_header_block
from ..models import StoredMsg, parse_time
from .retry import retry_within, split_timeout

if TYPE_CHECKING:
    from .api import JetStreamAPI
    from .streams import Stream

__all__ = [
    "MULTI_LAST_LIMIT",
    "DirectBatch",
    "RawStoredMsg",
    "direct_get_batch",
    "direct_get_batch_raw",
    "direct_get_last",
    "direct_get_last_raw",
    "direct_get_one",
]

_STATUS_LINE = b"NATS/1.0 "
# What the server adds to each message of a direct get; everything else is the message's own header.
# Compared as bytes, so a message's header block is decoded only where a value is needed.
_SERVER_HEADERS = {
    b"Nats-Subject": 0,
    b"Nats-Sequence": 1,
    b"Nats-Time-Stamp": 2,
    b"Nats-Num-Pending": 3,
    b"Nats-Stream": 4,
    b"Nats-Last-Sequence": 5,
}
_NS = NS_PER_SECOND
# "stream is offline" (10118): none of the stream's servers is running; it comes back with them.
_STREAM_OFFLINE = 10118
#: the most messages one ``multi_last`` request may match (the server answers 413 beyond it)
MULTI_LAST_LIMIT = 1024


class RawStoredMsg(NamedTuple):
    """A stored message as the wire gave it, without building datetime or Headers objects (for bulk readers)."""

    subject: str
    seq: int
    time_ns: int  #: store time, nanoseconds since the Unix epoch (UTC)
    headers: list[tuple[str, str]] | None  #: the message's own headers in order, None when it had none
    data: bytes


class DirectBatch(NamedTuple):
    """One batched direct get: the messages, and where the server stopped."""

    messages: list[RawStoredMsg]
    #: matching messages stored after ``last_seq`` when the batch ended (0: the reader has caught up)
    num_pending: int
    #: the last sequence the server sent (0 when nothing was found); continue from ``last_seq + 1``
    last_seq: int
    #: the stream sequence a ``multi_last`` request was answered as of (0 for other requests)
    up_to_seq: int = 0


def direct_get_batch(
    stream: Stream,
    start_seq: int,
    batch: int,
    *,
    subjects: Sequence[str] | None = None,
    up_to_seq: int | None = None,
    max_bytes: int | None = None,
    timeout: float | None = None,
) -> list[StoredMsg]:
    """Up to ``batch`` messages stored at or after ``start_seq``, in sequence order, in one round trip.

    ``subjects`` keeps only messages on those subjects (wildcards allowed; several subjects cost one request
    each), ``up_to_seq`` stops at that sequence, ``max_bytes`` caps the payload bytes of the batch (at least one
    message comes back). Deleted sequences are skipped; an empty list means nothing matched. Needs a stream
    with ``allow_direct`` (NoRespondersError otherwise) and nats-server 2.11 or later.
    """
    result = direct_get_batch_raw(
        stream, start_seq, batch, subjects=subjects, up_to_seq=up_to_seq, max_bytes=max_bytes, timeout=timeout
    )
    return [_stored(m) for m in result.messages]


def direct_get_one(
    api: JetStreamAPI, suffix: str, body: dict[str, Any] | None, *, timeout: float | None = None
) -> StoredMsg:
    """One message by direct get (``DIRECT.GET.<stream>`` with a body, or ``DIRECT.GET.<stream>.<subject>``).

    Stream.get_msg and get_last_msg use it; the reply is read by the same parser as a batch's messages. A read
    no replica answers (no responders while the stream exists: its servers restart or elect a leader) is
    retried within ``timeout`` (default: the API's), as an election is: StreamUnavailableError when that
    outlasts it, StreamNotFoundError when the stream is gone.
    """
    subject = api.subject(f"DIRECT.GET.{suffix}")
    stream = suffix.split(".", 1)[0]
    seconds = check_timeout(timeout, api.timeout)
    deadline = time.monotonic() + seconds

    def attempt() -> StoredMsg:
        try:
            reply = api.send_request(subject, body, split_timeout(seconds, deadline))
        except errors.NoRespondersError:
            raise _no_replica_answered(api, stream, subject, deadline) from None
        status, description = status_of(reply.headers)
        if status == 404:
            raise errors.MessageNotFoundError(404, 10037, f"no message found ({description or 'not found'})")
        if status == 412:
            what = description or "Min Last Sequence"
            raise errors.MinLastSequenceError(412, 10180, f"direct get on {subject}: {what}")
        if status is not None:
            raise errors.APIError(status, 0, description or "direct get failed")
        stored, _ = _parse(reply.headers, reply.data, subject)
        return _stored(stored)

    return retry_within(api.retry, deadline, seconds, f"direct get on {subject}", attempt)


def _no_replica_answered(api: JetStreamAPI, stream: str, subject: str, deadline: float) -> errors.JetStreamError:
    """Why a direct get had no responders: the stream is gone (StreamNotFoundError), does not allow direct get
    (NoRespondersError), or exists and none of its servers serves reads at the moment (StreamUnavailableError,
    which the caller's retry waits out). Asks the stream's info, within what is left of the read's time."""
    left = max(0.001, deadline - time.monotonic())
    try:
        info = api.request(f"STREAM.INFO.{stream}", None, left)
    except errors.StreamNotFoundError as exc:
        return exc
    except (errors.TimeoutError, errors.ClusterUnavailableError) as exc:
        return _unavailable(stream, subject, f"and its info: {exc}")
    except errors.APIError as exc:
        if exc.err_code != _STREAM_OFFLINE:
            return exc
        return _unavailable(stream, subject, "and the stream is offline: none of its servers is running")
    if not info.get("config", {}).get("allow_direct"):
        return errors.NoRespondersError(f"no responders on {subject}: stream {stream!r} does not allow direct get")
    return _unavailable(stream, subject, "while it exists: its servers are restarting or electing a leader")


def _unavailable(stream: str, subject: str, why: str) -> errors.StreamUnavailableError:
    return errors.StreamUnavailableError(
        503, 0, f"no server of stream {stream!r} answered a direct get on {subject} {why}"
    )


def _stored(m: RawStoredMsg) -> StoredMsg:
    return StoredMsg(
        subject=m.subject,
        seq=m.seq,
        data=m.data,
        headers=Headers(_group(m.headers)) if m.headers else Headers(),
        time=datetime_from_nanos(m.time_ns),
    )


def direct_get_batch_raw(
    stream: Stream,
    start_seq: int,
    batch: int,
    *,
    subjects: Sequence[str] | None = None,
    up_to_seq: int | None = None,
    max_bytes: int | None = None,
    timeout: float | None = None,
) -> DirectBatch:
    """[`direct_get_batch`][jetstream_sync.direct.direct_get_batch] without the object building, plus the end-of-batch
    position.

    For readers that convert to columnar data or loop over a range: continue from ``last_seq + 1`` until
    ``num_pending`` is 0 or ``last_seq`` passes the end of the range.
    """
    start = check_int("start_seq", start_seq, minimum=1)
    count = check_int("batch", batch, minimum=1)
    if up_to_seq is not None:
        check_int("up_to_seq", up_to_seq, minimum=1)
        if up_to_seq < start:
            return DirectBatch([], 0, 0)
        count = min(count, up_to_seq - start + 1)  # sequences are unique, so no more can fit below up_to_seq
    if max_bytes is not None:
        check_int("max_bytes", max_bytes, minimum=1)
    filters = _check_subjects(subjects)
    js = stream.jetstream
    seconds = check_timeout(timeout, js.timeout)
    subject = js.api.subject(f"DIRECT.GET.{stream.name}")
    deadline = time.monotonic() + seconds
    if len(filters) <= 1:
        result = _request(
            js.api, subject, _batch_body(start, count, filters[0] if filters else None, max_bytes), count, deadline
        )
    else:
        result = _merge(
            [_request(js.api, subject, _batch_body(start, count, f, max_bytes), count, deadline) for f in filters],
            count,
            max_bytes,
        )
    if up_to_seq is not None and result.messages and result.messages[-1].seq > up_to_seq:
        kept = [m for m in result.messages if m.seq <= up_to_seq]
        return DirectBatch(kept, result.num_pending + len(result.messages) - len(kept), result.last_seq)
    return result


def direct_get_last_raw(
    stream: Stream,
    subjects: Sequence[str],
    *,
    up_to_seq: int | None = None,
    timeout: float | None = None,
) -> list[RawStoredMsg]:
    """The last message stored on each of ``subjects`` (wildcards allowed), in stream order, as one snapshot.

    ADR-31's ``multi_last``: one request per [`MULTI_LAST_LIMIT`][jetstream_sync.direct.MULTI_LAST_LIMIT] matching
    subjects; when more are asked for, the later requests are pinned to the sequence the first was answered at
    (``up_to_seq``), so the result is the state at one moment. Subjects with no message are simply absent. nats-server
    2.11+ and a stream with ``allow_direct``.
    """
    if isinstance(subjects, str):
        raise errors.InvalidTypeError("subjects", "must be a sequence of subjects, not a str; use [subject]")
    filters = list(dict.fromkeys(check_subject("subjects", s, wildcards=True) for s in subjects))
    if not filters:
        raise errors.InvalidArgumentError("subjects", "give at least one subject")
    pinned = None if up_to_seq is None else check_int("up_to_seq", up_to_seq, minimum=1)
    js = stream.jetstream
    deadline = time.monotonic() + check_timeout(timeout, js.timeout)
    subject = js.api.subject(f"DIRECT.GET.{stream.name}")
    found: list[RawStoredMsg] = []
    for first in range(0, len(filters), MULTI_LAST_LIMIT):
        part = filters[first : first + MULTI_LAST_LIMIT]
        body: dict[str, Any] = {"multi_last": part, "batch": MULTI_LAST_LIMIT}
        if pinned is not None:
            body["up_to_seq"] = pinned
        result = _request(js.api, subject, body, MULTI_LAST_LIMIT, deadline)
        found.extend(result.messages)
        if pinned is None and result.up_to_seq:
            pinned = result.up_to_seq
    if len(filters) > MULTI_LAST_LIMIT:
        found = sorted({m.seq: m for m in found}.values(), key=lambda m: m.seq)
    return found


def direct_get_last(
    stream: Stream,
    subjects: Sequence[str],
    *,
    up_to_seq: int | None = None,
    timeout: float | None = None,
) -> list[StoredMsg]:
    """[`direct_get_last_raw`][jetstream_sync.direct.direct_get_last_raw] as
    [`StoredMsg`][jetstream_sync.models.StoredMsg] objects."""
    return [_stored(m) for m in direct_get_last_raw(stream, subjects, up_to_seq=up_to_seq, timeout=timeout)]


def _check_subjects(subjects: Sequence[str] | None) -> list[str]:
    if subjects is None:
        return []
    if isinstance(subjects, str):
        raise errors.InvalidTypeError("subjects", "must be a sequence of subjects, not a str; use [subject]")
    filters = [check_subject("subjects", s, wildcards=True) for s in subjects]
    return [] if ">" in filters else list(dict.fromkeys(filters))


def _merge(parts: list[DirectBatch], count: int, max_bytes: int | None) -> DirectBatch:
    """Several subject filters, one request each: the first ``count`` messages of their union, in order.

    A part cut short (by ``count`` or ``max_bytes``, so with messages pending) only covers up to its last
    sequence; past the lowest such sequence another filter's messages may be missing, so the union stops there.
    """
    cut = [p.last_seq for p in parts if p.num_pending > 0]
    bound = min(cut) if cut else None
    seen: set[int] = set()
    merged: list[RawStoredMsg] = []
    size = 0
    full = False
    for msg in heapq.merge(*(p.messages for p in parts), key=lambda m: m.seq):
        if bound is not None and msg.seq > bound:
            break
        if msg.seq in seen:
            continue  # overlapping filters ("a.>" and "a.b") match one message twice
        seen.add(msg.seq)
        merged.append(msg)
        size += len(msg.data)
        if len(merged) >= count or (max_bytes is not None and size >= max_bytes):
            full = True
            break
    left = sum(p.num_pending for p in parts) + sum(len(p.messages) for p in parts) - len(merged)
    if full:
        return DirectBatch(merged, max(1, left), merged[-1].seq)
    if bound is not None:
        return DirectBatch(merged, max(1, left), bound)
    return DirectBatch(merged, 0, max(p.last_seq for p in parts))


def _batch_body(start: int, count: int, subject_filter: str | None, max_bytes: int | None) -> dict[str, Any]:
    body: dict[str, Any] = {"seq": start, "batch": count}
    if subject_filter is not None:
        body["next_by_subj"] = subject_filter
    if max_bytes is not None:
        body["max_bytes"] = max_bytes
    return body


def _request(api: JetStreamAPI, subject: str, body: dict[str, Any], count: int, deadline: float) -> DirectBatch:
    """Send one batch request and collect its messages up to the end-of-batch status."""
    inbox = api.runtime.new_inbox()
    # Room for the whole batch and its EOB, so a burst is never dropped as a slow consumer.
    sub = api.subscribe_replies(inbox, max_pending=count + 2)
    try:
        api.publish(subject, api_payload(body), reply=inbox)
        messages: list[RawStoredMsg] = []
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise errors.TimeoutError(
                    f"direct get on {subject}: {len(messages)} of up to {count} messages and no end-of-batch "
                    "status in time"
                )
            msg = sub.next_msg(remaining)
            raw = msg.raw_headers
            if raw is not None and raw.startswith(_STATUS_LINE):
                return _end_of_batch(raw, messages, subject)
            stored, pending = _parse(raw, msg.data, subject)
            if pending is None:
                raise errors.JetStreamError(
                    f"direct get on {subject} answered a batch request with a single message: the server does "
                    "not support batched direct get (nats-server 2.11 or later does)"
                )
            messages.append(stored)
    finally:
        with contextlib.suppress(errors.JetStreamError):  # the client is closing; the subscription goes with it
            sub.unsubscribe()


def _end_of_batch(raw: bytes, messages: list[RawStoredMsg], subject: str) -> DirectBatch:
    status, description, headers = parse_header_block(raw)
    if status == 204:
        return DirectBatch(
            messages,
            int(headers.get("Nats-Num-Pending", "0")),
            int(headers.get("Nats-Last-Sequence", "0")),
            int(headers.get("Nats-UpTo-Sequence", "0")),
        )
    if status == 404:
        return DirectBatch(messages, 0, messages[-1].seq if messages else 0)
    if status == 413:
        raise errors.InvalidArgumentError(
            "subjects", f"direct get on {subject}: the server refused the request as too many results"
        )
    if status == 503:
        raise errors.NoRespondersError(
            f"no responders on {subject}: the stream does not allow direct get (StreamConfig.allow_direct) "
            "or JetStream is not available"
        )
    raise errors.APIError(status or 0, 0, f"direct get on {subject} failed: {description or 'no description'}")


def _parse(raw: bytes | None, data: bytes, subject: str) -> tuple[RawStoredMsg, int | None]:
    """One direct-get message: split the server's headers from the message's own (one pass, no Headers object).

    Returns the message and its Nats-Num-Pending (None when absent: a reply to a request without ``batch``).
    """
    if not raw:
        raise errors.JetStreamError(f"direct get on {subject}: a message without the Nats-Sequence header")
    own: list[tuple[str, str]] | None = None
    found: list[bytes | None] = [None, None, None, None, None, None]
    for line in raw.split(b"\r\n")[1:]:
        key, sep, value = line.partition(b":")
        if not sep:
            continue
        index = _SERVER_HEADERS.get(key)
        if index is not None:
            found[index] = value
        elif key.strip():
            if own is None:
                own = []
            own.append((key.decode("utf-8", "replace").strip(), value.decode("utf-8", "replace").strip()))
    subject_b, seq_b, stamp_b, pending_b = found[0], found[1], found[2], found[3]
    if subject_b is None or seq_b is None or stamp_b is None:
        raise errors.JetStreamError(
            f"direct get on {subject}: a message without Nats-Subject, -Sequence or -Time-Stamp"
        )
    try:
        stored = RawStoredMsg(
            subject=subject_b.strip().decode("utf-8", "replace"),
            seq=int(seq_b),
            time_ns=_stamp_ns(stamp_b.strip().decode("ascii", "replace")),
            headers=own,
            data=data,
        )
        pending = None if pending_b is None else int(pending_b)
    except ValueError as exc:
        raise errors.JetStreamError(f"direct get on {subject}: unreadable message headers {raw[:200]!r}") from exc
    return stored, pending


@lru_cache(maxsize=4096)
def _epoch_seconds(prefix: str) -> int:
    """``YYYY-MM-DDTHH:MM:SS`` in UTC to Unix seconds; cached, since a batch shares few distinct seconds."""
    return calendar.timegm(
        (
            int(prefix[0:4]),
            int(prefix[5:7]),
            int(prefix[8:10]),
            int(prefix[11:13]),
            int(prefix[14:16]),
            int(prefix[17:19]),
        )
    )


def _stamp_ns(text: str) -> int:
    """A server timestamp (RFC 3339 with up to nanoseconds, normally UTC with ``Z``) as Unix nanoseconds."""
    if len(text) >= 20 and text[-1] == "Z" and text[10] == "T" and text[19] in ".Z":
        fraction = text[20:-1]
        if fraction.isdigit() or not fraction:
            return _epoch_seconds(text[:19]) * _NS + int(fraction[:9].ljust(9, "0") or "0")
    moment = parse_time(text)  # an offset other than Z: the general parser (microseconds)
    if moment is None:
        raise ValueError(f"unreadable timestamp {text!r}")
    return calendar.timegm(moment.utctimetuple()) * _NS + moment.microsecond * 1000


def _group(pairs: list[tuple[str, str]]) -> dict[str, list[str]]:
    grouped: dict[str, list[str]] = {}
    for key, value in pairs:
        grouped.setdefault(key, []).append(value)
    return grouped
