"""Read and write JetStream streams from PySpark, in batch and with Structured Streaming.

Install with ``pip install 'jetstream-sync[spark]'`` (PySpark 4.2+ for admission control and
``Trigger.AvailableNow``, PyArrow). ``format("jetstream")`` is registered automatically when the package is
installed normally; otherwise register it once per session::

    from jetstream_sync.spark import JetStreamDataSource
    spark.dataSource.register(JetStreamDataSource)          # format("jetstream")

    df = spark.read.format("jetstream").option("servers", "nats://127.0.0.1:4222").option("stream", "ORDERS").load()

Read schema, one row per stored message::

    subject STRING, data BINARY, headers MAP<STRING, ARRAY<STRING>>, stream STRING, seq LONG, timestamp TIMESTAMP

The options (with their Kafka counterparts), what reads and writes guarantee, lag and progress, and the KV and
object store sources are in the Spark guide (``docs/guides/spark.md``). In short: streaming offsets are
[`StreamOffset`][jetstream_sync.spark.StreamOffset] values in Spark's checkpoint (the next sequence, the stream's
creation time, and the start a batch was planned from), so a micro-batch replays exactly; retention that removed unread
messages raises [`DataLossError`][jetstream_sync.spark.DataLossError] and a stream deleted and created again
[`StreamRecreatedError`][jetstream_sync.spark.StreamRecreatedError], unless ``failOnDataLoss=false``. Writes give every
row a ``Nats-Msg-Id``, so a task retried by Spark stores nothing twice within the stream's duplicate window. Every
option is checked before anything is sent; a bad one raises
[`jetstream_sync.errors.InvalidArgumentError`][jetstream_sync.errors.InvalidArgumentError] naming it.
"""

from __future__ import annotations

try:
    import pyarrow  # noqa: F401
    import pyspark  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError("jetstream_sync.spark needs PySpark and PyArrow: pip install 'jetstream-sync[spark]'") from exc

from .datasource import READ_SCHEMA, JetStreamBatchReader, JetStreamDataSource, JetStreamStreamReader, SequenceRange
from .kv_options import KeyValueReadOptions, KeyValueWriteOptions, parse_kv_read_options, parse_kv_write_options
from .kv_sink import KeyValueBatchWriter, KeyValueCommitMessage, KeyValueStreamWriter, KeyValueWriteConflictError
from .kv_source import (
    KV_SCHEMA,
    JetStreamKeyValueDataSource,
    KeySetPartition,
    KeyValueBatchReader,
    KeyValueStreamReader,
)
from .multi import MultiStreamReader
from .object_source import (
    OBJECTS_SCHEMA,
    JetStreamObjectsDataSource,
    JetStreamObjectsReader,
    ObjectReadOptions,
    ObjectTooLargeError,
    parse_object_options,
)
from .offsets import StreamOffset, StreamRecreatedError
from .options import ConnectionOptions, ReadOptions, WriteOptions, parse_read_options, parse_write_options
from .reading import DataLossError
from .sink import JetStreamBatchWriter, JetStreamCommitMessage, JetStreamStreamWriter

__all__ = [
    "KV_SCHEMA",
    "OBJECTS_SCHEMA",
    "READ_SCHEMA",
    "ConnectionOptions",
    "DataLossError",
    "JetStreamBatchReader",
    "JetStreamBatchWriter",
    "JetStreamCommitMessage",
    "JetStreamDataSource",
    "JetStreamKeyValueDataSource",
    "JetStreamObjectsDataSource",
    "JetStreamObjectsReader",
    "JetStreamStreamReader",
    "JetStreamStreamWriter",
    "KeySetPartition",
    "KeyValueBatchReader",
    "KeyValueBatchWriter",
    "KeyValueCommitMessage",
    "KeyValueReadOptions",
    "KeyValueStreamReader",
    "KeyValueStreamWriter",
    "KeyValueWriteConflictError",
    "KeyValueWriteOptions",
    "MultiStreamReader",
    "ObjectReadOptions",
    "ObjectTooLargeError",
    "ReadOptions",
    "SequenceRange",
    "StreamOffset",
    "StreamRecreatedError",
    "WriteOptions",
    "parse_kv_read_options",
    "parse_kv_write_options",
    "parse_object_options",
    "parse_read_options",
    "parse_write_options",
]
