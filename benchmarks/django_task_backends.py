#!/usr/bin/env python3
"""Django tasks through JetStreamBackend against the database backend of django-tasks (django-tasks-db), on
SQLite and on PostgreSQL, side by side on this machine.

Usage (from the repository root, in the dev venv with django-tasks-db, and psycopg for PostgreSQL):

    python benchmarks/django_task_backends.py                    # 3 repetitions of 2,000 tasks, every backend
    python benchmarks/django_task_backends.py --tasks 500 --reps 1 --only jetstream,sqlite

Method: one EmbeddedServer (file storage) and, when PostgreSQL's server programs are installed (Debian's
``postgresql``), one PostgreSQL cluster made in a temporary directory and started on 127.0.0.1 with its default
settings. For each repetition and variant (the order turns every repetition) a fresh process enqueues N no-op
tasks one after the other (each ``enqueue()`` timed: p50 and p99), then the variant's worker command runs them
in another process: ``manage.py jetstream_tasks_worker --threads T`` or ``manage.py db_worker --batch`` (one
thread). Run throughput is N over the span from the first task started to the last finished, read from the
results (every result is read back and checked: SUCCESSFUL, the right return value), so the workers' start-up
does not count. Medians over the repetitions; ratios against SQLite.

Durability differs by default: nats-server writes file-stored messages without an fsync per message (it syncs
every 2 minutes; a replicated stream is what protects writes), while PostgreSQL and SQLite fsync each commit.
So each database runs twice: with its defaults, and "-nosync" without an fsync per commit (SQLite: WAL with
synchronous=NORMAL; PostgreSQL: synchronous_commit=off), which is the closer match to nats-server's default.
PostgreSQL connections are persistent (CONN_MAX_AGE None): db_worker closes old connections around each task,
and with Django's default of 0 it would connect again for every task.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
VARIANTS = ("jetstream", "jetstream-t4", "sqlite", "sqlite-nosync", "postgres", "postgres-nosync")
PG_BIN = Path("/usr/lib/postgresql")


# -- the child: one measurement ----------------------------------------------------------------------------
def child(variant: str, count: int) -> dict[str, Any]:
    """Enqueue ``count`` tasks, run them with the variant's worker command, read every result back."""
    import django

    django.setup()
    from _django_tasks_jobs import noop
    from django.core.management import call_command

    from jetstream_sync.integrations.django.tasks._compat import task_backends

    backend = task_backends["default"]
    if variant.startswith("jetstream"):
        backend.store()  # the stream and bucket made before the timing, as migrate makes the table
    else:
        from django_tasks_db.models import DBTaskResult

        call_command("migrate", verbosity=0)
        DBTaskResult.objects.all().delete()  # an earlier repetition's (PostgreSQL keeps one database)
    latencies = []
    ids = []
    started = time.perf_counter()
    for n in range(count):
        t0 = time.perf_counter()
        result = noop.enqueue(n)
        latencies.append(time.perf_counter() - t0)
        ids.append(result.id)
    enqueue_span = time.perf_counter() - started

    env = dict(os.environ)
    if variant.startswith("jetstream"):
        threads = "4" if variant.endswith("t4") else "1"
        worker = subprocess.Popen(
            [sys.executable, "-m", "django", "jetstream_tasks_worker", "--threads", threads],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        js = backend.store().js
        deadline = time.monotonic() + 600
        while js.stream_info(backend.task_options.stream).state.messages and time.monotonic() < deadline:
            time.sleep(0.05)  # polls the stream until every task message was acked (work-queue retention)
        worker.send_signal(signal.SIGTERM)
        _, err = worker.communicate(timeout=120)
    else:
        worker = subprocess.Popen(
            [sys.executable, "-m", "django", "db_worker", "--batch", "--no-startup-delay", "--no-reload"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        _, err = worker.communicate(timeout=600)
    if worker.returncode != 0:
        raise SystemExit(f"{variant}: the worker exited {worker.returncode}: {err.decode()[-2000:]}")
    results = [backend.get_result(result_id) for result_id in ids]
    bad = [r.id for n, r in enumerate(results) if str(r.status) != "SUCCESSFUL" or r.return_value != n]
    if bad:
        raise SystemExit(f"{variant}: {len(bad)} of {count} tasks did not succeed with their value, e.g. {bad[0]}")
    first = min(r.started_at for r in results)
    last = max(r.finished_at for r in results)
    latencies.sort()
    return {
        "variant": variant,
        "tasks": count,
        "enqueue_p50_ms": 1000 * latencies[len(latencies) // 2],
        "enqueue_p99_ms": 1000 * latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))],
        "enqueue_per_s": count / enqueue_span,
        "run_per_s": count / max(1e-9, (last - first).total_seconds()),
    }


# -- the driver ----------------------------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Postgres:
    """A throwaway PostgreSQL cluster on 127.0.0.1 (initdb in a temporary directory, pg_ctl start/stop)."""

    def __init__(self) -> None:
        versions = sorted(PG_BIN.glob("*/bin/initdb"))
        if not versions:
            raise RuntimeError("PostgreSQL's server programs are not installed (apt-get install postgresql)")
        self.bin = versions[-1].parent
        self.dir = Path(tempfile.mkdtemp(prefix="bench-pg-"))
        self.port = free_port()
        self.as_user: list[str] = []
        if os.geteuid() == 0:  # initdb refuses root: run the cluster as the package's postgres user
            shutil.chown(self.dir, "postgres")
            self.as_user = ["runuser", "-u", "postgres", "--"]
        data = self.dir / "data"
        self._run("initdb", "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8")
        options = f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.dir}"
        self._run("pg_ctl", "-D", str(data), "-o", options, "-w", "-l", str(self.dir / "log"), "start")

    def _run(self, program: str, *args: str) -> None:
        done = subprocess.run([*self.as_user, str(self.bin / program), *args], capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"{program} failed: {done.stderr.strip()[-500:]}")

    def stop(self) -> None:
        try:
            self._run("pg_ctl", "-D", str(self.dir / "data"), "-m", "fast", "-w", "stop")
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)

    def version(self) -> str:
        return self.bin.parent.name


def measure(variant: str, count: int, env: dict[str, str]) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, str(Path(__file__)), "--child", variant, "--tasks", str(count)],
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    if done.returncode != 0:
        raise SystemExit(f"{variant} failed:\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=2000)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--only", default=",".join(VARIANTS), help=f"comma-separated, of {', '.join(VARIANTS)}")
    parser.add_argument("--child", choices=VARIANTS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    sys.path.insert(0, str(HERE))
    if args.child:
        print(json.dumps(child(args.child, args.tasks)))
        return

    from jetstream_sync.testing import EmbeddedServer

    variants = [v.strip() for v in args.only.split(",") if v.strip()]
    unknown = set(variants) - set(VARIANTS)
    if unknown:
        raise SystemExit(f"--only: unknown variants {sorted(unknown)}")
    base = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "_django_tasks_settings",
        "PYTHONPATH": os.pathsep.join([str(HERE), str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # a stopped run still stops its PostgreSQL (finally)
    postgres: Postgres | None = None
    notes = []
    if any(v.startswith("postgres") for v in variants):
        try:
            postgres = Postgres()
        except (RuntimeError, OSError, LookupError) as exc:
            notes.append(f"postgres: not measured ({exc})")
            variants = [v for v in variants if not v.startswith("postgres")]
    samples: dict[str, list[dict[str, Any]]] = {v: [] for v in variants}
    try:
        with EmbeddedServer() as server, tempfile.TemporaryDirectory() as tmp:
            for rep in range(args.reps):
                turn = variants[rep % len(variants) :] + variants[: rep % len(variants)]
                for variant in turn:
                    env = {**base, "BENCH_BACKEND": variant, "NATS_URL": server.url}
                    env["BENCH_STREAM"] = f"BENCH_{rep}_{variant.replace('-', '_').upper()}"
                    env["BENCH_SQLITE"] = str(Path(tmp) / f"rep{rep}-{variant}.sqlite3")
                    if postgres is not None:
                        env["BENCH_PG_PORT"] = str(postgres.port)
                        env["BENCH_PG_HOST"] = "127.0.0.1"
                    sample = measure(variant, args.tasks, env)
                    samples[variant].append(sample)
                    print(
                        f"rep {rep + 1} {variant:13s} enqueue p50 {sample['enqueue_p50_ms']:.3f} ms, "
                        f"p99 {sample['enqueue_p99_ms']:.3f} ms, {sample['enqueue_per_s']:,.0f}/s; "
                        f"run {sample['run_per_s']:,.0f} tasks/s",
                        flush=True,
                    )
    finally:
        if postgres is not None:
            postgres.stop()
    report(samples, args, notes, postgres)


def report(samples: dict[str, list[dict[str, Any]]], args: Any, notes: list[str], postgres: Postgres | None) -> None:
    import django

    def median(variant: str, key: str) -> float:
        return statistics.median(s[key] for s in samples[variant])

    print()
    command = f"python benchmarks/django_task_backends.py --tasks {args.tasks} --reps {args.reps} --only {args.only}"
    print(f"command:        {command}")
    print(f"machine:        {os.cpu_count()} cores, Python {sys.version.split()[0]}, Django {django.__version__}")
    if postgres is not None:
        print(f"postgresql:     {postgres.version()} (defaults; 127.0.0.1)")
    for note in notes:
        print(note)
    print()
    reference = "sqlite" if "sqlite" in samples else next(iter(samples))
    print(f"| backend | enqueue p50 (ms) | enqueue p99 (ms) | enqueues/s | tasks run/s | run vs {reference} |")
    print("|---|---:|---:|---:|---:|---:|")
    for variant in samples:
        ratio = median(variant, "run_per_s") / median(reference, "run_per_s")
        print(
            f"| {variant} | {median(variant, 'enqueue_p50_ms'):.3f} | {median(variant, 'enqueue_p99_ms'):.3f} | "
            f"{median(variant, 'enqueue_per_s'):,.0f} | {median(variant, 'run_per_s'):,.0f} | {ratio:.2f}x |"
        )


if __name__ == "__main__":
    main()
