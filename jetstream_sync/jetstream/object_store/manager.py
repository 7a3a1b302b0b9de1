"""ObjectStoreManager: the bucket-level calls of the JetStream context (create, bind, update, delete, list).

A mixin of [`JetStream`][jetstream_sync.JetStream], kept here so everything about object stores lives in one
package, as nats.go keeps its ``ObjectStoreManager`` beside ``object.go`` (and as ``kv/manager.py`` does for
key-value buckets).
"""

from __future__ import annotations

from collections.abc import Iterator

from ... import errors
from ..._validate import check_bucket_name
from ...models.object_store import OBJ_STREAM_PREFIX, ObjectStoreConfig, ObjectStoreStatus
from .._bucket import as_jetstream, bucket_names, bucket_stream_info, create_bucket_stream, update_bucket_stream
from .._consistency import ReadMode
from .store import ObjectStore

__all__ = ["ObjectStoreManager"]

# Every object store's stream captures its chunk subjects: how the buckets are told from other streams.
_OBJ_SUBJECTS = "$O.*.C.>"


def _config(config: object) -> ObjectStoreConfig:
    if not isinstance(config, ObjectStoreConfig):
        raise errors.InvalidTypeError("config", f"must be an ObjectStoreConfig, got {type(config).__name__}")
    return config


class ObjectStoreManager:
    """Create, bind to, update, delete and list object stores."""

    def create_object_store(self, config: ObjectStoreConfig, *, read: ReadMode = "leader") -> ObjectStore:
        """Create a bucket; the same configuration again returns it, another one is BucketExistsError."""
        config = _config(config)
        js = as_jetstream(self)
        info = create_bucket_stream(js, config.bucket, config.stream_config())
        return ObjectStore(js, config.bucket, info, read=read)

    def update_object_store(self, config: ObjectStoreConfig, *, read: ReadMode = "leader") -> ObjectStore:
        """Change a bucket's configuration; BucketNotFoundError when it does not exist."""
        config = _config(config)
        js = as_jetstream(self)
        info = update_bucket_stream(js, config.bucket, config.stream_config())
        return ObjectStore(js, config.bucket, info, read=read)

    def create_or_update_object_store(self, config: ObjectStoreConfig, *, read: ReadMode = "leader") -> ObjectStore:
        """Create the bucket, or bring an existing one to this configuration."""
        config = _config(config)
        try:
            return self.update_object_store(config, read=read)
        except errors.BucketNotFoundError:
            return self.create_object_store(config, read=read)

    def object_store(self, bucket: str, *, read: ReadMode = "leader") -> ObjectStore:
        """A handle on an existing bucket; BucketNotFoundError when there is none. ``read``: how
        [`ObjectStore.info`][jetstream_sync.ObjectStore.info] and [`ObjectStore.get`][jetstream_sync.ObjectStore.get]
        read metadata ([`ObjectStore.read`][jetstream_sync.ObjectStore.read])."""
        js = as_jetstream(self)
        info = bucket_stream_info(js, OBJ_STREAM_PREFIX, bucket)
        return ObjectStore(js, bucket, info, read=read)

    def delete_object_store(self, bucket: str) -> None:
        """Delete a bucket and every object in it; BucketNotFoundError when there is none."""
        check_bucket_name("bucket", bucket)
        try:
            as_jetstream(self).delete_stream(OBJ_STREAM_PREFIX + bucket)
        except errors.StreamNotFoundError as exc:
            raise errors.BucketNotFoundError(
                exc.code, exc.err_code, f"bucket {bucket!r} not found", f"OBJ_{bucket}", bucket
            ) from exc

    def object_store_names(self) -> Iterator[str]:
        """The names of every object store."""
        return bucket_names(as_jetstream(self), OBJ_STREAM_PREFIX, _OBJ_SUBJECTS)

    def object_stores(self) -> Iterator[ObjectStoreStatus]:
        """The status of every object store."""
        for info in as_jetstream(self).streams(_OBJ_SUBJECTS):
            name = info.config.name
            if name.startswith(OBJ_STREAM_PREFIX):
                yield ObjectStoreStatus.from_stream_info(name[len(OBJ_STREAM_PREFIX) :], info)
