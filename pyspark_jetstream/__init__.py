"""Auto-registration of the ``jetstream`` Spark data source.

PySpark looks for top-level modules named ``pyspark_*`` that expose ``DefaultSource`` and registers them, so
``spark.read.format("jetstream")`` works once jetstream-sync is installed with the ``spark`` extra.
"""

from jetstream_sync.integrations.spark import JetStreamDataSource as DefaultSource

__all__ = ["DefaultSource"]
