#!/usr/bin/env python3
"""Key-value store: jetstream_sync against nats-py's asyncio KV, side by side in one run, on an embedded server.

Usage (from the repository root, in the dev venv):

    python benchmarks/kv.py            # 5 repetitions, 100,000 keys for the listing cases (a few minutes)
    python benchmarks/kv.py --quick    # 3 repetitions, 10,000 keys (under a minute)
    python benchmarks/kv.py --only keys,watch --keys 50000 --reps 3

Cases (the issue's targets are ratios ours / nats-py, per repetition, median reported):
    get         kv.get of one 128 B key, one call after another: p50 latency        target <= 1.1x
    put         kv.put of a 128 B value, one after another: p50 latency             target <= 1.1x
    keys        every key of a bucket of N keys (kv.keys()): seconds                target >= 3x faster
    keys_1pct   the keys matching one filter that selects 1% of them: seconds      (ours filters on the
                server; nats-py lists every key and filters here)
    watch       watch_all() (nats-py watchall()) until the initial values are in (the None): seconds
                                                                                    target >= 2x faster

Method: both clients in this process (benchmarks/run.py compares four clients in processes of their own; this
script goes deeper into KV, against nats-py alone). One EmbeddedServer; the buckets are created and filled by an
admin client (identical data for both); each measurement opens its own connection (nats-py on a fresh event
loop), warms up untimed, then times only the measured part; the order of the two is reversed every repetition.
Latencies are per call (time.perf_counter); listings are wall time of the whole call. Every listing and watch
must return exactly the expected number of keys on both sides (the run stops otherwise); a nats-py listing or
watch that ends before its first entry (nats.py #842, a race in its watcher) is timed again and counted.

The latency cases move with the machine more than the others: the requesting thread writes its request itself
(the socket gate), but the reply still crosses from the IO thread to it (one thread wake-up nats-py's single
event loop does not pay), and on an idle VM a wake-up can cost tens of microseconds where on a busy one it
costs a few. Print the load average with them.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import nats
import nats.js.errors

import jetstream_sync
from jetstream_sync import KeyValueConfig, StorageType
from jetstream_sync.testing import EmbeddedServer

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _inprocess import environment, percentile, warm_up_process

VALUE = b"v" * 128
CALLS = 2000
WARM_CALLS = 200


def fill(url: str, bucket: str, count: int) -> None:
    """A memory bucket of ``count`` keys ``k.<group>.<i>`` (100 groups), written once by an admin client."""
    with jetstream_sync.connect(url, name="bench-admin") as nc:
        js = nc.jetstream()
        kv = js.create_key_value(KeyValueConfig(bucket=bucket, storage=StorageType.MEMORY))
        for i in range(count):
            js.publish_async(f"$KV.{bucket}.k.g{i % 100}.{i}", VALUE)
        js.publish_async_complete(60)
        check(kv.status().values, count, f"bucket {bucket!r} after filling")


# -- ours ------------------------------------------------------------------------------------------------------
def ours_get(url: str, bucket: str) -> float:
    with jetstream_sync.connect(url, name="bench-ours") as nc:
        kv = nc.jetstream().key_value(bucket)
        kv.put("one", VALUE)
        check_value(kv.get("one").value, "ours get")
        for _ in range(WARM_CALLS):
            kv.get("one")
        times = []
        for _ in range(CALLS):
            start = time.perf_counter()
            kv.get("one")
            times.append(time.perf_counter() - start)
    return percentile(sorted(times), 0.5) * 1e3


def ours_put(url: str, bucket: str) -> float:
    with jetstream_sync.connect(url, name="bench-ours") as nc:
        kv = nc.jetstream().key_value(bucket)
        for _ in range(WARM_CALLS):
            kv.put("one", VALUE)
        times = []
        for _ in range(CALLS):
            start = time.perf_counter()
            kv.put("one", VALUE)
            times.append(time.perf_counter() - start)
    return percentile(sorted(times), 0.5) * 1e3


def ours_keys(url: str, bucket: str, filters: tuple[str, ...], expect: int) -> float:
    with jetstream_sync.connect(url, name="bench-ours") as nc:
        kv = nc.jetstream().key_value(bucket)
        kv.get("k.g0.0")  # warm: the connection and the API path
        start = time.perf_counter()
        found = sum(1 for _ in kv.keys(*filters))
        elapsed = time.perf_counter() - start
    check(found, expect, "ours keys")
    return elapsed


def ours_watch(url: str, bucket: str, expect: int) -> float:
    with jetstream_sync.connect(url, name="bench-ours") as nc:
        kv = nc.jetstream().key_value(bucket)
        kv.get("k.g0.0")
        start = time.perf_counter()
        seen = 0
        with kv.watch_all() as watcher:
            for entry in watcher:
                if entry is None:
                    break
                seen += 1
        elapsed = time.perf_counter() - start
    check(seen, expect, "ours watch")
    return elapsed


# -- nats-py ---------------------------------------------------------------------------------------------------
async def natspy_get(url: str, bucket: str) -> float:
    nc = await nats.connect(url, name="bench-natspy")
    kv = await nc.jetstream().key_value(bucket)
    await kv.put("one", VALUE)
    check_value((await kv.get("one")).value, "nats-py get")
    for _ in range(WARM_CALLS):
        await kv.get("one")
    times = []
    for _ in range(CALLS):
        start = time.perf_counter()
        await kv.get("one")
        times.append(time.perf_counter() - start)
    await nc.close()
    return percentile(sorted(times), 0.5) * 1e3


async def natspy_put(url: str, bucket: str) -> float:
    nc = await nats.connect(url, name="bench-natspy")
    kv = await nc.jetstream().key_value(bucket)
    for _ in range(WARM_CALLS):
        await kv.put("one", VALUE)
    times = []
    for _ in range(CALLS):
        start = time.perf_counter()
        await kv.put("one", VALUE)
        times.append(time.perf_counter() - start)
    await nc.close()
    return percentile(sorted(times), 0.5) * 1e3


# nats-py's listings can end before their first entry (nats.py #842): its watcher takes the consumer-create
# reply's num_pending before counting what arrived, and when the server has pushed everything first that count
# is 0, so the "done" marker comes first and keys() raises NoKeysError (8 of 300 calls on a 200-key bucket
# here). Such a call is timed again, up to NATSPY_TRIES times, and the run says how many were.
NATSPY_TRIES = 5
natspy_early_ends = 0


async def natspy_keys(url: str, bucket: str, filters: tuple[str, ...], expect: int) -> float:
    global natspy_early_ends
    nc = await nats.connect(url, name="bench-natspy")
    kv = await nc.jetstream().key_value(bucket)
    await kv.get("k.g0.0")
    for _ in range(NATSPY_TRIES):
        start = time.perf_counter()
        try:
            found = len(await kv.keys(filters=list(filters) or None))
        except nats.js.errors.NoKeysError:
            natspy_early_ends += 1
            continue
        elapsed = time.perf_counter() - start
        break
    else:
        raise SystemExit(f"nats-py keys: no keys in {NATSPY_TRIES} tries, expected {expect}")
    await nc.close()
    check(found, expect, "nats-py keys")
    return elapsed


async def natspy_watch(url: str, bucket: str, expect: int) -> float:
    global natspy_early_ends
    nc = await nats.connect(url, name="bench-natspy")
    kv = await nc.jetstream().key_value(bucket)
    await kv.get("k.g0.0")
    for _ in range(NATSPY_TRIES):
        start = time.perf_counter()
        watcher = await kv.watchall()
        seen = 0
        while await watcher.updates(timeout=60) is not None:
            seen += 1
        elapsed = time.perf_counter() - start
        await watcher.stop()
        if seen or not expect:
            break
        natspy_early_ends += 1
    await nc.close()
    check(seen, expect, "nats-py watch")
    return elapsed


def check(got: int, expect: int, what: str) -> None:
    if got != expect:
        raise SystemExit(f"{what}: {got} keys, expected {expect}: the comparison would be meaningless")


def check_value(got: bytes | None, what: str) -> None:
    if got != VALUE:
        raise SystemExit(f"{what}: read back {got!r:.40}, not the value written")


# -- the run ---------------------------------------------------------------------------------------------------
CASES: list[tuple[str, str, str, str, float]] = [
    # (id, what, unit, op, target) -- op "<=" for latency ratios, ">=" for speed-ups (nats-py time / ours)
    ("get", "kv.get p50 latency, 128 B", "ms", "<=", 1.1),
    ("put", "kv.put p50 latency, 128 B", "ms", "<=", 1.1),
    ("keys", "kv.keys(), every key", "s", ">=", 3.0),
    ("keys_1pct", "kv.keys(filter) matching 1%", "s", ">=", 0.0),
    ("watch", "watch initial load until None", "s", ">=", 2.0),
]


def measures(url: str, count: int) -> dict[str, tuple[Callable[[], float], Callable[[], float]]]:
    one_group = count // 100
    return {
        "get": (lambda: ours_get(url, "small"), lambda: asyncio.run(natspy_get(url, "small"))),
        "put": (lambda: ours_put(url, "small"), lambda: asyncio.run(natspy_put(url, "small"))),
        "keys": (
            lambda: ours_keys(url, "big", (), count),
            lambda: asyncio.run(natspy_keys(url, "big", (), count)),
        ),
        "keys_1pct": (
            lambda: ours_keys(url, "big", ("k.g7.*",), one_group),
            # nats-py's filters are substrings matched here, after every key was received
            lambda: asyncio.run(natspy_keys(url, "big", ("k.g7.",), one_group)),
        ),
        "watch": (lambda: ours_watch(url, "big", count), lambda: asyncio.run(natspy_watch(url, "big", count))),
    }


def run_case(fns: tuple[Callable[[], float], Callable[[], float]], op: str, reps: int) -> dict[str, list[float]]:
    """``reps`` repetitions, the order reversed every one; per repetition both figures and their ratio."""
    out: dict[str, list[float]] = {"ours": [], "theirs": [], "ratio": []}
    for rep in range(reps):
        order = [("ours", fns[0]), ("theirs", fns[1])]
        results = {who: 0.0 for who, _ in order}
        for who, fn in order if rep % 2 == 0 else reversed(order):
            results[who] = fn()
        out["ours"].append(results["ours"])
        out["theirs"].append(results["theirs"])
        # latency: ours / theirs (lower is better); listings: theirs / ours (the speed-up)
        ratio = results["ours"] / results["theirs"] if op == "<=" else results["theirs"] / results["ours"]
        out["ratio"].append(ratio)
    return out


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="3 repetitions, 10,000 keys")
    parser.add_argument("--reps", type=int, default=None, help="repetitions per case (default 5, --quick 3)")
    parser.add_argument("--keys", type=int, default=None, help="keys in the listed bucket (default 100,000)")
    parser.add_argument("--only", metavar="IDS", help="comma-separated case ids: " + ",".join(c[0] for c in CASES))
    args = parser.parse_args(argv)
    reps = args.reps or (3 if args.quick else 5)
    count = args.keys or (10_000 if args.quick else 100_000)
    wanted = set(args.only.split(",")) if args.only else {c[0] for c in CASES}
    if reps < 1 or count < 100 or wanted - {c[0] for c in CASES}:
        parser.error("--reps must be >= 1, --keys >= 100, --only among " + ",".join(c[0] for c in CASES))
    # nats-py's keys(filters=...) warns on every call that servers before 2.10 may ignore filters
    logging.getLogger("nats.js.kv").setLevel(logging.ERROR)
    started = time.perf_counter()
    env = environment(argv, script="benchmarks/kv.py")
    print("jetstream_sync KV vs nats-py KV")
    for key in ("date", "machine", "python", "nats-py", "nats-server", "jetstream-sync", "command"):
        print(f"  {key + ':':<16}{env[key]}")
    mode = "quick" if args.quick else "full"
    print(f"  mode:           {mode}, {reps} repetitions, order reversed each, {count:,} keys listed")
    print("  load average:   {:.2f} {:.2f} {:.2f} at start".format(*env["loadavg_start"]), flush=True)
    with EmbeddedServer() as server:
        warm_up_process(server.url)
        with jetstream_sync.connect(server.url, name="bench-admin") as nc:
            nc.jetstream().create_key_value(KeyValueConfig(bucket="small", storage=StorageType.MEMORY))
        fill(server.url, "big", count)
        table = measures(server.url, count)
        print(f"\n  {'case (medians)':<34}{'ours':>10}{'nats-py':>10}{'ratio':>9}{'target':>9}  verdict  ratio min-max")
        for case, what, unit, op, target in CASES:
            if case not in wanted:
                continue
            got = run_case(table[case], op, reps)
            ratio = statistics.median(got["ratio"])
            verdict = (
                "-" if target == 0 else ("PASS" if (ratio <= target if op == "<=" else ratio >= target) else "MISS")
            )
            shown_target = "-" if target == 0 else f"{op}{target:g}x"
            print(
                f"  {what:<34}{statistics.median(got['ours']):>8.3f}{unit:<2}"
                f"{statistics.median(got['theirs']):>8.3f}{unit:<2}{ratio:>8.2f}x{shown_target:>9}  {verdict:<7}"
                f"  {min(got['ratio']):.2f}-{max(got['ratio']):.2f}",
                flush=True,
            )
    print(f"\n  checked: every listing and watch, on both sides, returned exactly the expected keys ({count:,} listed")
    print(f"  and watched, {count // 100:,} for the 1% filter); get read back the value put")
    print("  ratio: latency ours/nats-py (lower is better); listings nats-py time / ours (higher is better);")
    print("  each the median of the per-repetition ratios")
    if natspy_early_ends:
        print(f"  nats-py:        {natspy_early_ends} listing(s) or watch(es) ended before their first entry")
        print("                  (nats.py #842) and were timed again")
    print("  load average:   {:.2f} {:.2f} {:.2f} at end".format(*os.getloadavg()))
    print(f"  total time:     {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
