"""Spark change data capture from a key-value bucket: replicate PROFILES into PROFILES_REPLICA.

python examples/spark_kv_cdc.py                          # an embedded nats-server
python examples/spark_kv_cdc.py nats://127.0.0.1:4222    # your server (JetStream enabled, 2.11+)

Needs the spark extra (pip install 'jetstream-sync[spark]') and Java 17+. Profiles are put, deleted and purged
in the bucket PROFILES; a Structured Streaming query (format "jetstream-kv", Trigger.AvailableNow) reads every
change since its last run (the position is a revision kept in the checkpoint) and applies it to the bucket
PROFILES_REPLICA (format "jetstream-kv" again, in foreachBatch: rows of one key in revision order). The query
runs twice; the second run reads only the changes made after the first. A purge removes the key's history,
so a change purged before the query read it is not seen (its purge marker is). A batch read of both buckets checks
that the replica holds what the source holds.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections import Counter
from typing import Any

from _local_spark import local_spark  # first: without the spark extra it says what to install

import jetstream_sync
from jetstream_sync import KeyValueConfig
from jetstream_sync.testing import ServerNotInstalledError


def run(url: str, work_dir: str) -> None:
    checkpoint = os.path.join(work_dir, "checkpoint")
    from pyspark.sql import DataFrame

    from jetstream_sync.spark import JetStreamKeyValueDataSource

    with jetstream_sync.connect(url, name="spark-kv-cdc") as nc:
        js = nc.jetstream()
        for bucket in ("PROFILES", "PROFILES_REPLICA"):
            with contextlib.suppress(jetstream_sync.errors.BucketNotFoundError):
                js.delete_key_value(bucket)
        profiles = js.create_key_value(KeyValueConfig(bucket="PROFILES", history=10))
        replica = js.create_key_value(KeyValueConfig(bucket="PROFILES_REPLICA", history=10))

        spark = local_spark(
            "jetstream-sync spark kv cdc",
            work_dir,
            {"spark.sql.shuffle.partitions": "2", "spark.sql.session.timeZone": "UTC"},
        )
        spark.dataSource.register(JetStreamKeyValueDataSource)

        def apply(changes: DataFrame, batch_id: int) -> None:
            rows = changes.select("operation").collect()
            seen.update(r.operation for r in rows)
            # Rows of one key go to one task, in revision order: the replica sees each key's changes in order.
            ordered = changes.repartition("key").sortWithinPartitions("revision")
            (
                ordered.select("key", "value", "operation")
                .write.format("jetstream-kv")
                .mode("append")
                .option("servers", url)
                .option("bucket", "PROFILES_REPLICA")
                .save()
            )
            print(f"  micro-batch {batch_id}: applied {len(rows)} changes to PROFILES_REPLICA")

        def run_once(label: str) -> None:
            seen.clear()
            changes = (
                spark.readStream.format("jetstream-kv")
                .option("servers", url)
                .option("bucket", "PROFILES")
                .option("startingRevision", "earliest")
                .option("maxMessagesPerTrigger", "3")
                .load()
            )
            query = (
                changes.writeStream.foreachBatch(apply)
                .option("checkpointLocation", checkpoint)
                .trigger(availableNow=True)
                .start()
            )
            query.awaitTermination()
            total = sum(seen.values())
            print(
                f"{label}: {total} changes ({seen['PUT']} PUT, {seen['DEL']} DEL, {seen['PURGE']} PURGE)"
                f" up to revision {_last_revision(js)}"
            )

        def current(bucket: str) -> dict[str, Any]:
            table = spark.read.format("jetstream-kv").option("servers", url).option("bucket", bucket).load()
            return {r.key: bytes(r.value).decode() for r in table.collect()}

        seen: Counter[str] = Counter()
        try:
            profiles.put("alice", b'{"city": "Lyon"}')
            profiles.put("bob", b'{"city": "Oslo"}')
            profiles.put("carol", b'{"city": "Porto"}')
            profiles.delete("bob")
            profiles.purge("carol")
            run_once("run 1")
            profiles.put("alice", b'{"city": "Paris"}')
            profiles.put("dave", b'{"city": "Rome"}')
            profiles.delete("alice")
            run_once("run 2")
            source, copy = current("PROFILES"), current("PROFILES_REPLICA")
            print(f"PROFILES: {source}")
            print(f"PROFILES_REPLICA: {copy}")
            print(f"the replica matches the source: {source == copy}")
            print(f"replica history of alice: {[e.operation.value for e in replica.history('alice')]}")
        finally:
            spark.stop()


def _last_revision(js: jetstream_sync.JetStream) -> int:
    return js.stream_info("KV_PROFILES").state.last_seq


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="jetstream-spark-kv-") as work:
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
        sys.exit(f"{exc}; or give a running server: python examples/spark_kv_cdc.py nats://127.0.0.1:4222")
