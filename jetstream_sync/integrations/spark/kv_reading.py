"""Reading a key-value bucket into Arrow record batches of the ``jetstream-kv`` schema (no PySpark in here).

A batch read is a snapshot *as of one revision* (a stream sequence of ``KV_<bucket>``), fixed on the driver
when the query is planned: ``asOfRevision``, or the bucket's last revision at that moment. Every partition reads
the same revision, so the partitions agree with each other however many writes land while they run.

With a bucket that allows direct get on nats-server 2.11+, the driver lists the bucket's keys (subjects) from
the stream's info, cuts the sorted list into partitions, and each executor task asks for the last entry of its
keys at or below the revision with batched ``multi_last`` direct gets (1024 keys per round trip, any replica
answers). Otherwise (or with ``readMode=consumer``) one task walks the bucket's history up to the revision
with the KV API's watcher (an ordered consumer, served by the stream leader) and keeps each key's last entry.

The change stream (streaming reads) goes through format("jetstream")'s stream reader; `kv_batch` turns
its rows (subject, data, headers, stream, seq, timestamp) into rows of this schema.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any, NamedTuple

import pyarrow as pa

from ... import errors
from ...jetstream.direct import MULTI_LAST_LIMIT, RawStoredMsg, direct_get_last_raw
from ...jetstream.kv._keys import operation_of
from ...models.kv import KeyValueOp
from .._clients import process_client
from .kv_options import DEFAULT_KEYS_PER_PARTITION, KeyValueReadOptions
from .options import ReadOptions, redacted
from .reading import Mode, choose_mode

if TYPE_CHECKING:
    from ...jetstream import KeyValue, Stream

__all__ = [
    "KeyValueRow",
    "Snapshot",
    "kv_batch",
    "list_subjects",
    "open_bucket",
    "plan_snapshot",
    "read_snapshot_direct",
    "read_snapshot_walk",
    "stream_read_options",
]

log = logging.getLogger("jetstream_sync.spark")

# STREAM.INFO lists at most this many subjects per page (the server's limit); the rest come with "offset".
_SUBJECTS_PAGE = 100_000
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_MICROSECOND = timedelta(microseconds=1)


class KeyValueRow(NamedTuple):
    """One row of the jetstream-kv schema; ``value`` is None for a delete or purge marker."""

    key: str
    value: bytes | None
    revision: int
    created_us: int
    operation: str


class Snapshot(NamedTuple):
    """What the driver planned for a batch read: the revision, how to read, and each partition's keys (as
    full subjects; empty for the walk, which reads the whole range in one task)."""

    as_of: int
    mode: Mode
    prefix: str
    groups: list[tuple[str, ...]]


def open_bucket(options: KeyValueReadOptions) -> KeyValue:
    """A handle on the bucket through this process's cached client (driver or executor)."""
    client = process_client(options.connection)
    try:
        return client.jetstream().key_value(options.bucket)
    except errors.BucketNotFoundError as exc:
        raise errors.BucketNotFoundError(
            exc.code,
            exc.err_code,
            f"bucket {options.bucket!r} (option 'bucket') does not exist on {redacted(options.connection.servers)}",
        ) from None


def stream_read_options(options: KeyValueReadOptions, prefix: str, *, streaming: bool) -> ReadOptions:
    """The format("jetstream") read of the bucket's stream: ``KV_<bucket>``, subjects ``<prefix><filter>``
    (``$KV.<bucket>.`` or, for a mirror, its origin's prefix), the start options mapped onto sequences."""
    subjects = tuple(prefix + k for k in options.keys)
    min_size = options.min_partition_size
    return ReadOptions(
        connection=options.connection,
        stream=options.stream,
        subjects=subjects,
        starting_sequence=options.starting_revision if streaming else "earliest",
        starting_time=options.starting_time,
        ending_sequence=None if streaming else "latest",
        max_messages_per_trigger=options.max_messages_per_trigger,
        num_partitions=options.num_partitions,
        min_partition_size=10_000 if min_size is None else min_size,
        fail_on_data_loss=options.fail_on_data_loss,
        read_mode=options.read_mode,
        fetch_batch_size=options.fetch_batch_size,
        fetch_max_bytes=options.fetch_max_bytes,
    )


def list_subjects(stream: Stream, filters: Sequence[str]) -> list[str]:
    """Every subject (key) the stream holds a message on now, matching any of ``filters``, sorted: the stream
    info's ``subjects_filter`` listing, page by page. Names only: no values cross the network."""
    api = stream.jetstream.api
    found: set[str] = set()
    for subject_filter in filters:
        offset = 0
        while True:
            reply = api.request(f"STREAM.INFO.{stream.name}", {"subjects_filter": subject_filter, "offset": offset})
            page: dict[str, Any] = (reply.get("state") or {}).get("subjects") or {}
            found.update(page)
            offset += len(page)
            if not page or offset >= int(reply.get("total", 0) or 0) or len(page) < _SUBJECTS_PAGE:
                break
    return sorted(found)


def plan_snapshot(options: KeyValueReadOptions, kv: KeyValue, read_options: ReadOptions) -> Snapshot:
    """Driver (planning worker): fix the revision and cut the bucket's keys into partitions."""
    stream = kv.jetstream.stream(kv.stream_name)
    state = stream.cached_info.state
    as_of = state.last_seq if options.as_of_revision is None else options.as_of_revision
    if as_of > state.last_seq:
        raise errors.InvalidArgumentError(
            "asOfRevision", f"{as_of} is past bucket {options.bucket!r}'s last revision {state.last_seq}"
        )
    if options.as_of_revision is not None and as_of < state.first_seq:
        log.warning(
            "bucket %s: revisions before %d were removed (history limits, purges, TTL); the snapshot as of revision "
            "%d holds only the keys whose entry at that revision the bucket still keeps",
            options.bucket,
            state.first_seq,
            as_of,
        )
    mode = choose_mode(read_options, stream)
    if as_of < 1 or state.messages == 0:
        return Snapshot(as_of, mode, kv.prefix, [])
    if mode == "consumer":
        return Snapshot(as_of, mode, kv.prefix, [()])
    filters = list(read_options.subjects) or [kv.prefix + ">"]
    subjects = list_subjects(stream, filters)
    per = DEFAULT_KEYS_PER_PARTITION if options.min_partition_size is None else options.min_partition_size
    count = max(1, min(options.num_partitions, len(subjects) // max(1, per)))
    size = -(-len(subjects) // count) if subjects else 0
    groups = [tuple(subjects[i : i + size]) for i in range(0, len(subjects), size)] if subjects else []
    return Snapshot(as_of, mode, kv.prefix, groups)


def _operation(pairs: Sequence[tuple[str, Any]] | None) -> str:
    """KV-Operation (or a server limit marker's reason) of a message's headers, as PUT, DEL or PURGE."""
    if not pairs:
        return KeyValueOp.PUT.value
    first: dict[str, str] = {}
    for key, value in pairs:
        if key not in first:
            first[key] = value[0] if isinstance(value, list) and value else value
    return operation_of(first).value


def _batch(rows: Sequence[KeyValueRow], schema: pa.Schema) -> pa.RecordBatch:
    columns = {
        "key": [r.key for r in rows],
        "value": [r.value for r in rows],
        "revision": [r.revision for r in rows],
        "created": [r.created_us for r in rows],
        "operation": [r.operation for r in rows],
    }
    arrays = []
    for field in schema:
        if field.name not in columns:
            raise errors.InvalidArgumentError("schema", f"unknown column {field.name!r}")
        if field.name == "created":
            arrays.append(pa.array(columns["created"], pa.int64()).cast(field.type))
        else:
            arrays.append(pa.array(columns[field.name], field.type))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _row(message: RawStoredMsg, cut: int) -> KeyValueRow:
    operation = _operation(message.headers)
    value = message.data if operation == KeyValueOp.PUT.value else None
    return KeyValueRow(message.subject[cut:], value, message.seq, message.time_ns // 1000, operation)


def read_snapshot_direct(
    options: KeyValueReadOptions, subjects: Sequence[str], as_of: int, prefix: str, schema: pa.Schema
) -> Iterator[pa.RecordBatch]:
    """Executor: the last entry at or below ``as_of`` of each of ``subjects``, one record batch per batched
    ``multi_last`` direct get (1024 keys). Keys whose entry is a marker are left out unless includeDeletes."""
    kv = open_bucket(options)
    stream = kv.jetstream.stream(kv.stream_name)
    cut = len(prefix)
    for first in range(0, len(subjects), MULTI_LAST_LIMIT):
        part = subjects[first : first + MULTI_LAST_LIMIT]
        try:
            found = direct_get_last_raw(stream, part, up_to_seq=as_of)
        except errors.NoRespondersError as exc:
            raise errors.NoRespondersError(
                f"bucket {options.bucket!r}: no server answered a direct get ({exc}); set readMode=consumer to "
                "read through the stream leader"
            ) from exc
        rows = [_row(m, cut) for m in found]
        if not options.include_deletes:
            rows = [r for r in rows if r.operation == KeyValueOp.PUT.value]
        if rows:
            yield _batch(rows, schema)


def read_snapshot_walk(options: KeyValueReadOptions, as_of: int, schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    """Executor: walk the bucket's history up to ``as_of`` with the KV API's own watcher (an ordered consumer,
    which the stream leader serves) and keep the last entry of each key; memory holds one entry per key."""
    kv = open_bucket(options)
    latest: dict[str, KeyValueRow] = {}
    with kv.watch(list(options.keys) or ">", include_history=True) as watcher:
        while True:
            entry = watcher.next(options.connection.timeout)
            if entry is None or entry.revision > as_of:  # caught up, or past the snapshot (entries come in order)
                break
            created = (entry.created - _EPOCH) // _MICROSECOND
            value = entry.value if entry.operation is KeyValueOp.PUT else None
            latest[entry.key] = KeyValueRow(entry.key, value, entry.revision, created, entry.operation.value)
            if entry.revision == as_of:
                break
    rows = sorted(latest.values(), key=lambda r: r.revision)
    if not options.include_deletes:
        rows = [r for r in rows if r.operation == KeyValueOp.PUT.value]
    for start in range(0, len(rows), options.fetch_batch_size):
        yield _batch(rows[start : start + options.fetch_batch_size], schema)


def _rows_of(batch: pa.RecordBatch, cut: int) -> Iterator[KeyValueRow]:
    subjects = batch.column("subject").to_pylist()
    datas = batch.column("data").to_pylist()
    headers = batch.column("headers").to_pylist()
    seqs = batch.column("seq").to_pylist()
    micros = batch.column("timestamp").cast(pa.int64()).to_pylist()
    for subject, data, header, seq, created in zip(subjects, datas, headers, seqs, micros, strict=True):
        operation = _operation(header)
        value = data if operation == KeyValueOp.PUT.value else None
        yield KeyValueRow(subject[cut:], value, seq, created, operation)


def kv_batch(batch: pa.RecordBatch, prefix: str, schema: pa.Schema) -> pa.RecordBatch:
    """Executor: a record batch of format("jetstream")'s read schema (messages of ``KV_<bucket>``) as change
    rows of the jetstream-kv schema: the key without ``prefix``, PUT/DEL/PURGE, no value for a marker."""
    return _batch(list(_rows_of(batch, len(prefix))), schema)
