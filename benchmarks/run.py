#!/usr/bin/env python3
"""jetstream-sync side by side with nats-py, natsio and nats.js, in one run on one embedded nats-server.

Usage (from the repository root, in the dev virtualenv: ``pip install -e '.[dev]'``):

    python benchmarks/run.py                       # 3 repetitions, full counts (about 4 minutes)
    python benchmarks/run.py --quick               # 3 repetitions, small counts (about 2 minutes)
    python benchmarks/run.py --only consume_ack,next_waiting --peers ours,natsio
    python benchmarks/run.py --reps 5 --out results/

Peers, each measured in a process of its own (``benchmarks/peers/``; the contract is its README):
    ours      jetstream-sync, in this interpreter (with the compiled parser where it was built)
    ours-pure jetstream-sync on the pure-Python parser (JETSTREAM_SYNC_PURE_PYTHON=1); not run by default
    nats-py   nats-py's asyncio client, in this interpreter
    natsio    natsio 1.0.1 (asyncio, Python >= 3.13), in a virtualenv this script creates once under
              ~/.cache/jetstream-sync from the first Python >= 3.13 it finds (this one, pyenv's, python3.13 on
              PATH; or JETSTREAM_SYNC_NATSIO_PYTHON); skipped with a note when there is none
    nats.js   nats.js 3.4 on node, installed with npm once into ~/.cache/jetstream-sync/natsjs-3.4.0; skipped
              with a note without node and npm

Method:
  - One EmbeddedServer (memory storage everywhere). An admin jetstream-sync client in this process prepares
    each case (streams, one durable consumer per peer on a stream pre-filled once for all of them, buckets)
    and deletes it afterwards; drivers only run the measured operation.
  - A driver connects, warms up with operations of the same kind, then times the measured part: wall time
    and the process's CPU time (every thread), and each call's latency for the latency cases.
  - Repetitions are interleaved: every repetition runs every peer once, the order rotated each time.
  - Reported per peer: the median over repetitions (and min..max), client CPU per operation; per peer
    against ours: the median of the per-repetition ratios and their range. Ratios are ours / peer: above 1
    is faster for throughput, below 1 is faster for latency.
  - The targets of issue 29 are checked at the end. A results file (JSON, and the markdown table) is written
    per run to benchmarks/results/ (or --out).
  - The machine is shared and noisy: the load average is printed before and after; trust ratios within one
    run, not absolute figures across runs.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import importlib.metadata
import itertools
import json
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jetstream_sync
from jetstream_sync import (
    AckPolicy,
    ConsumerConfig,
    KeyValueConfig,
    ObjectStoreConfig,
    StorageType,
    StreamConfig,
)
from jetstream_sync._runtime import _scan
from jetstream_sync.testing import EmbeddedServer, find_server_binary

HERE = Path(__file__).resolve().parent
PEERS_DIR = HERE / "peers"
CACHE = Path(os.environ.get("JETSTREAM_SYNC_CACHE", Path.home() / ".cache" / "jetstream-sync"))
NATSIO = "1.0.1"
NATSJS = "3.4.0"
DRIVER_PATIENCE = 300  # seconds a driver may take before it counts as hung

KIB, MIB = 1024, 1024 * 1024


# -- peers -----------------------------------------------------------------------------------------------------------
@dataclass
class Peer:
    """A client under test: how to start its driver, or why it is not available on this machine."""

    key: str
    argv: list[str] = field(default_factory=list)
    cwd: Path | None = None
    missing: str = ""  # why it is skipped; empty when available

    def command(self, job: dict[str, Any]) -> list[str]:
        return [*self.argv, json.dumps(job)]


def python_driver(key: str, python: str, driver: str) -> Peer:
    return Peer(key, [python, str(PEERS_DIR / driver)])


def find_python_313() -> str | None:
    """A Python >= 3.13 for natsio: the override, this interpreter, pyenv's, or python3.13 on PATH."""
    override = os.environ.get("JETSTREAM_SYNC_NATSIO_PYTHON")
    if override:
        return override
    if sys.version_info >= (3, 13):
        return sys.executable
    pyenv = sorted(Path.home().glob(".pyenv/versions/3.1[3-9]*/bin/python"), reverse=True)
    if pyenv:
        return str(pyenv[0])
    return shutil.which("python3.13")


def natsio_peer() -> Peer:
    venv = CACHE / f"natsio-{NATSIO}-venv"
    python = venv / "bin" / "python"
    if not python.exists():
        base = find_python_313()
        if base is None:
            return Peer("natsio", missing="no Python >= 3.13 on this machine (natsio needs one)")
        print(f"  creating {venv} with {base} and natsio {NATSIO} (once)", flush=True)
        subprocess.run([base, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", f"natsio=={NATSIO}"], check=True)
    return python_driver("natsio", str(python), "natsio_driver.py")


def natsjs_peer() -> Peer:
    if shutil.which("node") is None or shutil.which("npm") is None:
        return Peer("nats.js", missing="node and npm are not installed")
    home = CACHE / f"natsjs-{NATSJS}"
    if not (home / "node_modules" / "@nats-io" / "obj").is_dir():
        print(f"  installing nats.js {NATSJS} into {home} with npm (once)", flush=True)
        home.mkdir(parents=True, exist_ok=True)
        (home / "package.json").write_text('{"name": "natsjs-bench", "private": true}\n')
        packages = [f"@nats-io/{name}@{NATSJS}" for name in ("transport-node", "jetstream", "kv", "obj")]
        subprocess.run(
            ["npm", "install", "--no-audit", "--no-fund", "--loglevel=error", *packages], cwd=home, check=True
        )
    script = home / "natsjs_driver.mjs"  # node resolves packages from the script's directory
    shutil.copyfile(PEERS_DIR / "natsjs_driver.mjs", script)
    return Peer("nats.js", ["node", str(script)], cwd=home)


def make_peers(wanted: list[str]) -> list[Peer]:
    makers: dict[str, Callable[[], Peer]] = {
        "ours": lambda: python_driver("ours", sys.executable, "ours_driver.py"),
        # ours on the pure-Python protocol parser: what the compiled fast path gains, in the same run
        "ours-pure": lambda: Peer(
            "ours-pure", ["env", f"{_scan.PURE_PYTHON_ENV}=1", sys.executable, str(PEERS_DIR / "ours_driver.py")]
        ),
        "nats-py": lambda: python_driver("nats-py", sys.executable, "natspy_driver.py"),
        "natsio": natsio_peer,
        "nats.js": natsjs_peer,
    }
    return [makers[key]() for key in wanted]


# -- cases -----------------------------------------------------------------------------------------------------------
THROUGHPUT, LATENCY, BYTES, RSS = "msgs/s", "p50 ms", "MB/s", "peak RSS MiB"


@dataclass(frozen=True)
class Case:
    """One row group of the table: what is measured, at which sizes and counts, and the state it needs."""

    id: str
    label: str
    metric: str
    setup: str  # "subject", "stream", "filled", "kv", "obj"
    sizes: tuple[int, ...]
    counts: dict[str, tuple[int, ...]]  # mode -> count per size
    warmup: int = 0  # 0: a tenth of the count
    ack: AckPolicy = AckPolicy.EXPLICIT
    batch: int = 1000
    p50_row: bool = False  # a throughput case whose calls' p50 latency is a row of its own (``<id>_p50``)
    ours_only: bool = False  # a property of this client (bounded memory), not a comparison


CASES = [
    Case("core_publish", "core publish + flush", THROUGHPUT, "subject", (128, 16 * KIB),
         {"full": (200_000, 20_000), "quick": (50_000, 5_000)}),
    Case("js_publish", "js.publish sequential", THROUGHPUT, "stream", (128, 16 * KIB),
         {"full": (3_000, 2_000), "quick": (1_000, 500)}, warmup=200, p50_row=True),
    Case("publish_async", "pipelined publish (publish_async)", THROUGHPUT, "stream", (128, 16 * KIB),
         {"full": (50_000, 10_000), "quick": (10_000, 3_000)}),
    Case("consume_ack", "consume + ack", THROUGHPUT, "filled", (128, 16 * KIB),
         {"full": (50_000, 10_000), "quick": (10_000, 3_000)}, batch=500),
    Case("consume_acknone", "consume, AckNone", THROUGHPUT, "filled", (128, 16 * KIB),
         {"full": (50_000, 10_000), "quick": (10_000, 3_000)}, ack=AckPolicy.NONE, batch=500),
    Case("messages_ack", "messages() + ack", THROUGHPUT, "filled", (128, 16 * KIB),
         {"full": (50_000, 10_000), "quick": (10_000, 3_000)}, batch=500),
    Case("fetch_ack", "fetch(1000) + ack", THROUGHPUT, "filled", (128, 16 * KIB),
         {"full": (30_000, 10_000), "quick": (10_000, 3_000)}, warmup=1000),
    Case("next_waiting", "next(), message waiting", LATENCY, "filled", (128,),
         {"full": (1_000,), "quick": (300,)}, warmup=50),
    Case("kv_get", "KV get", LATENCY, "kv", (128,), {"full": (2_000,), "quick": (500,)}, warmup=200),
    Case("kv_put", "KV put", LATENCY, "kv", (128,), {"full": (2_000,), "quick": (500,)}, warmup=200),
    Case("obj_put", "object store put", BYTES, "obj", (16 * MIB,), {"full": (3,), "quick": (2,)}, warmup=1),
    Case("obj_get", "object store get", BYTES, "obj", (16 * MIB,), {"full": (3,), "quick": (2,)}, warmup=1),
    Case("slow_consume_rss", "slow consumer (0.2 ms a message, max_messages=1000), peak RSS above the idle client",
         RSS, "filled", (16 * KIB,), {"full": (10_000,), "quick": (3_000,)}, warmup=1, batch=1000, ours_only=True),
]  # fmt: skip

# (case, size, peer, op, threshold): issue 29's targets; ratio = ours / peer in the same repetition
TARGETS = [
    *(
        (case, size, "natsio", ">=", 1.2)
        for case in ("core_publish", "publish_async", "consume_ack", "consume_acknone", "messages_ack", "fetch_ack")
        for size in (128, 16 * KIB)
    ),
    ("consume_ack", 128, "nats.js", ">=", 1.0),
    ("messages_ack", 128, "nats.js", ">=", 1.0),
    ("js_publish_p50", 128, "natsio", "<=", 1.0),
    ("js_publish_p50", 128, "nats-py", "<=", 1.0),
    ("next_waiting", 128, "natsio", "<=", 1.0),
    ("next_waiting", 128, "nats-py", "<=", 1.0),
]


def size_label(size: int) -> str:
    if size >= MIB:
        return f"{size // MIB} MiB"
    return f"{size // KIB} KiB" if size >= KIB else f"{size} B"


# -- the state of a case, prepared by the admin client ----------------------------------------------------------------
class Admin:
    """Creates what a repetition needs and deletes it afterwards; the drivers only measure."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.client = jetstream_sync.connect(url, name="bench-admin")
        self.js = self.client.jetstream(timeout=30)
        self._seq = itertools.count(1)

    def close(self) -> None:
        self.client.close()

    @contextlib.contextmanager
    def prepared(self, case: Case, size: int, count: int, warmup: int, peers: list[Peer]):  # type: ignore[no-untyped-def]
        """Yields the job of each peer for one repetition; removes the stream or bucket afterwards."""
        n = next(self._seq)
        base = {"url": self.url, "case": case.id, "size": size, "count": count, "warmup": warmup,
                "batch": case.batch, "window": 4000}  # fmt: skip
        jobs = {peer.key: dict(base) for peer in peers}
        cleanup: Callable[[], None] = lambda: None  # noqa: E731
        if case.setup == "subject":
            for job in jobs.values():
                job["subject"] = f"bench.nobody.{n}"
        elif case.setup in ("stream", "filled"):
            stream, subject = f"BENCH_{n}", f"bench.{n}"
            self.js.create_stream(StreamConfig(name=stream, subjects=[subject], storage=StorageType.MEMORY))
            cleanup = lambda: self.js.delete_stream(stream)  # noqa: E731
            for key, job in jobs.items():
                job.update(stream=stream, subject=subject)
                if case.setup == "filled":
                    job["consumer"] = "C_" + key.replace(".", "").replace("-", "").upper()
                    config = ConsumerConfig(durable_name=job["consumer"], ack_policy=case.ack, max_ack_pending=-1)
                    self.js.create_consumer(stream, config)
            if case.setup == "filled":
                self._fill(subject, b"x" * size, warmup + count)
        elif case.setup == "kv":
            bucket = f"BENCH_KV_{n}"
            kv = self.js.create_key_value(KeyValueConfig(bucket=bucket, storage=StorageType.MEMORY))
            kv.put("k", b"x" * size)
            cleanup = lambda: self.js.delete_key_value(bucket)  # noqa: E731
            for job in jobs.values():
                job["bucket"] = bucket
        elif case.setup == "obj":
            cleanups = []
            for key, job in jobs.items():  # a store per peer: puts must not replace each other's objects
                bucket = f"BENCH_OBJ_{n}_{key.replace('.', '').replace('-', '')}"
                store = self.js.create_object_store(ObjectStoreConfig(bucket=bucket, storage=StorageType.MEMORY))
                if case.id == "obj_get":
                    store.put("obj", bytes(i % 251 for i in range(size)))
                job["bucket"] = bucket
                cleanups.append(bucket)
            cleanup = lambda: [self.js.delete_object_store(b) for b in cleanups] and None  # noqa: E731
        try:
            yield jobs
        finally:
            cleanup()

    def _fill(self, subject: str, payload: bytes, count: int) -> None:
        futures = [self.js.publish_async(subject, payload) for _ in range(count)]
        self.js.publish_async_complete(timeout=300)
        failed = [f for f in futures if f.exception() is not None]
        if failed:
            raise RuntimeError(f"pre-filling {subject}: {len(failed)} publishes failed")


# -- running and collecting ------------------------------------------------------------------------------------------
@dataclass
class Sample:
    """One driver run: the case's metric, and client CPU per operation in microseconds."""

    value: float
    cpu_us: float
    client: str


@dataclass
class Table:
    """samples[(case, size, peer)] over repetitions; ratios[(case, size, peer)] = ours / peer per repetition."""

    samples: dict[tuple[str, int, str], list[Sample]] = field(default_factory=dict)
    ratios: dict[tuple[str, int, str], list[float]] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    def add(self, case_id: str, size: int, peer: str, sample: Sample) -> None:
        self.samples.setdefault((case_id, size, peer), []).append(sample)

    def add_ratios(self, case_id: str, size: int, values: dict[str, float]) -> None:
        """Ours / each other peer, for one repetition."""
        if "ours" in values:
            for key, value in values.items():
                if key != "ours":
                    self.ratios.setdefault((case_id, size, key), []).append(values["ours"] / value)


def run_driver(peer: Peer, job: dict[str, Any]) -> dict[str, Any]:
    done = subprocess.run(
        peer.command(job), cwd=peer.cwd, capture_output=True, text=True, timeout=DRIVER_PATIENCE, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"exit {done.returncode}: {done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def metric_of(case: Case, size: int, result: dict[str, Any]) -> float:
    if case.metric == LATENCY:
        return float(result["p50_ms"])
    if case.metric == BYTES:
        return result["count"] * size / result["seconds"] / 1e6
    if case.metric == RSS:
        return result["rss_over_kib"] / 1024
    return result["count"] / result["seconds"]


def run_case(admin: Admin, case: Case, mode: str, reps: int, peers: list[Peer], table: Table) -> None:
    if case.ours_only:
        peers = [p for p in peers if p.key == "ours"]
    for size, count in zip(case.sizes, case.counts[mode], strict=True):
        warmup = case.warmup or max(100, count // 10)
        print(f"\n== {case.label}, {size_label(size)}: {count:,} timed after {warmup:,} warm-up", flush=True)
        for rep in range(reps):
            order = peers[rep % len(peers) :] + peers[: rep % len(peers)]
            values: dict[str, float] = {}
            p50s: dict[str, float] = {}
            with admin.prepared(case, size, count, warmup, order) as jobs:
                for peer in order:
                    try:
                        result = run_driver(peer, jobs[peer.key])
                    except (RuntimeError, subprocess.TimeoutExpired, json.JSONDecodeError, IndexError) as exc:
                        message = f"{case.id} {size_label(size)} rep {rep + 1} {peer.key}: {exc}"
                        table.errors.append(message)
                        print(f"   ! {message}", flush=True)
                        continue
                    if "skip" in result:
                        table.skipped[f"{case.id} {peer.key}"] = result["skip"]
                        continue
                    cpu_us = result["cpu"] / result["count"] * 1e6
                    values[peer.key] = metric_of(case, size, result)
                    table.add(case.id, size, peer.key, Sample(values[peer.key], cpu_us, result["client"]))
                    if case.p50_row:
                        p50s[peer.key] = result["p50_ms"]
                        table.add(f"{case.id}_p50", size, peer.key, Sample(result["p50_ms"], cpu_us, result["client"]))
            table.add_ratios(case.id, size, values)
            table.add_ratios(f"{case.id}_p50", size, p50s)
            shown = "  ".join(f"{k} {v:,.3f}" if case.metric == LATENCY else f"{k} {v:,.0f}" for k, v in values.items())
            print(f"   rep {rep + 1}: {shown}", flush=True)


# -- reporting -------------------------------------------------------------------------------------------------------
def fmt(metric: str, value: float) -> str:
    if metric == LATENCY:
        return f"{value:.3f} ms"
    if metric == RSS:
        return f"{value:.1f} MiB"
    return f"{value:,.1f}" if metric == BYTES else f"{value:,.0f}"


def ratio_text(ratios: list[float]) -> str:
    if not ratios:
        return "-"
    median = statistics.median(ratios)
    return f"{median:.2f}x ({min(ratios):.2f}-{max(ratios):.2f})" if len(ratios) > 1 else f"{median:.2f}x"


def markdown(table: Table, peers: list[Peer]) -> list[str]:
    keys = [p.key for p in peers if not p.missing]
    head = ["case", "size", *keys, *(f"ours/{k}" for k in keys if k != "ours"), "CPU us/op " + " / ".join(keys)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * 2 + "---:|" * (len(head) - 2)]
    rows = []
    for c in CASES:
        rows.append((c.id, c.label, c.metric, c.sizes))
        if c.p50_row:
            rows.append((f"{c.id}_p50", c.label, LATENCY, c.sizes))
    for case_id, label, metric, sizes in rows:
        for size in sizes:
            got = {k: table.samples.get((case_id, size, k)) for k in keys}
            if not any(got.values()):
                continue
            cells = [label + (" (p50)" if metric == LATENCY else ""), size_label(size)]
            cells += [fmt(metric, statistics.median(s.value for s in got[k])) if got[k] else "-" for k in keys]
            cells += [ratio_text(table.ratios.get((case_id, size, k), [])) for k in keys if k != "ours"]
            cpu = [f"{statistics.median(s.cpu_us for s in got[k]):.1f}" if got[k] else "-" for k in keys]
            lines.append("| " + " | ".join([*cells, " / ".join(cpu)]) + " |")
    return lines


def check_targets(table: Table) -> list[dict[str, Any]]:
    rows = []
    for case_id, size, peer, op, threshold in TARGETS:
        ratios = table.ratios.get((case_id, size, peer))
        if not ratios:
            continue
        median = statistics.median(ratios)
        met = median >= threshold if op == ">=" else median <= threshold
        rows.append({"case": case_id, "size": size, "peer": peer, "ratio": median, "op": op,
                     "threshold": threshold, "met": met, "range": [min(ratios), max(ratios)]})  # fmt: skip
    for case in CASES:  # bounded memory: the peak within twice what max_messages allows (buffer + working set)
        if case.metric == RSS and (case.id, case.sizes[0], "ours") in table.samples:
            peaks = [s.value for s in table.samples[(case.id, case.sizes[0], "ours")]]
            bound = 2 * case.batch * case.sizes[0] / MIB
            rows.append({"case": case.id, "size": case.sizes[0], "peer": "bound", "ratio": max(peaks) / bound,
                         "op": "<=", "threshold": 1.0, "met": max(peaks) <= bound,
                         "range": [min(peaks), max(peaks)]})  # fmt: skip
    return rows


def save_results(out_dir: str, label: str, mode: str, document: dict[str, Any], lines: list[str]) -> Path:
    """Write a run's results as JSON and Markdown into ``out_dir``, named by the UTC time, ``label`` (a prefix
    such as ``"kv-read-modes-"``), the Python version and ``mode``; the path both share, without suffix."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    stem = out / f"{stamp}-{label}py{platform.python_version()}-{mode}"
    stem.with_name(stem.name + ".json").write_text(json.dumps(document, indent=1) + "\n")
    stem.with_name(stem.name + ".md").write_text("\n".join(lines) + "\n")
    return stem


def environment(argv: list[str], script: str = "benchmarks/run.py") -> dict[str, Any]:
    """Where and with what a run measured: printed at its start and kept in its results file; ``script`` and
    ``argv`` make the command that repeats it (kv.py, object_store.py and otel_overhead.py report theirs)."""
    server = subprocess.run([find_server_binary(), "--version"], capture_output=True, text=True, check=False)
    cpu = "unknown"
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as info:
        cpu = next((line.split(":", 1)[1].strip() for line in info if line.startswith("model name")), cpu)
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": f"{cpu}, {os.cpu_count()} cores",
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "nats-server": (server.stdout or server.stderr).strip(),
        "jetstream-sync": f"{jetstream_sync.__version__} ({_scan.PARSER} parser)",
        "nats-py": importlib.metadata.version("nats-py"),
        "command": shlex.join(["python", script, *argv]),
        "loadavg_start": os.getloadavg(),
    }


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="small counts (about 2 minutes)")
    parser.add_argument("--reps", type=int, default=3, help="repetitions per case and size (default 3)")
    parser.add_argument("--only", help="comma-separated case ids: " + ", ".join(c.id for c in CASES))
    parser.add_argument("--peers", default="ours,nats-py,natsio,nats.js", help="comma-separated peers")
    parser.add_argument("--out", default=str(HERE / "results"), help="directory of the results files")
    args = parser.parse_args(argv)
    known_cases, known_peers = {c.id for c in CASES}, {"ours", "ours-pure", "nats-py", "natsio", "nats.js"}
    args.cases = [c for c in CASES if not args.only or c.id in args.only.split(",")]
    args.peer_keys = args.peers.split(",")
    if args.only and set(args.only.split(",")) - known_cases:
        parser.error(f"unknown cases: {sorted(set(args.only.split(',')) - known_cases)}")
    if set(args.peer_keys) - known_peers or "ours" not in args.peer_keys:
        parser.error(f"--peers takes ours (always) and any of {sorted(known_peers - {'ours'})}")
    if args.reps < 1:
        parser.error("--reps must be at least 1")
    return args


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    mode = "quick" if args.quick else "full"
    env = environment(argv)
    print("jetstream-sync benchmark against the other clients, side by side")
    for key in ("date", "machine", "python", "nats-server", "jetstream-sync", "nats-py", "command"):
        print(f"  {key + ':':<16}{env[key]}")
    print("  load average:   {:.2f} {:.2f} {:.2f} at start".format(*env["loadavg_start"]), flush=True)
    peers = make_peers(args.peer_keys)
    for peer in peers:
        if peer.missing:
            print(f"  {peer.key}: skipped, {peer.missing}")
    available = [p for p in peers if not p.missing]
    table = Table(skipped={p.key: p.missing for p in peers if p.missing})
    started = time.monotonic()
    with EmbeddedServer() as server:
        admin = Admin(server.url)
        try:
            for case in args.cases:
                run_case(admin, case, mode, args.reps, available, table)
        finally:
            admin.close()
    env["loadavg_end"] = os.getloadavg()
    env["clients"] = sorted({s.client for samples in table.samples.values() for s in samples})
    lines = markdown(table, peers)
    targets = check_targets(table)
    print("\n" + "\n".join(lines))
    print("\nTargets (issue 29), ratio = ours / peer, median of the repetitions (range):")
    for row in targets:
        verdict = "met" if row["met"] else "MISSED"
        print(f"  {row['case']:<16} {size_label(row['size']):>7} vs {row['peer']:<8} {row['ratio']:.2f}x "
              f"({row['range'][0]:.2f}-{row['range'][1]:.2f}) {row['op']} {row['threshold']}x  {verdict}")  # fmt: skip
    print(f"\n  clients: {', '.join(env['clients'])}")
    print("  load average:   {:.2f} {:.2f} {:.2f} at end; {:.0f} s in all".format(
        *env["loadavg_end"], time.monotonic() - started))  # fmt: skip
    document = {
        "environment": env,
        "mode": mode,
        "reps": args.reps,
        "samples": {"|".join(map(str, k)): [vars(s) for s in v] for k, v in table.samples.items()},
        "ratios": {"|".join(map(str, k)): v for k, v in table.ratios.items()},
        "targets": targets,
        "skipped": table.skipped,
        "errors": table.errors,
    }
    stem = save_results(args.out, "", mode, document, lines)
    print(f"  results: {stem}.json and .md")
    return 1 if table.errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
