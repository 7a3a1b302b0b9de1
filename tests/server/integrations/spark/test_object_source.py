"""format("jetstream-objects"): an object store bucket as binary files, against a real nats-server on local
Spark (the session's ``spark`` fixture). The executor code (``read_objects``) is also driven in-process for
what cannot be timed inside one Spark action (an object replaced or deleted between planning and reading)."""

from __future__ import annotations

import hashlib
import logging
import os
import pickle
import shutil
import uuid
from collections.abc import Iterator

import pytest

pytest.importorskip("pyarrow")
pytest.importorskip("pyspark", minversion="4.2")
if shutil.which("java") is None:  # pragma: no cover - depends on the machine
    pytest.skip("PySpark needs Java on PATH", allow_module_level=True)

from pyspark.errors import PySparkException
from pyspark.sql.pandas.types import to_arrow_schema

from jetstream_sync import ObjectMeta, ObjectStore, ObjectStoreConfig, errors
from jetstream_sync.integrations.spark import object_source
from jetstream_sync.integrations.spark.object_source import (
    OBJECTS_SCHEMA,
    JetStreamObjectsDataSource,
    ObjectTooLargeError,
    glob_pattern,
    parse_object_options,
    plan_objects,
    plan_partitions,
    read_objects,
)
from tests.server.jetstream.object_store.obshelpers import CHUNK, digest, replace_chunk, with_nats_py

pytestmark = pytest.mark.spark

ARROW = to_arrow_schema(OBJECTS_SCHEMA, timezone="UTC")


@pytest.fixture(scope="module")
def registered(spark):
    spark.dataSource.register(JetStreamObjectsDataSource)
    return spark


@pytest.fixture
def new_bucket(js) -> Iterator:
    """Make object stores named for this test; deleted afterwards (only these: other tests share the server)."""
    made: list[str] = []

    def make() -> ObjectStore:
        name = "SPOBJ" + uuid.uuid4().hex[:10].upper()
        made.append(name)
        return js.create_object_store(ObjectStoreConfig(bucket=name))

    yield make
    for name in made:
        js.delete_object_store(name)


def objects(spark, url: str, bucket: str | None, **options: object):
    reader = spark.read.format("jetstream-objects").option("servers", url)
    if bucket is not None:
        reader = reader.option("bucket", bucket)
    for key, value in options.items():
        reader = reader.option(key, str(value))
    return reader.load()


def _options(url: str, bucket: str, **options: str):
    return parse_object_options({"servers": url, "bucket": bucket, **options})


def _sha(data: bytes) -> str:
    return digest(data)


# -- Spark reads ---------------------------------------------------------------------------------------------------


@pytest.mark.timeout(300)
def test_objects_of_every_size_read_back_across_partitions(registered, nats_server, new_bucket):
    obs = new_bucket()
    blobs = {
        "empty": b"",
        "tiny": b"x",
        "one-chunk": os.urandom(CHUNK),
        "dir/many-chunks": os.urandom(CHUNK * 9 + 17),  # 10 chunks, the last short
        "dir/small-chunks": os.urandom(300_000),  # 30 chunks of 10 KB
        "with-meta": b"described",
        "big": os.urandom(2 * 1024 * 1024 + 5),  # 17 chunks
    }
    infos = {}
    for name, data in blobs.items():
        meta = None
        if name == "dir/small-chunks":
            meta = ObjectMeta(max_chunk_size=10_000)
        elif name == "with-meta":
            meta = ObjectMeta(description="a description", headers={"X-Kind": ["a", "b"]})
        infos[name] = obs.put(name, data, meta=meta)
    obs.put("deleted", b"gone")
    obs.delete("deleted")
    infos["link"] = obs.add_link("link", infos["tiny"])
    obs.add_bucket_link("bucket-link", obs)

    df = objects(registered, nats_server.url, obs.bucket, numPartitions=3)
    assert df.schema == OBJECTS_SCHEMA
    assert df.rdd.getNumPartitions() == 3
    rows = {row.name: row for row in df.collect()}
    assert sorted(rows) == sorted([*blobs, "link"])  # no deleted object, no link to a whole bucket
    for name, data in blobs.items():
        row, info = rows[name], infos[name]
        assert bytes(row.content) == data, name
        assert row.size == len(data)
        if data:
            assert row.digest == info.digest == _sha(data)
        assert row.bucket == obs.bucket
        assert abs(row.modified.timestamp() - obs.info(name).mtime.timestamp()) < 1e-5
    assert rows["with-meta"].description == "a description"
    assert rows["with-meta"].headers == {"X-Kind": ["a", "b"]}
    assert rows["tiny"].description is None and rows["tiny"].headers is None
    assert bytes(rows["link"].content) == b"x" and rows["link"].digest == infos["tiny"].digest


@pytest.mark.timeout(300)
def test_path_glob_filter_include_content_and_the_load_path(registered, nats_server, new_bucket):
    obs = new_bucket()
    for name in ("a.txt", "dir/b.txt", "c.bin", "d.TXT"):
        obs.put(name, name.encode())
    names = sorted(r.name for r in objects(registered, nats_server.url, obs.bucket, pathGlobFilter="*.txt").collect())
    assert names == ["a.txt", "dir/b.txt"]
    df = (
        registered.read.format("jetstream-objects")
        .option("servers", nats_server.url)
        .option("pathGlobFilter", "{a,c}.*")
        .option("includeContent", "false")
        .load(obs.bucket)
    )
    rows = sorted(df.collect(), key=lambda r: r.name)
    assert [(r.name, r.content, r.size, r.digest) for r in rows] == [
        ("a.txt", None, 5, _sha(b"a.txt")),
        ("c.bin", None, 5, _sha(b"c.bin")),
    ]
    assert objects(registered, nats_server.url, obs.bucket, pathGlobFilter="nothing*").count() == 0
    assert objects(registered, nats_server.url, new_bucket().bucket).count() == 0  # an empty bucket


@pytest.mark.timeout(300)
def test_a_corrupted_chunk_fails_the_query_with_digest_mismatch(registered, nats_server, js, new_bucket):
    obs = new_bucket()
    obs.put("fine", b"fine")
    data = os.urandom(3 * CHUNK)
    info = obs.put("corrupt", data)
    replace_chunk(js, obs, info, 1, os.urandom(CHUNK))  # same size, other bytes
    with pytest.raises(PySparkException, match=r"DigestMismatchError.*'corrupt'.*a chunk was lost or changed"):
        objects(registered, nats_server.url, obs.bucket).collect()
    # includeContent=false reads no data: the metadata is listed as recorded
    rows = objects(registered, nats_server.url, obs.bucket, includeContent="false").collect()
    assert sorted((r.name, r.digest) for r in rows) == [("corrupt", _sha(data)), ("fine", _sha(b"fine"))]
    # and the executor code raises the object store's own typed error
    options = _options(nats_server.url, obs.bucket, pathGlobFilter="corrupt")
    with pytest.raises(errors.DigestMismatchError, match="a chunk was lost or changed"):
        list(read_objects(options, plan_objects(options), ARROW))


@pytest.mark.timeout(300)
def test_bad_options_fail_the_spark_query_with_the_option_named(registered, nats_server, new_bucket):
    with pytest.raises(PySparkException, match="numPartitions"):
        objects(registered, nats_server.url, "B", numPartitions="0").collect()
    with pytest.raises(PySparkException, match="bucket: is required"):
        objects(registered, nats_server.url, None).collect()
    with pytest.raises(PySparkException, match=r"'NOSUCHBUCKET' does not exist.*option 'bucket'"):
        objects(registered, nats_server.url, "NOSUCHBUCKET").collect()
    with pytest.raises(PySparkException, match="schema"):
        registered.read.format("jetstream-objects").schema("name STRING").option("servers", nats_server.url).load(
            "B"
        ).collect()


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ({"bucket": "B"}, "servers"),
        ({"servers": "nats://127.0.0.1:1"}, "bucket"),
        ({"servers": "nats://127.0.0.1:1", "bucket": "a.b"}, "bucket"),
        ({"servers": "nats://127.0.0.1:1", "bucket": "B", "pathGlobFilter": "[ab"}, "pathGlobFilter"),
        ({"servers": "nats://127.0.0.1:1", "bucket": "B", "pathGlobFilter": "{a,b"}, "pathGlobFilter"),
        ({"servers": "nats://127.0.0.1:1", "bucket": "B", "pathGlobFilter": "[z-a]"}, "pathGlobFilter"),
        ({"servers": "nats://127.0.0.1:1", "bucket": "B", "pathGlobFilter": "a\\"}, "pathGlobFilter"),
        ({"servers": "nats://127.0.0.1:1", "bucket": "B", "includeContent": "maybe"}, "includeContent"),
        ({"servers": "nats://127.0.0.1:1", "bucket": "B", "ignoreMissingObjects": "2"}, "ignoreMissingObjects"),
        ({"servers": "nats://127.0.0.1:1", "bucket": "B", "numPartitions": "-1"}, "numPartitions"),
        ({"servers": "nats://127.0.0.1:1", "bucket": "B", "listTimeout": "0"}, "listTimeout"),
        ({"servers": "nats://127.0.0.1:1", "bucket": "B", "timeout": "soon"}, "timeout"),
    ],
)
def test_bad_options_are_named(raw, field):
    with pytest.raises(errors.InvalidArgumentError) as info:
        parse_object_options(raw)
    assert info.value.field == field


def test_options_are_case_insensitive_and_unknown_ones_warned(caplog):
    with caplog.at_level(logging.WARNING, "jetstream_sync.spark"):
        options = parse_object_options(
            {"SERVERS": "nats://127.0.0.1:1", "path": "B", "PATHGLOBFILTER": "*.png", "numpartitions": "7", "x": "1"}
        )
    assert (options.bucket, options.path_glob_filter, options.num_partitions) == ("B", "*.png", 7)
    assert options.include_content and not options.ignore_missing_objects
    assert "ignoring unknown option 'x'" in caplog.text


def test_glob_pattern_follows_hadoop_syntax():
    def matches(glob: str, name: str) -> bool:
        return glob_pattern("pathGlobFilter", glob).fullmatch(name) is not None

    assert matches("*.png", "a.png") and matches("*.png", "dir/sub/a.png") and not matches("*.png", "a.png.bak")
    assert matches("?.txt", "a.txt") and not matches("?.txt", "ab.txt")
    assert matches("[ab]*", "b1") and not matches("[ab]*", "c1")
    assert matches("[^ab]*", "c1") and matches("[!ab]*", "c1") and not matches("[!ab]*", "a1")
    assert matches("[a-c]x", "bx") and not matches("[a-c]x", "dx")
    assert matches("{img,doc}/*.{png,jpg}", "doc/x.jpg") and not matches("{img,doc}/*.{png,jpg}", "vid/x.jpg")
    assert matches("{a,{b,c}d}", "cd") and not matches("{a,{b,c}d}", "c")
    assert matches("a\\*b", "a*b") and not matches("a\\*b", "axb")
    assert matches("a+b(1).txt", "a+b(1).txt") and not matches("a.b", "axb")


def test_partitions_are_balanced_by_size():
    from jetstream_sync import ObjectInfo
    from jetstream_sync.integrations.spark.object_source import PlannedObject

    def planned(name: str, size: int) -> PlannedObject:
        return PlannedObject(name, "B", ObjectInfo(name=name, bucket="B", nuid=name, size=size))

    objs = [planned("huge", 10_000_000), *(planned(f"s{i}", 1_000_000) for i in range(10)), planned("e", 0)]
    parts = plan_partitions(objs, 3)
    loads = sorted(sum(o.source.size for o in p.objects) for p in parts)
    assert [p.index for p in parts] == [0, 1, 2]
    assert loads == [5_000_000, 5_000_000, 10_000_000]
    assert sorted(o.name for p in parts for o in p.objects) == sorted(o.name for o in objs)
    assert all(list(p.objects) == sorted(p.objects, key=lambda o: o.name) for p in parts)
    assert len(plan_partitions(objs[:2], 8)) == 2  # never an empty partition
    assert plan_partitions([], 4) == []
    many_empty = plan_partitions([planned(f"e{i}", 0) for i in range(8)], 4)
    assert [len(p.objects) for p in many_empty] == [2, 2, 2, 2]


@pytest.mark.timeout(300)
def test_an_object_put_by_nats_py_reads_back_through_spark(registered, nats_server, js, new_bucket):
    bucket = new_bucket().bucket
    data = hashlib.sha256(b"nats-py").digest() * 20_000  # 640,000 bytes: 5 chunks

    async def body(njs):
        store = await njs.object_store(bucket)
        return await store.put("from/nats-py.bin", data)

    theirs = with_nats_py(nats_server.url, body)
    rows = objects(registered, nats_server.url, bucket).collect()
    assert [(r.name, bytes(r.content), r.size, r.digest) for r in rows] == [
        ("from/nats-py.bin", data, len(data), theirs.digest)
    ]
    assert theirs.digest == _sha(data)


# -- what happens between planning and reading (the executor code, in-process) -------------------------------------


def test_an_object_replaced_after_planning_is_read_as_its_newest_version_with_a_warning(
    nats_server, new_bucket, caplog
):
    obs = new_bucket()
    obs.put("a", b"old")
    obs.put("b", b"stays")
    options = _options(nats_server.url, obs.bucket)
    planned = plan_objects(options)
    new = os.urandom(CHUNK + 1)
    obs.put("a", new)
    with caplog.at_level(logging.WARNING, "jetstream_sync.spark"):
        batches = list(read_objects(options, planned, ARROW))
    rows = {r["name"]: r for b in batches for r in b.to_pylist()}
    assert rows["a"]["content"] == new and rows["a"]["size"] == len(new) and rows["a"]["digest"] == _sha(new)
    assert rows["b"]["content"] == b"stays"
    assert "'a' was replaced after the read was planned" in caplog.text


def test_an_object_deleted_after_planning_fails_the_task_unless_ignore_missing_objects(nats_server, new_bucket, caplog):
    obs = new_bucket()
    obs.put("a", b"doomed")
    obs.put("b", b"stays")
    options = _options(nats_server.url, obs.bucket)
    planned = plan_objects(options)
    obs.delete("a")
    with pytest.raises(errors.ObjectNotFoundError, match=r"'a' was deleted after the read was planned.*ignoreMissing"):
        list(read_objects(options, planned, ARROW))
    lenient = _options(nats_server.url, obs.bucket, ignoreMissingObjects="true")
    with caplog.at_level(logging.WARNING, "jetstream_sync.spark"):
        rows = [r for b in read_objects(lenient, planned, ARROW) for r in b.to_pylist()]
    assert [r["name"] for r in rows] == ["b"]
    assert "skipping object 'a' was deleted" in caplog.text


def test_an_object_replaced_while_it_is_read_is_read_again(nats_server, new_bucket, caplog):
    """The reader pulls a window of chunks; a put in the middle purges the rest of the old version's chunks,
    so the read ends in DigestMismatchError, and the task reads the new version instead of failing."""
    obs = new_bucket()
    old, new = os.urandom(200_000), os.urandom(50_000)
    obs.put("a", old, meta=ObjectMeta(max_chunk_size=1000))  # 200 chunks: far more than one read window
    options = _options(nats_server.url, obs.bucket)
    planned = plan_objects(options)

    class ReplacedAfterTheFirstChunk(bytearray):
        puts = 0

        def extend(self, chunk) -> None:
            if not self.puts:
                self.puts += 1
                obs.put("a", new)
            super().extend(chunk)

    data = ReplacedAfterTheFirstChunk()
    with caplog.at_level(logging.WARNING, "jetstream_sync.spark"):
        info = object_source._read_into(options, object_source._stores(options), planned[0], data)
    assert info is not None and info.digest == _sha(new)
    assert bytes(data) == new
    assert "'a' was replaced or deleted while it was read; reading it again" in caplog.text


def test_a_dangling_link_and_an_object_too_large_fail_planning(nats_server, new_bucket, monkeypatch):
    obs = new_bucket()
    target = obs.put("target", b"0123456789")
    obs.add_link("link", target)
    obs.delete("target")
    options = _options(nats_server.url, obs.bucket)
    with pytest.raises(errors.ObjectNotFoundError, match=r"link 'link' names .*'target', which is deleted or gone"):
        plan_objects(options)
    assert plan_objects(_options(nats_server.url, obs.bucket, ignoreMissingObjects="true")) == []
    obs.put("big", b"x" * 11)
    monkeypatch.setattr(object_source, "MAX_OBJECT_SIZE", 10)  # a binary column's 2 GiB, scaled down
    with pytest.raises(ObjectTooLargeError, match=r"'big' in bucket .* holds 11 bytes") as info:
        plan_objects(_options(nats_server.url, obs.bucket, pathGlobFilter="big"))
    assert info.value.name == "big" and info.value.size == 11
    copy = pickle.loads(pickle.dumps(info.value))  # it travels from an executor to the driver
    assert (type(copy), str(copy)) == (ObjectTooLargeError, str(info.value))
    metadata_only = plan_objects(_options(nats_server.url, obs.bucket, pathGlobFilter="big", includeContent="false"))
    assert [p.name for p in metadata_only] == ["big"]


def test_batches_stay_within_the_byte_budget(nats_server, new_bucket, monkeypatch):
    obs = new_bucket()
    blobs = {f"o{i}": os.urandom(40_000) for i in range(5)}
    blobs["z-big"] = os.urandom(150_000)
    for name, data in blobs.items():
        obs.put(name, data)
    monkeypatch.setattr(object_source, "BATCH_BYTES", 100_000)
    options = _options(nats_server.url, obs.bucket)
    batches = list(read_objects(options, plan_objects(options), ARROW))
    assert [b.num_rows for b in batches] == [2, 2, 1, 1]  # the big object goes alone
    assert {r["name"]: r["content"] for b in batches for r in b.to_pylist()} == blobs
    assert all(b.schema == ARROW for b in batches)
