"""Scenario ``spark-session``: Spark fragments on the reader's session run, in page order, in one local session.

The fragments use the reader's ``spark`` (a SparkSession), ``url`` (their server) and ``df`` (a DataFrame of
``key``/``value`` rows), and the buckets PROFILES (key-value) and MEDIA (object store). The driver makes all of
them on an embedded nats-server (``local[2]``, no UI, the driver on 127.0.0.1), runs the fragments in one
namespace (a later one may use what an earlier one made, as in a notebook), then reads back what they made: each
DataFrame a fragment left whose plan is a batch is counted, a streaming one is checked to be streaming, and the
bucket PROFILES holds the rows of ``df`` the write fragment wrote.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from pyspark.sql import DataFrame, SparkSession

import jetstream_sync
from jetstream_sync import KeyValueConfig, ObjectStoreConfig
from jetstream_sync.testing import EmbeddedServer
from tests.server.doc_scenarios import block_files, your_servers_to

#: a PNG's first bytes: enough for a file named *.png
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256))


def main() -> None:
    os.environ.update(PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1")
    with EmbeddedServer() as server, jetstream_sync.connect(server.url) as nc:
        js = nc.jetstream()
        profiles = js.create_key_value(KeyValueConfig(bucket="PROFILES"))
        profiles.put("alice", b'{"plan": "pro"}')
        media = js.create_object_store(ObjectStoreConfig(bucket="MEDIA"))
        media.put("logo.png", PNG)
        media.put("notes.txt", b"not an image")
        builder = SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
        for key in ("spark.driver.host", "spark.driver.bindAddress"):  # loopback only
            builder = builder.config(key, "127.0.0.1")
        spark = builder.getOrCreate()
        spark.sparkContext.setLogLevel("ERROR")
        try:
            df = spark.createDataFrame([("bob", b'{"plan": "free"}')], "key string, value binary")
            names: dict[str, Any] = {"spark": spark, "url": server.url, "df": df}
            for path in block_files():
                code = your_servers_to(path.read_text(encoding="utf-8"), [server.url])
                exec(compile(code, str(path), "exec"), names)
            for name, value in names.items():
                if isinstance(value, DataFrame) and value is not df:
                    said = "streaming" if value.isStreaming else f"{value.count()} rows"
                    print(f"{name}: {said}")
            assert profiles.get("bob").value == b'{"plan": "free"}'
        finally:
            spark.stop()


if __name__ == "__main__":
    main()
