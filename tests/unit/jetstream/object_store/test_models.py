"""The object store's attrs types: validation where they are made, the bucket's stream mapping."""

from __future__ import annotations

import pytest

from jetstream_sync import ObjectInfo, ObjectLink, ObjectMeta, ObjectStoreConfig, StorageType, errors
from jetstream_sync.models.object_store import MAX_NAME_BYTES, check_object_name


def test_object_names():
    for good in ("a", "dir/file.txt", "with space", "日本語", "*", ">", "a" * MAX_NAME_BYTES):
        assert check_object_name("name", good) == good
    for bad in ("", "a" * (MAX_NAME_BYTES + 1), "é" * (MAX_NAME_BYTES // 2 + 1), "\ud800"):
        with pytest.raises(errors.InvalidObjectNameError):
            check_object_name("name", bad)
    with pytest.raises(errors.InvalidTypeError):
        check_object_name("name", b"bytes")


def test_object_meta_validation():
    assert ObjectMeta(headers={"A": "1", "B": ["2", "3"]}).headers == {"A": ["1"], "B": ["2", "3"]}
    assert ObjectMeta(headers={"A": ("1", "2")}).headers == {"A": ["1", "2"]}
    with pytest.raises(errors.InvalidTypeError):
        ObjectMeta(headers={"A": 1})
    with pytest.raises(errors.InvalidTypeError):
        ObjectMeta(headers=["A"])
    with pytest.raises(errors.InvalidTypeError):
        ObjectMeta(headers={"": "x"})
    with pytest.raises(errors.InvalidObjectNameError):
        ObjectMeta(name="")
    with pytest.raises(errors.InvalidArgumentError):
        ObjectMeta(max_chunk_size=0)
    with pytest.raises(errors.InvalidTypeError):
        ObjectMeta(metadata={"a": 1})
    with pytest.raises(errors.InvalidTypeError):
        ObjectMeta(description=3)
    with pytest.raises(errors.InvalidArgumentError):
        ObjectMeta(description="lone \ud800 surrogate")


def test_config_maps_to_the_stream_every_client_makes():
    config = ObjectStoreConfig(bucket="a", ttl=10, storage="memory", compression=True, max_bytes=0).stream_config()
    assert (config.name, config.max_age, config.storage, config.max_bytes) == ("OBJ_a", 10.0, StorageType.MEMORY, -1)
    assert config.subjects == ["$O.a.C.>", "$O.a.M.>"]
    assert config.allow_rollup_hdrs and config.allow_direct and config.discard.value == "new"
    assert config.compression is not None and config.compression.value == "s2"
    back = ObjectStoreConfig.from_stream("a", config)
    assert (back.ttl, back.storage, back.compression) == (10.0, StorageType.MEMORY, True)
    plain = ObjectStoreConfig(bucket="b").stream_config()
    assert (plain.max_age, plain.num_replicas, plain.compression) == (0.0, 1, None)


def test_config_validation():
    with pytest.raises(errors.InvalidBucketNameError):
        ObjectStoreConfig(bucket="a.b")
    with pytest.raises(errors.InvalidBucketNameError):
        ObjectStoreConfig(bucket="")
    with pytest.raises(errors.InvalidArgumentError):
        ObjectStoreConfig(bucket="a", replicas=0)
    with pytest.raises(errors.InvalidArgumentError):
        ObjectStoreConfig(bucket="a", max_bytes=-2)
    with pytest.raises(errors.InvalidArgumentError):
        ObjectStoreConfig(bucket="a", ttl=-1)
    with pytest.raises(errors.InvalidTypeError):
        ObjectStoreConfig(bucket="a", metadata={"k": 1})


def test_info_meta_view_and_links():
    info = ObjectInfo(name="n", bucket="b", nuid="N", description="d", headers={"A": ["1"]}, max_chunk_size=5)
    assert info.meta == ObjectMeta(name="n", description="d", headers={"A": ["1"]}, max_chunk_size=5)
    assert not info.is_link
    assert ObjectLink(bucket="b").is_bucket and not ObjectLink(bucket="b", name="x").is_bucket
