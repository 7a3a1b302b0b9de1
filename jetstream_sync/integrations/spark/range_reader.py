"""Reading one planned sequence range into Arrow record batches, on an executor (no PySpark in here).

Each executor task reads its piece with the worker's cached client: batched direct get when the stream allows
it, else an ephemeral AckNone consumer from the first sequence. Nothing is kept on the server between tasks,
so a task retried by Spark reads exactly the same messages.

A range carries the stream's info as the planner saw it (`PlannedRange`), so a direct read needs no
``STREAM.INFO`` of its own in the usual case and a busy query costs the server about one request per trigger.
What the planner knew still has to hold when the task runs, and the messages themselves say when it may not:

* every sequence in the range was stored before the planner asked (``StreamInfo.ts``), so a message stored
  later comes from a stream deleted and created again since (or a clock that stepped): the task asks
  ``STREAM.INFO`` then, and a new incarnation fails the task (``failOnDataLoss``) or reads nothing;
* a first message later than the range's first sequence means deleted messages, or retention that removed
  what the query needs: ``STREAM.INFO`` tells which ([`DataLossError`][jetstream_sync.spark.DataLossError], or a warning
  with ``failOnDataLoss=false``).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone

import attrs
import pyarrow as pa

from ... import errors
from ...jetstream import Stream
from ...jetstream.direct import RawStoredMsg, direct_get_batch_raw
from ...models import AckPolicy, ConsumerConfig, DeliverPolicy, StreamInfo
from .._clients import process_client
from .offsets import StreamRecreatedError, incarnation
from .options import ReadOptions
from .reading import Mode, check_data_loss, open_stream

__all__ = ["PlannedRange", "read_range"]

log = logging.getLogger("jetstream_sync.spark")

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_MICRO = timedelta(microseconds=1)
_CONSUMER_INACTIVE = 15.0  # an ephemeral read consumer left behind by a killed task goes away after this
_FETCH_EXPIRES = 5.0
_EMPTY_FETCHES = 3


@attrs.frozen
class PlannedRange:
    """What the planner knew of the stream when it planned a range: its info (picklable, travels in the
    partition). ``created`` names the incarnation; ``stored_by_ns`` bounds the store time of every sequence
    the stream held then (its reply time, else its last message's time)."""

    info: StreamInfo

    @property
    def created(self) -> str:
        return incarnation(self.info)

    @property
    def stored_by_ns(self) -> int | None:
        moment = self.info.ts or self.info.state.last_ts
        if moment is None:
            return None
        return ((moment - _EPOCH) // _MICRO + 1) * 1000  # datetimes keep microseconds: round up


def _recreated(options: ReadOptions, first: int, last: int, planned: str, now: str) -> None:
    """The range was planned on another incarnation: raise, or warn that it is not read."""
    if options.fail_on_data_loss:
        raise StreamRecreatedError(options.stream, planned, now)
    log.warning(
        "%s: sequences %d-%d were planned on the stream created at %s, which was deleted and created again at %s; "
        "they are not read (failOnDataLoss=false)",
        options.stream,
        first,
        last,
        planned,
        now,
    )


def read_range(
    options: ReadOptions,
    first: int,
    last: int,
    mode: Mode,
    schema: pa.Schema,
    *,
    planned: PlannedRange | None = None,
) -> Iterator[pa.RecordBatch]:
    """Every message stored in ``first..last`` (inclusive) that matches the subject filters, in sequence order,
    as record batches of ``schema`` (one per server round trip). Deleted sequences are simply absent.

    ``planned`` is the stream as the planner saw it; without it (or reading through a consumer) the task asks
    ``STREAM.INFO`` first."""
    builder = _BatchBuilder(schema, options.stream)
    if mode == "direct" and planned is not None and planned.stored_by_ns is not None:
        stream = Stream(process_client(options.connection).jetstream(), planned.info)
        yield from _read_direct(options, stream, first, last, builder, planned)
        return
    stream = open_stream(options)
    if planned is not None and planned.created != incarnation(stream.cached_info):
        _recreated(options, first, last, planned.created, incarnation(stream.cached_info))
        return
    first = check_data_loss(options, first, last, stream.cached_info.state.first_seq)
    if first > last:
        return
    if mode == "direct":
        yield from _read_direct(options, stream, first, last, builder, None)
    else:
        yield from _read_consumer(options, stream, first, last, builder)


def _read_direct(
    options: ReadOptions,
    stream: Stream,
    first: int,
    last: int,
    builder: _BatchBuilder,
    planned: PlannedRange | None,
) -> Iterator[pa.RecordBatch]:
    """Batched direct gets from ``first``; with ``planned``, the first answer and every message's store time are
    checked against what the planner knew, and ``STREAM.INFO`` is asked only when they disagree."""
    subjects = list(options.subjects) or None
    stored_by = None if planned is None else planned.stored_by_ns
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
        messages = result.messages
        if planned is not None and stored_by is not None:
            starts_late = seq == first and (not messages or messages[0].seq != first)
            if starts_late or any(m.time_ns > stored_by for m in messages):
                if not _still_planned(options, first, last, planned):
                    return
                stored_by = None  # checked with the server: nothing more to check
        if messages:
            yield builder.from_raw(messages)
        if not result.messages or result.num_pending == 0 or result.last_seq >= last:
            return
        seq = result.last_seq + 1


def _still_planned(options: ReadOptions, first: int, last: int, planned: PlannedRange) -> bool:
    """Ask the server whether the range still means what the planner meant: the same incarnation (else raise,
    or False with a warning) and nothing it needs removed by retention (else raise, or warn and go on)."""
    now = open_stream(options).cached_info
    if incarnation(now) != planned.created:
        _recreated(options, first, last, planned.created, incarnation(now))
        return False
    check_data_loss(options, first, last, now.state.first_seq)  # the messages read exist: only a loss to report
    return True


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
