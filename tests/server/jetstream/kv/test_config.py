"""A bucket's configuration against a real server: each KeyValueConfig field lands in the bucket's stream and is
enforced there (value size, bytes, history, TTL, storage, compression, republish), and mirrors and sources carry
keys between buckets the way every other client maps them."""

from __future__ import annotations

from datetime import timedelta

import attrs
import pytest

from jetstream_sync import (
    KeyValueConfig,
    KeyValueOp,
    StorageType,
    StoreCompression,
    StreamSource,
    SubjectTransform,
    errors,
)
from tests.helpers import wait_until
from tests.server.jetstream.kv.kvhelpers import bucket, gone, readable, until_none


def test_every_field_lands_in_the_stream(js, name):
    config = KeyValueConfig(
        bucket=name,
        description="flags of the tests",
        max_value_size=1024,
        history=64,
        ttl=timedelta(hours=1),
        max_bytes=1 << 20,
        storage=StorageType.MEMORY,
        replicas=1,
        compression=True,
        metadata={"owner": "tests"},
        limit_marker_ttl=timedelta(minutes=5),
    )
    kv = js.create_key_value(config)
    sc = js.stream_info(f"KV_{name}").config
    assert (sc.name, sc.subjects, sc.description) == (f"KV_{name}", [f"$KV.{name}.>"], "flags of the tests")
    assert (sc.max_msg_size, sc.max_msgs_per_subject, sc.max_age, sc.max_bytes) == (1024, 64, 3600, 1 << 20)
    assert (sc.storage, sc.num_replicas, sc.compression) == (StorageType.MEMORY, 1, StoreCompression.S2)
    assert sc.metadata["owner"] == "tests"
    assert (sc.allow_msg_ttl, sc.subject_delete_marker_ttl) == (True, 300)
    assert sc.duplicate_window == 120
    st = kv.status()
    assert (st.history, st.ttl, st.is_compressed, st.limit_marker_ttl) == (64, 3600, True, 300)
    # what the server holds reads back as the same bucket configuration (metadata: the server adds its own keys)
    back = KeyValueConfig.from_stream(name, sc)
    assert back.metadata["owner"] == "tests"
    assert attrs.evolve(back, metadata=None) == attrs.evolve(config, metadata=None)


def test_defaults_land_in_the_stream(js, name):
    kv = bucket(js, name)
    sc = js.stream_info(f"KV_{name}").config
    assert (sc.max_msgs_per_subject, sc.max_age, sc.max_bytes, sc.max_msg_size) == (1, 0, -1, -1)
    assert (sc.storage, sc.num_replicas, sc.compression) == (StorageType.FILE, 1, StoreCompression.NONE)
    assert not sc.allow_msg_ttl and sc.subject_delete_marker_ttl is None
    st = kv.status()
    assert (st.history, st.ttl, st.is_compressed, st.limit_marker_ttl) == (1, None, False, None)


def test_history_64_keeps_64_values(js, name):
    kv = bucket(js, name, history=64)
    for i in range(70):
        kv.put("k", b"%d" % i)
    hist = kv.history("k")
    assert [e.value for e in hist] == [b"%d" % i for i in range(6, 70)]


def test_history_1_keeps_only_the_latest(js, name):
    kv = bucket(js, name)
    kv.put("k", b"1")
    latest = kv.put("k", b"2")
    assert [(e.value, e.revision) for e in kv.history("k")] == [(b"2", latest)]
    with pytest.raises(errors.KeyNotFoundError):
        kv.get("k", revision=latest - 1)


def test_history_65_is_refused_before_any_bucket_exists(js, name):
    with pytest.raises(errors.KeyHistoryTooLargeError):
        js.create_key_value(KeyValueConfig(bucket=name, history=65))
    with pytest.raises(errors.BucketNotFoundError):
        js.key_value(name)


def test_max_value_size_is_enforced_by_the_server(js, name):
    kv = bucket(js, name, max_value_size=16)
    kv.put("k", b"x" * 16)
    with pytest.raises(errors.ValueTooLargeError) as info:
        kv.put("k", b"x" * 17)
    assert info.value.err_code == 10054  # message size exceeds maximum allowed
    assert isinstance(info.value, errors.KeyValueError) and isinstance(info.value, errors.MessageTooLargeError)
    assert "max_value_size" in str(info.value)
    assert kv.get("k").value == b"x" * 16


def test_max_bytes_refuses_new_values_once_full(js, name):
    kv = bucket(js, name, max_bytes=2000)
    stored = 0
    with pytest.raises(errors.BucketFullError) as info:
        for i in range(100):
            kv.put(f"k.{i}", b"x" * 100)
            stored += 1
    assert info.value.err_code == 10077  # maximum bytes exceeded: discard new, the old values stay
    assert isinstance(info.value, errors.KeyValueError) and "maximum bytes exceeded" in str(info.value)
    assert 0 < stored < 20
    assert kv.status().values == stored
    assert kv.get("k.0").value == b"x" * 100


def test_memory_storage(js, name):
    kv = bucket(js, name, storage="memory", history=2)
    kv.put("k", b"1")
    kv.put("k", b"2")
    assert js.stream_info(kv.stream_name).config.storage is StorageType.MEMORY
    assert [e.value for e in kv.history("k")] == [b"1", b"2"]


def test_compressed_values_read_back_unchanged(js, name):
    kv = bucket(js, name, compression=True)
    value = b"compress me " * 1000
    kv.put("k", value)
    assert kv.get("k").value == value
    assert kv.get_many(["k"])["k"].value == value


def test_bucket_ttl_without_markers_ages_values_out(js, name):
    kv = bucket(js, name, ttl=1, history=3)
    assert js.stream_info(kv.stream_name).config.duplicate_window == 1  # never longer than the TTL
    kv.put("k", b"1")
    kv.put("k", b"2")
    wait_until(lambda: kv.status().values == 0, timeout=5)
    with pytest.raises(errors.KeyNotFoundError) as info:
        kv.get("k")
    assert type(info.value) is errors.KeyNotFoundError  # no marker is left without limit_marker_ttl
    assert list(kv.keys()) == []


def test_description_and_metadata_change_by_update(js, name):
    bucket(js, name, description="before", metadata={"v": "1"})
    kv = js.update_key_value(KeyValueConfig(bucket=name, description="after", metadata={"v": "2"}))
    sc = js.stream_info(kv.stream_name).config
    assert (sc.description, sc.metadata["v"]) == ("after", "2")
    assert kv.status().metadata["v"] == "2"


def test_limit_markers_enabled_by_update(js, name):
    bucket(js, name).put("k", b"v")
    kv = js.update_key_value(KeyValueConfig(bucket=name, limit_marker_ttl=30))
    assert kv.status().limit_marker_ttl == 30
    rev = kv.create("lock", b"me", ttl=60)  # the handle from the update knows the bucket takes TTLs now
    assert kv.get("lock").revision == rev
    assert kv.get("k").value == b"v"


def test_republish(client, js, name):
    sub = client.subscribe(f"{name}.changes.>")
    client.flush()
    kv = bucket(js, name, history=2, republish={"src": f"$KV.{name}.>", "dest": f"{name}.changes.>"})
    rev = kv.put("a.b", b"hello")
    kv.delete("a.b")
    put = sub.next_msg(2)
    assert (put.subject, put.data) == (f"{name}.changes.a.b", b"hello")
    assert put.headers["Nats-Subject"] == f"$KV.{name}.a.b"
    assert int(put.headers["Nats-Sequence"]) == rev
    deleted = sub.next_msg(2)
    assert deleted.subject == f"{name}.changes.a.b"
    assert deleted.headers["KV-Operation"] == "DEL"  # the marker is republished with its operation


# -- mirrors and sources -----------------------------------------------------------------------------------
def test_a_mirror_reads_the_origins_keys(js, name):
    origin = bucket(js, name + "o", history=3)
    origin.put("a", b"1")
    origin.put("a", b"2")
    origin.put("b.c", b"1")
    origin.delete("b.c")
    origin.put("p", b"1")
    origin.purge("p")
    mirror = bucket(js, name + "m", history=3, mirror={"name": name + "o"})
    sc = js.stream_info(f"KV_{name}m").config
    assert sc.subjects == [] and sc.mirror == StreamSource(name=f"KV_{name}o") and sc.mirror_direct
    assert mirror.prefix == f"$KV.{name}o."  # keys keep the origin's subjects
    wait_until(lambda: mirror.status().values == origin.status().values, timeout=5)

    got = mirror.get("a")
    assert (got.bucket, got.key, got.value, got.revision) == (name + "m", "a", b"2", origin.get("a").revision)
    with pytest.raises(errors.KeyDeletedError) as deleted:
        mirror.get("b.c")
    assert deleted.value.entry.operation is KeyValueOp.DELETE
    with pytest.raises(errors.KeyDeletedError) as purged:
        mirror.get("p")
    assert purged.value.entry.operation is KeyValueOp.PURGE
    assert sorted(mirror.keys()) == ["a"]
    assert list(mirror.keys("b.*")) == []
    assert [e.value for e in mirror.history("a")] == [b"1", b"2"]
    assert {k: e.value for k, e in mirror.get_many(["a", "b.c", "p", "none"]).items()} == {"a": b"2"}
    assert mirror.get("a", revision=1).value == b"1"
    with mirror.watch_all() as w:
        assert [(e.key, e.operation) for e in until_none(w)] == [
            ("a", KeyValueOp.PUT),
            ("b.c", KeyValueOp.DELETE),
            ("p", KeyValueOp.PURGE),
        ]
        # writes through the mirror's handle go to the origin, and come back through the mirror
        rev = mirror.put("new", b"via the mirror")
        entry = w.next(5)
        assert (entry.key, entry.value, entry.revision) == ("new", b"via the mirror", rev)
    assert origin.get("new").revision == rev


def test_key_value_binds_to_a_mirror(js, name):
    bucket(js, name + "o").put("k", b"v")
    bucket(js, name + "m", mirror={"name": f"KV_{name}o"})  # the stream name works as well
    bound = js.key_value(name + "m")
    assert bound.prefix == f"$KV.{name}o."
    wait_until(lambda: readable(bound, "k", b"v"), timeout=5)


def test_sources_land_under_the_buckets_own_prefix(js, name):
    first = bucket(js, name + "a")
    second = bucket(js, name + "b")
    first.put("x.1", b"from a")
    second.put("y", b"from b")
    second.put("gone", b"soon")
    second.delete("gone")
    agg = bucket(js, name + "agg", history=2, sources=[{"name": name + "a"}, StreamSource(name=f"KV_{name}b")])
    transforms = [s.subject_transforms for s in js.stream_info(agg.stream_name).config.sources or []]
    assert transforms == [
        [SubjectTransform(src=f"$KV.{name}a.>", dest=f"$KV.{name}agg.>")],
        [SubjectTransform(src=f"$KV.{name}b.>", dest=f"$KV.{name}agg.>")],
    ]
    assert agg.prefix == f"$KV.{name}agg."
    wait_until(lambda: readable(agg, "y", b"from b") and readable(agg, "x.1", b"from a"), timeout=5)
    wait_until(lambda: agg.status().values == 3, timeout=5)
    assert sorted(agg.keys()) == ["x.1", "y"]
    with pytest.raises(errors.KeyDeletedError):
        agg.get("gone")
    agg.put("own", b"mine")
    assert sorted(agg.keys()) == ["own", "x.1", "y"]
    first.put("x.1", b"newer")  # later changes follow
    wait_until(lambda: readable(agg, "x.1", b"newer"), timeout=5)
    first.delete("x.1")
    wait_until(lambda: gone(agg, "x.1"), timeout=5)
    assert first.get_many(["own", "y"]) == {}  # nothing flows back into a source
