"""The PySpark Python Data Source ``jetstream-kv``: a key-value bucket as a table.

- ``spark.read.format("jetstream-kv")``: the current value of every key (or as of ``asOfRevision``), one row per
  key: ``key``, ``value``, ``revision``, ``created``, ``operation``.
- ``spark.readStream.format("jetstream-kv")``: every change of the bucket in revision order (change data
  capture): puts, deletes and purges, as rows of the same schema.
- ``df.write`` / ``writeStream.format("jetstream-kv")``: a put (or delete, purge) per row, see `kv_sink`.

Spark runs these classes in its Python workers: ``reader()``/``streamReader()``/``writer()`` and the streaming
reader's offset methods in a planning worker on the driver, ``read()``/``write()`` in executor workers (from a
pickled copy), so nothing here holds a connection: workers get theirs from ``integrations._clients``.

The change stream is format("jetstream")'s `JetStreamStreamReader` over the bucket's stream
``KV_<bucket>``, composed rather than copied: its offsets (kept in Spark's checkpoint), admission control,
``Trigger.AvailableNow`` and data-loss checks are the stream source's own; this reader only turns its rows into
change rows.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.streaming.datasource import ReadLimit, SupportsTriggerAvailableNow
from pyspark.sql.types import BinaryType, LongType, StringType, StructField, StructType, TimestampType

from ... import errors
from .datasource import READ_SCHEMA, JetStreamStreamReader
from .kv_options import KeyValueReadOptions, parse_kv_read_options, parse_kv_write_options
from .kv_reading import (
    Snapshot,
    kv_batch,
    open_bucket,
    plan_snapshot,
    read_snapshot_direct,
    read_snapshot_walk,
    stream_read_options,
)
from .kv_sink import KeyValueBatchWriter, KeyValueStreamWriter, plan_kv_columns
from .options import ReadOptions

__all__ = [
    "KV_SCHEMA",
    "JetStreamKeyValueDataSource",
    "KeyValueBatchReader",
    "KeyValueStreamReader",
    "KeySetPartition",
]

log = logging.getLogger("jetstream_sync.spark")

#: What a read of a bucket returns: one row per key (batch) or per change (streaming). ``value`` is null for a
#: delete or purge marker; ``operation`` is ``PUT``, ``DEL`` or ``PURGE``; ``revision`` is the entry's stream
#: sequence in ``KV_<bucket>``; ``created`` when the bucket stored it (UTC).
KV_SCHEMA = StructType(
    [
        StructField("key", StringType(), nullable=False),
        StructField("value", BinaryType(), nullable=True),
        StructField("revision", LongType(), nullable=False),
        StructField("created", TimestampType(), nullable=False),
        StructField("operation", StringType(), nullable=False),
    ]
)


class KeySetPartition(InputPartition):
    """One partition of a batch read: the last entries of ``subjects`` as of revision ``as_of`` (direct get), or
    with no subjects, the walk of the whole bucket up to ``as_of`` (consumer)."""

    def __init__(self, index: int, snapshot: Snapshot, subjects: tuple[str, ...]) -> None:
        super().__init__(index)
        self.index = index
        self.as_of = snapshot.as_of
        self.mode = snapshot.mode
        self.prefix = snapshot.prefix
        self.subjects = subjects


def _arrow_schema(schema: StructType) -> pa.Schema:
    """The Arrow schema Spark checks record batches against (it must match exactly)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(schema, timezone="UTC")


def _check_schema(schema: StructType) -> None:
    """A user-given schema may differ in nullability only."""
    expected = [(f.name, f.dataType) for f in KV_SCHEMA.fields]
    given = [(f.name, f.dataType) for f in schema.fields]
    if given != expected:
        raise errors.InvalidArgumentError(
            "schema", f"the jetstream-kv source returns {KV_SCHEMA.simpleString()}; got {schema.simpleString()}"
        )


class JetStreamKeyValueDataSource(DataSource):
    """``spark.read/readStream/write/writeStream.format("jetstream-kv")``; register it with
    ``spark.dataSource.register(JetStreamKeyValueDataSource)``. See the Spark guide for the options."""

    @classmethod
    def name(cls) -> str:
        """PySpark: the format name, ``jetstream-kv``."""
        return "jetstream-kv"

    def schema(self) -> StructType:
        """PySpark: the schema of the rows read (key, value, revision, created, operation)."""
        return KV_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        """PySpark (driver): a batch reader, the bucket's current values (or as of ``asOfRevision``)."""
        _check_schema(schema)
        options = parse_kv_read_options(self.options, streaming=False)
        prefix = open_bucket(options).prefix
        return KeyValueBatchReader(options, stream_read_options(options, prefix, streaming=False), schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        """PySpark (driver): a streaming reader, the bucket's changes. The bucket's key prefix is looked up
        once here (a mirror's keys live under its origin's prefix) and travels with the reader."""
        _check_schema(schema)
        options = parse_kv_read_options(self.options, streaming=True)
        prefix = open_bucket(options).prefix
        return KeyValueStreamReader(options, prefix, schema)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceArrowWriter:
        """PySpark (driver): a batch writer, a put (delete, purge) per row."""
        options = parse_kv_write_options(self.options)
        return KeyValueBatchWriter(options, plan_kv_columns(_fields(schema), options, overwrite))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamArrowWriter:
        """PySpark (driver): a streaming writer, a put (delete, purge) per row of each micro-batch."""
        options = parse_kv_write_options(self.options)
        return KeyValueStreamWriter(options, plan_kv_columns(_fields(schema), options, overwrite))


def _fields(schema: StructType) -> dict[str, str]:
    return {f.name: f.dataType.simpleString() for f in schema.fields}


class KeyValueBatchReader(DataSourceReader):
    """The bucket as of one revision, fixed when the query is planned (see `kv_reading`)."""

    def __init__(self, options: KeyValueReadOptions, read_options: ReadOptions, schema: StructType) -> None:
        self.options = options
        self.read_options = read_options
        self.schema = schema

    def partitions(self) -> Sequence[InputPartition]:
        """PySpark (driver): pin the revision and cut the bucket's keys into partitions."""
        kv = open_bucket(self.options)
        snapshot = plan_snapshot(self.options, kv, self.read_options)
        planned = [KeySetPartition(i, snapshot, group) for i, group in enumerate(snapshot.groups)]
        log.info(
            "reading bucket %s as of revision %d: %d keys in %d partitions (%s)",
            self.options.bucket,
            snapshot.as_of,
            sum(len(g) for g in snapshot.groups),
            len(planned),
            snapshot.mode,
        )
        return planned

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """PySpark (executor): the rows of one partition, as Arrow record batches."""
        if not isinstance(partition, KeySetPartition):  # Spark reads one empty partition when there is none
            return iter(())
        schema = _arrow_schema(self.schema)
        if partition.mode == "consumer":
            return read_snapshot_walk(self.options, partition.as_of, schema)
        return read_snapshot_direct(self.options, partition.subjects, partition.as_of, partition.prefix, schema)


class KeyValueStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """The bucket's changes, micro-batch by micro-batch: format("jetstream")'s stream reader over ``KV_<bucket>``
    and the subjects ``<prefix><keys filter>``, whose every offset method this delegates to (offsets are the
    stream source's, kept in Spark's checkpoint); only ``read()`` is this class's own, turning messages into
    change rows."""

    def __init__(self, options: KeyValueReadOptions, prefix: str, schema: StructType) -> None:
        self.options = options
        self.prefix = prefix
        self.schema = schema
        self.changes = JetStreamStreamReader(stream_read_options(options, prefix, streaming=True), READ_SCHEMA)

    def initialOffset(self) -> dict[str, Any]:
        """PySpark (driver): where a new query starts (``startingRevision``/``startingTime``)."""
        return self.changes.initialOffset()

    def getDefaultReadLimit(self) -> ReadLimit:
        """PySpark (driver): ``maxMessagesPerTrigger`` as a read limit, or all available."""
        return self.changes.getDefaultReadLimit()

    def prepareForTriggerAvailableNow(self) -> None:
        """PySpark (driver): fix the end of an AvailableNow query at the bucket's last revision now."""
        self.changes.prepareForTriggerAvailableNow()

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        """PySpark (driver): the end of the next micro-batch, within the read limit."""
        return self.changes.latestOffset(start, limit)

    def reportLatestOffset(self) -> dict[str, Any] | None:
        """PySpark (driver): the bucket's last revision, for progress reporting."""
        return self.changes.reportLatestOffset()

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        """PySpark (driver): the partitions of a micro-batch (ranges of revisions)."""
        return self.changes.partitions(start, end)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """PySpark (executor): the changes of one partition, in revision order, as change rows."""
        schema = _arrow_schema(self.schema)
        for batch in self.changes.read(partition):
            yield kv_batch(batch, self.prefix, schema)

    def commit(self, end: dict[str, Any]) -> None:
        """PySpark (driver): a micro-batch up to ``end`` is done."""
        self.changes.commit(end)
