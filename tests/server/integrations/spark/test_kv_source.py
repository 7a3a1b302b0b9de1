"""format("jetstream-kv"): a key-value bucket as a table, against a real nats-server on local Spark.

Batch reads (current values, as of a revision, markers, key filters, partitions), the change stream (puts,
deletes, purges across triggers from one checkpoint), the sink (puts, deletes, compare-and-set) and the example.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator

import pytest

pytest.importorskip("pyarrow")
pytest.importorskip("pyspark", minversion="4.2")
if shutil.which("java") is None:  # pragma: no cover - depends on the machine
    pytest.skip("PySpark needs Java on PATH", allow_module_level=True)

from pyspark.errors import PySparkException

import jetstream_sync
from jetstream_sync import KeyValueConfig, errors
from jetstream_sync.integrations.spark.kv_options import parse_kv_read_options, parse_kv_write_options
from jetstream_sync.integrations.spark.kv_sink import plan_kv_columns
from jetstream_sync.integrations.spark.kv_source import KV_SCHEMA, JetStreamKeyValueDataSource
from tests.helpers import REPO_ROOT

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def kv_spark(spark):
    spark.dataSource.register(JetStreamKeyValueDataSource)
    return spark


@pytest.fixture
def new_bucket(js) -> Iterator:
    """Make buckets named for this test; deleted afterwards (only these: other tests share the server)."""
    made: list[str] = []

    def make(history: int = 5) -> jetstream_sync.KeyValue:
        name = "KV" + uuid.uuid4().hex[:10].upper()
        made.append(name)
        return js.create_key_value(KeyValueConfig(bucket=name, history=history))

    yield make
    for name in made:
        js.delete_key_value(name)


def kv_read(spark, url: str, bucket: str, **options: object):
    reader = spark.read.format("jetstream-kv").option("servers", url).option("bucket", bucket)
    for key, value in options.items():
        reader = reader.option(key, str(value))
    return reader.load()


def kv_stream(spark, url: str, bucket: str, **options: object):
    reader = spark.readStream.format("jetstream-kv").option("servers", url).option("bucket", bucket)
    for key, value in options.items():
        reader = reader.option(key, str(value))
    return reader.load()


def table(df) -> dict[str, tuple[bytes | None, int, str]]:
    """key -> (value, revision, operation), checking one row per key."""
    rows = df.collect()
    out = {r.key: (None if r.value is None else bytes(r.value), r.revision, r.operation) for r in rows}
    assert len(out) == len(rows), "a key appears twice"
    return out


def run_available_now(builder, timeout: float = 120.0):
    query = builder.trigger(availableNow=True).start()
    try:
        assert query.awaitTermination(timeout), "the availableNow query did not finish"
    finally:
        if query.isActive:
            query.stop()
    if query.exception() is not None:
        raise query.exception()
    return query


# -- batch reads --------------------------------------------------------------------------------------------------


def test_batch_read_is_the_current_value_of_every_key(kv_spark, nats_server, new_bucket):
    kv = new_bucket()
    kv.put("a", b"1")
    kv.put("b", b"1")
    kv.put("a", b"2")
    kv.put("gone", b"x")
    kv.delete("gone")
    kv.put("purged", b"y")
    kv.purge("purged")
    df = kv_read(kv_spark, nats_server.url, kv.bucket)
    assert df.schema == KV_SCHEMA
    assert table(df) == {
        "a": (b"2", kv.get("a").revision, "PUT"),
        "b": (b"1", kv.get("b").revision, "PUT"),
    }
    created = df.where("key = 'a'").collect()[0].created  # session time zone UTC: a naive UTC datetime
    assert abs((created - kv.get("a").created.replace(tzinfo=None)).total_seconds()) < 1e-3

    with_markers = table(kv_read(kv_spark, nats_server.url, kv.bucket, includeDeletes="true"))
    assert with_markers["gone"][0] is None and with_markers["gone"][2] == "DEL"
    assert with_markers["purged"][0] is None and with_markers["purged"][2] == "PURGE"
    assert {k: v for k, v in with_markers.items() if v[2] == "PUT"} == table(df)


def test_batch_read_as_of_a_revision(kv_spark, nats_server, new_bucket):
    kv = new_bucket()
    first = kv.put("a", b"old")
    kv.put("b", b"b1")
    kv.put("c", b"c1")
    as_of = kv.put("b", b"b2")
    kv.put("a", b"new")
    kv.delete("b")
    kv.put("d", b"later")
    snapshot = table(kv_read(kv_spark, nats_server.url, kv.bucket, asOfRevision=as_of))
    assert snapshot == {"a": (b"old", first, "PUT"), "b": (b"b2", as_of, "PUT"), "c": (b"c1", as_of - 1, "PUT")}
    now = table(kv_read(kv_spark, nats_server.url, kv.bucket))
    assert set(now) == {"a", "c", "d"}
    with pytest.raises(PySparkException, match="asOfRevision"):
        kv_read(kv_spark, nats_server.url, kv.bucket, asOfRevision=10_000).collect()


def test_key_filters(kv_spark, nats_server, new_bucket):
    kv = new_bucket()
    for key in ("users.1", "users.2", "users.eu.3", "orders.1", "other"):
        kv.put(key, key.encode())
    assert set(table(kv_read(kv_spark, nats_server.url, kv.bucket, keys="users.*"))) == {"users.1", "users.2"}
    assert set(table(kv_read(kv_spark, nats_server.url, kv.bucket, keys="users.>, other"))) == {
        "users.1",
        "users.2",
        "users.eu.3",
        "other",
    }
    assert table(kv_read(kv_spark, nats_server.url, kv.bucket, keys="nothing.>")) == {}


def test_a_large_bucket_is_read_in_partitions_and_the_walk_agrees(kv_spark, nats_server, js, new_bucket):
    kv = new_bucket(history=1)
    futures = [js.publish_async(f"{kv.prefix}k{i:05d}", b"v%d" % i) for i in range(2500)]
    futures += [js.publish_async(f"{kv.prefix}k{i:05d}", b"w%d" % i) for i in range(0, 2500, 7)]
    js.publish_async_complete(timeout=60)
    assert all(not f.result().duplicate for f in futures)
    df = kv_read(kv_spark, nats_server.url, kv.bucket, numPartitions=4, minPartitionSize=600)
    assert df.rdd.getNumPartitions() == 4
    direct = table(df)
    assert len(direct) == 2500
    assert direct["k00007"][0] == b"w7" and direct["k00008"][0] == b"v8"
    walked = table(kv_read(kv_spark, nats_server.url, kv.bucket, readMode="consumer"))
    assert walked == direct


# -- the change stream --------------------------------------------------------------------------------------------


def test_change_stream_across_two_triggers_from_one_checkpoint_is_exactly_once(
    kv_spark, nats_server, new_bucket, tmp_path
):
    kv = new_bucket(history=10)
    expected: list[tuple[str, str, bytes | None, int]] = []
    expected.append(("a", "PUT", b"1", kv.put("a", b"1")))
    expected.append(("b", "PUT", b"1", kv.put("b", b"1")))
    expected.append(("a", "PUT", b"2", kv.put("a", b"2")))
    kv.delete("a")
    expected.append(("a", "DEL", None, kv.history("a")[-1].revision))
    collected: list[tuple[str, str, bytes | None, int]] = []
    batches: list[int] = []

    def sink(df, batch_id: int) -> None:
        batches.append(batch_id)
        for r in df.orderBy("revision").collect():
            collected.append((r.key, r.operation, None if r.value is None else bytes(r.value), r.revision))

    def build():
        changes = kv_stream(kv_spark, nats_server.url, kv.bucket, startingRevision="earliest", maxMessagesPerTrigger=2)
        return changes.writeStream.foreachBatch(sink).option("checkpointLocation", str(tmp_path / "ckpt"))

    run_available_now(build())
    assert collected == expected
    assert len(batches) == 2  # admission control: 2 + 2
    history = [(e.key, e.operation.value, e.value or None, e.revision) for e in kv.history("a")]
    assert [c for c in collected if c[0] == "a"] == history  # what the KV API reports

    expected.append(("c", "PUT", b"3", kv.put("c", b"3")))
    kv.purge("b")
    expected.append(("b", "PURGE", None, kv.history("b")[-1].revision))
    expected.append(("a", "PUT", b"4", kv.put("a", b"4")))
    run_available_now(build())
    assert collected == expected  # the second run reads only what is new, each change once
    assert len({c[3] for c in collected}) == len(collected)


def test_change_stream_starts_at_latest_by_default_and_filters_keys(kv_spark, nats_server, new_bucket, tmp_path):
    kv = new_bucket()
    kv.put("x.1", b"before")
    collected: list[tuple[str, str]] = []

    def build():
        changes = kv_stream(kv_spark, nats_server.url, kv.bucket, keys="x.*")
        return changes.writeStream.foreachBatch(
            lambda df, _: collected.extend((r.key, r.operation) for r in df.orderBy("revision").collect())
        ).option("checkpointLocation", str(tmp_path / "ckpt"))

    run_available_now(build())
    assert collected == []
    kv.put("x.1", b"after")
    kv.put("y.1", b"other key")
    kv.delete("x.2")
    run_available_now(build())
    assert collected == [("x.1", "PUT"), ("x.2", "DEL")]


# -- the sink -----------------------------------------------------------------------------------------------------


def kv_write(df, url: str, bucket: str, **options: object) -> None:
    writer = df.write.format("jetstream-kv").mode("append").option("servers", url).option("bucket", bucket)
    for key, value in options.items():
        writer = writer.option(key, str(value))
    writer.save()


def test_sink_puts_and_deletes_read_back_in_the_kv_api(kv_spark, nats_server, new_bucket):
    kv = new_bucket()
    kv.put("stale", b"x")
    rows = [(f"k{i}", f"v{i}") for i in range(50)]
    df = kv_spark.createDataFrame(rows, "key STRING, value STRING").repartition(3)
    kv_write(df, nats_server.url, kv.bucket)
    kv_write(df, nats_server.url, kv.bucket)  # a retry: the same values again, nothing else changes
    assert {k: kv.get(k).value for k in sorted(kv.keys())} == {**{k: v.encode() for k, v in rows}, "stale": b"x"}
    assert len(kv.history("k7")) == 2
    deletes = kv_spark.createDataFrame(
        [("k1", None, "DEL"), ("stale", None, "PURGE"), ("k2", b"new", None)],
        "key STRING, value BINARY, operation STRING",
    )
    kv_write(deletes, nats_server.url, kv.bucket)
    with pytest.raises(errors.KeyDeletedError):
        kv.get("k1")
    assert [e.operation.value for e in kv.history("stale")] == ["PURGE"]
    assert kv.get("k2").value == b"new"


def test_sink_compare_and_set_conflict_names_the_key_and_revisions(kv_spark, nats_server, new_bucket):
    kv = new_bucket()
    kv.put("a", b"1")
    kv.put("b", b"1")
    current = kv_read(kv_spark, nats_server.url, kv.bucket).selectExpr(
        "key", "concat(cast(value AS STRING), '+') AS value", "revision"
    )
    snapshot = current.collect()  # the revisions the update is based on
    update = kv_spark.createDataFrame(snapshot, "key STRING, value STRING, revision BIGINT")
    kv_write(update, nats_server.url, kv.bucket, compareAndSet="true")
    assert kv.get("a").value == b"1+" and kv.get("b").value == b"1+"
    # The same write again (a retried task, a replayed batch): the keys already hold the rows' values.
    kv_write(update, nats_server.url, kv.bucket, compareAndSet="true")
    assert len(kv.history("a")) == 2
    # Create-only rows (revision null): a new key is created, an existing one with another value conflicts.
    create = kv_spark.createDataFrame([("new", "n", None)], "key STRING, value STRING, revision BIGINT")
    kv_write(create, nats_server.url, kv.bucket, compareAndSet="true")
    assert kv.get("new").value == b"n"
    moved = kv.put("a", b"someone else")
    stale = kv_spark.createDataFrame([("a", "mine", snapshot[0].revision)], "key STRING, value STRING, revision BIGINT")
    with pytest.raises(PySparkException, match="KeyValueWriteConflictError") as failure:
        kv_write(stale, nats_server.url, kv.bucket, compareAndSet="true")
    assert f"key 'a': the row expected revision {snapshot[0].revision} but the key is at revision {moved}" in str(
        failure.value
    )
    assert kv.get("a").value == b"someone else"
    taken = kv_spark.createDataFrame([("new", "other", 0)], "key STRING, value STRING, revision BIGINT")
    with pytest.raises(PySparkException, match="expected no live value"):
        kv_write(taken, nats_server.url, kv.bucket, compareAndSet="true")


def test_change_stream_into_another_bucket_with_the_stream_writer(kv_spark, nats_server, new_bucket, tmp_path):
    """CDC rows (key, value, revision, created, operation) write straight into another bucket: puts, deletes and
    purges arrive, in order within a key (one task: maxMessagesPerTrigger keeps batches small, one partition)."""
    source, replica = new_bucket(), new_bucket()
    source.put("a", b"1")
    source.put("b", b"1")

    def build():
        changes = kv_stream(kv_spark, nats_server.url, source.bucket, startingRevision="earliest")
        return (
            changes.coalesce(1)
            .writeStream.format("jetstream-kv")
            .option("servers", nats_server.url)
            .option("bucket", replica.bucket)
            .option("checkpointLocation", str(tmp_path / "ckpt"))
        )

    run_available_now(build())
    source.put("a", b"2")
    source.delete("b")
    source.put("c", b"3")
    source.purge("c")
    run_available_now(build())
    assert sorted(replica.keys()) == sorted(source.keys()) == ["a"]
    assert replica.get("a").value == b"2"
    assert [(e.operation.value, e.value) for e in replica.history("b")] == [("PUT", b"1"), ("DEL", b"")]
    assert [e.operation.value for e in replica.history("c")] == ["PURGE"]


# -- options ------------------------------------------------------------------------------------------------------

BASE = {"servers": "nats://127.0.0.1:4222", "bucket": "B"}


@pytest.mark.parametrize(
    ("options", "streaming", "field"),
    [
        ({"bucket": None}, False, "bucket"),
        ({"bucket": "a.b"}, False, "bucket"),
        ({"servers": None}, False, "servers"),
        ({"keys": "a..b"}, False, "keys"),
        ({"keys": " , "}, False, "keys"),
        ({"asOfRevision": "0"}, False, "asOfRevision"),
        ({"asOfRevision": "soon"}, False, "asOfRevision"),
        ({"asOfRevision": "5"}, True, "asOfRevision"),
        ({"includeDeletes": "maybe"}, False, "includeDeletes"),
        ({"includeDeletes": "true"}, True, "includeDeletes"),
        ({"startingRevision": "5"}, False, "startingRevision"),
        ({"startingRevision": "first"}, True, "startingRevision"),
        ({"startingRevision": "5", "startingTime": "2025-01-01T00:00:00Z"}, True, "startingTime"),
        ({"maxMessagesPerTrigger": "0"}, True, "maxMessagesPerTrigger"),
        ({"maxMessagesPerTrigger": "10"}, False, "maxMessagesPerTrigger"),
        ({"readMode": "fast"}, False, "readMode"),
        ({"numPartitions": "0"}, False, "numPartitions"),
    ],
)
def test_bad_read_options_name_the_option(options, streaming, field):
    raw = {**BASE, **options}
    raw = {k: v for k, v in raw.items() if v is not None}
    with pytest.raises((errors.InvalidArgumentError, errors.InvalidTypeError)) as info:
        parse_kv_read_options(raw, streaming=streaming)
    assert info.value.field == field


def test_read_options_defaults_and_filters():
    batch = parse_kv_read_options({**BASE, "KEYS": "a.*, a.b, c"}, streaming=False)
    assert batch.keys == ("a.*", "c")  # a.b is covered by a.* (the server refuses overlapping filters)
    assert (batch.include_deletes, batch.as_of_revision, batch.stream) == (False, None, "KV_B")
    streaming = parse_kv_read_options({**BASE, "path": "P", "bucket": "B2"}, streaming=True)
    assert (streaming.bucket, streaming.starting_revision, streaming.fail_on_data_loss) == ("B2", "latest", False)
    assert parse_kv_read_options({**BASE, "keys": "x,>"}, streaming=True).keys == ()


@pytest.mark.parametrize(
    ("fields", "options", "field"),
    [
        ({"value": "string"}, {}, "key"),
        ({"key": "int", "value": "string"}, {}, "key"),
        ({"key": "string"}, {}, "value"),
        ({"key": "string", "value": "int"}, {}, "value"),
        ({"key": "string", "value": "string", "operation": "int"}, {}, "operation"),
        ({"key": "string", "value": "string"}, {"compareAndSet": "true"}, "compareAndSet"),
        ({"key": "string", "value": "string", "revision": "string"}, {"compareAndSet": "true"}, "revision"),
        ({"key": "string", "value": "string"}, {"compareAndSet": "perhaps"}, "compareAndSet"),
    ],
)
def test_bad_write_columns_and_options_name_them(fields, options, field):
    with pytest.raises(errors.InvalidArgumentError) as info:
        plan_kv_columns(fields, parse_kv_write_options({**BASE, **options}), overwrite=False)
    assert info.value.field == field


def test_overwrite_is_refused():
    with pytest.raises(errors.InvalidArgumentError) as info:
        plan_kv_columns({"key": "string", "value": "binary"}, parse_kv_write_options(BASE), overwrite=True)
    assert info.value.field == "mode"


# -- the example --------------------------------------------------------------------------------------------------


@pytest.mark.timeout(300)  # a new Spark and two queries: past the default 120 s when the machine is busy
def test_the_kv_cdc_example_runs_in_one_command():
    example = REPO_ROOT / "examples" / "spark_kv_cdc.py"
    # without SPARK_LOCAL_IP: the example keeps Spark on loopback itself
    env = {key: value for key, value in os.environ.items() if key != "SPARK_LOCAL_IP"}
    result = subprocess.run(
        [sys.executable, str(example)], capture_output=True, text=True, timeout=280, check=False, env=env
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "run 1: 4 changes (2 PUT, 1 DEL, 1 PURGE)" in result.stdout  # the purge took carol's put with it
    assert "run 2: 3 changes (2 PUT, 1 DEL, 0 PURGE)" in result.stdout
    assert "the replica matches the source: True" in result.stdout
    # quiet: no Spark log line, no notice that it bound another address; only the JVM's own module notice is left
    noise = [line for line in result.stderr.splitlines() if not line.startswith("WARNING: Using incubator modules")]
    assert noise == [], result.stderr[-3000:]
