"""The local Spark session of the Spark examples: on 127.0.0.1 only, and quiet.

Left to itself, a local PySpark session binds its driver to the address the host name resolves to (or, when that
is a loopback address, to the first network interface's, with two WARN lines saying so), and prints its log4j
profile, its default log level and a WARN about native Hadoop libraries before the application can call
``setLogLevel``. Here ``SPARK_LOCAL_IP``, ``spark.driver.host`` and ``spark.driver.bindAddress`` keep the driver
on loopback, the web UI is off, and a log4j2 configuration written next to the checkpoint replaces Spark's
default one from the JVM's first line on (WARN, without the native-Hadoop notice), then ``setLogLevel("ERROR")``.
One line is left that no setting removes: the JVM's own ``WARNING: Using incubator modules:
jdk.incubator.vector`` (Spark 4 asks for that module on the java command line).

Imported first by the examples, before they start anything: without the ``spark`` extra it ends the program
with the command that installs it, instead of an ImportError traceback.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

try:
    import pyarrow  # noqa: F401 - the data source's record batches; checked here, used by jetstream_sync.spark
    from pyspark.sql import SparkSession
except ModuleNotFoundError as exc:
    sys.exit(
        f"this example needs the spark extra (and Java 17+): pip install -e '.[server,spark]' (no module {exc.name!r})"
    )

if TYPE_CHECKING:
    from collections.abc import Mapping

LOOPBACK = "127.0.0.1"
# WARN and worse on stderr from the JVM's first line on (until setLogLevel("ERROR") below): a root level other than
# WARN makes PySpark, which Spark counts as a shell, print "Setting default log level to ..." at start.
_LOG4J2 = """\
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = stderr
appender.stderr.type = Console
appender.stderr.name = stderr
appender.stderr.target = SYSTEM_ERR
appender.stderr.layout.type = PatternLayout
appender.stderr.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
# "Unable to load native-hadoop library": Hadoop's pure-Java code is what runs here, as intended.
logger.native.name = org.apache.hadoop.util.NativeCodeLoader
logger.native.level = error
"""


def local_spark(app_name: str, work_dir: str, config: Mapping[str, str] | None = None) -> SparkSession:
    """A ``local[2]`` SparkSession bound to 127.0.0.1 with its UI off and its logs at ERROR; ``config`` adds
    settings. ``work_dir`` (the example's temporary directory) receives the log4j2 configuration."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ["SPARK_LOCAL_IP"] = LOOPBACK  # the driver's RPC and block manager, before the JVM starts
    log4j = Path(work_dir) / "log4j2.properties"
    log4j.write_text(_LOG4J2, encoding="utf-8")
    builder = (
        SparkSession.builder.master("local[2]")
        .appName(app_name)
        .config("spark.driver.host", LOOPBACK)
        .config("spark.driver.bindAddress", LOOPBACK)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile={log4j.as_uri()}")
    )
    for key, value in (config or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")  # the executors' loggers too (they run in this JVM, local mode)
    return spark
