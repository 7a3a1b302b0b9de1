"""Fixtures of the Spark tests: one local Spark for the session, a client and streams made per test.

PySpark is imported inside the fixtures, so collecting this directory without the ``spark`` extra only skips
the test modules (each calls ``pytest.importorskip``)."""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

import jetstream_sync
from jetstream_sync import StreamConfig
from jetstream_sync.integrations._clients import close_process_clients

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_LOG4J = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
"""


@pytest.fixture(scope="module", autouse=True)
def _close_cached_clients() -> Iterator[None]:
    """Reads in this (driver) process cache one client per connection, as executors do: end them with this
    module, so the tests after it that count the library's threads start from none."""
    yield
    close_process_clients()


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkSession]:
    """One small local Spark for the session: 2 cores, task retries, quiet logs, no UI."""
    from pyspark.sql import SparkSession

    from jetstream_sync.spark import JetStreamDataSource

    work = tmp_path_factory.mktemp("spark")
    log4j = work / "log4j2.properties"
    log4j.write_text(_LOG4J)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PYSPARK_PYTHON", sys.executable)
        mp.setenv("PYSPARK_DRIVER_PYTHON", sys.executable)
        mp.setenv("SPARK_LOCAL_IP", "127.0.0.1")
        session = (
            SparkSession.builder.master("local[2,3]")
            .appName("jetstream-sync-tests")
            .config("spark.driver.memory", "1g")
            .config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile=file:{log4j}")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.shuffle.partitions", "2")
            .config("spark.default.parallelism", "2")
            .config("spark.sql.session.timeZone", "UTC")
            .config("spark.sql.execution.arrow.maxRecordsPerBatch", "1000")
            .config("spark.sql.streaming.stopTimeout", "30s")
            .config("spark.local.dir", str(work / "local"))
            .config("spark.sql.warehouse.dir", str(work / "warehouse"))
            .getOrCreate()
        )
        session.sparkContext.setLogLevel("ERROR")
        session.dataSource.register(JetStreamDataSource)
        try:
            yield session
        finally:
            session.stop()


@pytest.fixture(scope="module")
def nc(nats_server) -> Iterator[jetstream_sync.Client]:
    with jetstream_sync.connect(nats_server.url, name="spark-tests") as client:
        yield client


@pytest.fixture(scope="module")
def js(nc) -> jetstream_sync.JetStream:
    return nc.jetstream(timeout=30)


@pytest.fixture
def new_stream(js) -> Iterator:
    """Make streams named for this test; deleted afterwards (only these: other tests share the server)."""
    made: list[str] = []

    def make(*, allow_direct: bool = True, **config) -> jetstream_sync.Stream:
        name = "SP" + uuid.uuid4().hex[:10].upper()
        made.append(name)
        return js.create_stream(StreamConfig(name=name, subjects=[f"{name}.>"], allow_direct=allow_direct, **config))

    yield make
    for name in made:
        js.delete_stream(name)
