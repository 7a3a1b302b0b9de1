"""Bucket calls of the JetStream context against a real server: create, bind, update, delete, list."""

from __future__ import annotations

import pytest

from jetstream_sync import KeyValue, KeyValueConfig, KeyValueStatus, StorageType, StreamConfig, errors
from tests.server.jetstream.kv.kvhelpers import bucket


def test_create_makes_the_adr8_stream(js, name):
    kv = bucket(js, name, history=5, ttl=3600, description="d", metadata={"owner": "tests"})
    assert isinstance(kv, KeyValue)
    assert kv.bucket == name
    assert kv.stream_name == f"KV_{name}"
    info = js.stream_info(f"KV_{name}")
    assert info.config.subjects == [f"$KV.{name}.>"]
    assert info.config.max_msgs_per_subject == 5
    assert info.config.max_age == 3600
    assert info.config.allow_rollup_hdrs and info.config.deny_delete and info.config.allow_direct
    assert info.config.metadata["owner"] == "tests"


def test_create_again_with_the_same_config_returns_the_bucket(js, name):
    kv = bucket(js, name, history=3)
    kv.put("a", b"1")
    again = bucket(js, name, history=3)
    assert again.get("a").value == b"1"


def test_create_with_another_config_is_bucket_exists(js, name):
    bucket(js, name, history=3)
    with pytest.raises(errors.BucketExistsError) as info:
        bucket(js, name, history=4)
    assert isinstance(info.value, errors.KeyValueError)
    assert js.stream_info(f"KV_{name}").config.max_msgs_per_subject == 3


def test_update_changes_the_config(js, name):
    kv = bucket(js, name, history=2)
    kv.put("a", b"1")
    updated = js.update_key_value(KeyValueConfig(bucket=name, history=7, description="now 7"))
    assert updated.status().history == 7
    assert js.stream_info(f"KV_{name}").config.description == "now 7"
    assert updated.get("a").value == b"1"


def test_update_of_a_missing_bucket(js, name):
    with pytest.raises(errors.BucketNotFoundError):
        js.update_key_value(KeyValueConfig(bucket=name))


def test_update_cannot_change_the_storage_type(js, name):
    kv = bucket(js, name)
    kv.put("a", b"1")
    with pytest.raises(errors.StreamConfigError, match=rf"bucket '{name}'.*storage type") as info:
        js.update_key_value(KeyValueConfig(bucket=name, storage=StorageType.MEMORY))
    assert info.value.err_code == 10052
    assert js.stream_info(f"KV_{name}").config.storage is StorageType.FILE
    assert kv.get("a").value == b"1"


def test_create_or_update(js, name):
    created = js.create_or_update_key_value(KeyValueConfig(bucket=name, history=2))
    assert created.status().history == 2
    created.put("k", b"v")
    updated = js.create_or_update_key_value(KeyValueConfig(bucket=name, history=9))
    assert updated.status().history == 9
    assert updated.get("k").value == b"v"


def test_key_value_binds(js, name):
    bucket(js, name, history=4).put("x", b"1")
    kv = js.key_value(name)
    assert kv.bucket == name
    assert kv.get("x").value == b"1"
    assert kv.status().history == 4


def test_key_value_of_a_missing_bucket(js, name):
    with pytest.raises(errors.BucketNotFoundError) as info:
        js.key_value(name)
    assert isinstance(info.value, errors.KeyValueError)
    assert isinstance(info.value, errors.StreamNotFoundError)


@pytest.mark.parametrize("bad", ["", "a.b", "a b", "a*", "a>"])
def test_bad_bucket_names_are_refused_before_sending(js, bad):
    with pytest.raises(errors.InvalidBucketNameError):
        js.key_value(bad)
    with pytest.raises(errors.InvalidBucketNameError):
        js.delete_key_value(bad)


def test_key_value_of_a_stream_that_is_not_a_bucket(js, name):
    js.create_stream(StreamConfig(name=f"KV_{name}", subjects=[f"notkv.{name}.>"], max_msgs_per_subject=0))
    with pytest.raises(errors.KeyValueConfigError):
        js.key_value(name)


def test_config_must_be_a_key_value_config(js):
    with pytest.raises(errors.InvalidTypeError):
        js.create_key_value({"bucket": "x"})


def test_delete(js, name):
    bucket(js, name)
    js.delete_key_value(name)
    with pytest.raises(errors.BucketNotFoundError):
        js.key_value(name)
    with pytest.raises(errors.BucketNotFoundError):
        js.delete_key_value(name)


def test_names_and_stores(js, name):
    bucket(js, name + "a", history=2).put("k", b"v")
    bucket(js, name + "b")
    js.create_stream(StreamConfig(name=f"{name}plain", subjects=[f"{name}.>"]))
    names = set(js.key_value_store_names())
    assert {name + "a", name + "b"} <= names
    assert f"{name}plain" not in names and f"KV_{name}a" not in names
    stores = {s.bucket: s for s in js.key_value_stores()}
    assert {name + "a", name + "b"} <= set(stores)
    a = stores[name + "a"]
    assert isinstance(a, KeyValueStatus)
    assert (a.values, a.history, a.backing_store) == (1, 2, "JetStream")


def test_status(js, name):
    kv = bucket(js, name, history=3, ttl=60, compression=True, limit_marker_ttl=5)
    for i in range(4):
        kv.put("a", b"%d" % i)
    kv.put("b", b"x")
    st = kv.status()
    assert st.bucket == name
    assert st.values == 4  # three of a's history, one of b
    assert st.history == 3
    assert st.ttl == 60
    assert st.bytes > 0
    assert st.is_compressed
    assert st.limit_marker_ttl == 5
    assert st.stream_info.config.name == f"KV_{name}"
