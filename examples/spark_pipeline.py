"""Spark pipeline: read a stream incrementally, transform it, write the result to another stream.

python examples/spark_pipeline.py                          # an embedded nats-server with demo data
python examples/spark_pipeline.py nats://127.0.0.1:4222    # your server (JetStream enabled)

Needs the spark extra (pip install 'jetstream-sync[spark]') and Java 17+. Orders (JSON) are published to the
stream ORDERS; a Structured Streaming query with Trigger.AvailableNow picks up what is new since its last run
(the position is a stream sequence kept in the checkpoint), keeps orders of 100 or more, and publishes them to
BIG_ORDERS with a Nats-Msg-Id made of the source stream and sequence, so a rerun never stores one twice.
The query runs twice: the second run reads only the orders published after the first.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import sys
import tempfile

from _local_spark import local_spark  # first: without the spark extra it says what to install

import jetstream_sync
from jetstream_sync import StreamConfig
from jetstream_sync.testing import ServerNotInstalledError


def publish_orders(js: jetstream_sync.JetStream, first: int, count: int) -> None:
    rng = random.Random(first)
    for order_id in range(first, first + count):
        region = rng.choice(["eu", "us", "ap"])
        body = {"id": order_id, "region": region, "amount": rng.randint(1, 200)}
        js.publish_async(f"orders.{region}", json.dumps(body).encode(), msg_id=f"order-{order_id}")
    js.publish_async_complete(timeout=30)


def run(url: str, work_dir: str) -> None:
    checkpoint = os.path.join(work_dir, "checkpoint")
    from pyspark.sql import functions as F

    from jetstream_sync.spark import JetStreamDataSource

    with jetstream_sync.connect(url, name="spark-pipeline") as nc:
        js = nc.jetstream()
        orders = js.create_or_update_stream(StreamConfig(name="ORDERS", subjects=["orders.>"], allow_direct=True))
        big = js.create_or_update_stream(
            StreamConfig(name="BIG_ORDERS", subjects=["big.>"], allow_direct=True, duplicate_window=600)
        )
        first_id = orders.info().state.last_seq + 1
        publish_orders(js, first_id, 500)
        print(f"published 500 orders to ORDERS (sequences up to {orders.info().state.last_seq})")

        spark = local_spark("jetstream-sync spark pipeline", work_dir, {"spark.sql.shuffle.partitions": "2"})
        spark.dataSource.register(JetStreamDataSource)
        order_schema = "id LONG, region STRING, amount INT"

        def run_once() -> None:
            events = (
                spark.readStream.format("jetstream")
                .option("servers", url)
                .option("stream", "ORDERS")
                .option("subjects", "orders.>")
                .option("startingSequence", "earliest")
                .option("maxMessagesPerTrigger", "200")
                .load()
            )
            big_orders = (
                events.withColumn("order", F.from_json(F.col("data").cast("string"), order_schema))
                .where(F.col("order.amount") >= 100)
                .select(
                    F.concat(F.lit("big."), F.col("order.region")).alias("subject"),
                    F.to_json(F.struct("order.id", "order.amount", "timestamp")).alias("data"),
                    F.concat("stream", F.lit(":"), "seq").alias("msg_id"),
                )
            )
            query = (
                big_orders.writeStream.format("jetstream")
                .option("servers", url)
                .option("msgIdColumn", "msg_id")
                .option("checkpointLocation", checkpoint)
                .trigger(availableNow=True)
                .start()
            )
            query.awaitTermination()
            batches = [p["batchId"] for p in query.recentProgress if p["numInputRows"]]
            rows = sum(p["numInputRows"] for p in query.recentProgress)
            print(f"  read {rows} orders in micro-batches {batches}; BIG_ORDERS holds {big.info().state.messages}")

        try:
            print("run 1: everything in ORDERS so far")
            run_once()
            publish_orders(js, first_id + 500, 300)
            print("published 300 more orders")
            print("run 2: only what is new since run 1 (the checkpoint holds the next sequence)")
            run_once()
            for msg in big.get_msg(1), big.get_msg(big.info().state.last_seq):
                print(f"  BIG_ORDERS seq {msg.seq} on {msg.subject}: {msg.data.decode()}")
        finally:
            spark.stop()


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="jetstream-spark-") as work:
        if len(sys.argv) > 1:
            run(sys.argv[1], work)
            return
        from jetstream_sync.testing import EmbeddedServer

        with EmbeddedServer() as server, contextlib.suppress(KeyboardInterrupt):
            print(f"started an embedded nats-server at {server.url}")
            run(server.url, work)


if __name__ == "__main__":
    try:
        main()
    except ServerNotInstalledError as exc:  # no nats-server to start: the message names the extra that has one
        sys.exit(f"{exc}; or give a running server: python examples/spark_pipeline.py nats://127.0.0.1:4222")
