"""The sink side of the ``jetstream`` data source: batch and streaming writers and their commit messages.

Spark creates the writers on the driver (``JetStreamDataSource.writer()``/``streamWriter()``), pickles them to
the executors, and calls ``write()`` there once per partition; ``commit()``/``abort()`` run back on the driver.
The publishing itself (columns, message ids, acknowledgements) is in :mod:`.writing`.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage

from .options import WriteOptions
from .writing import ColumnPlan, PublishStats, publish_batches

__all__ = ["JetStreamBatchWriter", "JetStreamCommitMessage", "JetStreamStreamWriter"]

log = logging.getLogger("jetstream_sync.spark")

# Local properties Spark sets on the tasks of a streaming micro-batch; the query id survives restarts.
_QUERY_ID = "sql.streaming.queryId"
_BATCH_ID = "streaming.sql.batchId"


@dataclass
class JetStreamCommitMessage(WriterCommitMessage):
    """What one write task did: rows acknowledged, how many were duplicates, and the stored sequences."""

    partition_id: int
    attempt: int
    published: int
    duplicates: int
    first_seq: int
    last_seq: int

    @classmethod
    def of(cls, stats: PublishStats) -> JetStreamCommitMessage:
        """The commit message of a partition, from what its publishes counted."""
        context = TaskContext.get()
        return cls(
            partition_id=context.partitionId() if context else 0,
            attempt=context.attemptNumber() if context else 0,
            published=stats.published,
            duplicates=stats.duplicates,
            first_seq=stats.first_seq,
            last_seq=stats.last_seq,
        )


def _summary(messages: Sequence[WriterCommitMessage | None]) -> tuple[int, int, int]:
    done = [m for m in messages if isinstance(m, JetStreamCommitMessage)]
    return len(done), sum(m.published for m in done), sum(m.duplicates for m in done)


def _task() -> tuple[int, TaskContext | None]:
    context = TaskContext.get()
    return (context.partitionId() if context else 0), context


class JetStreamBatchWriter(DataSourceArrowWriter):
    """``df.write.format("jetstream")``: each task publishes its rows and waits for every ack."""

    def __init__(self, options: WriteOptions, columns: ColumnPlan) -> None:
        self.options = options
        self.columns = columns
        self.write_id = uuid.uuid4().hex  # made once on the driver: every attempt of a task shares it

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        """PySpark: publish the rows of one partition, on an executor."""
        partition, _ = _task()
        prefix = f"{self.write_id}:{partition}" if self.options.idempotent else None
        return JetStreamCommitMessage.of(publish_batches(self.options, self.columns, iterator, prefix))

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        """PySpark: every partition was written."""
        tasks, published, duplicates = _summary(messages)
        log.info("write committed: %d tasks published %d messages (%d duplicates)", tasks, published, duplicates)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """PySpark: the write failed; what was published stays (a stream cannot take it back)."""
        tasks, published, _ = _summary(messages)
        log.warning(
            "write aborted after %d tasks published %d messages; they stay in the stream (JetStream has no "
            "transactions), and a rerun within the duplicate window publishes them as duplicates only",
            tasks,
            published,
        )


class JetStreamStreamWriter(DataSourceStreamArrowWriter):
    """``writeStream.format("jetstream")``: like the batch writer, with default message ids made from the
    streaming query id and batch id, so a micro-batch replayed after a restart is deduplicated."""

    def __init__(self, options: WriteOptions, columns: ColumnPlan) -> None:
        self.options = options
        self.columns = columns
        self.write_id = uuid.uuid4().hex

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        """PySpark: publish the rows of one partition of a micro-batch, on an executor."""
        partition, context = _task()
        prefix: str | None = None
        if self.options.idempotent:
            query = context.getLocalProperty(_QUERY_ID) if context else None
            batch = context.getLocalProperty(_BATCH_ID) if context else None
            if query is None or batch is None:
                log.warning("no streaming query or batch id on this task; message ids only hold within this run")
                prefix = f"{self.write_id}:{partition}"
            else:
                prefix = f"{query}:{batch}:{partition}"
        return JetStreamCommitMessage.of(publish_batches(self.options, self.columns, iterator, prefix))

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """PySpark: every partition of a micro-batch was written."""
        tasks, published, duplicates = _summary(messages)
        log.info("batch %d committed: %d tasks published %d (%d duplicates)", batchId, tasks, published, duplicates)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """PySpark: a micro-batch failed; what was published stays."""
        tasks, published, _ = _summary(messages)
        log.warning("batch %d aborted after %d tasks published %d messages", batchId, tasks, published)
