"""The PySpark data source against a real nats-server, on local Spark (``local[2,3]``: 2 cores, 3 task attempts).

Run with ``python -m pytest tests/test_spark.py -m spark``. One SparkSession serves the whole file; skipped
without PySpark (the ``spark`` extra) or Java.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import ssl
import sys
import time
import uuid
from collections.abc import Iterator

import pytest

pytest.importorskip("pyarrow")
pytest.importorskip("pyspark", minversion="4.2")
if shutil.which("java") is None:  # pragma: no cover - depends on the machine
    pytest.skip("PySpark needs Java on PATH", allow_module_level=True)

from pyspark.errors import PySparkException
from pyspark.sql import functions as F
from pyspark.sql.types import BinaryType

import jetstream_sync
from jetstream_sync import StreamConfig, errors
from jetstream_sync.integrations.spark.reading import plan_ranges
from jetstream_sync.spark import (
    READ_SCHEMA,
    parse_read_options,
    parse_write_options,
)
from tests.helpers import REPO_ROOT
from tests.server.integrations.spark.helpers import publish, run_available_now, seqs, source, stream_source

pytestmark = pytest.mark.spark

BIG = 100_000

# -- batch reads --------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def big(js) -> Iterator[tuple[str, float, float]]:
    """100,000 messages with headers on every 1000th; (name, time before, time after)."""
    name = "SPBIG" + uuid.uuid4().hex[:6].upper()
    js.create_stream(StreamConfig(name=name, subjects=[f"{name}.>"], allow_direct=True))
    before = time.time()
    publish(js, name, BIG, every_header=1000)
    yield name, before, time.time()
    js.delete_stream(name)


@pytest.mark.timeout(300)
def test_batch_read_of_100k_messages_in_4_partitions_returns_each_once_with_correct_fields(spark, nats_server, js, big):
    name, before, after = big
    df = source(spark, nats_server.url, name, numPartitions=4, minPartitionSize=1000)
    assert df.schema == READ_SCHEMA
    assert df.rdd.getNumPartitions() == 4
    per_partition = (
        df.groupBy(F.spark_partition_id().alias("p"))
        .agg(F.min("seq").alias("lo"), F.max("seq").alias("hi"), F.count("*").alias("n"))
        .orderBy("lo")
        .collect()
    )
    quarters = [(1, 25_000), (25_001, 50_000), (50_001, 75_000), (75_001, 100_000)]
    assert [(r.lo, r.hi, r.n) for r in per_partition] == [(lo, hi, 25_000) for lo, hi in quarters]
    i = F.col("seq") - 1
    wrong = df.filter(
        (F.col("data") != F.concat(F.lit("m"), i.cast("string")).cast("binary"))
        | (F.col("subject") != F.concat(F.lit(f"{name}."), F.when(i % 2 == 0, "a").otherwise("b")))
        | (F.col("stream") != name)
        | F.when(i % 1000 == 0, F.col("headers").isNull()).otherwise(F.col("headers").isNotNull())
        | (F.col("timestamp") < F.lit(dt.datetime.fromtimestamp(before - 1, dt.timezone.utc)))
        | (F.col("timestamp") > F.lit(dt.datetime.fromtimestamp(after + 1, dt.timezone.utc)))
    )
    assert wrong.count() == 0
    totals = df.agg(F.count("*").alias("n"), F.countDistinct("seq").alias("distinct")).first()
    assert (totals.n, totals.distinct) == (BIG, BIG)
    stream = js.stream(name)
    for row in df.filter(F.col("seq").isin(1, 2, 1001, 50_000, BIG)).collect():
        stored = stream.get_msg(row.seq, direct=False)
        assert (row.subject, bytes(row.data)) == (stored.subject, stored.data)
        assert row.timestamp.replace(tzinfo=dt.timezone.utc) == stored.time
        if (row.seq - 1) % 1000 == 0:
            assert row.headers == {"X-I": [str(row.seq - 1)], "X-Multi": ["1", "2"]}


@pytest.mark.parametrize("mode", ["direct", "consumer"])
def test_batch_read_with_deleted_messages_misses_no_live_message(spark, nats_server, js, new_stream, mode):
    stream = new_stream()
    publish(js, stream.name, 2000)
    deleted = {1, 2, 500, 501, 999, 1000, 1001, 1500, 1999, 2000} | set(range(1200, 1300))
    for seq in sorted(deleted):
        stream.delete_msg(seq)
    df = source(spark, nats_server.url, stream.name, numPartitions=4, minPartitionSize=10, readMode=mode)
    assert seqs(df) == [s for s in range(1, 2001) if s not in deleted]


def test_auto_mode_reads_a_stream_without_direct_get_through_a_consumer(spark, nats_server, js, new_stream):
    stream = new_stream(allow_direct=False)
    publish(js, stream.name, 300, every_header=7)
    rows = source(spark, nats_server.url, stream.name, numPartitions=3, minPartitionSize=50).collect()
    assert sorted(r.seq for r in rows) == list(range(1, 301))
    by_seq = {r.seq: r for r in rows}
    assert by_seq[8].headers == {"X-I": ["7"], "X-Multi": ["1", "2"]}
    assert by_seq[9].headers is None
    assert list(stream.consumer_names()) == []  # the read consumers were deleted


@pytest.mark.parametrize("mode", ["direct", "consumer"])
def test_subjects_start_and_end_options(spark, nats_server, js, new_stream, mode):
    stream = new_stream()
    name = stream.name
    publish(js, name, 100)
    js.publish(f"{name}.c.deep", b"deep")  # seq 101
    url = nats_server.url
    assert seqs(source(spark, url, name, subjects=f"{name}.a", readMode=mode)) == list(range(1, 101, 2))
    assert seqs(source(spark, url, name, subjects=f"{name}.b,{name}.c.>", readMode=mode)) == [
        *range(2, 101, 2),
        101,
    ]
    assert seqs(source(spark, url, name, subjects=f"{name}.>", readMode=mode)) == list(range(1, 102))
    ranged = source(spark, url, name, startingSequence=10, endingSequence=20, readMode=mode, minPartitionSize=3)
    assert seqs(ranged) == list(range(10, 21))
    assert seqs(source(spark, url, name, startingSequence="latest", readMode=mode)) == []
    assert seqs(source(spark, url, name, endingSequence=5, readMode=mode)) == [1, 2, 3, 4, 5]
    assert seqs(source(spark, url, name, startingSequence=500, readMode=mode)) == []


def test_starting_time_resolves_to_the_first_message_stored_at_or_after_it(spark, nats_server, js, new_stream):
    stream = new_stream()
    publish(js, stream.name, 10)
    time.sleep(0.05)  # the scenario: a gap in time, so that `middle` lies strictly between the two groups
    middle = dt.datetime.now(dt.timezone.utc)
    time.sleep(0.05)  # the scenario: the second group is stored strictly after `middle`
    publish(js, stream.name, 5, start=10)
    url = nats_server.url
    assert seqs(source(spark, url, stream.name, startingTime=middle.isoformat())) == list(range(11, 16))
    assert seqs(source(spark, url, stream.name, startingTime="2000-01-01T00:00:00Z")) == list(range(1, 16))
    assert seqs(source(spark, url, stream.name, startingTime="2200-01-01T00:00:00Z")) == []


def test_empty_stream_reads_as_an_empty_frame(spark, nats_server, new_stream):
    stream = new_stream()
    df = source(spark, nats_server.url, stream.name)
    assert df.count() == 0


# -- streaming reads ----------------------------------------------------------------------------------------------


def test_streaming_available_now_twice_from_one_checkpoint_reads_every_message_once(
    spark, nats_server, js, new_stream, tmp_path
):
    stream = new_stream()
    publish(js, stream.name, 250)
    collected: list[int] = []
    batches: list[int] = []

    def sink(df, batch_id: int) -> None:
        batches.append(batch_id)
        collected.extend(r.seq for r in df.select("seq").collect())

    def build():
        events = stream_source(
            spark, nats_server.url, stream.name, startingSequence="earliest", maxMessagesPerTrigger=100
        )
        return events.writeStream.foreachBatch(sink).option("checkpointLocation", str(tmp_path / "ckpt"))

    first = run_available_now(build())
    assert sorted(collected) == list(range(1, 251))
    assert len(batches) == 3  # admission control: 100 + 100 + 50
    end = json.loads(first.lastProgress["sources"][0]["endOffset"])
    assert end == {"stream": stream.name, "seq": 251, "created": stream.cached_info.created.isoformat(), "from": 201}
    publish(js, stream.name, 120, start=250)
    stream.delete_msg(300)
    run_available_now(build())
    assert sorted(collected) == [s for s in range(1, 371) if s != 300]  # exactly once across both runs
    assert len(collected) == len(set(collected))


def test_streaming_starts_at_latest_by_default(spark, nats_server, js, new_stream, tmp_path):
    stream = new_stream()
    publish(js, stream.name, 10)
    collected: list[int] = []

    def build():
        return (
            stream_source(spark, nats_server.url, stream.name)
            .writeStream.foreachBatch(lambda df, _: collected.extend(r.seq for r in df.collect()))
            .option("checkpointLocation", str(tmp_path / "ckpt"))
        )

    run_available_now(build())
    assert collected == []
    publish(js, stream.name, 3, start=10)
    run_available_now(build())
    assert sorted(collected) == [11, 12, 13]


def test_data_loss_fails_naming_the_range_unless_fail_on_data_loss_is_false(
    spark, nats_server, js, new_stream, tmp_path
):
    stream = new_stream()
    publish(js, stream.name, 200)
    collected: list[int] = []

    def build(fail: str):
        events = stream_source(spark, nats_server.url, stream.name, startingSequence="earliest", failOnDataLoss=fail)
        return events.writeStream.foreachBatch(lambda df, _: collected.extend(r.seq for r in df.collect())).option(
            "checkpointLocation", str(tmp_path / "ckpt")
        )

    run_available_now(build("true"))
    assert sorted(collected) == list(range(1, 201))
    publish(js, stream.name, 100, start=200)  # 201..300
    assert stream.purge(sequence=251) == 250  # retention took 201..250 before the query read them
    with pytest.raises(PySparkException, match=r"sequences 201-250 were removed") as failure:
        run_available_now(build("true"))
    assert "failOnDataLoss=false" in str(failure.value)
    assert sorted(collected) == list(range(1, 201))
    run_available_now(build("false"))
    assert sorted(collected) == [*range(1, 201), *range(251, 301)]
    with pytest.raises(PySparkException, match=r"sequences 5-250 were removed"):
        source(spark, nats_server.url, stream.name, startingSequence=5).count()
    assert seqs(source(spark, nats_server.url, stream.name, startingSequence=5, failOnDataLoss="false")) == list(
        range(251, 301)
    )


# -- writes -------------------------------------------------------------------------------------------------------


def test_batch_write_publishes_subject_data_and_headers_and_a_rerun_stores_nothing_twice(
    spark, nats_server, js, new_stream
):
    target = new_stream()
    rows = [(f"{target.name}.x", f"payload-{i}", {"K": ["v1", "v2"]} if i % 2 else None, f"id-{i}") for i in range(40)]
    df = spark.createDataFrame(rows, "subject STRING, data STRING, headers MAP<STRING, ARRAY<STRING>>, key STRING")
    writer = df.write.format("jetstream").option("servers", nats_server.url).option("msgIdColumn", "key")
    writer.mode("append").save()
    writer.mode("append").save()  # the same ids again: all duplicates
    assert target.info().state.messages == 40
    stored = {m.data: m for m in (target.get_msg(s) for s in range(1, 41))}
    assert set(stored) == {f"payload-{i}".encode() for i in range(40)}
    assert stored[b"payload-1"].headers == {"K": ["v1", "v2"], "Nats-Msg-Id": "id-1"}
    assert stored[b"payload-2"].headers == {"Nats-Msg-Id": "id-2"}
    plain = spark.createDataFrame([(b"\x00\x01", {"A": "b"})], "data BINARY, headers MAP<STRING, STRING>")
    (
        plain.write.format("jetstream")
        .option("servers", nats_server.url)
        .option("subject", f"{target.name}.fixed")
        .option("idempotent", "false")
        .mode("append")
        .save()
    )
    last = target.get_msg(41)
    assert (last.subject, last.data, last.headers) == (f"{target.name}.fixed", b"\x00\x01", {"A": "b"})


def test_a_write_of_a_read_round_trips(spark, nats_server, js, new_stream):
    src, dst = new_stream(), new_stream()
    publish(js, src.name, 500, every_header=10)
    copied = source(spark, nats_server.url, src.name, numPartitions=2, minPartitionSize=10).select(
        F.regexp_replace("subject", f"^{src.name}", dst.name).alias("subject"), "data", "headers"
    )
    copied.write.format("jetstream").option("servers", nats_server.url).mode("append").save()
    back = {bytes(r.data): r.headers for r in source(spark, nats_server.url, dst.name).collect()}
    assert len(back) == 500
    assert back[b"m10"] == {"X-I": ["10"], "X-Multi": ["1", "2"], "Nats-Msg-Id": back[b"m10"]["Nats-Msg-Id"]}
    assert back[b"m11"].keys() == {"Nats-Msg-Id"}  # the default idempotent id


def test_stream_to_stream_copy_with_msg_id_column_survives_an_injected_task_failure(
    spark, nats_server, js, new_stream, tmp_path
):
    src, dst = new_stream(), new_stream()
    publish(js, src.name, 3000)
    marker = tmp_path / "failed"
    url, target = nats_server.url, dst.name

    def fail_once(seq, data):
        from pyspark import TaskContext

        context = TaskContext.get()
        if context.attemptNumber() == 0 and context.partitionId() == 0 and seq == 1400:
            # Fail only once the writers have published something, so the retry has duplicates to drop.
            with jetstream_sync.connect(url) as client:
                js = client.jetstream()
                deadline = time.monotonic() + 60
                stored = js.stream_info(target).state.messages
                while stored == 0 and time.monotonic() < deadline:
                    time.sleep(0.05)  # the poll interval of this bounded wait on a condition
                    stored = js.stream_info(target).state.messages
            marker.write_text(str(stored))
            raise RuntimeError("injected failure in attempt 0")
        return data

    fail = F.udf(fail_once, BinaryType(), useArrow=False)
    events = stream_source(spark, url, src.name, startingSequence="earliest", numPartitions=2, minPartitionSize=100)
    copy = events.select(
        F.lit(f"{target}.copy").alias("subject"),
        fail("seq", "data").alias("data"),
        F.concat("stream", F.lit(":"), "seq").alias("msg_id"),
    )
    run_available_now(
        copy.writeStream.format("jetstream")
        .option("servers", url)
        .option("msgIdColumn", "msg_id")
        .option("checkpointLocation", str(tmp_path / "ckpt"))
    )
    assert marker.exists(), "the failure was not injected"
    assert int(marker.read_text()) > 0, "nothing was published before the failure"
    state = dst.info().state
    assert (state.messages, state.last_seq) == (3000, 3000)  # duplicates were dropped, not stored
    copied = sorted(bytes(r.data) for r in source(spark, url, target).select("data").collect())
    assert copied == sorted(b"m%d" % i for i in range(3000))
    ids = {r.headers["Nats-Msg-Id"][0] for r in source(spark, url, target).select("headers").collect()}
    assert ids == {f"{src.name}:{s}" for s in range(1, 3001)}


def test_query_stopped_mid_batch_and_restarted_is_exactly_once_with_default_ids(
    spark, nats_server, js, new_stream, tmp_path
):
    src, dst = new_stream(), new_stream()
    publish(js, src.name, 2000)

    def slow(data):
        time.sleep(0.002)  # slow on purpose, so that the query can be stopped mid-batch
        return data

    def build():
        events = stream_source(spark, nats_server.url, src.name, startingSequence="earliest", minPartitionSize=100)
        return (
            events.select(
                F.lit(f"{dst.name}.copy").alias("subject"),
                F.udf(slow, BinaryType(), useArrow=False)("data").alias("data"),
            )
            .writeStream.format("jetstream")
            .option("servers", nats_server.url)
            .option("checkpointLocation", str(tmp_path / "ckpt"))
        )

    query = build().start()
    try:
        deadline = time.monotonic() + 90
        while dst.info().state.messages == 0:
            assert time.monotonic() < deadline, "nothing was copied"
            assert query.exception() is None, query.exception()
            time.sleep(0.02)  # the poll interval of this bounded wait on a condition
    finally:
        query.stop()
    partial = dst.info().state.messages
    assert 0 < partial < 2000, f"the query was not stopped mid-batch ({partial} copied)"
    run_available_now(build())
    state = dst.info().state
    assert (state.messages, state.last_seq) == (2000, 2000)
    copied = sorted(bytes(r.data) for r in source(spark, nats_server.url, dst.name).select("data").collect())
    assert copied == sorted(b"m%d" % i for i in range(2000))


# -- options ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({}, "servers"),
        ({"servers": "nats://x:4222"}, "stream"),
        ({"stream": "a.b"}, "stream"),
        ({"numPartitions": "zero"}, "numPartitions"),
        ({"numPartitions": "0"}, "numPartitions"),
        ({"minPartitionSize": "-5"}, "minPartitionSize"),
        ({"startingSequence": "first"}, "startingSequence"),
        ({"startingSequence": "0"}, "startingSequence"),
        ({"startingTime": "yesterday"}, "startingTime"),
        ({"startingTime": "2999-01-01T00:00:00Z"}, "startingTime"),
        ({"startingTime": "2025-01-01T00:00:00Z", "startingSequence": "5"}, "startingTime"),
        ({"endingSequence": "soon"}, "endingSequence"),
        ({"startingSequence": "10", "endingSequence": "5"}, "endingSequence"),
        ({"maxMessagesPerTrigger": "100"}, "maxMessagesPerTrigger"),
        ({"failOnDataLoss": "maybe"}, "failOnDataLoss"),
        ({"readMode": "fast"}, "readMode"),
        ({"subjects": "a..b"}, "subjects"),
        ({"password": "p"}, "password"),
        ({"timeout": "-1"}, "timeout"),
    ],
)
def test_bad_batch_read_options_name_the_option(options, field):
    raw = {"servers": "nats://127.0.0.1:4222", "stream": "S", **options}
    if field == "servers":
        del raw["servers"]
    if field == "stream" and "stream" not in options:
        del raw["stream"]
    with pytest.raises((errors.InvalidArgumentError, errors.InvalidTypeError)) as info:
        parse_read_options(raw, streaming=False)
    assert info.value.field == field


def test_streaming_only_and_batch_only_options():
    base = {"servers": "nats://127.0.0.1:4222", "stream": "S"}
    with pytest.raises(errors.InvalidArgumentError, match="endingSequence"):
        parse_read_options({**base, "endingSequence": "10"}, streaming=True)
    options = parse_read_options({**base, "MAXMESSAGESPERTRIGGER": "50", "subjects": "a.*, b.>"}, streaming=True)
    assert options.max_messages_per_trigger == 50
    assert options.subjects == ("a.*", "b.>")
    assert options.starting_sequence == "latest"
    assert parse_read_options(base, streaming=False).starting_sequence == "earliest"
    moment = parse_read_options({**base, "startingTime": "2025-01-31T12:00:00"}, streaming=False).starting_time
    assert moment == dt.datetime(2025, 1, 31, 12, tzinfo=dt.timezone.utc)


def test_bad_options_fail_the_spark_query_with_the_option_named(spark, nats_server, new_stream):
    stream = new_stream()
    with pytest.raises(PySparkException, match="numPartitions"):
        source(spark, nats_server.url, stream.name, numPartitions="zero").collect()
    with pytest.raises(PySparkException, match="does not exist"):
        source(spark, nats_server.url, "NOSUCHSTREAM").collect()
    df = spark.createDataFrame([("x",)], "payload STRING")
    with pytest.raises(PySparkException, match="data"):
        df.write.format("jetstream").option("servers", nats_server.url).option("subject", "x").mode("append").save()
    good = spark.createDataFrame([(f"{stream.name}.a", b"x")], "subject STRING, data BINARY")
    with pytest.raises(PySparkException, match="append-only"):
        good.write.format("jetstream").option("servers", nats_server.url).mode("overwrite").save()
    with pytest.raises(PySparkException, match="msgIdColumn"):
        (
            good.write.format("jetstream")
            .option("servers", nats_server.url)
            .option("msgIdColumn", "nope")
            .mode("append")
            .save()
        )
    assert stream.info().state.messages == 0


def test_write_options():
    with pytest.raises(errors.InvalidArgumentError) as info:
        parse_write_options({"servers": "nats://h:1", "subject": "a.*"})
    assert info.value.field == "subject"
    with pytest.raises(errors.InvalidArgumentError) as info:
        parse_write_options({"servers": "nats://h:1", "maxInFlight": "0"})
    assert info.value.field == "maxInFlight"
    options = parse_write_options({"servers": "nats://h:1, nats://g:2", "password": " secret ", "user": "u"})
    assert options.connection.servers == ("nats://h:1", "nats://g:2")
    assert "secret" not in repr(options)


def test_plan_ranges_are_contiguous_and_respect_the_minimum_size():
    assert plan_ranges(1, 100, 4, 10) == [(1, 25), (26, 50), (51, 75), (76, 100)]
    assert plan_ranges(1, 100, 4, 40) == [(1, 50), (51, 100)]
    assert plan_ranges(5, 7, 4, 10) == [(5, 7)]
    assert plan_ranges(10, 9, 4, 1) == []
    assert plan_ranges(1, 10, 3, 1) == [(1, 4), (5, 7), (8, 10)]


def test_the_core_package_does_not_import_pyspark():
    import subprocess

    code = "import jetstream_sync, jetstream_sync.direct, sys; assert 'pyspark' not in sys.modules, 'pyspark'"
    subprocess.run([sys.executable, "-c", code], check=True)


# -- the figure ---------------------------------------------------------------------------------------------------


def _spark_connections(server) -> int:
    import urllib.request

    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(f"{server.monitor_url}/connz?limit=1024", timeout=5) as response:
        conns = json.loads(response.read())["connections"]
    return sum(1 for c in conns if c.get("name") == "jetstream-sync-spark")


def test_workers_reuse_one_client_per_process(spark, nats_server, js, new_stream):
    """Reads of 4 tasks each add no connections once the Python workers have theirs (a client per task would
    add 4 per read). The level itself counts every live Python worker of the session."""
    stream = new_stream()
    publish(js, stream.name, 1000)
    counts = []
    for _ in range(5):
        assert source(spark, nats_server.url, stream.name, numPartitions=4, minPartitionSize=10).count() == 1000
        counts.append(_spark_connections(nats_server))
    assert counts[-1] - counts[0] <= 2 and max(counts) <= 16, counts


def test_clients_are_cached_per_process_and_a_forked_child_gets_its_own(nats_server):
    import subprocess

    code = f"""
import os
from jetstream_sync.integrations.spark.options import ConnectionOptions
from jetstream_sync.integrations._clients import process_client as client_for
options = ConnectionOptions(servers=({nats_server.url!r},))
parent = client_for(options)
assert client_for(options) is parent
pid = os.fork()
if pid == 0:
    child = client_for(options)
    ok = child is not parent and child.jetstream().account_info() is not None
    os._exit(0 if ok else 1)
_, status = os.waitpid(pid, 0)
assert os.waitstatus_to_exitcode(status) == 0, status
assert client_for(options) is parent and parent.is_connected
"""
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    """A server with TLS (a throwaway CA) and a user/password; yields (server, CA file)."""
    trustme = pytest.importorskip("trustme")
    from jetstream_sync.testing import EmbeddedServer

    directory = tmp_path_factory.mktemp("secured")
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost")
    cert.private_key_pem.write_to_path(str(directory / "server.key"))
    cert.cert_chain_pems[0].write_to_path(str(directory / "server.pem"))
    ca.cert_pem.write_to_path(str(directory / "ca.pem"))
    config = (
        f'tls {{\n  cert_file: "{directory / "server.pem"}"\n  key_file: "{directory / "server.key"}"\n}}\n'
        "authorization { user: spark, password: s3cret }\n"
    )
    with EmbeddedServer(config=config) as server:
        yield server, str(directory / "ca.pem")


def test_credentials_and_tls_reach_the_executors(spark, secured, tmp_path):
    server, ca_file = secured
    with jetstream_sync.connect(
        server.url, user="spark", password="s3cret", tls=ssl.create_default_context(cafile=ca_file)
    ) as client:
        js = client.jetstream()
        js.create_stream(StreamConfig(name="SECURE", subjects=["SECURE.>"], allow_direct=True))
        publish(js, "SECURE", 50)
    common = {"user": "spark", "password": "s3cret", "tlsCaFile": ca_file}
    assert seqs(source(spark, server.url, "SECURE", **common)) == list(range(1, 51))
    (
        spark.createDataFrame([("SECURE.w", b"x")], "subject STRING, data BINARY")
        .write.format("jetstream")
        .options(servers=server.url, **common)
        .mode("append")
        .save()
    )
    assert seqs(source(spark, server.url, "SECURE", **common)) == list(range(1, 52))
    with pytest.raises(PySparkException, match="rejected the credentials"):
        source(spark, server.url, "SECURE", **{**common, "password": "wrong"}).count()
    with pytest.raises(PySparkException, match="tlsCaFile"):
        source(spark, server.url, "SECURE", **{**common, "tlsCaFile": str(tmp_path / "missing.pem")}).count()


@pytest.mark.timeout(300)
def test_the_pipeline_example_runs_in_one_command():
    import subprocess

    example = REPO_ROOT / "examples" / "spark_pipeline.py"
    # without SPARK_LOCAL_IP: the example keeps Spark on loopback itself
    env = {key: value for key, value in os.environ.items() if key != "SPARK_LOCAL_IP"}
    result = subprocess.run(
        [sys.executable, str(example)], capture_output=True, text=True, timeout=280, check=False, env=env
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "read 500 orders in micro-batches [0, 1, 2]" in result.stdout
    assert "read 300 orders in micro-batches [3, 4]" in result.stdout
    # quiet: no Spark log line, no notice that it bound another address; only the JVM's own module notice is left
    noise = [line for line in result.stderr.splitlines() if not line.startswith("WARNING: Using incubator modules")]
    assert noise == [], result.stderr[-3000:]


@pytest.mark.spark
def test_format_jetstream_is_registered_automatically(nats_server, tmp_path):
    """A fresh Spark session finds format("jetstream"), "jetstream-kv" and "jetstream-objects" with no
    register() call (PySpark's pyspark_* lookup, one module per format)."""
    import subprocess

    stream = "AUTOREG"
    with jetstream_sync.connect(nats_server.url) as nc:
        js = nc.jetstream()
        js.create_or_update_stream(jetstream_sync.StreamConfig(name=stream, subjects=["autoreg.>"]))
        for i in range(3):
            js.publish("autoreg.x", b"%d" % i)
        js.create_key_value(jetstream_sync.KeyValueConfig(bucket="AUTOREG_KV")).put("k", b"v")
        js.create_object_store(jetstream_sync.ObjectStoreConfig(bucket="AUTOREG_OBJ")).put("o", b"object")
    url = nats_server.url
    script = f"""
from pyspark.sql import SparkSession
spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
         .config("spark.sql.shuffle.partitions", "1").getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
rows = (spark.read.format("jetstream").option("servers", {url!r}).option("stream", {stream!r})
        .load().orderBy("seq").collect())
print("ROWS", [bytes(r.data).decode() for r in rows])
kv = spark.read.format("jetstream-kv").option("servers", {url!r}).option("bucket", "AUTOREG_KV").load().collect()
print("KV", [(r.key, bytes(r.value).decode()) for r in kv])
objects = spark.read.format("jetstream-objects").option("servers", {url!r}).load("AUTOREG_OBJ").collect()
print("OBJECTS", [(r.name, bytes(r.content).decode()) for r in objects])
spark.stop()
"""
    # A regular install puts pyspark_jetstream on a path entry, where PySpark's pkgutil scan finds it; an
    # editable install hides it behind an import hook, so the project root stands in for site-packages here.
    root = str(REPO_ROOT)
    env = {
        **os.environ,
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])),
    }
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=180, env=env, cwd=tmp_path
    )
    assert "ROWS ['0', '1', '2']" in result.stdout, result.stderr[-3000:]
    assert "KV [('k', 'v')]" in result.stdout, result.stderr[-3000:]
    assert "OBJECTS [('o', 'object')]" in result.stdout, result.stderr[-3000:]
