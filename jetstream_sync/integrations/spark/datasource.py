"""The PySpark Python Data Source ``jetstream``: batch and streaming reads and writes of JetStream streams.

Spark runs these classes in its Python workers: ``reader()``/``writer()`` and the streaming reader's offset
methods in a planning worker on the driver, ``read()``/``write()`` in executor workers (from a pickled copy).
So nothing here holds a connection; workers get theirs from the per-process cache in ``integrations._clients``.
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
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from ... import errors
from .options import ReadOptions, WriteOptions, parse_read_options, parse_write_options
from .reading import (
    Mode,
    check_data_loss,
    choose_mode,
    ending_sequence,
    open_stream,
    plan_ranges,
    read_range,
    starting_sequence,
)
from .sink import JetStreamBatchWriter, JetStreamStreamWriter
from .writing import ColumnPlan, plan_columns

__all__ = [
    "READ_SCHEMA",
    "JetStreamBatchReader",
    "JetStreamDataSource",
    "JetStreamStreamReader",
    "SequenceRange",
]

log = logging.getLogger("jetstream_sync.spark")

#: What a read returns, one row per stored message. ``headers`` is null for a message without headers.
READ_SCHEMA = StructType(
    [
        StructField("subject", StringType(), nullable=False),
        StructField("data", BinaryType(), nullable=False),
        StructField("headers", MapType(StringType(), ArrayType(StringType())), nullable=True),
        StructField("stream", StringType(), nullable=False),
        StructField("seq", LongType(), nullable=False),
        StructField("timestamp", TimestampType(), nullable=False),
    ]
)


class SequenceRange(InputPartition):
    """One Spark partition: the stream sequences ``first..last`` (inclusive), read with ``mode``."""

    def __init__(self, index: int, first: int, last: int, mode: Mode) -> None:
        super().__init__(index)
        self.index = index
        self.first = first
        self.last = last
        self.mode = mode


def _arrow_schema(schema: StructType) -> pa.Schema:
    """The Arrow schema Spark checks record batches against (it must match exactly)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(schema, timezone="UTC")


def _check_schema(schema: StructType) -> None:
    """A user-given schema may differ in nullability only: the columns are what the stream holds."""
    expected = [(f.name, f.dataType) for f in READ_SCHEMA.fields]
    given = [(f.name, f.dataType) for f in schema.fields]
    if given != expected:
        raise errors.InvalidArgumentError(
            "schema", f"the jetstream source returns {READ_SCHEMA.simpleString()}; got {schema.simpleString()}"
        )


def _read(options: ReadOptions, partition: InputPartition, schema: StructType) -> Iterator[pa.RecordBatch]:
    if not isinstance(partition, SequenceRange):  # Spark reads one empty partition when there is nothing to read
        return iter(())
    return read_range(options, partition.first, partition.last, partition.mode, _arrow_schema(schema))


def _partitions(options: ReadOptions, mode: Mode, first: int, last: int) -> list[SequenceRange]:
    ranges = plan_ranges(first, last, options.num_partitions, options.min_partition_size)
    return [SequenceRange(i, lo, hi, mode) for i, (lo, hi) in enumerate(ranges)]


class JetStreamDataSource(DataSource):
    """``spark.read/readStream/write/writeStream.format("jetstream")``; register it with
    ``spark.dataSource.register(JetStreamDataSource)``. See :mod:`jetstream_sync.spark` for the options."""

    @classmethod
    def name(cls) -> str:
        """PySpark: the format name, ``jetstream``."""
        return "jetstream"

    def schema(self) -> StructType:
        """PySpark: the schema of the rows read (subject, data, headers, stream, seq, timestamp)."""
        return READ_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        """PySpark: a batch reader for these options."""
        _check_schema(schema)
        return JetStreamBatchReader(parse_read_options(self.options, streaming=False), schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        """PySpark: a streaming reader for these options."""
        _check_schema(schema)
        return JetStreamStreamReader(parse_read_options(self.options, streaming=True), schema)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceArrowWriter:
        """PySpark: a batch writer for these options."""
        options, columns = _write_plan(self.options, schema, overwrite)
        return JetStreamBatchWriter(options, columns)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamArrowWriter:
        """PySpark: a streaming writer for these options."""
        options, columns = _write_plan(self.options, schema, overwrite)
        return JetStreamStreamWriter(options, columns)


class JetStreamBatchReader(DataSourceReader):
    """A batch read of ``startingSequence``/``startingTime`` .. ``endingSequence``, planned when the query runs."""

    def __init__(self, options: ReadOptions, schema: StructType) -> None:
        self.options = options
        self.schema = schema

    def partitions(self) -> Sequence[InputPartition]:
        """PySpark: the partitions of the batch read (stream sequence ranges)."""
        options = self.options
        stream = open_stream(options)
        mode = choose_mode(options, stream)
        last = ending_sequence(options, stream)
        first = starting_sequence(options, stream)
        first = check_data_loss(options, first, last, stream.cached_info.state.first_seq)
        planned = _partitions(options, mode, first, last)
        log.info("reading %s sequences %d-%d in %d partitions (%s)", options.stream, first, last, len(planned), mode)
        return planned

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """PySpark: the rows of one partition, as Arrow record batches, on an executor."""
        return _read(self.options, partition, self.schema)


class JetStreamStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batches of stream sequences. The offset ``{"stream": name, "seq": n}`` is the next sequence to
    read; Spark keeps it in the checkpoint, so a batch replays exactly after a failure and nothing is kept on
    the server. ``maxMessagesPerTrigger`` bounds the sequences of a batch (with subject filters or deleted
    messages a batch holds fewer messages than sequences)."""

    def __init__(self, options: ReadOptions, schema: StructType) -> None:
        self.options = options
        self.schema = schema
        self._target: int | None = None  # Trigger.AvailableNow: the end fixed when the query started
        self._mode: Mode | None = None
        self._warned_ahead = False

    def _offset(self, seq: int) -> dict[str, Any]:
        return {"stream": self.options.stream, "seq": seq}

    def _seq(self, offset: dict[str, Any], which: str) -> int:
        stream, seq = offset.get("stream"), offset.get("seq")
        if stream != self.options.stream:
            raise errors.InvalidArgumentError(
                "stream",
                f"the checkpoint's {which} offset is for stream {stream!r}, this query reads {self.options.stream!r}; "
                "use a new checkpointLocation to read another stream",
            )
        if isinstance(seq, bool) or not isinstance(seq, int) or seq < 1:
            raise errors.JetStreamError(f"unreadable {which} offset in the checkpoint: {offset!r}")
        return seq

    def initialOffset(self) -> dict[str, Any]:
        """PySpark: where a new query starts (``startingSequence``/``startingTime``)."""
        stream = open_stream(self.options)
        start = starting_sequence(self.options, stream)
        log.info("query on %s starts at sequence %d", self.options.stream, start)
        return self._offset(start)

    def getDefaultReadLimit(self) -> ReadLimit:
        """PySpark: ``maxMessagesPerTrigger`` as a read limit, or all available."""
        limit = self.options.max_messages_per_trigger
        return ReadAllAvailable() if limit is None else ReadMaxRows(limit)

    def prepareForTriggerAvailableNow(self) -> None:
        """PySpark: fix the end of an AvailableNow query at the stream's last sequence now."""
        self._target = open_stream(self.options).cached_info.state.last_seq + 1

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        """PySpark: the end of the next micro-batch, within the read limit."""
        begin = self._seq(start, "start")
        stream = open_stream(self.options)
        state = stream.cached_info.state
        end = state.last_seq + 1
        if end < begin and not self._warned_ahead:
            self._warned_ahead = True  # a recreated stream, or a startingSequence in the future
            log.warning(
                "%s: the query waits for sequence %d, but the stream ends at %d; if the stream was recreated, "
                "start the query with a new checkpointLocation",
                self.options.stream,
                begin,
                state.last_seq,
            )
        if self._target is not None:
            end = min(end, self._target)
        if end <= begin:
            return start
        first = check_data_loss(self.options, begin, end - 1, state.first_seq)
        if isinstance(limit, ReadMaxRows):
            end = min(end, first + limit.max_rows)
        return self._offset(max(end, begin))

    def reportLatestOffset(self) -> dict[str, Any] | None:
        """PySpark: the stream's last sequence, for progress reporting."""
        return self._offset(open_stream(self.options).cached_info.state.last_seq + 1)

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        """PySpark: the partitions of a micro-batch between two offsets."""
        begin, stop = self._seq(start, "start"), self._seq(end, "end")
        if stop <= begin:
            return []
        stream = open_stream(self.options)
        if self._mode is None:
            self._mode = choose_mode(self.options, stream)
        first = check_data_loss(self.options, begin, stop - 1, stream.cached_info.state.first_seq)
        return _partitions(self.options, self._mode, first, stop - 1)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """PySpark: the rows of one partition, on an executor."""
        return _read(self.options, partition, self.schema)

    def commit(self, end: dict[str, Any]) -> None:
        """PySpark: a micro-batch up to ``end`` is done (nothing to release on the server)."""
        log.debug("%s: committed up to sequence %s", self.options.stream, end.get("seq"))


def _write_plan(raw: Any, schema: StructType, overwrite: bool) -> tuple[WriteOptions, ColumnPlan]:
    if overwrite:
        raise errors.InvalidArgumentError(
            "mode", "a stream is append-only: use mode('append') (or outputMode('append') when streaming)"
        )
    options = parse_write_options(raw)
    columns = plan_columns({f.name: f.dataType.simpleString() for f in schema.fields}, options)
    return options, columns
