#!/usr/bin/env python3
"""The Spark data source side by side with one client doing the same work without Spark, in one run on one
embedded nats-server and one local Spark (issue 36: ratios, not absolute times).

Usage (from the repository root, in the dev virtualenv with the ``spark`` extra and Java):

    python benchmarks/spark.py                      # 100,000 rows, 3 repetitions (about 4 minutes when idle)
    python benchmarks/spark.py --quick              # 5,000 rows, 2 repetitions (under a minute)
    python benchmarks/spark.py --label old          # names the results file spark-old-<commit>-...
    python benchmarks/spark.py --compare a.json b.json ...   # one old-vs-new table from saved runs

Another checkout of the package is measured with ``PYTHONPATH=<its root>``: the driver imports it from there,
and so do Spark's Python workers (PySpark passes PYTHONPATH on; the JVM starts in a temporary directory, as a
worker's working directory comes first on its sys.path); the run checks the workers and stops when
they import another copy than the driver. The package's commit goes into the results.

Measured, each as rows per second (rows / wall time of the action, as the driver sees it):

    fetch loop        baseline: one client, an ephemeral AckNone consumer, ``fetch(5000)`` until every message
                      has come (Msg objects only, nothing converted)
    read_range        baseline: one client reading the stream into Arrow record batches of the source's schema
                      with the source's own executor code (``read_range(options, 1, N, "direct", schema)``)
    batch read p=1,2,4  ``spark.read.format("jetstream")`` with numPartitions 1, 2, 4 (minPartitionSize 1000,
                      so 4 really happen), written to the ``noop`` sink (every column crosses from the Python
                      worker into the JVM; the time includes planning)
    stream AvailableNow  ``spark.readStream`` from earliest, maxMessagesPerTrigger N/5, Trigger.AvailableNow
                      into the ``noop`` sink (the time includes starting the query and its checkpoints)
    publish_async loop  baseline: one client publishing the sink's N rows (subject, 100 B payload, headers
                      on every 10th, a Nats-Msg-Id each, as the sink sends), then ``publish_async_complete``
    sink default ids  a cached DataFrame of N rows in 2 partitions written with ``format("jetstream")``,
                      default idempotent ids
    sink msgIdColumn  the same rows, ids from a column

The read stream holds N messages (100 B payloads, headers on every 10th, two subjects), memory storage; each
publish and write goes to a new memory stream (so no id is a duplicate) whose message count is checked
afterwards. Spark is ``local[2]`` with the UI off, as the Spark tests' session, with Spark's default Arrow
batch size. A warm-up (untimed) checks each batch read's partition count and the 4-partition
read's row count, and runs the streaming query and the sink once at a small size. Every repetition runs every
case once, baselines first; reported per case: the best of the repetitions, their range, and the ratio of the
best to the best of its baseline (reads to read_range, the sink to the publish_async loop; the reads also to
the fetch loop, whose code issue 36 did not change), with the range of the per-repetition ratios. The machine
is shared and noisy: the load average is kept per case; compare ratios within one run, and old and new code
in interleaved runs.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jetstream_sync
from jetstream_sync import AckPolicy, ConsumerConfig, StorageType, StreamConfig
from jetstream_sync.testing import EmbeddedServer

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run import environment, save_results

HERE = Path(__file__).resolve().parent
PAYLOAD = 100
HEADER_EVERY = 10
FETCH_BATCH = 5000

_LOG4J = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
"""


@dataclass(frozen=True)
class Case:
    """One measured line: its id, what the table calls it, and the baseline its ratio is taken to."""

    id: str
    label: str
    baseline: str | None = None
    also: str | None = None  # a second baseline shown for reads (the fetch loop)


CASES = (
    Case("fetch", "fetch loop (one client, Msg objects)"),
    Case("read_range", "read_range into Arrow (one client, no Spark)", baseline="fetch"),
    Case("read_p1", "Spark batch read, 1 partition", baseline="read_range", also="fetch"),
    Case("read_p2", "Spark batch read, 2 partitions", baseline="read_range", also="fetch"),
    Case("read_p4", "Spark batch read, 4 partitions", baseline="read_range", also="fetch"),
    Case("stream", "Spark streaming, AvailableNow", baseline="read_range", also="fetch"),
    Case("publish", "publish_async loop (one client)"),
    Case("sink_default", "Spark sink, default ids", baseline="publish"),
    Case("sink_msgid", "Spark sink, msgIdColumn", baseline="publish"),
)
BY_ID = {case.id: case for case in CASES}


def package_commit() -> str:
    """The git commit of the jetstream_sync this interpreter imported, ``-dirty`` when tracked files differ from it
    ("unknown" outside a checkout)."""
    root = Path(jetstream_sync.__file__).resolve().parent.parent
    done = subprocess.run(
        ["git", "-C", str(root), "describe", "--always", "--dirty", "--abbrev=7"],
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout.strip() or "unknown"


def row_headers(i: int) -> dict[str, str] | None:
    return {"X-I": str(i), "X-Kind": "bench"} if i % HEADER_EVERY == 0 else None


def payload(i: int) -> bytes:
    return (b"m%d:" % i).ljust(PAYLOAD, b"x")


def fill(js: jetstream_sync.JetStream, name: str, count: int) -> None:
    """The read stream: ``count`` messages on ``<name>.a`` / ``.b``, headers on every 10th."""
    js.create_stream(StreamConfig(name=name, subjects=[f"{name}.>"], storage=StorageType.MEMORY, allow_direct=True))
    for i in range(count):
        js.publish_async(f"{name}.{'ab'[i % 2]}", payload(i), row_headers(i))
    js.publish_async_complete(120)
    stored = js.stream_info(name).state.messages
    if stored != count:
        raise SystemExit(f"the read stream holds {stored} messages, not {count}")


@contextlib.contextmanager
def target_stream(js: jetstream_sync.JetStream) -> Iterator[str]:
    """A new memory stream (direct gets allowed, as the read stream) for one write or read; deleted afterwards."""
    name = "SINK" + uuid.uuid4().hex[:8].upper()
    js.create_stream(StreamConfig(name=name, subjects=[f"{name}.>"], storage=StorageType.MEMORY, allow_direct=True))
    try:
        yield name
    finally:
        js.delete_stream(name)


def expect_stored(js: jetstream_sync.JetStream, name: str, count: int, what: str) -> None:
    stored = js.stream_info(name).state.messages
    if stored != count:
        raise SystemExit(f"{what}: the target stream holds {stored} messages, not {count}")


# -- the baselines -------------------------------------------------------------------------------------------------
def fetch_loop(js: jetstream_sync.JetStream, name: str, count: int) -> float:
    consumer = js.stream(name).create_consumer(
        ConsumerConfig(ack_policy=AckPolicy.NONE, inactive_threshold=30, mem_storage=True)
    )
    try:
        started = time.perf_counter()
        fetched = 0
        while fetched < count:
            fetched += sum(1 for _ in consumer.fetch(FETCH_BATCH, expires=5))
        return time.perf_counter() - started
    finally:
        consumer.delete()


def import_read_range() -> Callable[..., Iterator[Any]]:
    """``read_range`` from where this checkout keeps it (range_reader.py now, reading.py before issue 36)."""
    try:
        from jetstream_sync.integrations.spark.range_reader import read_range
    except ImportError:
        from jetstream_sync.integrations.spark.reading import read_range  # type: ignore[no-redef,attr-defined,unused-ignore]
    return read_range


def read_range_loop(url: str, name: str, count: int) -> float:
    from pyspark.sql.pandas.types import to_arrow_schema

    from jetstream_sync.spark import READ_SCHEMA, parse_read_options

    read_range = import_read_range()
    options = parse_read_options({"servers": url, "stream": name}, streaming=False)
    schema = to_arrow_schema(READ_SCHEMA, timezone="UTC")
    started = time.perf_counter()
    rows = sum(batch.num_rows for batch in read_range(options, 1, count, "direct", schema))
    elapsed = time.perf_counter() - started
    if rows != count:
        raise SystemExit(f"read_range read {rows} rows, not {count}")
    return elapsed


def publish_loop(js: jetstream_sync.JetStream, count: int) -> float:
    with target_stream(js) as name:
        rows = [(f"{name}.{'ab'[i % 2]}", payload(i), row_headers(i), f"r-{i}") for i in range(count)]
        started = time.perf_counter()
        for subject, data, headers, msg_id in rows:
            js.publish_async(subject, data, headers, msg_id=msg_id)
        js.publish_async_complete(120)
        elapsed = time.perf_counter() - started
        expect_stored(js, name, count, "publish_async loop")
    return elapsed


# -- Spark ---------------------------------------------------------------------------------------------------------
def start_spark(work: Path) -> Any:
    from pyspark.sql import SparkSession

    from jetstream_sync.spark import JetStreamDataSource

    log4j = work / "log4j2.properties"
    log4j.write_text(_LOG4J)
    # Spark's Python workers run ``python -m pyspark.daemon`` in the JVM's working directory, which puts that
    # directory first on their sys.path: from the repository root they would import its jetstream_sync whatever
    # PYTHONPATH says. The JVM starts here, in an empty directory, so they find the package as the driver did.
    os.chdir(work)
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    session = (
        SparkSession.builder.master("local[2]")
        .appName("jetstream-sync-bench")
        .config("spark.driver.memory", "2g")
        .config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile=file:{log4j}")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.local.dir", str(work / "local"))
        .config("spark.sql.warehouse.dir", str(work / "warehouse"))
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    session.dataSource.register(JetStreamDataSource)
    return session


def worker_package(spark: Any) -> str:
    """Where a Spark Python worker imports jetstream_sync from (it must be the driver's copy)."""

    def where(_: Any) -> Iterator[str]:
        import jetstream_sync as imported

        yield imported.__file__

    found: list[str] = spark.sparkContext.parallelize([0], 1).mapPartitions(where).collect()
    return found[0]


def batch_source(spark: Any, url: str, name: str, partitions: int) -> Any:
    return (
        spark.read.format("jetstream")
        .option("servers", url)
        .option("stream", name)
        .option("numPartitions", str(partitions))
        .option("minPartitionSize", "1000")
        .load()
    )


def batch_read(spark: Any, url: str, name: str, partitions: int) -> float:
    df = batch_source(spark, url, name, partitions)
    started = time.perf_counter()
    df.write.format("noop").mode("overwrite").save()
    return time.perf_counter() - started


def stream_read(spark: Any, url: str, name: str, count: int, work: Path) -> float:
    events = (
        spark.readStream.format("jetstream")
        .option("servers", url)
        .option("stream", name)
        .option("startingSequence", "earliest")
        .option("maxMessagesPerTrigger", str(max(1, count // 5)))
        .load()
    )
    checkpoint = work / f"ckpt-{uuid.uuid4().hex[:8]}"
    started = time.perf_counter()
    query = (
        events.writeStream.format("noop")
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    try:
        if not query.awaitTermination(600):
            raise SystemExit("the AvailableNow query did not finish in 600 s")
    finally:
        if query.isActive:
            query.stop()
    elapsed = time.perf_counter() - started
    if query.exception() is not None:
        raise SystemExit(f"the AvailableNow query failed: {query.exception()}")
    rows = sum(progress["numInputRows"] for progress in query.recentProgress)
    if rows != count:
        raise SystemExit(f"the AvailableNow query read {rows} rows, not {count}")
    shutil.rmtree(checkpoint, ignore_errors=True)
    return elapsed


def sink_frame(spark: Any, count: int) -> Any:
    """N rows in 2 partitions, cached: subject (two subjects), 100 B data, headers on every 10th, an id."""
    from pyspark.sql import functions as F

    i = F.col("id")
    frame = spark.range(0, count, 1, 2).select(
        F.when(i % 2 == 0, F.lit("a")).otherwise(F.lit("b")).alias("suffix"),
        F.rpad(F.concat(F.lit("m"), i.cast("string"), F.lit(":")), PAYLOAD, "x").cast("binary").alias("data"),
        F.when(
            i % HEADER_EVERY == 0,
            F.create_map(F.lit("X-I"), F.array(i.cast("string")), F.lit("X-Kind"), F.array(F.lit("bench"))),
        ).alias("headers"),
        F.concat(F.lit("r-"), i.cast("string")).alias("key"),
    )
    frame = frame.cache()
    frame.count()
    return frame


def sink_write(spark: Any, js: jetstream_sync.JetStream, url: str, frame: Any, count: int, msg_id: bool) -> float:
    from pyspark.sql import functions as F

    with target_stream(js) as name:
        rows = frame.select(
            F.concat(F.lit(f"{name}."), F.col("suffix")).alias("subject"),
            "data",
            "headers",
            *(["key"] if msg_id else []),
        )
        writer = rows.write.format("jetstream").option("servers", url).mode("append")
        if msg_id:
            writer = writer.option("msgIdColumn", "key")
        started = time.perf_counter()
        writer.save()
        elapsed = time.perf_counter() - started
        expect_stored(js, name, count, "the Spark sink")
    return elapsed


# -- a run ---------------------------------------------------------------------------------------------------------
def warm_up(spark: Any, js: jetstream_sync.JetStream, url: str, name: str, count: int, work: Path) -> None:
    """Untimed: each Spark case once (the streaming query and the sink small); the batch reads' partition
    counts checked, and the row count of the 4-partition read."""
    for partitions in (1, 2, 4):
        df = batch_source(spark, url, name, partitions)
        planned = df.rdd.getNumPartitions()
        if planned != partitions:
            raise SystemExit(f"numPartitions={partitions} planned {planned} partitions")
    rows = batch_source(spark, url, name, 4).count()
    if rows != count:
        raise SystemExit(f"the 4-partition read counted {rows} rows, not {count}")
    small = min(count, 2000)
    with target_stream(js) as small_stream:
        for i in range(small):
            js.publish_async(f"{small_stream}.{'ab'[i % 2]}", payload(i), row_headers(i))
        js.publish_async_complete(60)
        stream_read(spark, url, small_stream, small, work)
    frame = sink_frame(spark, small)
    sink_write(spark, js, url, frame, small, msg_id=False)
    sink_write(spark, js, url, frame, small, msg_id=True)
    frame.unpersist()


def measure(args: argparse.Namespace, count: int, reps: int, work: Path) -> dict[str, Any]:
    """Every case ``reps`` times on one server and one Spark; per case the seconds and load of each rep."""
    seconds: dict[str, list[float]] = {case.id: [] for case in CASES}
    loads: dict[str, list[float]] = {case.id: [] for case in CASES}
    with EmbeddedServer() as server, jetstream_sync.connect(server.url, name="bench-spark") as nc:
        url = server.url
        js = nc.jetstream(timeout=60)
        name = "READ" + uuid.uuid4().hex[:8].upper()
        fill(js, name, count)
        spark = start_spark(work)
        try:
            worker = worker_package(spark)
            driver = jetstream_sync.__file__
            print(f"  package:        {driver} (commit {package_commit()}); Spark workers: {worker}", flush=True)
            if Path(worker).resolve() != Path(driver).resolve():
                raise SystemExit("Spark's Python workers import another jetstream_sync than the driver")
            warm_up(spark, js, url, name, count, work)
            frame = sink_frame(spark, count)
            runs: dict[str, Callable[[], float]] = {
                "fetch": lambda: fetch_loop(js, name, count),
                "read_range": lambda: read_range_loop(url, name, count),
                "read_p1": lambda: batch_read(spark, url, name, 1),
                "read_p2": lambda: batch_read(spark, url, name, 2),
                "read_p4": lambda: batch_read(spark, url, name, 4),
                "stream": lambda: stream_read(spark, url, name, count, work),
                "publish": lambda: publish_loop(js, count),
                "sink_default": lambda: sink_write(spark, js, url, frame, count, msg_id=False),
                "sink_msgid": lambda: sink_write(spark, js, url, frame, count, msg_id=True),
            }
            for rep in range(reps):
                for case in CASES:
                    if case.id not in args.cases:
                        continue
                    loads[case.id].append(os.getloadavg()[0])
                    took = runs[case.id]()
                    seconds[case.id].append(took)
                    print(f"  rep {rep + 1}: {case.label:<46} {count / took:>10,.0f} rows/s", flush=True)
            frame.unpersist()
        finally:
            spark.stop()
            with contextlib.suppress(ImportError):
                from jetstream_sync.integrations._clients import close_process_clients

                close_process_clients()
    return {
        "package": jetstream_sync.__file__,
        "commit": package_commit(),
        "worker_package": worker,
        "seconds": {k: v for k, v in seconds.items() if v},
        "loadavg": {k: v for k, v in loads.items() if v},
    }


# -- figures and tables --------------------------------------------------------------------------------------------
def rates(run: dict[str, Any], case: str) -> list[float]:
    return [run["count"] / s for s in run["seconds"].get(case, [])]


def ratio_best(run: dict[str, Any], case: str, base: str) -> float | None:
    mine, theirs = rates(run, case), rates(run, base)
    return max(mine) / max(theirs) if mine and theirs else None


def ratio_range(run: dict[str, Any], case: str, base: str) -> tuple[float, float] | None:
    per_rep = [m / b for m, b in zip(rates(run, case), rates(run, base), strict=False)]
    return (min(per_rep), max(per_rep)) if per_rep else None


def spread(values: list[float]) -> str:
    """min-max as a percentage below the best: how far apart the repetitions were."""
    return f"{min(values):,.0f}-{max(values):,.0f} (-{100 * (1 - min(values) / max(values)):.0f}%)"


def run_table(run: dict[str, Any]) -> list[str]:
    lines = [
        "| case | rows/s (best) | repetitions (min-max) | ratio to baseline (best/best) | per-rep ratios | vs fetch |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for case in CASES:
        got = rates(run, case.id)
        if not got:
            continue
        cells = [case.label, f"{max(got):,.0f}", spread(got)]
        if case.baseline is None:
            cells += ["baseline", "", ""]
        else:
            best, low_high = ratio_best(run, case.id, case.baseline), ratio_range(run, case.id, case.baseline)
            cells.append(f"{best:.3f} x {BY_ID[case.baseline].label.split(' (')[0]}" if best else "")
            cells.append(f"{low_high[0]:.3f}-{low_high[1]:.3f}" if low_high else "")
            also = ratio_best(run, case.id, case.also) if case.also else None
            cells.append(f"{also:.3f}" if also else "")
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def ratio_cells(runs: list[dict[str, Any]], case: str, base: str | None) -> tuple[str, float | None]:
    """The runs' ratios of ``case`` to ``base`` (best over best, one per run) as text, and their median."""
    if base is None:
        return "baseline", None
    values = [v for r in runs if (v := ratio_best(r, case, base)) is not None]
    return ", ".join(f"{v:.3f}" for v in values), statistics.median(values) if values else None


def change(old: float | None, new: float | None) -> str:
    return f"{100 * (new / old - 1):+.1f}%" if old and new else ""


def compare(paths: list[str], out: str) -> int:
    """One table of saved runs labelled ``old`` and ``new``: rows/s and ratios side by side, per run."""
    runs = [json.loads(Path(p).read_text()) for p in paths]
    old = [r for r in runs if r["label"] == "old"]
    new = [r for r in runs if r["label"] != "old"]
    lines = [
        "Runs, in the order given: "
        + "; ".join(
            f"`{Path(p).name}` ({r['label']}, {r['commit']}, load {r['environment']['loadavg_start'][0]:.1f} at "
            f"start, {r['environment']['loadavg_end'][0]:.1f} at end)"
            for p, r in zip(paths, runs, strict=True)
        ),
        "",
        "| case | old rows/s | new rows/s | old ratio to baseline | new ratio | change | old vs fetch | new vs fetch "
        "| change |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    figures: dict[str, Any] = {}
    for case in CASES:
        cells = [case.label]
        for group in (old, new):
            cells.append(", ".join(f"{max(rates(r, case.id)):,.0f}" for r in group if rates(r, case.id)))
        old_text, old_median = ratio_cells(old, case.id, case.baseline)
        new_text, new_median = ratio_cells(new, case.id, case.baseline)
        cells += [old_text, new_text, change(old_median, new_median)]
        fetch = case.also or ("fetch" if case.id == "read_range" else None)
        old_fetch, old_fetch_median = ratio_cells(old, case.id, fetch) if fetch else ("", None)
        new_fetch, new_fetch_median = ratio_cells(new, case.id, fetch) if fetch else ("", None)
        cells += [old_fetch, new_fetch, change(old_fetch_median, new_fetch_median)]
        lines.append("| " + " | ".join(cells) + " |")
        figures[case.id] = {
            "old_ratio": old_median,
            "new_ratio": new_median,
            "old_vs_fetch": old_fetch_median,
            "new_vs_fetch": new_fetch_median,
        }
    lines += [
        "",
        "Per run, comma-separated: the best rows/s, and the ratio of a case's best rows/s to its baseline's best in",
        "the same run (batch and streaming reads: read_range into Arrow; read_range: the fetch loop; the sink: the",
        "publish_async loop). Change: median new ratio / median old ratio - 1. The fetch loop's code is the same in",
        "both checkouts, so the ratios to it compare the reads against an unchanged yardstick.",
    ]
    print("\n".join(lines))
    mode = "full" if all(r["mode"] == "full" for r in runs) else "quick"
    stem = save_results(out, "spark-old-vs-new-", mode, {"runs": paths, "ratios": figures}, lines)
    print(f"  results:        {stem}.json and .md")
    return 0


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="5,000 rows, 2 repetitions")
    parser.add_argument("--count", type=int, default=None, help="rows per case (default 100,000; quick 5,000)")
    parser.add_argument("--reps", type=int, default=None, help="repetitions (default 3; quick 2)")
    parser.add_argument("--only", default=",".join(c.id for c in CASES), help="comma-separated case ids")
    parser.add_argument("--label", default="new", help="names the checkout measured (e.g. old, new)")
    parser.add_argument("--compare", nargs="+", metavar="JSON", help="tabulate saved runs instead of measuring")
    parser.add_argument("--out", default=str(HERE / "results"), help="directory of the results files")
    args = parser.parse_args(argv)
    args.out = str(Path(args.out).resolve())  # the run changes directory (start_spark)
    if args.compare:
        return compare(args.compare, args.out)
    count = args.count or (5_000 if args.quick else 100_000)
    reps = args.reps or (2 if args.quick else 3)
    args.cases = args.only.split(",")
    if count < 1000 or reps < 1 or set(args.cases) - set(BY_ID) or not args.label.isidentifier():
        parser.error("--count >= 1000, --reps >= 1, --only among " + ",".join(BY_ID) + ", --label a word")
    mode = "quick" if args.quick else "full"
    env = environment(argv, script="benchmarks/spark.py")
    print("jetstream_sync Spark source and sink against one client without Spark")
    for key in ("date", "machine", "python", "nats-server", "command"):
        print(f"  {key + ':':<16}{env[key]}")
    print(f"  mode:           {mode}, {count:,} rows, {reps} repetitions")
    print("  load average:   {:.2f} {:.2f} {:.2f} at start".format(*env["loadavg_start"]), flush=True)
    started = time.perf_counter()
    here = Path.cwd()
    with tempfile.TemporaryDirectory(prefix="bench-spark-") as work:
        try:
            run = measure(args, count, reps, Path(work))
        finally:
            os.chdir(here)
    env["loadavg_end"] = os.getloadavg()
    run.update(environment=env, mode=mode, count=count, reps=reps, label=args.label)
    lines = [
        f"`{env['command']}`, {env['date']}, {env['machine']}, {env['python']}, {env['nats-server']}; "
        f"jetstream_sync from {run['package']} (commit {run['commit']}, label {args.label}); load average "
        "{:.2f} at start, {:.2f} at end".format(env["loadavg_start"][0], env["loadavg_end"][0]),
        "",
        f"{count:,} rows of {PAYLOAD} B (headers on every {HEADER_EVERY}th), best of {reps} repetitions.",
        "",
        *run_table(run),
    ]
    print("\n" + "\n".join(lines))
    print("  load average:   {:.2f} {:.2f} {:.2f} at end".format(*env["loadavg_end"]))
    print(f"  total time:     {time.perf_counter() - started:.0f} s")
    stem = save_results(args.out, f"spark-{args.label}-{run['commit']}-", mode, run, lines)
    print(f"  results:        {stem}.json and .md")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
