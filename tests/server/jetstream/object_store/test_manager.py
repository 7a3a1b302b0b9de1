"""The bucket-level calls on the JetStream context: create, bind, update, delete, list."""

from __future__ import annotations

import pytest

from jetstream_sync import KeyValueConfig, ObjectStoreConfig, StorageType, StreamConfig, errors


def test_create_maps_the_bucket_to_its_stream(js, name):
    obs = js.create_object_store(
        ObjectStoreConfig(bucket=name, description="d", ttl=3600, max_bytes=1 << 20, metadata={"team": "a"})
    )
    assert obs.bucket == name and obs.stream_name == f"OBJ_{name}"
    config = js.stream_info(f"OBJ_{name}").config
    assert config.subjects == [f"$O.{name}.C.>", f"$O.{name}.M.>"]
    assert (config.description, config.max_age, config.max_bytes) == ("d", 3600.0, 1 << 20)
    assert config.allow_rollup_hdrs and config.allow_direct and config.discard.value == "new"
    assert config.metadata is not None and config.metadata["team"] == "a"
    status = obs.status()
    assert (status.bucket, status.ttl, status.description, status.storage) == (name, 3600.0, "d", StorageType.FILE)


def test_create_is_idempotent_and_refuses_another_config(js, name):
    js.create_object_store(ObjectStoreConfig(bucket=name))
    js.create_object_store(ObjectStoreConfig(bucket=name))
    with pytest.raises(errors.BucketExistsError):
        js.create_object_store(ObjectStoreConfig(bucket=name, description="other"))


def test_update_and_create_or_update(js, name):
    with pytest.raises(errors.BucketNotFoundError):
        js.update_object_store(ObjectStoreConfig(bucket=name))
    js.create_or_update_object_store(ObjectStoreConfig(bucket=name, description="one"))
    js.create_or_update_object_store(ObjectStoreConfig(bucket=name, description="two"))
    assert js.object_store(name).status().description == "two"
    updated = js.update_object_store(ObjectStoreConfig(bucket=name, description="three"))
    assert updated.status().description == "three"
    with pytest.raises(errors.StreamConfigError, match=rf"bucket '{name}'.*storage type"):
        js.update_object_store(ObjectStoreConfig(bucket=name, storage=StorageType.MEMORY))
    assert js.object_store(name).status().storage is StorageType.FILE


def test_bind_delete_and_not_found(js, name):
    with pytest.raises(errors.BucketNotFoundError):
        js.object_store(name)
    with pytest.raises(errors.BucketNotFoundError):
        js.delete_object_store(name)
    js.create_object_store(ObjectStoreConfig(bucket=name)).put("a", b"1")
    assert js.object_store(name).get_bytes("a") == b"1"
    js.delete_object_store(name)
    with pytest.raises(errors.BucketNotFoundError):
        js.object_store(name)


def test_names_and_statuses_list_only_object_stores(js, name):
    js.create_object_store(ObjectStoreConfig(bucket=name + "_a"))
    js.create_object_store(ObjectStoreConfig(bucket=name + "_b"))
    js.create_stream(StreamConfig(name=name + "_plain", subjects=[f"{name}.>"]))
    js.create_key_value(KeyValueConfig(bucket=name + "_kv"))
    assert sorted(js.object_store_names()) == [name + "_a", name + "_b"]
    assert sorted(s.bucket for s in js.object_stores()) == [name + "_a", name + "_b"]


def test_bad_arguments(js):
    with pytest.raises(errors.InvalidBucketNameError):
        ObjectStoreConfig(bucket="bad.name")
    with pytest.raises(errors.InvalidTypeError):
        js.create_object_store({"bucket": "x"})
    with pytest.raises(errors.InvalidBucketNameError):
        js.object_store("bad name")
    with pytest.raises(errors.InvalidBucketNameError):
        js.delete_object_store("")
