"""The sink side of ``jetstream-kv``: a put (or delete, purge) per row into a key-value bucket.

Columns: ``key`` (string), ``value`` (binary or string), optionally ``operation`` (``PUT``, ``DEL``/``DELETE``,
``PURGE``; null is PUT) and ``revision`` (bigint; used with the option ``compareAndSet=true``). Other columns are
ignored, so the change rows of a ``jetstream-kv`` stream read write straight into another bucket.

Spark creates the writers on the driver, pickles them to the executors and calls ``write()`` there once per
partition (each row is one request through the worker's cached client, in the partition's order, so several
rows of one key land in row order); ``commit()``/``abort()`` run back on the driver.

Retries. A plain put is idempotent for last-value semantics: a task Spark retries, or a micro-batch replayed
after a restart, writes the same values again (the key's history gets the same value twice, its current value
is right). A compare-and-set row that conflicts is checked against the key's current entry, read from the stream
leader: when it already is what the row asks for (the same value, or the same marker for a delete or purge)
the row counts as done, which is what a retried task that wrote it before it failed sees, and what a replayed
micro-batch sees; otherwise the task fails with
[`KeyValueWriteConflictError`][jetstream_sync.spark.KeyValueWriteConflictError] naming the key and both revisions. (A
different writer that wrote the very same bytes is not told apart: the outcome is the same.)
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import attrs
import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage

from ... import errors
from ...jetstream import KeyValue
from ...models.kv import KeyValueOp
from .._clients import process_client
from .kv_options import KeyValueWriteOptions

__all__ = [
    "KeyValueBatchWriter",
    "KeyValueColumns",
    "KeyValueCommitMessage",
    "KeyValueStreamWriter",
    "KeyValueWriteConflictError",
    "plan_kv_columns",
]

log = logging.getLogger("jetstream_sync.spark")

_OPERATIONS = {"PUT": KeyValueOp.PUT, "DEL": KeyValueOp.DELETE, "DELETE": KeyValueOp.DELETE, "PURGE": KeyValueOp.PURGE}
_REVISION_TYPES = ("bigint", "int", "smallint", "tinyint")


class KeyValueWriteConflictError(errors.KeyWrongLastSequenceError):
    """A compare-and-set row lost: the key's revision was not the row's ``revision``, and its current entry is
    not what the row asks for. Fails the task (and the write). Read the bucket again and retry with the
    revisions it has now, or write without compareAndSet to overwrite."""

    def __init__(self, bucket: str, key: str, expected: int, current: int | None) -> None:
        self.bucket = bucket
        self.key = key
        self.expected = expected
        self.current = current
        wanted = "no live value (create)" if expected == 0 else f"revision {expected}"
        found = "no entry" if current is None else f"revision {current}"
        super().__init__(
            400,
            10071,
            f"bucket {bucket!r}, key {key!r}: the row expected {wanted} but the key is at {found} with another "
            "value (compareAndSet); read the bucket again and write with its current revisions",
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.bucket, self.key, self.expected, self.current))


@attrs.frozen
class KeyValueColumns:
    """Which input columns feed the key, value, operation and expected revision."""

    key: str
    value: str
    operation: str | None
    revision: str | None


def plan_kv_columns(fields: Mapping[str, str], options: KeyValueWriteOptions, overwrite: bool) -> KeyValueColumns:
    """Driver: check the DataFrame's columns (name -> simple type string) against what a write needs."""
    if overwrite:
        raise errors.InvalidArgumentError(
            "mode", "a bucket is written key by key: use mode('append') (outputMode('append') when streaming)"
        )
    lowered = {name.lower(): (name, kind) for name, kind in fields.items()}
    key = lowered.get("key")
    if key is None or key[1] != "string":
        raise errors.InvalidArgumentError("key", f"the DataFrame needs a string column 'key'; columns: {dict(fields)}")
    value = lowered.get("value")
    if value is None or value[1] not in ("binary", "string"):
        raise errors.InvalidArgumentError(
            "value", f"the DataFrame needs a binary or string column 'value'; got {value}"
        )
    operation = lowered.get("operation")
    if operation is not None and operation[1] != "string":
        raise errors.InvalidArgumentError(
            "operation", f"the column must be a string (PUT, DEL, PURGE), got {operation[1]}"
        )
    revision = lowered.get("revision")
    if options.compare_and_set:
        if revision is None:
            raise errors.InvalidArgumentError(
                "compareAndSet", "needs a bigint column 'revision' (0 or null: create only if the key has no value)"
            )
        if revision[1] not in _REVISION_TYPES:
            raise errors.InvalidArgumentError("revision", f"the column must be a whole number, got {revision[1]}")
    elif revision is not None:
        log.info("jetstream-kv write: column %r is ignored without compareAndSet=true", revision[0])
    return KeyValueColumns(
        key=key[0],
        value=value[0],
        operation=None if operation is None else operation[0],
        revision=revision[0] if options.compare_and_set and revision is not None else None,
    )


@dataclass
class KeyValueCommitMessage(WriterCommitMessage):
    """What one write task did: rows written, rows found already written (compare-and-set), and deletes."""

    partition_id: int
    attempt: int
    written: int
    already: int
    deleted: int


def _rows(batches: Iterator[pa.RecordBatch], columns: KeyValueColumns) -> Iterator[tuple[Any, Any, Any, Any]]:
    for batch in batches:
        count = batch.num_rows
        if count == 0:
            continue
        keys = batch.column(columns.key).to_pylist()
        values = batch.column(columns.value).to_pylist()
        operations = batch.column(columns.operation).to_pylist() if columns.operation else [None] * count
        revisions = batch.column(columns.revision).to_pylist() if columns.revision else [None] * count
        yield from zip(keys, values, operations, revisions, strict=True)


def _operation(text: Any) -> KeyValueOp:
    if text is None:
        return KeyValueOp.PUT
    found = _OPERATIONS.get(str(text).strip().upper())
    if found is None:
        raise errors.InvalidArgumentError("operation", f"a row has operation {text!r}; use PUT, DEL or PURGE")
    return found


def _payload(value: Any) -> bytes:
    if value is None:
        return b""
    return value.encode() if isinstance(value, str) else bytes(value)


def write_rows(
    options: KeyValueWriteOptions, columns: KeyValueColumns, batches: Iterator[pa.RecordBatch]
) -> KeyValueCommitMessage:
    """Executor: apply every row of a partition in order; raises (failing the task) on a row that cannot be
    written, or on a compare-and-set conflict its own earlier attempt does not explain."""
    kv = process_client(options.connection).jetstream().key_value(options.bucket)
    written = already = deleted = 0
    for key, value, operation_text, revision in _rows(batches, columns):
        if key is None:
            raise errors.InvalidArgumentError("key", "a row has a null key")
        operation = _operation(operation_text)
        data = _payload(value)
        expected = None if columns.revision is None else int(revision or 0)
        try:
            _apply(kv, key, data, operation, expected)
        except errors.KeyWrongLastSequenceError as conflict:
            if expected is None:  # only a compare-and-set is refused; anything else is not this module's to judge
                raise
            _explain(kv, key, data, operation, expected, conflict)
            already += 1
            continue
        written += 1
        if operation is not KeyValueOp.PUT:
            deleted += 1
    context = TaskContext.get()
    return KeyValueCommitMessage(
        partition_id=context.partitionId() if context else 0,
        attempt=context.attemptNumber() if context else 0,
        written=written,
        already=already,
        deleted=deleted,
    )


def _apply(kv: KeyValue, key: str, data: bytes, operation: KeyValueOp, expected: int | None) -> None:
    """One row. ``expected``: None writes unconditionally; 0 creates only if the key has no live value; n
    writes only if n is the key's latest revision (for deletes and purges, 0 is unconditional)."""
    if operation is KeyValueOp.PUT:
        if expected is None:
            kv.put(key, data)
        elif expected == 0:
            kv.create(key, data)
        else:
            kv.update(key, data, expected)
    elif operation is KeyValueOp.DELETE:
        kv.delete(key, last=expected or None)
    else:
        kv.purge(key, last=expected or None)


def _explain(
    kv: KeyValue,
    key: str,
    data: bytes,
    operation: KeyValueOp,
    expected: int,
    conflict: errors.KeyWrongLastSequenceError,
) -> None:
    """A compare-and-set was refused: fine when the key already holds what the row asks for (a retried task's
    or replayed batch's own earlier write), KeyValueWriteConflictError otherwise."""
    current: int | None
    try:
        entry = kv.get(key, read="leader")
        current, now_op, now_value = entry.revision, entry.operation, entry.value
    except errors.KeyDeletedError as gone:
        marker = gone.entry
        current = getattr(marker, "revision", None)
        now_op, now_value = getattr(marker, "operation", KeyValueOp.PURGE), b""
    except errors.KeyNotFoundError:
        current, now_op, now_value = None, KeyValueOp.PURGE, b""
    if operation is KeyValueOp.PUT:
        done = now_op is KeyValueOp.PUT and now_value == data
    else:
        done = now_op is operation or current is None
    if not done:
        raise KeyValueWriteConflictError(kv.bucket, key, expected, current) from conflict
    log.info(
        "bucket %s key %r: compare-and-set expected revision %d, the key is at %s with the row's own %s already "
        "(a retried task or replayed batch wrote it); counted as written",
        kv.bucket,
        key,
        expected,
        current,
        operation.value,
    )


def _summary(messages: Sequence[WriterCommitMessage | None]) -> tuple[int, int, int]:
    done = [m for m in messages if isinstance(m, KeyValueCommitMessage)]
    return len(done), sum(m.written for m in done), sum(m.already for m in done)


class KeyValueBatchWriter(DataSourceArrowWriter):
    """``df.write.format("jetstream-kv")``: each task applies its rows to the bucket, one request each."""

    def __init__(self, options: KeyValueWriteOptions, columns: KeyValueColumns) -> None:
        self.options = options
        self.columns = columns

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        """PySpark (executor): write the rows of one partition."""
        return write_rows(self.options, self.columns, iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        """PySpark (driver): every partition was written."""
        tasks, written, already = _summary(messages)
        log.info(
            "kv write to %s committed: %d tasks wrote %d rows (%d already there)",
            self.options.bucket,
            tasks,
            written,
            already,
        )

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """PySpark (driver): the write failed; rows written stay (a bucket has no transactions)."""
        tasks, written, _ = _summary(messages)
        log.warning(
            "kv write to %s aborted after %d tasks wrote %d rows; they stay in the bucket (no transactions)",
            self.options.bucket,
            tasks,
            written,
        )


class KeyValueStreamWriter(DataSourceStreamArrowWriter):
    """``writeStream.format("jetstream-kv")``: each micro-batch's rows applied as the batch writer does; a
    micro-batch replayed after a restart writes the same values again (see the module's text)."""

    def __init__(self, options: KeyValueWriteOptions, columns: KeyValueColumns) -> None:
        self.options = options
        self.columns = columns

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        """PySpark (executor): write the rows of one partition of a micro-batch."""
        return write_rows(self.options, self.columns, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """PySpark (driver): every partition of a micro-batch was written."""
        tasks, written, already = _summary(messages)
        log.info(
            "kv batch %d to %s committed: %d tasks wrote %d (%d already there)",
            batchId,
            self.options.bucket,
            tasks,
            written,
            already,
        )

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """PySpark (driver): a micro-batch failed; rows written stay."""
        tasks, written, _ = _summary(messages)
        log.warning(
            "kv batch %d to %s aborted after %d tasks wrote %d rows", batchId, self.options.bucket, tasks, written
        )
