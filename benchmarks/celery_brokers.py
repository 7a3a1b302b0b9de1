#!/usr/bin/env python3
"""The same Celery workload on JetStream (our kombu transport and result backend), Redis and RabbitMQ, side by
side on this machine.

Usage (from the repository root, in the dev venv; Debian's redis-server and rabbitmq-server for the peers):

    python benchmarks/celery_brokers.py                        # 3 repetitions of 2,000 tasks, every broker
    python benchmarks/celery_brokers.py --tasks 500 --reps 1 --only jetstream,redis

Method: each broker runs on 127.0.0.1 with a data directory and port of its own, started here: an
EmbeddedServer (file storage), ``redis-server`` (its defaults: snapshots, no append-only file, so no fsync per
write, as nats-server) and ``rabbitmq-server`` (a node of its own, durable classic queue, persistent messages:
Celery's defaults). A broker whose server is not installed is skipped with a note. Each stack is measured as its
users run it: JetStream with the KV result backend, Redis with the Redis result backend, RabbitMQ with the
``rpc://`` backend (replies over AMQP).

For each repetition and broker (the order turns every repetition), a fresh process measures:

- **throughput**: it sends N no-op tasks, then starts ``celery worker --pool=prefork --concurrency=2`` with
  ``task_acks_late`` (and Celery's default prefetch multiplier of 4) and reads every result back (each must be
  its task's). Tasks/s is N over the span from the first task started to the last finished, read from the
  tasks' own timestamps, so the worker's start-up does not count; the broker's delivery, the acks and the
  result writes do.
- **round trip**: with the worker idle, ``stamp.delay(i).get()`` one after the other, M times: the p50 and
  p99 from ``delay()`` to ``get()`` returning.

Medians over the repetitions; ratios against Redis. The machine's load average is printed with the results.
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
BROKERS = ("jetstream", "redis", "rabbitmq")
RABBIT_BIN = Path("/usr/lib/rabbitmq/bin")


# -- the child: one measurement ----------------------------------------------------------------------------
def child(count: int, round_trips: int) -> dict[str, Any]:
    """Send ``count`` tasks, run them with a prefork worker, check every result; then time round trips."""
    import _celery_bench_app as bench

    app = bench.app
    with app.connection_for_write() as conn:  # declare the queue before the timing, as a deployed app has it
        app.amqp.queues["celery"].bind(conn).declare()
    results = [bench.stamp.delay(n) for n in range(count)]
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "_celery_bench_app", "worker", "--pool=prefork", "--concurrency=2",
         "--loglevel=WARNING", "--without-heartbeat", "--without-mingle", "--without-gossip"],
        env=os.environ, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        done = [r.get(timeout=600) for r in results]
        bad = [n for n, value in enumerate(done) if value[0] != n]
        if bad:
            raise SystemExit(f"{len(bad)} of {count} results are not their task's, e.g. task {bad[0]}")
        first = min(value[1] for value in done)
        last = max(value[2] for value in done)
        latencies = []
        for n in range(round_trips):
            started = time.perf_counter()
            value = bench.stamp.delay(n).get(timeout=60)
            latencies.append(time.perf_counter() - started)
            if value[0] != n:
                raise SystemExit(f"round trip {n} returned {value[0]}")
    finally:
        worker.send_signal(signal.SIGTERM)
        _, err = worker.communicate(timeout=120)
    if worker.returncode not in (0, None):
        raise SystemExit(f"the worker exited {worker.returncode}: {err.decode()[-2000:]}")
    latencies.sort()
    return {
        "tasks": count,
        "run_per_s": count / max(1e-9, last - first),
        "rtt_p50_ms": 1000 * latencies[len(latencies) // 2],
        "rtt_p99_ms": 1000 * latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))],
    }


# -- the brokers ---------------------------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_port(port: int, timeout: float, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"exited {process.returncode}: {log.read_text(errors='replace')[-500:]}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.2)  # polls the port until the server listens (bounded by timeout)
    raise RuntimeError(f"did not listen on {port} within {timeout:g} s")


class Redis:
    """redis-server on 127.0.0.1 with its defaults, a port and a directory of its own."""

    def __init__(self) -> None:
        program = shutil.which("redis-server")
        if program is None:
            raise RuntimeError("redis-server is not installed (apt-get install redis-server)")
        try:
            import redis  # noqa: F401 - kombu's Redis transport needs it
        except ImportError:
            raise RuntimeError("the redis package is not installed (pip install redis)") from None
        self.dir = Path(tempfile.mkdtemp(prefix="bench-redis-"))
        self.port = free_port()
        log = self.dir / "log"
        self.process = subprocess.Popen(
            [program, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.dir), "--logfile", str(log)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        wait_port(self.port, 30, self.process, log)
        version = subprocess.run([program, "--version"], capture_output=True, text=True).stdout.split()
        self.version = version[2].removeprefix("v=") if len(version) > 2 else "?"

    def urls(self, rep: int) -> tuple[str, str]:
        return f"redis://127.0.0.1:{self.port}/{2 * rep}", f"redis://127.0.0.1:{self.port}/{2 * rep + 1}"

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(30)
        shutil.rmtree(self.dir, ignore_errors=True)


class RabbitMQ:
    """A RabbitMQ node of its own on 127.0.0.1: its own name, ports (AMQP, distribution, epmd) and directory."""

    def __init__(self) -> None:
        if not (RABBIT_BIN / "rabbitmq-server").exists():
            raise RuntimeError("rabbitmq-server is not installed (apt-get install rabbitmq-server)")
        self.dir = Path(tempfile.mkdtemp(prefix="bench-rabbitmq-"))
        self.port = free_port()
        (self.dir / "enabled_plugins").write_text("[].\n")
        self.env = {
            **os.environ,
            "HOME": str(self.dir),  # the Erlang cookie
            "RABBITMQ_NODENAME": f"bench{self.port}@localhost",
            "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1",
            "RABBITMQ_NODE_PORT": str(self.port),
            "RABBITMQ_DIST_PORT": str(free_port()),
            "ERL_EPMD_ADDRESS": "127.0.0.1",
            "ERL_EPMD_PORT": str(free_port()),
            "RABBITMQ_MNESIA_BASE": str(self.dir / "mnesia"),
            "RABBITMQ_LOG_BASE": str(self.dir / "log"),
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(self.dir / "enabled_plugins"),
            "RABBITMQ_PID_FILE": str(self.dir / "pid"),
        }
        log = self.dir / "out.log"
        with log.open("wb") as out:
            self.process = subprocess.Popen(
                [str(RABBIT_BIN / "rabbitmq-server")], env=self.env, cwd=self.dir, stdout=out, stderr=out
            )
        wait_port(self.port, 120, self.process, log)
        self.version = "?"
        for line in log.read_text(errors="replace").splitlines():
            if "RabbitMQ " in line and "Copyright" not in line:
                self.version = line.split("RabbitMQ ")[1].split()[0]
                break

    def urls(self, rep: int) -> tuple[str, str]:
        return f"pyamqp://guest:guest@127.0.0.1:{self.port}//", "rpc://"

    def stop(self) -> None:
        try:
            subprocess.run([str(RABBIT_BIN / "rabbitmqctl"), "-n", self.env["RABBITMQ_NODENAME"], "stop"],
                           env=self.env, capture_output=True, timeout=120)  # fmt: skip
            self.process.wait(60)
        finally:
            if self.process.poll() is None:
                self.process.kill()
            epmd = shutil.which("epmd")
            if epmd is not None:  # the node started an epmd on its own port: end it too
                subprocess.run([epmd, "-kill"], env=self.env, capture_output=True, timeout=30)
            shutil.rmtree(self.dir, ignore_errors=True)


def measure(env: dict[str, str], count: int, round_trips: int) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, str(Path(__file__)), "--child", "--tasks", str(count), "--round-trips", str(round_trips)],
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    if done.returncode != 0:
        raise SystemExit(f"{env['BENCH_NAME']} failed:\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=2000)
    parser.add_argument("--round-trips", type=int, default=300)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--only", default=",".join(BROKERS), help=f"comma-separated, of {', '.join(BROKERS)}")
    parser.add_argument("--label", default="", help="a name for this run in the report (e.g. the commit)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    sys.path.insert(0, str(HERE))
    sys.path.insert(0, str(REPO))
    if args.child:
        print(json.dumps(child(args.tasks, args.round_trips)))
        return

    from jetstream_sync.testing import EmbeddedServer

    brokers = [b.strip() for b in args.only.split(",") if b.strip()]
    unknown = set(brokers) - set(BROKERS)
    if unknown:
        raise SystemExit(f"--only: unknown brokers {sorted(unknown)}")
    base = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), str(REPO), os.environ.get("PYTHONPATH", "")])}
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # a stopped run still stops its servers (finally)
    peers: dict[str, Any] = {}
    notes: list[str] = []
    try:
        for name, kind in (("redis", Redis), ("rabbitmq", RabbitMQ)):
            if name in brokers:
                try:
                    peers[name] = kind()
                except (RuntimeError, OSError) as exc:
                    notes.append(f"{name}: not measured ({exc})")
                    brokers.remove(name)
        samples: dict[str, list[dict[str, Any]]] = {b: [] for b in brokers}
        loads: list[float] = []
        with EmbeddedServer() as server:
            for rep in range(args.reps):
                turn = brokers[rep % len(brokers) :] + brokers[: rep % len(brokers)]
                for broker in turn:
                    env = {**base, "BENCH_NAME": broker, "BENCH_STREAM": f"BENCH{rep}"}
                    if broker == "jetstream":
                        url = server.url.replace("nats://", "jetstream://", 1)
                        env["BENCH_BROKER"], env["BENCH_BACKEND"] = url, url
                    else:
                        env["BENCH_BROKER"], env["BENCH_BACKEND"] = peers[broker].urls(rep)
                    loads.append(os.getloadavg()[0])
                    sample = measure(env, args.tasks, args.round_trips)
                    samples[broker].append(sample)
                    print(
                        f"rep {rep + 1} {broker:9s} {sample['run_per_s']:,.0f} tasks/s; round trip p50 "
                        f"{sample['rtt_p50_ms']:.2f} ms, p99 {sample['rtt_p99_ms']:.2f} ms "
                        f"(load {loads[-1]:.1f})",
                        flush=True,
                    )
    finally:
        for peer in peers.values():
            peer.stop()
    report(samples, args, notes, peers, loads)


def report(
    samples: dict[str, list[dict[str, Any]]], args: Any, notes: list[str], peers: dict[str, Any], loads: list[float]
) -> None:
    import celery
    import kombu

    def median(broker: str, key: str) -> float:
        return float(statistics.median(s[key] for s in samples[broker]))

    print()
    command = (
        f"python benchmarks/celery_brokers.py --tasks {args.tasks} --round-trips {args.round_trips} "
        f"--reps {args.reps} --only {args.only}"
    )
    print(f"command:        {command}")
    if args.label:
        print(f"label:          {args.label}")
    print(
        f"machine:        {os.cpu_count()} cores, Python {sys.version.split()[0]}, Celery {celery.__version__}, "
        f"kombu {kombu.__version__}; load average {min(loads, default=0):.1f}-{max(loads, default=0):.1f}"
    )
    for name, peer in peers.items():
        print(f"{name}:{' ' * (15 - len(name))}{peer.version} (127.0.0.1, defaults)")
    for note in notes:
        print(note)
    print()
    reference = "redis" if "redis" in samples else next(iter(samples), None)
    print(f"| broker | tasks/s | vs {reference} | round trip p50 (ms) | vs {reference} | round trip p99 (ms) |")
    print("|---|---:|---:|---:|---:|---:|")
    for broker in samples:
        run = median(broker, "run_per_s") / median(reference, "run_per_s") if reference else 1.0
        rtt = median(broker, "rtt_p50_ms") / median(reference, "rtt_p50_ms") if reference else 1.0
        print(
            f"| {broker} | {median(broker, 'run_per_s'):,.0f} | {run:.2f}x | {median(broker, 'rtt_p50_ms'):.2f} | "
            f"{rtt:.2f}x | {median(broker, 'rtt_p99_ms'):.2f} |"
        )


if __name__ == "__main__":
    main()
