"""The rows a read returns and the Spark partitions that carry a sequence range to an executor.

Shared by the batch reader and the streaming reader (and the readers built on them): planning runs on the
driver, in the planning worker; `read_partition` runs in an executor worker, on a pickled
[`SequenceRange`][jetstream_sync.spark.SequenceRange].
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql.datasource import InputPartition
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
from ...models import StreamInfo
from .options import ReadOptions
from .range_reader import PlannedRange, read_range
from .reading import Mode, plan_ranges

__all__ = ["READ_SCHEMA", "SequenceRange", "arrow_schema", "check_schema", "plan_partitions", "read_partition"]

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
    """One Spark partition: the stream sequences ``first..last`` (inclusive), read with ``mode``, and the
    stream as the planner saw it (``planned``), which the executor checks instead of asking again."""

    def __init__(
        self, index: int, first: int, last: int, mode: Mode, planned: PlannedRange | None = None, stream: str = ""
    ) -> None:
        super().__init__(index)
        self.index = index
        self.first = first
        self.last = last
        self.mode = mode
        self.planned = planned
        self.stream = stream  #: the stream read (a query may read several); "" means the options' stream

    def numbered(self, index: int) -> SequenceRange:
        """This range as partition ``index`` of a plan that joins the ranges of several streams."""
        return SequenceRange(index, self.first, self.last, self.mode, self.planned, self.stream)

    @property
    def created(self) -> str | None:
        """The creation time of the stream the range was planned on (None: not known)."""
        return None if self.planned is None else self.planned.created


def arrow_schema(schema: StructType) -> pa.Schema:
    """The Arrow schema Spark checks record batches against (it must match exactly)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(schema, timezone="UTC")


def check_schema(schema: StructType) -> None:
    """A user-given schema may differ in nullability only: the columns are what the stream holds."""
    expected = [(f.name, f.dataType) for f in READ_SCHEMA.fields]
    given = [(f.name, f.dataType) for f in schema.fields]
    if given != expected:
        raise errors.InvalidArgumentError(
            "schema", f"the jetstream source returns {READ_SCHEMA.simpleString()}; got {schema.simpleString()}"
        )


def read_partition(options: ReadOptions, partition: InputPartition, schema: StructType) -> Iterator[pa.RecordBatch]:
    """Executor: the rows of one partition as Arrow record batches of ``schema``."""
    if not isinstance(partition, SequenceRange):  # Spark reads one empty partition when there is nothing to read
        return iter(())
    if partition.stream:
        options = options.for_stream(partition.stream)
    return read_range(
        options, partition.first, partition.last, partition.mode, arrow_schema(schema), planned=partition.planned
    )


def plan_partitions(
    options: ReadOptions, mode: Mode, first: int, last: int, info: StreamInfo | None = None
) -> list[SequenceRange]:
    """Driver: ``first..last`` cut into at most ``numPartitions`` contiguous ranges (see ``plan_ranges``), each
    carrying ``info``, the stream as planned."""
    planned = None if info is None else PlannedRange(info)
    ranges = plan_ranges(first, last, options.num_partitions, options.min_partition_size)
    return [SequenceRange(i, lo, hi, mode, planned, options.stream) for i, (lo, hi) in enumerate(ranges)]
