"""KeyValueManager: the bucket-level calls of the JetStream context (create, bind, update, delete, list).

A mixin of [`JetStream`][jetstream_sync.JetStream], kept here so everything about key-value buckets lives in one
package, as nats.go keeps its ``KeyValueManager`` beside ``kv.go``.
"""

from __future__ import annotations

from collections.abc import Iterator

from ... import errors
from ..._validate import check_bucket_name
from ...models.kv import KV_STREAM_PREFIX, KeyValueConfig, KeyValueStatus
from .._bucket import as_jetstream, bucket_names, bucket_stream_info, create_bucket_stream, update_bucket_stream
from .._consistency import ReadMode
from .bucket import KeyValue

__all__ = ["KeyValueManager"]

_KV_SUBJECTS = "$KV.*.>"


def _config(config: object) -> KeyValueConfig:
    if not isinstance(config, KeyValueConfig):
        raise errors.InvalidTypeError("config", f"must be a KeyValueConfig, got {type(config).__name__}")
    return config


class KeyValueManager:
    """Create, bind to, update, delete and list key-value buckets."""

    def create_key_value(self, config: KeyValueConfig, *, read: ReadMode = "read_your_writes") -> KeyValue:
        """Create a bucket; the same configuration again returns it, another one is BucketExistsError.

        ``read``: how the handle's single-key reads pick the server that answers
        ([`KeyValue`][jetstream_sync.KeyValue])."""
        config = _config(config)
        js = as_jetstream(self)
        info = create_bucket_stream(js, config.bucket, config.stream_config())
        return KeyValue(js, config.bucket, info, read=read)

    def update_key_value(self, config: KeyValueConfig, *, read: ReadMode = "read_your_writes") -> KeyValue:
        """Change a bucket's configuration; BucketNotFoundError when it does not exist. ``read`` as for
        [`create_key_value`][jetstream_sync.KeyValueManager.create_key_value]."""
        config = _config(config)
        js = as_jetstream(self)
        info = update_bucket_stream(js, config.bucket, config.stream_config())
        return KeyValue(js, config.bucket, info, read=read)

    def create_or_update_key_value(self, config: KeyValueConfig, *, read: ReadMode = "read_your_writes") -> KeyValue:
        """Create the bucket, or bring an existing one to this configuration."""
        config = _config(config)
        try:
            return self.update_key_value(config, read=read)
        except errors.BucketNotFoundError:
            return self.create_key_value(config, read=read)

    def key_value(self, bucket: str, *, read: ReadMode = "read_your_writes") -> KeyValue:
        """A handle on an existing bucket; BucketNotFoundError when there is none, KeyValueConfigError when the
        stream of that name is not a bucket. ``read`` as for
        [`create_key_value`][jetstream_sync.KeyValueManager.create_key_value]."""
        js = as_jetstream(self)
        info = bucket_stream_info(js, KV_STREAM_PREFIX, bucket)
        if info.config.max_msgs_per_subject < 1:
            raise errors.KeyValueConfigError(
                "bucket", f"stream {info.config.name!r} is not a key-value bucket (it keeps no per-key history)"
            )
        return KeyValue(js, bucket, info, read=read)

    def delete_key_value(self, bucket: str) -> None:
        """Delete a bucket and everything in it; BucketNotFoundError when there is none."""
        check_bucket_name("bucket", bucket)
        try:
            as_jetstream(self).delete_stream(KV_STREAM_PREFIX + bucket)
        except errors.StreamNotFoundError as exc:
            raise errors.BucketNotFoundError(
                exc.code, exc.err_code, f"bucket {bucket!r} not found", f"KV_{bucket}", bucket
            ) from exc

    def key_value_store_names(self) -> Iterator[str]:
        """The names of every key-value bucket."""
        return bucket_names(as_jetstream(self), KV_STREAM_PREFIX, _KV_SUBJECTS)

    def key_value_stores(self) -> Iterator[KeyValueStatus]:
        """The status of every key-value bucket."""
        for info in as_jetstream(self).streams(_KV_SUBJECTS):
            name = info.config.name
            if name.startswith(KV_STREAM_PREFIX):
                yield KeyValueStatus.from_stream_info(name[len(KV_STREAM_PREFIX) :], info)
