"""Auto-registration of the ``jetstream-kv`` Spark data source.

PySpark registers the ``DefaultSource`` of every top-level ``pyspark_*`` module, one per module, so each format
of jetstream-sync has a module of its own: ``spark.read.format("jetstream-kv")`` works once jetstream-sync is
installed with the ``spark`` extra.
"""

from jetstream_sync.integrations.spark.kv_source import JetStreamKeyValueDataSource as DefaultSource

__all__ = ["DefaultSource"]
