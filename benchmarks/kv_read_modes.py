#!/usr/bin/env python3
"""What each KV read mode costs and what it buys: read="direct", "read_your_writes" and "leader" side by side in
one run, on a 3-node EmbeddedCluster with an R3 bucket and, for reference, on one EmbeddedServer (R1).

Usage (from the repository root, in the dev venv):

    python benchmarks/kv_read_modes.py            # 5 rounds, both setups (about 2 minutes)
    python benchmarks/kv_read_modes.py --quick    # 2 rounds, small counts (under half a minute)
    python benchmarks/kv_read_modes.py --only cluster --rounds 3

Cases, for each read mode (a handle made with ``js.key_value(bucket, read=mode)``), each call timed
(time.perf_counter) and reported as calls per second (calls / time spent in them), p50 and p99 latency:
    own write   kv.put of a key, then kv.get of it on the same connection; the get alone is timed and its value
                checked against the put (a mismatch is a stale read)
    old keys    kv.get of a random key among 1,000 written by another client before the run
    get_many    kv.get_many of 100 random keys among those 1,000
    other conn  (not timed) kv.put on one connection, then kv.get of it on a second one; stale reads counted

Method: file storage (the default); on the cluster the bucket has replicas=3 and the two measuring connections
are pinned to the two nodes that do not lead its stream (where a direct get is answered by a replica that
may lag; a client on the leader's node reads from the leader either way). Each round runs every case for every
mode, the mode order rotated each round (direct, ryw, leader; ryw, leader, direct; ...), every mode of a case
on the same keys, so the machine's noise hits the modes alike. Ratios are per round, mode / direct (calls/s:
above 1 is faster; latency: below 1 is faster); reported are the medians over rounds and the ratios' range.
Every value read is checked; a stale read where a mode promises none (read_your_writes on its own writes,
leader anywhere) is reported and makes the exit status 1. A results file (JSON, and the markdown tables) is
written per run to benchmarks/results/ (or --out). The machine is shared and noisy: trust ratios within one run.
"""

from __future__ import annotations

import argparse
import itertools
import os
import random
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jetstream_sync
from jetstream_sync import KeyValueConfig
from jetstream_sync.jetstream.kv import KeyValue
from jetstream_sync.testing import EmbeddedCluster, EmbeddedServer

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _inprocess import environment, percentile, save_results

HERE = Path(__file__).resolve().parent
BUCKET = "MODES"
STREAM = f"KV_{BUCKET}"
MODES = ("direct", "read_your_writes", "leader")
SHORT = {"direct": "direct", "read_your_writes": "ryw", "leader": "leader"}
SETUPS = ("cluster", "single")
OLD_KEYS = 1000
MANY = 100


@dataclass(frozen=True)
class Counts:
    """How many calls each case makes per mode and round."""

    pairs: int  # own write: put-then-get pairs
    reads: int  # old keys: gets
    many: int  # get_many calls
    other: int  # other conn: put-then-get pairs across two connections
    warm: int  # untimed gets (and a tenth as many pairs) per mode before the first round


FULL = Counts(pairs=400, reads=1000, many=25, other=400, warm=200)
QUICK = Counts(pairs=30, reads=60, many=3, other=30, warm=20)

CASES = (
    ("own_write", "get after own put"),
    ("old_keys", "get of an old key"),
    ("get_many", f"get_many of {MANY} old keys"),
)


def value_of(n: int | str) -> bytes:
    """A 128 B value that says what it is (a write's number, or an old key's name)."""
    return (b"%s:" % str(n).encode()).ljust(128, b"v")


@dataclass
class Setup:
    """One place measured: its two connections and their handles per mode, and what they recorded."""

    name: str
    title: str
    nodes: str
    handles_a: dict[str, KeyValue]
    handles_b: dict[str, KeyValue]
    # (case, mode) -> one {"ops", "p50_ms", "p99_ms"} per round
    samples: dict[tuple[str, str], list[dict[str, float]]] = field(default_factory=dict)
    # (same|other, mode) -> [stale, pairs] summed over rounds
    stale: dict[tuple[str, str], list[int]] = field(default_factory=dict)


_written = itertools.count(1)


def timed(latencies: list[float], call: Callable[[Any], Any], arg: Any) -> Any:
    """``call(arg)``, its latency appended to ``latencies``."""
    start = time.perf_counter()
    result = call(arg)
    latencies.append(time.perf_counter() - start)
    return result


def own_write(kv: KeyValue, pairs: int, latencies: list[float]) -> int:
    """``pairs`` put-then-get on one key of one connection; the gets timed; how many returned an older value."""
    stale = 0
    for _ in range(pairs):
        value = value_of(next(_written))
        kv.put("fresh.same", value)
        stale += timed(latencies, kv.get, "fresh.same").value != value
    return stale


def other_conn(writer: KeyValue, reader: KeyValue, pairs: int) -> int:
    """``pairs`` puts on one connection, each read at once on another; how many reads returned an older value."""
    stale = 0
    for _ in range(pairs):
        value = value_of(next(_written))
        writer.put("fresh.other", value)
        stale += reader.get("fresh.other").value != value
    return stale


def old_keys(kv: KeyValue, keys: list[str], latencies: list[float]) -> None:
    for key in keys:
        got = timed(latencies, kv.get, key).value
        if got != value_of(key):
            raise SystemExit(f"{kv.read}: {key} read back {got!r:.40}: the comparison would be meaningless")


def get_many(kv: KeyValue, batches: list[list[str]], latencies: list[float]) -> None:
    for keys in batches:
        got = timed(latencies, kv.get_many, keys)
        if len(got) != len(keys) or any(entry.value != value_of(key) for key, entry in got.items()):
            raise SystemExit(f"{kv.read}: get_many returned {len(got)} of {len(keys)} keys or a wrong value")


def summary(latencies: list[float]) -> dict[str, float]:
    ordered = sorted(latencies)
    return {
        "ops": len(ordered) / sum(ordered),
        "p50_ms": percentile(ordered, 0.5) * 1e3,
        "p99_ms": percentile(ordered, 0.99) * 1e3,
    }


def fill(url: str | list[str], replicas: int) -> None:
    """The bucket, and OLD_KEYS keys ``old.<i>`` written by an admin client (not the measuring ones)."""
    with jetstream_sync.connect(url, name="bench-admin") as nc:
        js = nc.jetstream(timeout=30)
        js.create_key_value(KeyValueConfig(bucket=BUCKET, replicas=replicas, history=1))
        for i in range(OLD_KEYS):
            js.publish_async(f"$KV.{BUCKET}.old.{i}", value_of(f"old.{i}"))
        js.publish_async_complete(60)


def warm_up(setup: Setup, counts: Counts, rng: random.Random) -> None:
    keys = [f"old.{i}" for i in range(OLD_KEYS)]
    for mode in MODES:
        for kv in (setup.handles_a[mode], setup.handles_b[mode]):
            old_keys(kv, rng.choices(keys, k=counts.warm), [])
            get_many(kv, [rng.sample(keys, MANY)], [])
        own_write(setup.handles_a[mode], max(1, counts.warm // 10), [])
        other_conn(setup.handles_a[mode], setup.handles_b[mode], max(1, counts.warm // 10))


def run_rounds(setup: Setup, counts: Counts, rounds: int, seed: int) -> None:
    rng = random.Random(seed)
    keys = [f"old.{i}" for i in range(OLD_KEYS)]
    warm_up(setup, counts, rng)
    for rnd in range(rounds):
        order = MODES[rnd % len(MODES) :] + MODES[: rnd % len(MODES)]
        reads = rng.choices(keys, k=counts.reads)  # the same keys for every mode of this round
        batches = [rng.sample(keys, MANY) for _ in range(counts.many)]
        for case, _ in CASES:
            for mode in order:
                kv = setup.handles_a[mode]
                latencies: list[float] = []
                if case == "own_write":
                    stale = own_write(kv, counts.pairs, latencies)
                    tally = setup.stale.setdefault(("same", mode), [0, 0])
                    tally[0] += stale
                    tally[1] += counts.pairs
                elif case == "old_keys":
                    old_keys(kv, reads, latencies)
                else:
                    get_many(kv, batches, latencies)
                setup.samples.setdefault((case, mode), []).append(summary(latencies))
        for mode in order:
            stale = other_conn(setup.handles_a[mode], setup.handles_b[mode], counts.other)
            tally = setup.stale.setdefault(("other", mode), [0, 0])
            tally[0] += stale
            tally[1] += counts.other
        print(f"  {setup.name}: round {rnd + 1} of {rounds} done", flush=True)


def measure(name: str, urls: list[str], leader: int | None, counts: Counts, rounds: int, seed: int) -> Setup:
    """Both connections (pinned to the non-leader nodes on a cluster), a handle per mode on each, the rounds."""
    if leader is None:
        url_a = url_b = urls[0]
        title, nodes = "One EmbeddedServer, R1 bucket", "both connections on the one server"
    else:
        followers = [i for i in range(len(urls)) if i != leader]
        url_a, url_b = urls[followers[0]], urls[followers[1]]
        title = f"{len(urls)}-node EmbeddedCluster, R3 bucket"
        nodes = (
            f"stream leader n{leader + 1}; connection A (measured) on n{followers[0] + 1}, "
            f"B (second connection) on n{followers[1] + 1}"
        )
    with (
        jetstream_sync.connect(url_a, name="bench-a") as nc_a,
        jetstream_sync.connect(url_b, name="bench-b") as nc_b,
    ):
        js_a, js_b = nc_a.jetstream(timeout=30), nc_b.jetstream(timeout=30)
        setup = Setup(
            name=name,
            title=title,
            nodes=nodes,
            handles_a={mode: js_a.key_value(BUCKET, read=mode) for mode in MODES},
            handles_b={mode: js_b.key_value(BUCKET, read=mode) for mode in MODES},
        )
        run_rounds(setup, counts, rounds, seed)
    return setup


# -- report ----------------------------------------------------------------------------------------------------
def ratios(setup: Setup, case: str, mode: str, metric: str) -> list[float]:
    return [
        mine[metric] / base[metric]
        for mine, base in zip(setup.samples[(case, mode)], setup.samples[(case, "direct")], strict=True)
    ]


def ratio_text(values: list[float]) -> str:
    return f"{statistics.median(values):.2f}x ({min(values):.2f}-{max(values):.2f})"


def tables(setup: Setup) -> list[str]:
    lines = [
        f"### {setup.title}",
        "",
        f"{setup.nodes}.",
        "",
        "| case | read mode | calls/s | p50 | p99 | calls/s vs direct | p50 vs direct | p99 vs direct |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for case, what in CASES:
        for mode in MODES:
            got = setup.samples[(case, mode)]
            cells = [
                what if mode == MODES[0] else "",
                f"`{mode}`",
                f"{statistics.median(s['ops'] for s in got):,.0f}",
                f"{statistics.median(s['p50_ms'] for s in got):.3f} ms",
                f"{statistics.median(s['p99_ms'] for s in got):.3f} ms",
            ]
            if mode == "direct":
                cells += ["1", "1", "1"]
            else:
                cells += [ratio_text(ratios(setup, case, mode, metric)) for metric in ("ops", "p50_ms", "p99_ms")]
            lines.append("| " + " | ".join(cells) + " |")
    lines += [
        "",
        "| read mode | stale reads of a put just completed, same connection | from a second connection |",
        "|---|---:|---:|",
    ]
    for mode in MODES:
        cells = [f"`{mode}`"]
        for where in ("same", "other"):
            stale, pairs = setup.stale[(where, mode)]
            cells.append(f"{stale:,} of {pairs:,} ({100 * stale / pairs:.1f}%)")
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def violations(setup: Setup) -> list[str]:
    """Stale reads where the mode promises none: read_your_writes on its own writes, leader anywhere."""
    promised = [("same", "read_your_writes"), ("same", "leader"), ("other", "leader")]
    return [
        f"{setup.name}: {setup.stale[key][0]} stale reads with read={key[1]!r} ({key[0]} connection)"
        for key in promised
        if setup.stale[key][0]
    ]


def document(setup: Setup) -> dict[str, Any]:
    return {
        "title": setup.title,
        "nodes": setup.nodes,
        "samples": {f"{case}|{mode}": v for (case, mode), v in setup.samples.items()},
        "ratios": {
            f"{case}|{mode}|{metric}": ratios(setup, case, mode, metric)
            for case, _ in CASES
            for mode in MODES[1:]
            for metric in ("ops", "p50_ms", "p99_ms")
        },
        "stale": {f"{where}|{mode}": {"stale": v[0], "pairs": v[1]} for (where, mode), v in setup.stale.items()},
    }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="2 rounds, small counts")
    parser.add_argument("--rounds", type=int, default=None, help="rounds (default 5, --quick 2)")
    parser.add_argument("--only", default=",".join(SETUPS), help="comma-separated: cluster, single")
    parser.add_argument("--seed", type=int, default=37, help="of the random keys read")
    parser.add_argument("--out", default=str(HERE / "results"), help="directory of the results files")
    args = parser.parse_args(argv)
    rounds = args.rounds or (2 if args.quick else 5)
    wanted = args.only.split(",")
    if rounds < 1 or not wanted or set(wanted) - set(SETUPS):
        parser.error("--rounds must be >= 1, --only among " + ",".join(SETUPS))
    counts = QUICK if args.quick else FULL
    mode = "quick" if args.quick else "full"
    started = time.perf_counter()
    env = environment(argv, script="benchmarks/kv_read_modes.py")
    print("jetstream_sync KV read modes: direct, read_your_writes, leader")
    for key in ("date", "machine", "python", "nats-server", "jetstream-sync", "command"):
        print(f"  {key + ':':<16}{env[key]}")
    print(
        f"  mode:           {mode}, {rounds} rounds, mode order rotated each; per mode and round: {counts.pairs} "
        f"own-write pairs, {counts.reads} gets of {OLD_KEYS:,} old keys, {counts.many} get_many of {MANY}, "
        f"{counts.other} pairs across two connections"
    )
    print("  load average:   {:.2f} {:.2f} {:.2f} at start".format(*env["loadavg_start"]), flush=True)
    setups: list[Setup] = []
    for name in SETUPS:
        if name not in wanted:
            continue
        if name == "cluster":
            with EmbeddedCluster(size=3, name="bench") as cluster:
                fill(cluster.urls, replicas=3)
                leader = cluster.leader_of(STREAM)
                setups.append(measure(name, cluster.urls, leader, counts, rounds, args.seed))
                moved = cluster.leader_of(STREAM)
                if moved != leader:
                    print(f"  note: the stream leader moved during the run, n{leader + 1} -> n{moved + 1}")
        else:
            with EmbeddedServer() as server:
                fill(server.url, replicas=1)
                setups.append(measure(name, [server.url], None, counts, rounds, args.seed))
    lines: list[str] = []
    for setup in setups:
        lines += [*tables(setup), ""]
    lines += [
        f"Medians of {rounds} rounds; ratios mode / direct per round, median (range). calls/s: above 1 is faster;",
        "latency: below 1 is faster. Stale: a get returned the value before a put that had completed.",
    ]
    print("\n" + "\n".join(lines))
    broken = [v for setup in setups for v in violations(setup)]
    for line in broken:
        print(f"  UNEXPECTED: {line}")
    print("  checked: every get and get_many of an old key read back the value written")
    env["loadavg_end"] = os.getloadavg()
    print("  load average:   {:.2f} {:.2f} {:.2f} at end".format(*env["loadavg_end"]))
    print(f"  total time:     {time.perf_counter() - started:.0f} s")
    saved = {
        "environment": env,
        "mode": mode,
        "rounds": rounds,
        "counts": vars(counts),
        "setups": {setup.name: document(setup) for setup in setups},
        "violations": broken,
    }
    header = [
        f"`{env['command']}`, {env['date']}, {env['machine']}, {env['python']}, {env['nats-server']}, load average "
        "{:.2f} at start, {:.2f} at end".format(env["loadavg_start"][0], env["loadavg_end"][0]),
        "",
    ]
    stem = save_results(args.out, "kv-read-modes-", mode, saved, header + lines)
    print(f"  results:        {stem}.json and .md")
    return 1 if broken else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
