#!/usr/bin/env python3
"""Where a Celery task's round trip (``delay()`` to ``get()``) spends its time, on JetStream (our kombu
transport and KV result backend) and on Redis (broker and result backend), in the same run.

Usage (from the repository root, in the dev venv; Debian's redis-server for the Redis side):

    python benchmarks/celery_round_trip.py                     # 400 round trips on each, after 50 unrecorded
    python benchmarks/celery_round_trip.py --round-trips 100 --only jetstream

Method: the workload of benchmarks/celery_brokers.py (its app, ``_celery_bench_app``: one no-op task,
``task_acks_late``, ``celery worker --pool=prefork --concurrency=2``), round trips one after the other with the
worker idle. Every process (the producer, the worker's main process, its pool processes) appends
``<event> <role> <CLOCK_MONOTONIC ns>`` lines to one file; the clock is the same for all processes of the
machine, and as the round trips do not overlap, an event belongs to the round trip whose span holds it. The
events come from Celery's signals (both brokers: ``before/after_task_publish``, ``task_received``,
``task_prerun/postrun``), from wrapping ``backend.store_result`` and ``AsyncResult.get`` (both), and, on
JetStream only, from wrapping the transport's and backend's own steps (the publish and its ack, a message
reaching the worker's puller, ``get()``'s subscribe, flush, first read and the notice). The wrapping is done
here, at run time; the library is not changed. Each segment's median over the round trips is printed, and
the median round trip itself.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jetstream_sync.subscription import Subscription

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

VARIANTS = ("no-flush", "quick-unsub")
_ROLE = [os.environ.get("BENCH_ROLE", "producer")]
_FD: dict[int, int] = {}


def mark(event: str) -> None:
    """Append one event with this process's role and the shared monotonic clock."""
    path = os.environ.get("BENCH_TRACE")
    if not path:
        return
    pid = os.getpid()
    fd = _FD.get(pid)
    if fd is None:
        fd = _FD[pid] = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    os.write(fd, f"{event} {_ROLE[0]} {time.monotonic_ns()}\n".encode())


def _wrap(owner: Any, name: str, before: str | None, after: str | None, *, only_result: bool = False) -> None:
    original = getattr(owner, name)

    @functools.wraps(original)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if before:
            mark(before)
        value = original(*args, **kwargs)
        if after and (not only_result or value is not None):
            mark(after)
        return value

    setattr(owner, name, wrapper)


def install() -> None:
    """Hook the signals and wrap the steps (in the producer and in the worker, before it forks its pool)."""
    from celery import signals
    from celery.result import AsyncResult

    signals.before_task_publish.connect(lambda **_: mark("publish_start"), weak=False)
    signals.after_task_publish.connect(lambda **_: mark("publish_end"), weak=False)
    signals.task_received.connect(lambda **_: mark("received"), weak=False)
    signals.task_prerun.connect(lambda **_: mark("prerun"), weak=False)
    signals.task_postrun.connect(lambda **_: mark("postrun"), weak=False)

    def child(**_: Any) -> None:
        _ROLE[0] = "child"

    signals.worker_process_init.connect(child, weak=False)
    _wrap(AsyncResult, "get", "get_start", "get_end")
    import _celery_bench_app as bench

    backend = bench.app.backend
    _wrap(type(backend), "store_result", "store_start", "store_end")
    if not os.environ["BENCH_BROKER"].startswith("jetstream"):
        return
    from jetstream_sync.client import Client
    from jetstream_sync.integrations import celery as js_celery
    from jetstream_sync.integrations.kombu import transport
    from jetstream_sync.subscription import Subscription

    _wrap(transport.Channel, "basic_publish", "js_publish_start", "js_publish_acked")
    _wrap(transport.Channel, "_sink", "js_arrived", None)
    _wrap(transport.Channel, "_to_kombu", "js_to_kombu", None)
    _wrap(transport.Channel, "basic_ack", "js_ack_start", "js_ack_end")
    _wrap(js_celery.ResultBackend, "_notice", "js_notice_start", "js_notice_end")
    _wrap(Client, "subscribe", None, "js_subscribed")
    _wrap(Client, "flush", None, "js_flushed")
    _wrap(js_celery.ResultBackend, "_read_ready", None, "js_first_read")
    _wrap(Subscription, "next_msg", None, "js_notice_received")
    _wrap(Subscription, "unsubscribe", "js_unsubscribe_start", "js_unsubscribed")
    variant = os.environ.get("BENCH_VARIANT", "")
    if variant == "no-flush" and _ROLE[0] == "producer":  # what get() would gain without its flush
        Client.flush = lambda self, timeout=None: mark("js_flushed")  # type: ignore[method-assign]
    if variant == "quick-unsub" and _ROLE[0] == "producer":  # ... with an UNSUB it does not wait for
        Subscription.unsubscribe = _unsubscribe_without_waiting  # type: ignore[method-assign,assignment]


def _unsubscribe_without_waiting(sub: Subscription, timeout: float | None = None) -> None:
    """A variant of ``Subscription.unsubscribe`` measured here (not the library's): the IO thread sends the
    UNSUB in the background (as an ended request's inbox is dropped, ``replies._unsubscribe``), the caller does
    not wait for it."""
    mark("js_unsubscribe_start")
    if not sub._buffer.ended:
        runtime, nats_sub, subject = sub._runtime, sub._nats_sub, sub.subject
        sub._nats_sub = None
        try:
            if nats_sub is not None:
                runtime.post_if_open(lambda: runtime.unsubscribe_soon(nats_sub, subject))
        finally:
            sub._buffer.finish()
            runtime.untrack(sub)
    mark("js_unsubscribed")


if os.environ.get("BENCH_TRACE") and os.environ.get("BENCH_BROKER"):
    install()
    import _celery_bench_app

    app = _celery_bench_app.app  # `celery -A celery_round_trip worker` runs the bench app, traced


# -- the child: one broker's round trips ---------------------------------------------------------------------
def child(warmup: int, round_trips: int) -> list[tuple[int, int]]:
    """Start the worker, run ``warmup`` round trips unrecorded, then ``round_trips``; their spans (ns)."""
    import _celery_bench_app as bench

    with bench.app.connection_for_write() as conn:
        bench.app.amqp.queues["celery"].bind(conn).declare()
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "celery_round_trip", "worker", "--pool=prefork", "--concurrency=2",
         "--loglevel=WARNING", "--without-heartbeat", "--without-mingle", "--without-gossip"],
        env={**os.environ, "BENCH_ROLE": "main"}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    spans = []
    try:
        for n in range(warmup + round_trips):
            started = time.monotonic_ns()
            mark("delay_start")
            result = bench.stamp.delay(n)
            mark("delay_end")
            value = result.get(timeout=120)
            ended = time.monotonic_ns()
            if value[0] != n:
                raise SystemExit(f"round trip {n} returned {value[0]}")
            if n >= warmup:
                spans.append((started, ended))
    finally:
        worker.send_signal(signal.SIGTERM)
        _, err = worker.communicate(timeout=120)
    if worker.returncode not in (0, None):
        raise SystemExit(f"the worker exited {worker.returncode}: {err.decode()[-2000:]}")
    return spans


# -- the segments -----------------------------------------------------------------------------------------
#: (label, from event, to event); an event is "<name>@<role>", its first occurrence in the round trip
SEGMENTS = (
    ("delay(): publish until it returns", "delay_start@producer", "delay_end@producer"),
    ("  of which the broker publish (JetStream: to the PubAck)", "js_publish_start@producer",
     "js_publish_acked@producer"),
    ("publish start -> message at the worker's puller", "js_publish_start@producer", "js_arrived@main"),
    ("publish start -> task_received (worker main)", "publish_start@producer", "received@main"),
    ("  puller -> handed to kombu", "js_arrived@main", "js_to_kombu@main"),
    ("  handed to kombu -> task_received", "js_to_kombu@main", "received@main"),
    ("task_received -> task_prerun (pool process)", "received@main", "prerun@child"),
    ("task_prerun -> store_result start (the task)", "prerun@child", "store_start@child"),
    ("store_result (whole)", "store_start@child", "store_end@child"),
    ("  store: the create until the notice starts", "store_start@child", "js_notice_start@child"),
    ("  store: the notice publish", "js_notice_start@child", "js_notice_end@child"),
    ("store_result end -> get() returns", "store_end@child", "get_end@producer"),
    ("  notice published -> received by get()", "js_notice_end@child", "js_notice_received@producer"),
    ("  notice received -> get() returns", "js_notice_received@producer", "get_end@producer"),
    ("    of which the unsubscribe", "js_unsubscribe_start@producer", "js_unsubscribed@producer"),
    ("get(): called -> subscribed", "get_start@producer", "js_subscribed@producer"),
    ("get(): subscribed -> flushed", "js_subscribed@producer", "js_flushed@producer"),
    ("get(): flushed -> first read done", "js_flushed@producer", "js_first_read@producer"),
    ("get(): called -> waiting (subscribe+flush+read)", "get_start@producer", "js_first_read@producer"),
    ("delay() start -> task_prerun", "delay_start@producer", "prerun@child"),
    ("delay() start -> store_result end", "delay_start@producer", "store_end@child"),
    ("round trip (delay() -> get() returns)", "delay_start@producer", "get_end@producer"),
)  # fmt: skip


def trips(trace: Path, spans: list[tuple[int, int]]) -> list[dict[str, int]]:
    """Each round trip's events (the first occurrence of each) from the trace file."""
    events = []
    for line in trace.read_text().splitlines():
        name, role, stamp = line.split()
        events.append((int(stamp), f"{name}@{role}"))
    events.sort()
    per_trip: list[dict[str, int]] = [{} for _ in spans]
    trip = 0
    for ns, event in events:
        while trip < len(spans) and ns > spans[trip][1]:
            trip += 1
        if trip == len(spans):
            break
        if ns >= spans[trip][0]:
            per_trip[trip].setdefault(event, ns)
    return per_trip


ENDED_BY_READ = "get() ended by its first read, not by the notice"


def summary(per_trip: list[dict[str, int]]) -> dict[str, tuple[float, int]]:
    """Median (ms) and count of each segment over the round trips where both its events were seen."""
    out = {}
    waited = [t for t in per_trip if "js_subscribed@producer" in t]
    if waited:
        out[ENDED_BY_READ] = (float(sum("js_notice_received@producer" not in t for t in waited)), len(waited))
    for label, start, end in SEGMENTS:
        values = [(t[end] - t[start]) / 1e6 for t in per_trip if start in t and end in t]
        if values:
            out[label] = (float(statistics.median(values)), len(values))
    return out


def measure(name: str, env: dict[str, str], warmup: int, round_trips: int) -> list[dict[str, int]]:
    with tempfile.TemporaryDirectory(prefix="bench-rtt-") as tmp:
        trace = Path(tmp) / "trace"
        env = {**env, "BENCH_TRACE": str(trace), "BENCH_NAME": name}
        done = subprocess.run(
            [sys.executable, str(Path(__file__)), "--child", "--warmup", str(warmup), "--round-trips",
             str(round_trips)],
            env=env, capture_output=True, text=True, timeout=1800,
        )  # fmt: skip
        if done.returncode != 0:
            raise SystemExit(f"{name} failed:\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}")
        spans = [(int(a), int(b)) for a, b in json.loads(done.stdout.strip().splitlines()[-1])]
        return trips(trace, spans)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--round-trips", type=int, default=400)
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--only", default="jetstream,redis")
    parser.add_argument(
        "--variant",
        action="append",
        default=[],
        choices=VARIANTS,
        help="also run JetStream with get() changed so: no-flush (its flush skipped), quick-unsub (its UNSUB "
        "not waited for); measures what a change would gain, the library is not changed",
    )
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))
    if args.child:
        print(json.dumps(child(args.warmup, args.round_trips)))
        return

    from celery_brokers import Redis

    from jetstream_sync.testing import EmbeddedServer

    brokers = [b.strip() for b in args.only.split(",") if b.strip()]
    if "jetstream" in brokers:
        for variant in reversed(args.variant):
            brokers.insert(brokers.index("jetstream") + 1, f"jetstream-{variant}")
    base = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), str(REPO), os.environ.get("PYTHONPATH", "")])}
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    collected: dict[str, list[dict[str, int]]] = {b: [] for b in brokers}
    loads = [os.getloadavg()[0]]
    redis = None
    try:
        if "redis" in brokers:
            try:
                redis = Redis()
            except (RuntimeError, OSError) as exc:
                print(f"redis: not measured ({exc})")
                brokers.remove("redis")
        with EmbeddedServer() as server:
            for rep in range(args.reps):
                for broker in brokers[rep % len(brokers) :] + brokers[: rep % len(brokers)]:
                    env = {**base, "BENCH_STREAM": f"RTT{rep}"}
                    if broker.startswith("jetstream"):
                        env["BENCH_VARIANT"] = broker.removeprefix("jetstream").removeprefix("-")
                        env["BENCH_STREAM"] = f"RTT{rep}{env['BENCH_VARIANT'].replace('-', '').upper()}"
                        url = server.url.replace("nats://", "jetstream://", 1)
                        env["BENCH_BROKER"], env["BENCH_BACKEND"] = url, url
                    else:
                        assert redis is not None
                        env["BENCH_BROKER"], env["BENCH_BACKEND"] = redis.urls(rep)
                    collected[broker] += measure(broker, env, args.warmup, args.round_trips)
                    loads.append(os.getloadavg()[0])
    finally:
        if redis is not None:
            redis.stop()
    print(
        f"{args.reps} x {args.round_trips} round trips per broker (each after {args.warmup} unrecorded, the order "
        f"turning every repetition); {os.cpu_count()} cores, "
        f"load average {min(loads):.1f}-{max(loads):.1f}; medians per segment (ms), n = round trips that had both"
    )
    results = {b: summary(collected[b]) for b in brokers}
    print()
    print(
        f"command:        python benchmarks/celery_round_trip.py --round-trips {args.round_trips} --warmup "
        f"{args.warmup} --reps {args.reps} --only {args.only}{''.join(f' --variant {v}' for v in args.variant)}"
    )
    print()
    print("| segment | " + " | ".join(brokers) + " |")
    print("|---|" + "---:|" * len(brokers))
    for label in [label for label, _, _ in SEGMENTS] + [ENDED_BY_READ]:
        cells = [_cell(label, *results[b][label]) if label in results[b] else "-" for b in brokers]
        if any(c != "-" for c in cells):
            print(f"| {label} | " + " | ".join(cells) + " |")


def _cell(label: str, value: float, count: int) -> str:
    return f"{value:.0f} of {count}" if label.startswith("get() ended") else f"{value:.3f} (n={count})"


if __name__ == "__main__":
    main()
