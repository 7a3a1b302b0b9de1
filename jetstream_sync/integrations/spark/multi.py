"""Several streams in one query (``option("stream", "ORDERS,RETURNS")``), as Kafka's ``subscribe`` takes
several topics: one single-stream reader per stream, their offsets kept side by side.

The offset of a several-stream query is ``{"streams": {name: <that stream's offset>}}``; each stream keeps
its own start, incarnation and data-loss checks (see `streaming`), and a micro-batch's partitions are
every stream's ranges together. A stream added to the option under an existing checkpoint starts at its
``startingSequence``/``startingTime``; one removed is no longer read. The read limits apply per stream:
``maxMessagesPerTrigger`` is shared out evenly, and ``minMessagesPerTrigger`` holds back each stream alone.
Runs where `JetStreamStreamReader` runs: offsets in the driver's planning worker, ``read`` on
executors.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow
from pyspark.sql.types import StructType

from ... import errors
from .options import ReadOptions
from .partitions import SequenceRange, read_partition
from .streaming import JetStreamStreamReader

__all__ = ["MultiStreamReader"]


class MultiStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """A streaming read of every stream in ``options.streams``, one
    [`JetStreamStreamReader`][jetstream_sync.spark.JetStreamStreamReader] each."""

    def __init__(self, options: ReadOptions, schema: StructType) -> None:
        self.options = options
        self.schema = schema
        self.readers = {each.stream: JetStreamStreamReader(each, schema) for each in options.each_stream()}

    def _split(self, offset: dict[str, Any], which: str) -> dict[str, dict[str, Any]]:
        """The per-stream offsets of ``offset``; a stream the checkpoint does not have starts at its start."""
        given = offset.get("streams") if isinstance(offset, dict) else None
        if not isinstance(given, dict):
            raise errors.JetStreamError(
                f"unreadable {which} offset in the checkpoint: {offset!r} is not the offset of a query reading "
                f"{', '.join(self.readers)}; a query that read one stream needs a new checkpointLocation to read "
                "several"
            )
        return {name: given[name] if name in given else reader.initialOffset() for name, reader in self.readers.items()}

    @staticmethod
    def _join(offsets: dict[str, dict[str, Any]]) -> dict[str, Any]:
        return {"streams": offsets}

    def initialOffset(self) -> dict[str, Any]:
        """PySpark: every stream's start."""
        return self._join({name: reader.initialOffset() for name, reader in self.readers.items()})

    def getDefaultReadLimit(self) -> ReadLimit:
        """PySpark: ``maxMessagesPerTrigger`` over all streams, or all available."""
        limit = self.options.max_messages_per_trigger
        return ReadAllAvailable() if limit is None else ReadMaxRows(limit)

    def prepareForTriggerAvailableNow(self) -> None:
        """PySpark: fix every stream's end now."""
        for reader in self.readers.values():
            reader.prepareForTriggerAvailableNow()

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        """PySpark: every stream's end of the next batch; ``start`` when no stream has anything new."""
        starts = self._split(start, "start")
        if isinstance(limit, ReadMaxRows):
            limit = ReadMaxRows(max(1, limit.max_rows // len(self.readers)))
        ends = {name: reader.latestOffset(starts[name], limit) for name, reader in self.readers.items()}
        return start if ends == starts and start.get("streams") == starts else self._join(ends)

    def reportLatestOffset(self) -> dict[str, Any] | None:
        """PySpark: every stream's end as last asked (None until each was asked once)."""
        reported = {name: reader.reportLatestOffset() for name, reader in self.readers.items()}
        if any(value is None for value in reported.values()):
            return None
        return {"streams": reported}

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        """PySpark: every stream's ranges of the batch, numbered together."""
        starts, ends = self._split(start, "start"), self._split(end, "end")
        planned: list[SequenceRange] = []
        for name, reader in self.readers.items():
            for part in reader.partitions(starts[name], ends[name]):
                if isinstance(part, SequenceRange):  # a single-stream reader plans nothing else
                    planned.append(part.numbered(len(planned)))
        return planned

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """PySpark: the rows of one partition, on an executor (the partition names its stream)."""
        return read_partition(self.options, partition, self.schema)

    def commit(self, end: dict[str, Any]) -> None:
        """PySpark: a batch up to ``end`` is done, for every stream."""
        ends = self._split(end, "end")
        for name, reader in self.readers.items():
            reader.commit(ends[name])
