"""The options of the ``jetstream-kv`` data source: checked on the driver, kept as typed, picklable values.

The connection options are exactly those of ``format("jetstream")`` (parsed by `options`' helpers), so a
query moves between the two formats with the same connection settings. Everything is validated when the reader
or writer is created, before anything is sent; a bad option raises InvalidArgumentError (or InvalidTypeError)
naming it. Option names are case-insensitive, as everywhere in Spark.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Literal

import attrs

from ... import errors
from ..._protocol import filter_covers
from ..._validate import check_bucket_name
from ...jetstream.kv._keys import check_filter
from .options import (
    _CONNECTION_KEYS,
    DEFAULT_FETCH_BATCH_SIZE,
    DEFAULT_FETCH_MAX_BYTES,
    ConnectionOptions,
    _bool,
    _connection,
    _int,
    _lower,
    _sequence,
    _text,
    _time,
    _warn_unknown,
)

__all__ = [
    "DEFAULT_KEYS_PER_PARTITION",
    "KeyValueReadOptions",
    "KeyValueWriteOptions",
    "parse_kv_read_options",
    "parse_kv_write_options",
]

KVReadMode = Literal["auto", "direct", "consumer"]
Start = int | Literal["earliest", "latest"]

_READ_KEYS = (
    "bucket",
    "keys",
    "asOfRevision",
    "includeDeletes",
    "startingRevision",
    "startingTime",
    "maxMessagesPerTrigger",
    "numPartitions",
    "minPartitionSize",
    "failOnDataLoss",
    "readMode",
    "fetchBatchSize",
    "fetchMaxBytes",
)
_WRITE_KEYS = ("bucket", "compareAndSet")
_BATCH_ONLY = ("asOfRevision", "includeDeletes")
_STREAMING_ONLY = ("startingRevision", "startingTime", "maxMessagesPerTrigger")

DEFAULT_NUM_PARTITIONS = 4
#: a batch read puts at least this many keys in each partition (a key is one message of a multi_last get)
DEFAULT_KEYS_PER_PARTITION = 10_000
# The change stream's default: sequences per partition of a micro-batch, as format("jetstream").
DEFAULT_MIN_PARTITION_SIZE = 10_000


@attrs.frozen(kw_only=True)
class KeyValueReadOptions:
    """A validated read of a bucket. ``keys`` are key filters (``*``, ``>`` allowed; empty: every key), without
    filters another one covers (the server refuses overlapping consumer filters)."""

    connection: ConnectionOptions
    bucket: str
    keys: tuple[str, ...] = ()
    as_of_revision: int | None = None
    include_deletes: bool = False
    starting_revision: Start = "latest"
    starting_time: datetime | None = None
    max_messages_per_trigger: int | None = None
    num_partitions: int = DEFAULT_NUM_PARTITIONS
    min_partition_size: int | None = None
    fail_on_data_loss: bool = False
    read_mode: KVReadMode = "auto"
    fetch_batch_size: int = DEFAULT_FETCH_BATCH_SIZE
    fetch_max_bytes: int = DEFAULT_FETCH_MAX_BYTES

    @property
    def stream(self) -> str:
        """The bucket's stream, ``KV_<bucket>``."""
        return f"KV_{self.bucket}"


@attrs.frozen(kw_only=True)
class KeyValueWriteOptions:
    """A validated write into a bucket."""

    connection: ConnectionOptions
    bucket: str
    compare_and_set: bool = False


def _bucket(options: dict[str, str]) -> str:
    bucket = _text(options, "bucket") or _text(options, "path")
    if bucket is None:
        raise errors.InvalidArgumentError("bucket", "is required: the name of the key-value bucket")
    check_bucket_name("bucket", bucket)
    return bucket


def _keys(options: dict[str, str]) -> tuple[str, ...]:
    text = _text(options, "keys")
    if text is None:
        return ()
    filters = list(dict.fromkeys(check_filter(k.strip(), "keys") for k in text.split(",") if k.strip()))
    if not filters:
        raise errors.InvalidArgumentError("keys", f"must list at least one key filter, got {text!r}")
    if ">" in filters:
        return ()
    return tuple(f for f in filters if not any(o != f and filter_covers(o, f) for o in filters))


def parse_kv_read_options(raw: Mapping[str, str], *, streaming: bool) -> KeyValueReadOptions:
    """Check the options of ``spark.read`` / ``spark.readStream`` of ``jetstream-kv``; the error names the
    option at fault. Runs on the driver (the planning worker), before anything is sent."""
    options = _lower(raw)
    _warn_unknown(options, _CONNECTION_KEYS + _READ_KEYS, "kv read")
    connection = _connection(options)
    bucket = _bucket(options)
    keys = _keys(options)
    wrong = _STREAMING_ONLY if not streaming else _BATCH_ONLY
    for name in wrong:
        if _text(options, name) is not None:
            what = "streaming reads (readStream)" if not streaming else "batch reads (read)"
            raise errors.InvalidArgumentError(name, f"is for {what} of a bucket")
    as_of: int | None = None
    if _text(options, "asOfRevision") is not None:
        as_of = _int(options, "asOfRevision", 1)
    starting = _sequence(options, "startingRevision", ("earliest", "latest"))
    starting_time = _time(options, "startingTime")
    if starting is not None and starting_time is not None:
        raise errors.InvalidArgumentError("startingTime", "cannot be combined with startingRevision; set one")
    max_per_trigger: int | None = None
    if _text(options, "maxMessagesPerTrigger") is not None:
        max_per_trigger = _int(options, "maxMessagesPerTrigger", 0)
    mode = (_text(options, "readMode") or "auto").lower()
    if mode not in {"auto", "direct", "consumer"}:
        raise errors.InvalidArgumentError("readMode", f"must be auto, direct or consumer, got {mode!r}")
    min_size: int | None = None
    if _text(options, "minPartitionSize") is not None:
        min_size = _int(options, "minPartitionSize", 1)
    return KeyValueReadOptions(
        connection=connection,
        bucket=bucket,
        keys=keys,
        as_of_revision=as_of,
        include_deletes=_bool(options, "includeDeletes", False),
        starting_revision="latest" if starting is None else starting,  # type: ignore[arg-type]
        starting_time=starting_time,
        max_messages_per_trigger=max_per_trigger,
        num_partitions=_int(options, "numPartitions", DEFAULT_NUM_PARTITIONS),
        min_partition_size=min_size,
        fail_on_data_loss=_bool(options, "failOnDataLoss", False),
        read_mode=mode,  # type: ignore[arg-type]
        fetch_batch_size=_int(options, "fetchBatchSize", DEFAULT_FETCH_BATCH_SIZE),
        fetch_max_bytes=_int(options, "fetchMaxBytes", DEFAULT_FETCH_MAX_BYTES),
    )


def parse_kv_write_options(raw: Mapping[str, str]) -> KeyValueWriteOptions:
    """Check the options of ``df.write`` / ``df.writeStream`` of ``jetstream-kv``; runs on the driver."""
    options = _lower(raw)
    _warn_unknown(options, _CONNECTION_KEYS + _WRITE_KEYS, "kv write")
    return KeyValueWriteOptions(
        connection=_connection(options),
        bucket=_bucket(options),
        compare_and_set=_bool(options, "compareAndSet", False),
    )
