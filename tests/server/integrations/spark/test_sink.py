"""The sink's replay safety (issue 36): a replayed write in another order stores every row, and the writers
check the target stream's duplicate window. Real nats-server, local Spark (``local[2,3]``: 3 task attempts).
"""

from __future__ import annotations

import logging
import random
import shutil
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("pyarrow")
pytest.importorskip("pyspark", minversion="4.2")
if shutil.which("java") is None:  # pragma: no cover - depends on the machine
    pytest.skip("PySpark needs Java on PATH", allow_module_level=True)

import pyarrow as pa
from pyspark.errors import PythonException

import jetstream_sync
from jetstream_sync.integrations.spark import sink
from jetstream_sync.integrations.spark.options import parse_write_options
from jetstream_sync.integrations.spark.sink import JetStreamBatchWriter, JetStreamCommitMessage, JetStreamStreamWriter
from jetstream_sync.integrations.spark.writing import plan_columns
from tests.server.integrations.spark.helpers import source

pytestmark = pytest.mark.spark

ROWS = 2400
TWINS = 100  # rows identical in every published byte, on top of the ROWS distinct ones
QUERY = "4b1d0c36-0000-4000-8000-000000000036"
BATCH = 5
SCHEMA = pa.schema([("subject", pa.string()), ("data", pa.binary()), ("stream", pa.string()), ("seq", pa.int64())])


@pytest.fixture(autouse=True)
def _active_session(spark: Any) -> None:
    """Make the session the active one of this thread's JVM thread: PySpark 4.3 finds a registered Python
    data source for a write only through the active session, which a py4j thread may not have (the writes
    then fail with DATA_SOURCE_NOT_FOUND, as test_spark.py's write tests do on this machine)."""
    spark._jvm.org.apache.spark.sql.SparkSession.setActiveSession(spark._jsparkSession)


def rows_for(target: str) -> list[tuple[str, bytes, str, int]]:
    """ROWS distinct rows and TWINS identical ones, each with a source message (stream SRC, seq)."""
    distinct = [(f"{target}.copy", b"m%d" % i, "SRC", i + 1) for i in range(ROWS)]
    return distinct + [(f"{target}.copy", b"twin", "SRC", ROWS + 1 + i) for i in range(TWINS)]


def write_task(writer: Any, url: str, target: str, fail: str | None) -> Any:
    """The body of a Spark task that feeds its partition to ``writer.write`` the way Spark does (Arrow record
    batches), on the executor. A non-deterministic plan: attempt 0 (or every attempt with ``fail="always"``)
    hands on the rows in sequence order and, with ``fail``, fails after the first half, once they are stored;
    any other attempt hands on every row, shuffled."""

    def task(rows: Iterator[tuple[str, bytes, str, int]]) -> Iterator[Any]:
        from pyspark import TaskContext

        context = TaskContext.get()
        ordered = sorted(rows, key=lambda r: r[3])
        first = fail == "always" or (context is not None and context.attemptNumber() == 0)
        failing = first and fail is not None

        def batches() -> Iterator[pa.RecordBatch]:
            chosen = ordered if first else random.sample(ordered, len(ordered))
            if failing:
                chosen = chosen[: len(chosen) // 2]
            for at in range(0, len(chosen), 200):
                yield pa.RecordBatch.from_pylist(
                    [dict(zip(SCHEMA.names, row, strict=True)) for row in chosen[at : at + 200]], SCHEMA
                )
            if failing:
                with jetstream_sync.connect(url) as client:
                    js = client.jetstream()
                    deadline = time.monotonic() + 60
                    while js.stream_info(target).state.messages < len(chosen):
                        assert time.monotonic() < deadline, "the writer stored too little"
                        time.sleep(0.05)  # the poll interval of this bounded wait on a condition
                raise RuntimeError("injected failure in attempt 0")

        yield writer.write(batches())

    return task


def run_job(spark: Any, writer: Any, rows: list[Any], partitions: int, url: str, target: str, fail: bool) -> list[Any]:
    """One Spark job writing ``rows`` in ``partitions`` tasks through ``writer``, as a micro-batch of QUERY
    (the local properties Spark sets on a streaming query's tasks); returns the commit messages."""
    context = spark.sparkContext
    context.setLocalProperty("sql.streaming.queryId", QUERY)
    context.setLocalProperty("streaming.sql.batchId", str(BATCH))
    try:
        data = context.parallelize(random.sample(rows, len(rows)), partitions)
        return data.mapPartitions(write_task(writer, url, target, fail)).collect()
    finally:
        context.setLocalProperty("sql.streaming.queryId", None)
        context.setLocalProperty("streaming.sql.batchId", None)


def writer_for(kind: type, url: str, keep_source: bool) -> Any:
    options = parse_write_options({"servers": url})
    fields = {"subject": "string", "data": "binary"} | ({"stream": "string", "seq": "bigint"} if keep_source else {})
    return kind(options, plan_columns(fields, options))


def stored(spark: Any, url: str, stream: str) -> Counter[bytes]:
    return Counter(bytes(r.data) for r in source(spark, url, stream).select("data").collect())


def wanted() -> Counter[bytes]:
    return Counter({b"m%d" % i: 1 for i in range(ROWS)} | {b"twin": TWINS})


@pytest.mark.timeout(300)
@pytest.mark.parametrize("kind", [JetStreamStreamWriter, JetStreamBatchWriter], ids=["stream", "batch"])
@pytest.mark.parametrize("keep_source", [False, True], ids=["scoped-ids", "source-ids"])
def test_a_task_retried_with_its_rows_in_another_order_stores_every_row_once(
    spark: Any, nats_server: Any, new_stream: Any, kind: type, keep_source: bool
) -> None:
    """The replay test: one batch written twice by a non-deterministic plan (Spark retries the failed task,
    whose rows now come shuffled); every row must be in the target, once. Row-numbered ids (before issue 36)
    gave the retry's rows the ids of other rows already stored, and the stream dropped them."""
    target = new_stream()
    writer = writer_for(kind, nats_server.url, keep_source)
    messages = run_job(spark, writer, rows_for(target.name), 1, nats_server.url, target.name, fail="first")
    assert [m.attempt for m in messages] == [1], "the task was not retried"
    got, want = stored(spark, nats_server.url, target.name), wanted()
    assert want - got == Counter(), f"lost: {sum((want - got).values())} rows"
    assert got == want, f"stored twice: {sum((got - want).values())} rows"


@pytest.mark.timeout(300)
@pytest.mark.parametrize("keep_source", [False, True], ids=["scoped-ids", "source-ids"])
def test_a_micro_batch_replayed_after_a_restart_in_another_partitioning_loses_no_row(
    spark: Any, nats_server: Any, new_stream: Any, keep_source: bool
) -> None:
    """A query that died while writing a batch (half of each partition stored) replays the batch after its
    restart (same query id and batch id) with a new writer, its rows shuffled into 3 partitions instead of 2.
    Scoped ids may store rows again (never lose one); ids from the source columns store each row once."""
    target = new_stream()
    rows = rows_for(target.name)
    first = writer_for(JetStreamStreamWriter, nats_server.url, keep_source)
    with pytest.raises(PythonException, match="injected failure"):  # the query dies mid-batch, uncommitted
        run_job(spark, first, rows, 2, nats_server.url, target.name, fail="always")
    replay = writer_for(JetStreamStreamWriter, nats_server.url, keep_source)
    messages = run_job(spark, replay, rows, 3, nats_server.url, target.name, fail=None)
    replay.commit(messages, BATCH)
    got, want = stored(spark, nats_server.url, target.name), wanted()
    assert want - got == Counter(), f"lost: {sum((want - got).values())} rows"
    if keep_source:
        assert got == want, f"stored twice: {sum((got - want).values())} rows"
    assert sum(m.published for m in messages) == ROWS + TWINS


# -- the duplicate window check (the writers' driver side, in this process) ---------------------------------------


def writer_options(url: str, **extra: str) -> Any:
    return parse_write_options({"servers": url, **extra})


def columns(options: Any) -> Any:
    return plan_columns({"subject": "string", "data": "binary"}, options)


def window_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "duplicate_window" in r.getMessage()]


def test_a_stream_writer_warns_at_start_when_the_window_is_shorter_than_spark_retries(
    nats_server: Any, new_stream: Any, caplog: pytest.LogCaptureFixture
) -> None:
    short = new_stream(duplicate_window=sink.RETRY_MARGIN / 2)
    long = new_stream(duplicate_window=10 * sink.RETRY_MARGIN)
    caplog.set_level(logging.INFO, "jetstream_sync.spark")
    for stream in (long, short, short):  # the second look at the same stream does not warn again
        options = writer_options(nats_server.url, subject=f"{stream.name}.out")
        JetStreamStreamWriter(options, columns(options))
    (warning,) = window_warnings(caplog)
    assert short.name in warning and "30 s" in warning and "duplicate_window" in warning


def test_no_window_check_without_ids(nats_server: Any, new_stream: Any, caplog: pytest.LogCaptureFixture) -> None:
    short = new_stream(duplicate_window=1)
    caplog.set_level(logging.INFO, "jetstream_sync.spark")
    options = writer_options(nats_server.url, subject=f"{short.name}.out", idempotent="false")
    JetStreamStreamWriter(options, columns(options))
    assert window_warnings(caplog) == []


def test_a_writer_for_a_subject_no_stream_captures_says_so(nats_server: Any, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "jetstream_sync.spark")
    options = writer_options(nats_server.url, subject="nowhere.captured.issue36")
    JetStreamStreamWriter(options, columns(options))
    assert any("no stream captures subject 'nowhere.captured.issue36'" in r.getMessage() for r in caplog.records)


def test_a_commit_warns_when_the_batch_took_longer_than_the_window_allows(
    nats_server: Any, new_stream: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """The stream behind a subject column is learnt from the acks in the commit messages; the batch's length
    from its tasks' first publish."""
    target = new_stream(duplicate_window=sink.RETRY_MARGIN + 30)
    options = writer_options(nats_server.url)
    writer = JetStreamStreamWriter(options, columns(options))
    caplog.set_level(logging.INFO, "jetstream_sync.spark")

    def message(started: float) -> JetStreamCommitMessage:
        return JetStreamCommitMessage(0, 0, 10, 0, 1, 10, streams=(target.name,), started=started, query="q-36")

    writer.commit([message(time.time() - 5)], 0)  # 5 s + the margin fit in 90 s
    assert window_warnings(caplog) == []
    writer.commit([message(time.time() - 40), None], 1)  # 40 s + the margin do not
    (warning,) = window_warnings(caplog)
    assert target.name in warning and "90 s" in warning


@pytest.mark.parametrize(
    ("extra", "fields", "says"),
    [
        ({}, {}, "publishes them AGAIN"),
        ({"msgIdColumn": "key"}, {"key": "string"}, "drops them as duplicates (ids from 'key')"),
        ({}, {"stream": "string", "seq": "bigint"}, "drops them as duplicates (ids from the source columns"),
        ({"idempotent": "false"}, {}, "publishes them again (idempotent=false"),
    ],
)
def test_the_batch_abort_log_says_what_a_rerun_does(
    extra: dict[str, str], fields: dict[str, str], says: str, caplog: pytest.LogCaptureFixture
) -> None:
    options = writer_options("nats://127.0.0.1:4222", subject="a.b", **extra)
    plan = plan_columns({"data": "binary", **fields}, options)
    caplog.set_level(logging.WARNING, "jetstream_sync.spark")
    JetStreamBatchWriter(options, plan).abort([JetStreamCommitMessage(0, 0, 5, 0, 1, 5), None])
    (record,) = caplog.records
    assert says in record.getMessage()
