"""Bucket-wide behaviour of a handle: seal, status, TTL, and a bucket deleted under its handles."""

from __future__ import annotations

import pytest

from jetstream_sync import ObjectMeta, ObjectStoreConfig, StorageType, errors
from tests.helpers import wait_until


def test_seal(obs):
    obs.put("a", b"1")
    obs.put("b", b"2")
    obs.seal()
    assert obs.status().sealed
    with pytest.raises(errors.ObjectStoreSealedError):
        obs.put("c", b"3")
    with pytest.raises(errors.ObjectStoreSealedError):
        obs.put("a", b"replaced")
    with pytest.raises(errors.ObjectStoreSealedError):
        obs.delete("a")
    with pytest.raises(errors.ObjectStoreSealedError):
        obs.update_meta("a", ObjectMeta(description="x"))
    with pytest.raises(errors.ObjectStoreSealedError):
        obs.update_meta("a", ObjectMeta(name="renamed"))
    with pytest.raises(errors.ObjectStoreSealedError):
        obs.add_link("l", obs.info("a"))
    with pytest.raises(errors.ObjectStoreSealedError):
        obs.add_bucket_link("l", obs)
    assert obs.get_bytes("a") == b"1"
    assert sorted(i.name for i in obs.list()) == ["a", "b"]
    with obs.watch() as w:
        assert {w.next(5).name, w.next(5).name} == {"a", "b"} and w.next(5) is None
    obs.seal()  # sealing again is no error


def test_status(js, obs):
    obs.put("a", b"x" * 1000)
    status = obs.status()
    assert status.bucket == obs.bucket and not status.sealed and status.size > 1000
    assert (status.ttl, status.storage, status.replicas, status.is_compressed) == (None, StorageType.FILE, 1, False)
    assert status.backing_store == "JetStream" and status.stream_info.config.name == obs.stream_name


def test_memory_compressed_bucket_with_metadata(js, name):
    obs = js.create_object_store(
        ObjectStoreConfig(
            bucket=name, storage=StorageType.MEMORY, compression=True, metadata={"owner": "ops"}, description="d"
        )
    )
    obs.put("a", b"z" * 500_000)
    status = obs.status()
    assert (status.storage, status.is_compressed, status.description) == (StorageType.MEMORY, True, "d")
    assert status.metadata is not None and status.metadata["owner"] == "ops"
    assert obs.get_bytes("a") == b"z" * 500_000


def test_ttl_ages_objects_out(js, name):
    obs = js.create_object_store(ObjectStoreConfig(bucket=name, ttl=1.0))
    assert obs.status().ttl == 1.0
    obs.put("short-lived", b"x" * 200_000)
    wait_until(lambda: obs.list(show_deleted=True) == [], timeout=10)
    with pytest.raises(errors.ObjectNotFoundError):
        obs.info("short-lived")
    assert js.stream_info(obs.stream_name).state.messages == 0


def test_bucket_deleted_under_the_handle(js, obs):
    obs.put("a", b"1")
    js.delete_object_store(obs.bucket)
    with pytest.raises(errors.BucketNotFoundError):
        obs.put("a", b"1")
    with pytest.raises(errors.BucketNotFoundError):
        obs.info("a")
    with pytest.raises(errors.BucketNotFoundError):
        obs.get("a")
    with pytest.raises(errors.BucketNotFoundError):
        obs.delete("a")
    with pytest.raises(errors.BucketNotFoundError):
        obs.list()
    with pytest.raises(errors.BucketNotFoundError):
        obs.watch()
    with pytest.raises(errors.BucketNotFoundError):
        obs.status()
    with pytest.raises(errors.BucketNotFoundError):
        obs.seal()


def test_deleting_the_bucket_ends_a_watch_and_a_read(js, obs):
    obs.put("big", b"x" * 8_000_000)  # 62 chunks: more than a read window
    w = obs.watch()
    assert w.next(5).name == "big" and w.next(5) is None
    r = obs.get("big", timeout=20)
    assert r.read(10) == b"x" * 10
    js.delete_object_store(obs.bucket)
    with pytest.raises(errors.BucketNotFoundError):
        w.next(15)
    with pytest.raises(errors.BucketNotFoundError):
        while r.read(64 * 1024):
            pass
    w.stop()
    r.close()
