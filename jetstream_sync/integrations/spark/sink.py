"""The sink side of the ``jetstream`` data source: batch and streaming writers and their commit messages.

Spark creates the writers on the driver (``JetStreamDataSource.writer()``/``streamWriter()``), pickles them to
the executors, and calls ``write()`` there once per partition; ``commit()``/``abort()`` run back on the driver,
on a writer Spark creates afresh for each commit (so nothing the driver learns lives on the writer object:
what has to outlast one commit is kept per process in `_watch`). The publishing itself (columns,
message ids, acknowledgements) is in `writing`.

Deduplication holds only inside the target stream's ``duplicate_window``; the writers check that window
(once per stream and process) against what they can know, and warn when a replay could come later than it.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage

from ... import errors
from .._clients import process_client
from .options import ConnectionOptions, WriteOptions
from .writing import ColumnPlan, PublishStats, publish_batches

__all__ = ["JetStreamBatchWriter", "JetStreamCommitMessage", "JetStreamStreamWriter"]

log = logging.getLogger("jetstream_sync.spark")

# Local properties Spark sets on the tasks of a streaming micro-batch; the query id survives restarts.
_QUERY_ID = "sql.streaming.queryId"
_BATCH_ID = "streaming.sql.batchId"

#: Seconds added to what the writer measured before comparing with a stream's duplicate window: Spark retries
#: a failed task at once, a restarted query replays its last batch first; an executor that dies silently is
#: noticed only after spark.network.timeout (120 s), which this margin does not cover.
RETRY_MARGIN = 60.0
_LOOKUP_TTL = 300.0  # seconds a looked-up duplicate window (or subject -> stream) is trusted in this process
_LOOKUP_ERRORS = (errors.JetStreamError,)


@dataclass
class JetStreamCommitMessage(WriterCommitMessage):
    """What one write task did: rows acknowledged, how many were duplicates, the stored sequences, and for
    the driver's duplicate-window check the streams that stored them and when the task began publishing."""

    partition_id: int
    attempt: int
    published: int
    duplicates: int
    first_seq: int
    last_seq: int
    streams: tuple[str, ...] = ()
    started: float = 0.0
    query: str | None = None

    @classmethod
    def of(cls, stats: PublishStats, query: str | None = None) -> JetStreamCommitMessage:
        """The commit message of a partition, from what its publishes counted (on the executor)."""
        context = TaskContext.get()
        return cls(
            partition_id=context.partitionId() if context else 0,
            attempt=context.attemptNumber() if context else 0,
            published=stats.published,
            duplicates=stats.duplicates,
            first_seq=stats.first_seq,
            last_seq=stats.last_seq,
            streams=tuple(sorted(stats.streams)),
            started=stats.started,
            query=query,
        )


def _done(messages: Sequence[WriterCommitMessage | None]) -> list[JetStreamCommitMessage]:
    return [m for m in messages if isinstance(m, JetStreamCommitMessage)]


def _summary(messages: Sequence[WriterCommitMessage | None]) -> tuple[int, int, int]:
    done = _done(messages)
    return len(done), sum(m.published for m in done), sum(m.duplicates for m in done)


def _task() -> tuple[int, TaskContext | None]:
    context = TaskContext.get()
    return (context.partitionId() if context else 0), context


@dataclass
class _WindowWatch:
    """What the driver process remembers between commits (each commit has a new writer object): looked-up
    duplicate windows, the streams found for a subject, the warnings given, each query's last commit."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    windows: dict[tuple[ConnectionOptions, str], tuple[float | None, float]] = field(default_factory=dict)
    subjects: dict[tuple[ConnectionOptions, str], tuple[str | None, float]] = field(default_factory=dict)
    warned: set[tuple[ConnectionOptions, str]] = field(default_factory=set)
    last_commit: dict[str, float] = field(default_factory=dict)


_watch = _WindowWatch()


def _fresh(entry: tuple[object, float] | None) -> bool:
    return entry is not None and time.monotonic() - entry[1] < _LOOKUP_TTL


def _stream_for_subject(connection: ConnectionOptions, subject: str) -> str | None:
    """The stream capturing ``subject`` (STREAM.NAMES filtered by it), on the driver; None if none does."""
    key = (connection, subject)
    with _watch.lock:
        entry = _watch.subjects.get(key)
    if entry is not None and _fresh(entry):
        return entry[0]
    js = process_client(connection).jetstream()
    try:
        stream: str | None = js.find_stream_name(subject)
    except errors.StreamNotFoundError:
        stream = None
    with _watch.lock:
        _watch.subjects[key] = (stream, time.monotonic())
    return stream


def _duplicate_window(connection: ConnectionOptions, stream: str) -> float | None:
    """The stream's duplicate window in seconds (cached for a while), on the driver."""
    key = (connection, stream)
    with _watch.lock:
        entry = _watch.windows.get(key)
    if entry is not None and _fresh(entry):
        return entry[0]
    window = process_client(connection).jetstream().stream_info(stream).config.duplicate_window
    with _watch.lock:
        _watch.windows[key] = (window, time.monotonic())
    return window


def check_duplicate_window(connection: ConnectionOptions, stream: str, measured: float, what: str) -> bool:
    """Warn once per stream and process when ``stream`` forgets message ids sooner than ``measured`` seconds
    (what the writer saw ``what`` take) plus `RETRY_MARGIN`. Runs on the driver; a failed look-up is
    logged and skipped, never fails the query. Returns True when it warned now."""
    try:
        window = _duplicate_window(connection, stream)
    except _LOOKUP_ERRORS as exc:
        log.warning("could not read the duplicate window of stream %r, so it is not checked: %s", stream, exc)
        return False
    needed = measured + RETRY_MARGIN
    if window is None or window >= needed:
        return False
    with _watch.lock:
        if (connection, stream) in _watch.warned:
            return False
        _watch.warned.add((connection, stream))
    log.warning(
        "stream %r keeps message ids for %.0f s (duplicate_window), less than %s (%.0f s) plus %.0f s for "
        "Spark's task retries and a restart: rows replayed later than %.0f s after their first attempt are "
        "stored twice (never lost). Raise the stream's duplicate_window to at least %.0f s "
        "(StreamConfig.duplicate_window, nats stream edit --dupe-window), or make micro-batches shorter.",
        stream,
        window,
        what,
        measured,
        RETRY_MARGIN,
        window,
        needed,
    )
    return True


def _check_after_commit(
    connection: ConnectionOptions, messages: Sequence[WriterCommitMessage | None], what: str
) -> None:
    """On the driver, after a commit: compare each target stream's window with the time the write took and,
    for a streaming query whose previous commit this process saw, with the time between commits."""
    done = _done(messages)
    now = time.time()
    started = [m.started for m in done if m.started > 0]
    measured = now - min(started) if started else 0.0
    queries = {m.query for m in done if m.query is not None}
    with _watch.lock:
        for query in queries:
            previous = _watch.last_commit.get(query)
            if previous is not None:
                measured = max(measured, now - previous)
            _watch.last_commit[query] = now
    for stream in sorted({s for m in done for s in m.streams}):
        check_duplicate_window(connection, stream, measured, what)


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
        """PySpark: every partition was written (on the driver)."""
        tasks, published, duplicates = _summary(messages)
        log.info("write committed: %d tasks published %d messages (%d duplicates)", tasks, published, duplicates)
        if self.options.idempotent:
            _check_after_commit(self.options.connection, messages, "the length of this write")

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """PySpark: the write failed (on the driver); what was published stays (a stream cannot take it back).
        The log says what a rerun does, which depends on where the message ids come from."""
        tasks, published, _ = _summary(messages)
        if not self.options.idempotent:
            rerun = "a rerun publishes them again (idempotent=false: no message ids)"
        elif self.columns.msg_id is not None:
            column = self.columns.msg_id
            rerun = f"a rerun within the stream's duplicate window drops them as duplicates (ids from {column!r})"
        elif self.columns.stream is not None:
            rerun = (
                "a rerun within the stream's duplicate window drops them as duplicates (ids from the source "
                "columns stream/seq and the row's content)"
            )
        else:
            rerun = (
                "a rerun is a new write with new message ids and publishes them AGAIN; give the rows stable ids "
                "(msgIdColumn, or the source columns stream and seq) to make reruns idempotent"
            )
        log.warning(
            "write aborted after %d tasks published %d messages; they stay in the stream (JetStream has no "
            "transactions), and %s",
            tasks,
            published,
            rerun,
        )


class JetStreamStreamWriter(DataSourceStreamArrowWriter):
    """``writeStream.format("jetstream")``: like the batch writer; default message ids are scoped by the
    streaming query id and batch id (or keyed by the source columns stream/seq), so a micro-batch replayed
    after a restart is deduplicated within the stream's duplicate window.

    Created on the driver when the query starts and again for every commit: with a ``subject`` option, the
    stream behind it is looked up (STREAM.NAMES filtered by the subject) and its duplicate window checked,
    once per process and stream."""

    def __init__(self, options: WriteOptions, columns: ColumnPlan) -> None:
        self.options = options
        self.columns = columns
        self.write_id = uuid.uuid4().hex
        if options.idempotent and options.subject is not None:
            self._check_subject_stream(options.subject)

    def _check_subject_stream(self, subject: str) -> None:
        try:
            stream = _stream_for_subject(self.options.connection, subject)
        except _LOOKUP_ERRORS as exc:
            log.warning(
                "could not look up the stream of subject %r, its duplicate window is not checked: %s", subject, exc
            )
            return
        if stream is None:
            log.warning("no stream captures subject %r: the writes will fail until one does", subject)
            return
        check_duplicate_window(self.options.connection, stream, 0.0, "what this query has measured so far")

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        """PySpark: publish the rows of one partition of a micro-batch, on an executor."""
        partition, context = _task()
        prefix: str | None = None
        query = context.getLocalProperty(_QUERY_ID) if context else None
        if self.options.idempotent:
            batch = context.getLocalProperty(_BATCH_ID) if context else None
            if query is None or batch is None:
                log.warning("no streaming query or batch id on this task; message ids only hold within this run")
                prefix = f"{self.write_id}:{partition}"
            else:
                prefix = f"{query}:{batch}:{partition}"
        return JetStreamCommitMessage.of(publish_batches(self.options, self.columns, iterator, prefix), query)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """PySpark: every partition of a micro-batch was written (on the driver)."""
        tasks, published, duplicates = _summary(messages)
        log.info("batch %d committed: %d tasks published %d (%d duplicates)", batchId, tasks, published, duplicates)
        if self.options.idempotent:
            _check_after_commit(
                self.options.connection, messages, "the length of a micro-batch or the time between two"
            )

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """PySpark: a micro-batch failed (on the driver); what was published stays, and Spark replays the batch."""
        tasks, published, _ = _summary(messages)
        log.warning(
            "batch %d aborted after %d tasks published %d messages; they stay in the stream, and the replay of "
            "the batch drops them as duplicates if it comes within the stream's duplicate window (with default "
            "ids: when its rows land in the same partitions, or always when they carry stream/seq)",
            batchId,
            tasks,
            published,
        )
