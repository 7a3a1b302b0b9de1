"""What the Spark tests share besides fixtures: publishing test messages and building readers."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def publish(js, stream: str, count: int, *, start: int = 0, every_header: int = 0) -> None:
    """``count`` messages on ``<stream>.a`` / ``.b`` (by parity) with payload ``m<i>``; headers every n-th."""
    futures = []
    for i in range(start, start + count):
        headers = {"X-I": str(i), "X-Multi": ["1", "2"]} if every_header and i % every_header == 0 else None
        futures.append(js.publish_async(f"{stream}.{'ab'[i % 2]}", b"m%d" % i, headers))
    js.publish_async_complete(timeout=60)
    assert all(not f.result().duplicate for f in futures)


def source(spark: SparkSession, url: str, stream: str, **options: object):
    reader = spark.read.format("jetstream").option("servers", url).option("stream", stream)
    for key, value in options.items():
        reader = reader.option(key, str(value))
    return reader.load()


def stream_source(spark: SparkSession, url: str, stream: str, **options: object):
    reader = spark.readStream.format("jetstream").option("servers", url).option("stream", stream)
    for key, value in options.items():
        reader = reader.option(key, str(value))
    return reader.load()


def seqs(df) -> list[int]:
    return sorted(row.seq for row in df.select("seq").collect())


def run_available_now(query_builder, timeout: float = 120.0):
    query = query_builder.trigger(availableNow=True).start()
    try:
        assert query.awaitTermination(timeout), "the availableNow query did not finish"
    finally:
        if query.isActive:
            query.stop()
    if query.exception() is not None:
        raise query.exception()
    return query
