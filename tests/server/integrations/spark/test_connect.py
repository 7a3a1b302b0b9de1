"""The ``jetstream`` data source through Spark Connect (issue 36): batch read, streaming read, batch write and
streaming write from a Connect client, against a real nats-server.

The Connect server is the pyspark wheel's own ``SparkConnectServer``, started with the wheel's ``spark-submit``
in a process of its own (``local[2,3]``, gRPC on 127.0.0.1, an ephemeral port read from its log), once for this
module. A separate process rather than ``SparkSession.builder.remote("local[2]")``: that starts the server in
*this* process's JVM, next to the session-wide classic ``spark`` fixture the other modules share, and PySpark
refuses a second context (SESSION_OR_CONTEXT_EXISTS). Planning and reading run in the server's Python workers
(``PYSPARK_PYTHON`` is this interpreter), so the data source class must unpickle and import there as it would
on a cluster.

The client needs PySpark's ``connect`` extra (grpcio, grpcio-status, googleapis-common-protos, zstandard,
pandas); without it, or without Java, or when the server process exits at start, the module is skipped with
the reason. Through Connect, ``foreachBatch`` runs on the server, so streaming results are collected through
sinks the test reads back: parquet files, or a JetStream stream read with this library's client.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyarrow")
pytest.importorskip("pyspark", minversion="4.2")
if shutil.which("java") is None:  # pragma: no cover - depends on the machine
    pytest.skip("PySpark needs Java on PATH", allow_module_level=True)

import pyspark
from pyspark.errors import PySparkException, PySparkImportError

from jetstream_sync.spark import JetStreamDataSource
from tests.helpers import REPO_ROOT
from tests.server.integrations.spark.helpers import publish, run_available_now, seqs, source, stream_source


def _connect_client_missing() -> str | None:
    """Why this interpreter cannot be a Spark Connect client (the packages of ``pyspark[connect]``), or None."""
    try:
        # The package checks on import (pandas, grpcio, grpcio-status, googleapis-common-protos, zstandard).
        from pyspark.sql.connect.utils import check_dependencies

        check_dependencies()
    except PySparkImportError as exc:
        return str(exc)
    return None


_MISSING = _connect_client_missing()
if _MISSING is not None:  # pragma: no cover - depends on the environment
    pytest.skip(
        "Spark Connect needs pyspark[connect] (grpcio, grpcio-status, googleapis-common-protos, zstandard, "
        f"pandas): {_MISSING}",
        allow_module_level=True,
    )


# Starting the server (half a minute on a busy machine) counts against the first test's timeout.
pytestmark = [pytest.mark.spark, pytest.mark.timeout(360)]

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
STARTED = re.compile(r"Spark Connect server started at: (\S+):(\d+)")
START_TIMEOUT = 240.0

# Errors only, but the line that tells the ephemeral port the server bound.
_LOG4J = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
logger.connect.name = org.apache.spark.sql.connect.service.SparkConnectServer
logger.connect.level = info
"""

# The variables that would make spark-submit (or this process's PySpark) think it is a Connect client.
_CLIENT_ENV = ("SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED", "SPARK_LOCAL_REMOTE", "SPARK_API_MODE")


def _log_tail(log: Path, lines: int = 30) -> str:
    text = log.read_text(errors="replace") if log.exists() else ""
    return "\n".join(text.splitlines()[-lines:])


def _stop(process: subprocess.Popen[bytes]) -> None:
    """End the server's process group (spark-submit's shell and the JVM it started), gently first."""
    if process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=30)


def _start_server(work: Path) -> tuple[subprocess.Popen[bytes], str]:
    """Start a Spark Connect server from the pyspark wheel; return the process and its ``sc://`` URL."""
    home = Path(pyspark.__file__).parent
    log4j = work / "log4j2.properties"
    log4j.write_text(_LOG4J)
    log = work / "server.log"
    env = {k: v for k, v in os.environ.items() if k not in _CLIENT_ENV}
    env.update(
        SPARK_HOME=str(home),
        SPARK_CONF_DIR=str(work),  # no spark-defaults.conf of the machine's
        PYSPARK_PYTHON=sys.executable,
        SPARK_LOCAL_IP="127.0.0.1",
        # The repository's root first, as a regular install's site-packages would be: PySpark finds
        # ``pyspark_jetstream`` with pkgutil.iter_modules, which does not see an editable install's modules.
        PYTHONPATH=os.pathsep.join(p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH", "")) if p),
    )
    confs = {
        "spark.connect.grpc.binding.address": "127.0.0.1",
        "spark.connect.grpc.binding.port": "0",  # ephemeral: parallel runs do not collide
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "2",
        "spark.default.parallelism": "2",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.streaming.stopTimeout": "30s",
        "spark.local.dir": str(work / "local"),
        "spark.sql.warehouse.dir": str(work / "warehouse"),
    }
    command = [
        str(home / "bin" / "spark-submit"),
        "--master",
        "local[2,3]",
        "--name",
        "jetstream-sync-connect-tests",
        "--driver-memory",
        "1g",
        "--driver-java-options",
        f"-Dlog4j2.configurationFile=file:{log4j}",
        "--class",
        SERVER_CLASS,
    ]
    for key, value in confs.items():
        command += ["--conf", f"{key}={value}"]
    with log.open("wb") as out:
        process = subprocess.Popen(
            command,
            env=env,
            cwd=work,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    deadline = time.monotonic() + START_TIMEOUT
    while True:
        found = STARTED.search(log.read_text(errors="replace"))
        if found:
            return process, f"sc://{found.group(1)}:{found.group(2)}"
        if process.poll() is not None:
            pytest.skip(f"the Spark Connect server exited at start ({process.returncode}):\n{_log_tail(log)}")
        if time.monotonic() > deadline:
            _stop(process)
            pytest.fail(f"the Spark Connect server did not start within {START_TIMEOUT:.0f}s:\n{_log_tail(log)}")
        time.sleep(0.2)  # the poll interval of this bounded wait for the server's "started" line


@pytest.fixture(scope="module")
def connect_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One Spark Connect server for this module, in its own process and work directory; stopped at the end."""
    process, url = _start_server(tmp_path_factory.mktemp("spark-connect"))
    try:
        yield url
    finally:
        _stop(process)


@pytest.fixture(scope="module")
def connect(connect_url: str) -> Iterator[Any]:
    """A Spark Connect session with ``JetStreamDataSource`` registered the documented way (the class is pickled
    to the server). ``builder.remote`` marks this process as a Connect client (``SPARK_CONNECT_MODE_ENABLED``,
    which makes ``pyspark.sql.functions`` build Connect columns); that mark is undone with the module, so the
    classic modules after it are unaffected."""
    from pyspark.sql import SparkSession

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SPARK_CONNECT_MODE_ENABLED", "1")  # recorded, so undone at the end
        session = SparkSession.builder.remote(connect_url).create()
        try:
            session.dataSource.register(JetStreamDataSource)
            yield session
        finally:
            session.stop()


def test_the_session_is_a_spark_connect_client(connect: Any) -> None:
    from pyspark.sql.connect.session import SparkSession as RemoteSparkSession

    assert isinstance(connect, RemoteSparkSession)


def test_batch_read_returns_each_message_once_with_its_fields(
    connect: Any, nats_server: Any, js: Any, new_stream: Any
) -> None:
    stream = new_stream()
    publish(js, stream.name, 300, every_header=50)
    df = source(connect, nats_server.url, stream.name, numPartitions=3, minPartitionSize=50)
    assert df.count() == 300
    assert seqs(df) == list(range(1, 301))
    rows = {r.seq: r for r in df.filter("seq IN (1, 2, 300)").collect()}
    assert (rows[1].subject, bytes(rows[1].data), rows[1].stream) == (f"{stream.name}.a", b"m0", stream.name)
    assert rows[1].headers == {"X-I": ["0"], "X-Multi": ["1", "2"]}
    assert (rows[2].subject, bytes(rows[2].data), rows[2].headers) == (f"{stream.name}.b", b"m1", None)
    assert rows[300].timestamp is not None


def test_format_jetstream_resolves_without_register_when_the_package_is_installed_on_the_server(
    connect_url: str, connect: Any, nats_server: Any, js: Any, new_stream: Any
) -> None:
    """A second session on the same server, never registered: the server's Python finds the top-level
    ``pyspark_jetstream`` module (its ``DefaultSource``), as classic Spark does."""
    from pyspark.sql import SparkSession

    stream = new_stream()
    publish(js, stream.name, 20)
    other: Any = SparkSession.builder.remote(connect_url).create()
    try:
        assert other.session_id != connect.session_id
        assert seqs(source(other, nats_server.url, stream.name)) == list(range(1, 21))
    finally:
        other.stop()


def test_a_bad_option_reaches_the_client_naming_the_option(connect: Any, nats_server: Any, new_stream: Any) -> None:
    stream = new_stream()
    with pytest.raises(PySparkException, match="numPartitions"):
        source(connect, nats_server.url, stream.name, numPartitions="zero").collect()


def test_streaming_available_now_twice_from_one_checkpoint_is_exactly_once(
    connect: Any, nats_server: Any, js: Any, new_stream: Any, tmp_path: Path
) -> None:
    """The server runs the query; its parquet sink (read back through the session) is what the test sees."""
    stream = new_stream()
    publish(js, stream.name, 250)
    out, checkpoint = tmp_path / "out", tmp_path / "ckpt"

    def build() -> Any:
        events = stream_source(
            connect, nats_server.url, stream.name, startingSequence="earliest", maxMessagesPerTrigger=100
        )
        return (
            events.select("seq", "data")
            .writeStream.format("parquet")
            .option("path", str(out))
            .option("checkpointLocation", str(checkpoint))
        )

    first = run_available_now(build())
    # Through Connect a progress's JSON has no top-level numInputRows; the property sums its sources'.
    assert [p.numInputRows for p in first.recentProgress if p.numInputRows] == [100, 100, 50]  # admission control
    assert seqs(connect.read.parquet(str(out))) == list(range(1, 251))
    publish(js, stream.name, 120, start=250)
    js.stream(stream.name).delete_msg(300)
    run_available_now(build())
    read_back = connect.read.parquet(str(out))
    assert seqs(read_back) == [s for s in range(1, 371) if s != 300]  # each once across both runs
    assert {bytes(r.data) for r in read_back.filter("seq = 370").collect()} == {b"m369"}


def test_batch_write_publishes_rows_and_a_rerun_stores_nothing_twice(
    connect: Any, nats_server: Any, new_stream: Any
) -> None:
    target = new_stream()
    rows = [(f"{target.name}.x", f"payload-{i}", {"K": ["v1", "v2"]} if i % 2 else None, f"id-{i}") for i in range(40)]
    df = connect.createDataFrame(rows, "subject STRING, data STRING, headers MAP<STRING, ARRAY<STRING>>, key STRING")
    writer = df.write.format("jetstream").option("servers", nats_server.url).option("msgIdColumn", "key")
    writer.mode("append").save()
    writer.mode("append").save()  # the same ids again: all duplicates
    assert target.info().state.messages == 40
    stored = {m.data: m for m in (target.get_msg(s) for s in range(1, 41))}
    assert set(stored) == {f"payload-{i}".encode() for i in range(40)}
    assert stored[b"payload-1"].headers == {"K": ["v1", "v2"], "Nats-Msg-Id": "id-1"}
    assert stored[b"payload-2"].headers == {"Nats-Msg-Id": "id-2"}
    assert {m.subject for m in stored.values()} == {f"{target.name}.x"}


def test_streaming_write_copies_a_stream_exactly_once_across_two_runs(
    connect: Any, nats_server: Any, js: Any, new_stream: Any, tmp_path: Path
) -> None:
    src, dst = new_stream(), new_stream()
    publish(js, src.name, 300)
    url = nats_server.url

    def build() -> Any:
        events = stream_source(connect, url, src.name, startingSequence="earliest", minPartitionSize=100)
        copy = events.selectExpr(
            f"'{dst.name}.copy' AS subject", "data", "concat(stream, ':', CAST(seq AS STRING)) AS msg_id"
        )
        return (
            copy.writeStream.format("jetstream")
            .option("servers", url)
            .option("msgIdColumn", "msg_id")
            .option("checkpointLocation", str(tmp_path / "ckpt"))
        )

    run_available_now(build())
    assert dst.info().state.messages == 300
    publish(js, src.name, 50, start=300)
    run_available_now(build())
    state = dst.info().state
    assert (state.messages, state.last_seq) == (350, 350)  # nothing was published twice, not even a duplicate
    copied = [dst.get_msg(s) for s in range(1, 351)]
    assert sorted(m.data for m in copied) == sorted(b"m%d" % i for i in range(350))
    assert {m.headers["Nats-Msg-Id"] for m in copied} == {f"{src.name}:{s}" for s in range(1, 351)}
    assert {m.subject for m in copied} == {f"{dst.name}.copy"}
