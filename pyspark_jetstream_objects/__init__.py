"""Auto-registration of the ``jetstream-objects`` Spark data source.

PySpark registers the ``DefaultSource`` of every top-level ``pyspark_*`` module, one per module, so each format
of jetstream-sync has a module of its own: ``spark.read.format("jetstream-objects")`` works once jetstream-sync
is installed with the ``spark`` extra.
"""

from jetstream_sync.integrations.spark.object_source import JetStreamObjectsDataSource as DefaultSource

__all__ = ["DefaultSource"]
