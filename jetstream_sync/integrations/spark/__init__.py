"""Read and write JetStream streams from PySpark, in batch and with Structured Streaming.

Install with ``pip install 'jetstream-sync[spark]'`` (PySpark 4.2+ for admission control and
``Trigger.AvailableNow``, PyArrow). Register the source once per session::

    from jetstream_sync.spark import JetStreamDataSource
    spark.dataSource.register(JetStreamDataSource)          # format("jetstream")

    df = (spark.read.format("jetstream").option("servers", "nats://127.0.0.1:4222").option("stream", "ORDERS")
          .option("startingSequence", "earliest").option("endingSequence", "latest").load())

Read schema, one row per stored message::

    subject STRING, data BINARY, headers MAP<STRING, ARRAY<STRING>>, stream STRING, seq LONG, timestamp TIMESTAMP

``headers`` holds the message's own headers (null when it has none; a repeated header has several values),
``timestamp`` is when the stream stored the message (microseconds, UTC).

Read options (batch and streaming unless noted):

- ``servers`` (required): comma-separated NATS URLs; ``credentials`` (a .creds file), ``nkeySeedFile``,
  ``user``/``password``, ``token``, ``tlsCaFile``/``tlsCertFile``/``tlsKeyFile``/``tlsHostname``, ``name``,
  ``connectTimeout`` and ``timeout`` (seconds) as for :func:`jetstream_sync.connect`. Files must exist on
  the executors.
- ``stream`` (required, or the ``load()`` path).
- ``subjects``: comma-separated filter subjects, wildcards allowed.
- ``startingSequence``: ``earliest``, ``latest`` or a sequence (default: ``earliest`` in batch, ``latest`` in
  streaming, as Kafka does). ``startingTime``: an ISO 8601 time instead; the read starts at the first message
  stored at or after it.
- ``endingSequence`` (batch only): ``latest`` (default) or the last sequence to read, inclusive.
- ``maxMessagesPerTrigger`` (streaming only): at most this many sequences per micro-batch (admission control;
  ``Trigger.AvailableNow`` reads what was there at the start, in batches of that size).
- ``numPartitions`` (default 4) and ``minPartitionSize`` (default 10000): a range of sequences is cut into at
  most ``numPartitions`` contiguous pieces, none shorter than ``minPartitionSize`` unless there is only one.
- ``failOnDataLoss`` (default true): when retention or a purge removed sequences the query still needed
  (the stream's first sequence passed the query's position), fail naming the lost range; false skips them
  with a warning. Messages deleted one by one inside the range are not data loss: they are simply absent.
- ``readMode``: ``auto`` (batched direct get when the stream has ``allow_direct`` and the server is 2.11+,
  else an ephemeral consumer), ``direct`` or ``consumer``. ``fetchBatchSize`` (5000) and ``fetchMaxBytes``
  (8 MiB) size each round trip.

Streaming offsets are stream sequences (the next one to read) kept in Spark's checkpoint: a micro-batch
replays exactly after a failure, and nothing is kept on the server (no durable consumer).

Writes (``df.write`` and ``writeStream``) take the columns ``subject`` (string; or the option ``subject`` for
every row), ``data`` (binary or string) and optionally ``headers`` (``map<string, array<string>>`` or
``map<string, string>``); other columns are ignored. Write options: the connection options above,
``msgIdColumn`` (the column whose value becomes ``Nats-Msg-Id``), ``idempotent`` (default true: rows without
an id column get one made from the write, partition and row, or in streaming from the query id, batch id,
partition and row), ``maxInFlight`` (4000 unacknowledged publishes per task) and ``publishTimeout`` (10 s).

Exactly-once writes rest on the stream's deduplication: a task retried by Spark, or a micro-batch replayed
after a restart, publishes the same message ids, and the stream stores each once *within its duplicate
window* (``StreamConfig.duplicate_window``, 2 minutes by default). Make the window longer than the longest
time a query may take to be retried or restarted. Default ids count rows, so they repeat only when a retry
sees the same rows in the same order (true for a read or a per-row transform of this source; not after a
shuffle): give ``msgIdColumn`` a key of the row itself (e.g. ``concat(stream, ':', seq)``) when in doubt.

Every option is checked before anything is sent; a bad one raises
:class:`jetstream_sync.errors.InvalidArgumentError` naming it (Spark shows it inside its own exception).
"""

from __future__ import annotations

try:
    import pyarrow  # noqa: F401
    import pyspark  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError("jetstream_sync.spark needs PySpark and PyArrow: pip install 'jetstream-sync[spark]'") from exc

from .datasource import READ_SCHEMA, JetStreamBatchReader, JetStreamDataSource, JetStreamStreamReader, SequenceRange
from .offsets import StreamOffset, StreamRecreatedError
from .options import ConnectionOptions, ReadOptions, WriteOptions, parse_read_options, parse_write_options
from .reading import DataLossError
from .sink import JetStreamBatchWriter, JetStreamCommitMessage, JetStreamStreamWriter

__all__ = [
    "READ_SCHEMA",
    "ConnectionOptions",
    "DataLossError",
    "JetStreamBatchReader",
    "JetStreamBatchWriter",
    "JetStreamCommitMessage",
    "JetStreamDataSource",
    "JetStreamStreamReader",
    "JetStreamStreamWriter",
    "ReadOptions",
    "SequenceRange",
    "StreamOffset",
    "StreamRecreatedError",
    "WriteOptions",
    "parse_read_options",
    "parse_write_options",
]
