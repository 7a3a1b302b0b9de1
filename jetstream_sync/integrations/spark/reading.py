"""Planning and reading sequence ranges of a stream into Arrow record batches (no PySpark in here).

A read is a range of stream sequences. The planner (on the driver side) turns options into a first and last
sequence, checks that retention has not removed sequences the query needs, and cuts the range into contiguous
pieces, one per Spark partition. Each executor task then reads its piece with the worker's cached client:
batched direct get when the stream allows it, else an ephemeral AckNone consumer from the first sequence.
Nothing is kept on the server between tasks, so a task retried by Spark reads exactly the same messages.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any, Literal

import pyarrow as pa

from ... import errors
from ...jetstream.direct import RawStoredMsg, direct_get_batch_raw
from ...models import AckPolicy, ConsumerConfig, DeliverPolicy
from .._clients import process_client
from .offsets import StreamRecreatedError, incarnation
from .options import ReadOptions, redacted

if TYPE_CHECKING:
    from ...client import Client
    from ...jetstream import Stream

__all__ = [
    "DataLossError",
    "StreamRecreatedError",
    "Mode",
    "check_data_loss",
    "choose_mode",
    "ending_sequence",
    "open_stream",
    "plan_ranges",
    "read_range",
    "sequence_at_time",
    "starting_sequence",
]

log = logging.getLogger("jetstream_sync.spark")

Mode = Literal["direct", "consumer"]

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_MICRO = timedelta(microseconds=1)
_CONSUMER_INACTIVE = 15.0  # an ephemeral read consumer left behind by a killed task goes away after this
_FETCH_EXPIRES = 5.0
_EMPTY_FETCHES = 3


class DataLossError(errors.JetStreamError):
    """Sequences the query needs were removed (retention limits or a purge) before it read them."""

    def __init__(self, stream: str, first_lost: int, last_lost: int, first_seq: int) -> None:
        self.stream = stream
        self.first_lost = first_lost
        self.last_lost = last_lost
        self.first_seq = first_seq
        super().__init__(
            f"stream {stream!r}: sequences {first_lost}-{last_lost} were removed (retention limits or a purge) "
            f"before this query read them; the stream now starts at sequence {first_seq}. Set the option "
            "failOnDataLoss=false to skip lost sequences and go on"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.stream, self.first_lost, self.last_lost, self.first_seq))


def open_stream(options: ReadOptions) -> Stream:
    """A handle on the stream with fresh info, through this process's cached client."""
    client = process_client(options.connection)
    try:
        return client.jetstream().stream(options.stream)
    except errors.StreamNotFoundError as exc:
        raise errors.StreamNotFoundError(
            exc.code,
            exc.err_code,
            f"stream {options.stream!r} (option 'stream') does not exist on {redacted(options.connection.servers)}",
        ) from None


def _server_version(client: Client) -> tuple[int, ...]:
    parts = []
    for token in str(client.server_info.get("version", "0")).split("-")[0].split("."):
        parts.append(int(token) if token.isdigit() else 0)
    return tuple(parts)


def choose_mode(options: ReadOptions, stream: Stream) -> Mode:
    """Batched direct get needs ``allow_direct`` and nats-server 2.11+; otherwise read through a consumer."""
    allowed = bool(stream.cached_info.config.allow_direct)
    if options.read_mode == "consumer":
        return "consumer"
    if options.read_mode == "direct":
        if not allowed:
            raise errors.InvalidArgumentError(
                "readMode", f"direct needs a stream with allow_direct, and {options.stream!r} does not allow it"
            )
        return "direct"
    if allowed and _server_version(stream.jetstream.client) >= (2, 11):
        return "direct"
    return "consumer"


def sequence_at_time(stream: Stream, when: datetime) -> int:
    """The first sequence stored at or after ``when``; last sequence + 1 when nothing is that recent.

    An ephemeral consumer with ``opt_start_time`` makes the server find it; its info says where it starts.
    """
    consumer = stream.create_consumer(
        ConsumerConfig(
            deliver_policy=DeliverPolicy.BY_START_TIME,
            opt_start_time=when,
            ack_policy=AckPolicy.NONE,
            inactive_threshold=_CONSUMER_INACTIVE,
            mem_storage=True,
            num_replicas=1,
        )
    )
    try:
        return consumer.cached_info.delivered.stream_seq + 1
    finally:
        with contextlib.suppress(errors.JetStreamError):
            consumer.delete()


def starting_sequence(options: ReadOptions, stream: Stream) -> int:
    """Where a read starts (inclusive), from startingTime or startingSequence.

    A ``startingTime`` after the last message starts at the end (the next message stored), or fails with
    ``startingTimeStrategy=error`` (Kafka's ``startingOffsetsByTimestampStrategy``)."""
    state = stream.cached_info.state
    if options.starting_time is not None:
        seq = sequence_at_time(stream, options.starting_time)
        if seq > state.last_seq and options.starting_time_strategy == "error":
            raise errors.InvalidArgumentError(
                "startingTime",
                f"no message of stream {options.stream!r} was stored at or after {options.starting_time.isoformat()} "
                "(startingTimeStrategy=error); pick an earlier time, or set startingTimeStrategy=latest to start "
                "at the next message",
            )
        return seq
    start = options.starting_sequence
    if start == "earliest":
        return max(1, state.first_seq)
    if start == "latest":
        return state.last_seq + 1
    return start


def ending_sequence(options: ReadOptions, stream: Stream) -> int:
    """Where a batch read ends (inclusive): endingSequence, or the last message stored before endingTime
    (Kafka's endingTimestamp is exclusive too), never past what the stream holds now."""
    last = stream.cached_info.state.last_seq
    if options.ending_time is not None:
        return min(last, sequence_at_time(stream, options.ending_time) - 1)
    end = options.ending_sequence
    if end is None or end == "latest":
        return last
    return min(end, last)


def check_data_loss(options: ReadOptions, first_needed: int, last_needed: int, first_seq: int) -> int:
    """Where reading can start: ``first_needed``, or past a lost prefix when failOnDataLoss is false."""
    if first_needed >= first_seq or last_needed < first_needed:
        return first_needed
    loss = DataLossError(options.stream, first_needed, min(last_needed, first_seq - 1), first_seq)
    if options.fail_on_data_loss:
        raise loss
    log.warning("%s; skipping them because failOnDataLoss=false", str(loss).split(". Set the option")[0])
    return first_seq


def plan_ranges(first: int, last: int, num_partitions: int, min_size: int) -> list[tuple[int, int]]:
    """Cut ``first..last`` (inclusive) into contiguous ranges of about equal length, none shorter than
    ``min_size`` unless there is only one, and at most ``num_partitions`` of them."""
    if last < first:
        return []
    span = last - first + 1
    count = max(1, min(num_partitions, span // max(1, min_size)))
    base, extra = divmod(span, count)
    ranges = []
    lo = first
    for i in range(count):
        hi = lo + base + (1 if i < extra else 0) - 1
        ranges.append((lo, hi))
        lo = hi + 1
    return ranges


def read_range(
    options: ReadOptions, first: int, last: int, mode: Mode, schema: pa.Schema, *, created: str | None = None
) -> Iterator[pa.RecordBatch]:
    """Every message stored in ``first..last`` (inclusive) that matches the subject filters, in sequence order,
    as record batches of ``schema`` (one per server round trip). Deleted sequences are simply absent.

    ``created`` is the incarnation the range was planned on: a stream re-created since then holds other
    messages under these sequences, so the read fails (``failOnDataLoss``) or returns nothing, with a warning."""
    stream = open_stream(options)
    now = incarnation(stream.cached_info)
    if created is not None and created != now:
        if options.fail_on_data_loss:
            raise StreamRecreatedError(options.stream, created, now)
        log.warning(
            "%s: sequences %d-%d were planned on the stream created at %s, which was deleted and created again "
            "at %s; they are not read (failOnDataLoss=false)",
            options.stream,
            first,
            last,
            created,
            now,
        )
        return
    first = check_data_loss(options, first, last, stream.cached_info.state.first_seq)
    if first > last:
        return
    builder = _BatchBuilder(schema, options.stream)
    if mode == "direct":
        yield from _read_direct(options, stream, first, last, builder)
    else:
        yield from _read_consumer(options, stream, first, last, builder)


def _read_direct(
    options: ReadOptions, stream: Stream, first: int, last: int, builder: _BatchBuilder
) -> Iterator[pa.RecordBatch]:
    subjects = list(options.subjects) or None
    seq = first
    while seq <= last:
        result = direct_get_batch_raw(
            stream,
            seq,
            min(options.fetch_batch_size, last - seq + 1),
            subjects=subjects,
            up_to_seq=last,
            max_bytes=options.fetch_max_bytes,
        )
        if result.messages:
            yield builder.from_raw(result.messages)
        if not result.messages or result.num_pending == 0 or result.last_seq >= last:
            return
        seq = result.last_seq + 1


def _read_consumer(
    options: ReadOptions, stream: Stream, first: int, last: int, builder: _BatchBuilder
) -> Iterator[pa.RecordBatch]:
    """An ordered read through an ephemeral AckNone consumer: a gap in consumer sequences fails the task."""
    subjects = list(options.subjects)
    consumer = stream.create_consumer(
        ConsumerConfig(
            deliver_policy=DeliverPolicy.BY_START_SEQUENCE,
            opt_start_seq=first,
            ack_policy=AckPolicy.NONE,
            filter_subject=subjects[0] if len(subjects) == 1 else None,
            filter_subjects=subjects if len(subjects) > 1 else None,
            inactive_threshold=_CONSUMER_INACTIVE,
            mem_storage=True,
            num_replicas=1,
        )
    )
    try:
        if consumer.cached_info.num_pending == 0:
            return
        expected = 1
        seen = first - 1
        empty = 0
        done = False
        while not done:
            rows: list[RawStoredMsg] = []
            for msg in consumer.fetch(min(options.fetch_batch_size, last - seen), expires=_FETCH_EXPIRES):
                meta = msg.metadata
                if meta.sequence.consumer != expected:
                    raise errors.JetStreamError(
                        f"reading {options.stream!r}: consumer delivery skipped from {expected} to "
                        f"{meta.sequence.consumer}; retry the task"
                    )
                expected += 1
                if meta.sequence.stream > last:
                    done = True
                    break
                seen = meta.sequence.stream
                headers = msg.headers.multi_items() if msg.raw_headers else None
                micros = (meta.timestamp - _EPOCH) // _MICRO
                rows.append(RawStoredMsg(msg.subject, seen, micros * 1000, headers or None, msg.data))
                if seen >= last or meta.num_pending == 0:
                    done = True
                    break
            if rows:
                empty = 0
                yield builder.from_raw(rows)
            elif not done:
                empty += 1
                if consumer.info().num_pending == 0:
                    return
                if empty >= _EMPTY_FETCHES:
                    raise errors.TimeoutError(
                        f"reading {options.stream!r}: no message for {empty * _FETCH_EXPIRES:g}s while the "
                        f"consumer reports pending messages at sequence {seen + 1}"
                    )
    finally:
        with contextlib.suppress(errors.JetStreamError):
            consumer.delete()


class _BatchBuilder:
    """Columns of the read schema from stored messages, typed exactly as Spark's Arrow schema says."""

    def __init__(self, schema: pa.Schema, stream: str) -> None:
        self.schema = schema
        self.stream = stream
        self.types = {field.name: field.type for field in schema}

    def from_raw(self, messages: list[RawStoredMsg]) -> pa.RecordBatch:
        types = self.types
        columns: dict[str, pa.Array] = {}
        for name, kind in types.items():
            if name == "subject":
                columns[name] = pa.array([m.subject for m in messages], kind)
            elif name == "data":
                columns[name] = pa.array([m.data for m in messages], kind)
            elif name == "headers":
                columns[name] = pa.array([_grouped(m.headers) for m in messages], kind)
            elif name == "stream":
                columns[name] = pa.repeat(pa.scalar(self.stream, kind), len(messages))
            elif name == "seq":
                columns[name] = pa.array([m.seq for m in messages], kind)
            elif name == "timestamp":
                columns[name] = pa.array([m.time_ns // 1000 for m in messages], pa.int64()).cast(kind)
            else:
                raise errors.InvalidArgumentError("schema", f"unknown column {name!r}")
        return pa.RecordBatch.from_arrays([columns[f.name] for f in self.schema], schema=self.schema)


def _grouped(pairs: list[tuple[str, str]] | None) -> list[tuple[str, list[str]]] | None:
    """Headers as map entries: repeated keys become one key with several values, in arrival order."""
    if not pairs:
        return None
    grouped: dict[str, list[str]] = {}
    for key, value in pairs:
        grouped.setdefault(key, []).append(value)
    return list(grouped.items())
