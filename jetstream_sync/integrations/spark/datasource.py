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
from pyspark.sql.types import StructType

from ... import errors
from .multi import MultiStreamReader
from .options import ReadOptions, WriteOptions, parse_read_options, parse_write_options
from .partitions import READ_SCHEMA, SequenceRange, check_schema, plan_partitions, read_partition
from .reading import check_data_loss, choose_mode, ending_sequence, open_stream, starting_sequence
from .sink import JetStreamBatchWriter, JetStreamStreamWriter
from .streaming import JetStreamStreamReader
from .writing import ColumnPlan, plan_columns

__all__ = [
    "READ_SCHEMA",
    "JetStreamBatchReader",
    "JetStreamDataSource",
    "JetStreamStreamReader",
    "SequenceRange",
]

log = logging.getLogger("jetstream_sync.spark")


class JetStreamDataSource(DataSource):
    """``spark.read/readStream/write/writeStream.format("jetstream")``; register it with
    ``spark.dataSource.register(JetStreamDataSource)``. See [`jetstream_sync.spark`][jetstream_sync.spark] for the
    options."""

    @classmethod
    def name(cls) -> str:
        """PySpark: the format name, ``jetstream``."""
        return "jetstream"

    def schema(self) -> StructType:
        """PySpark: the schema of the rows read (subject, data, headers, stream, seq, timestamp)."""
        return READ_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        """PySpark: a batch reader for these options."""
        check_schema(schema)
        return JetStreamBatchReader(parse_read_options(self.options, streaming=False), schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        """PySpark: a streaming reader for these options."""
        check_schema(schema)
        options = parse_read_options(self.options, streaming=True)
        if len(options.streams) > 1:
            return MultiStreamReader(options, schema)
        return JetStreamStreamReader(options, schema)

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
        """PySpark: the partitions of the batch read (stream sequence ranges, of every stream given)."""
        planned: list[SequenceRange] = []
        for options in self.options.each_stream():
            stream = open_stream(options)
            mode = choose_mode(options, stream)
            last = ending_sequence(options, stream)
            first = starting_sequence(options, stream)
            first = check_data_loss(options, first, last, stream.cached_info.state.first_seq)
            ranges = plan_partitions(options, mode, first, last, stream.cached_info)
            log.info("reading %s sequences %d-%d in %d partitions (%s)", options.stream, first, last, len(ranges), mode)
            planned.extend(part.numbered(len(planned) + i) for i, part in enumerate(ranges))
        return planned

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """PySpark: the rows of one partition, as Arrow record batches, on an executor."""
        return read_partition(self.options, partition, self.schema)


def _write_plan(raw: Any, schema: StructType, overwrite: bool) -> tuple[WriteOptions, ColumnPlan]:
    if overwrite:
        raise errors.InvalidArgumentError(
            "mode", "a stream is append-only: use mode('append') (or outputMode('append') when streaming)"
        )
    options = parse_write_options(raw)
    columns = plan_columns({f.name: f.dataType.simpleString() for f in schema.fields}, options)
    return options, columns
