#!/usr/bin/env python3
"""Object store: jetstream_sync against nats-py's asyncio object store, side by side in one run, on an embedded server.

Usage (from the repository root, in the dev venv):

    python benchmarks/object_store.py            # a 256 MiB object, 3 repetitions (about 11 minutes on 2 cores:
                                                 # nats-py's get is quadratic in the object's size)
    python benchmarks/object_store.py --quick    # a 64 MiB object, 2 repetitions (about 30 s)
    python benchmarks/object_store.py --only put,rss --size 128 --reps 5

Cases (the issue's targets; ratios are ours / nats-py in MiB/s, per repetition, median reported):
    put     put of one object read from a temporary file: MiB/s                    target >= 1.5x
            ours obs.put(name, file), nats-py await obs.put(name, file) (both read the file chunk by chunk)
    get     get of that object, every byte received and SHA-256-hashed here: MiB/s   target >= 1.5x
            ours `with obs.get(name) as r:` r.readinto(1 MiB buffer) until 0; nats-py await obs.get(name),
            which returns the whole object in memory (its API; it grows the result by bytes concatenation)
            also shown, without target: nats-py get(name, writeinto=sink), its streaming form, the sink
            hashing and counting what it is given (run_in_executor per chunk)
    rss     peak RSS above an idle client, each operation in a fresh child process     target < 64 MiB (ours)
            (python benchmarks/object_store.py --rss-child put|get|nats-py-put|nats-py-get ...): VmRSS once
            connected and warmed up (idle), VmHWM reset there (/proc/self/clear_refs) and read after the
            operation; nats-py's get holds the whole object (and a copy while concatenating): shown, no target

Method: as benchmarks/kv.py. One EmbeddedServer, file storage (StorageType.FILE, the default, the store in a
temporary directory); 128 KiB chunks (both libraries' default). The data is a temporary file of --size MiB of
os.urandom data (1 MiB blocks, every one different), written once, its SHA-256 computed once; it sits in the
page cache, so the disk is the server's only. Each measurement opens its own connection (nats-py on a fresh
event loop), warms up untimed on it (a 3-chunk object put and got back), then times only the put or the get
(time.perf_counter). A put goes into a fresh bucket, deleted right after; the gets read one object, put once by
an admin client, in a bucket deleted at the end. The order of ours and nats-py is reversed every repetition.
Every put must return the reference size and digest, every get must deliver exactly --size MiB whose SHA-256
is the reference; the run stops (SystemExit) otherwise. The get's own hashing is in the timed part on both
sides (the same work for both; both libraries also check the digest themselves).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import gc
import hashlib
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import nats

import jetstream_sync
from jetstream_sync import ObjectStoreConfig
from jetstream_sync.testing import EmbeddedServer

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _inprocess import environment, proc_status_kib, warm_up_process

MiB = 1024 * 1024
CHUNK = 128 * 1024
READ_SIZE = MiB  # ours: readinto a buffer this size
WARM = b"w" * 3 * CHUNK  # the warm-up object: three chunks
NAME = "big"
GET_BUCKET = "bench-get"


class Reference:
    """The data file and what every put and get must reproduce."""

    def __init__(self, path: str, size: int, sha: bytes) -> None:
        self.path = path
        self.size = size
        self.sha = sha
        self.digest = "SHA-256=" + base64.urlsafe_b64encode(sha).decode()


def make_data(directory: str, size: int) -> Reference:
    """``size`` bytes of urandom data in a file, written 1 MiB at a time; its SHA-256."""
    path = os.path.join(directory, "object.bin")
    sha = hashlib.sha256()
    with open(path, "wb") as out:
        left = size
        while left:
            block = os.urandom(min(MiB, left))
            sha.update(block)
            out.write(block)
            left -= len(block)
    return Reference(path, size, sha.digest())


class Sink(io.RawIOBase):
    """nats-py's get(writeinto=...): counts and hashes what it is given, keeps nothing."""

    def __init__(self) -> None:
        self.sha = hashlib.sha256()
        self.count = 0

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        self.sha.update(data)
        self.count += len(data)
        return len(data)


# -- checks ----------------------------------------------------------------------------------------------------
def check_put(size: int, digest: str | None, ref: Reference, what: str) -> None:
    if size != ref.size or digest != ref.digest:
        raise SystemExit(f"{what}: stored {size} bytes, digest {digest}; expected {ref.size}, {ref.digest}")


def check_get(count: int, sha: bytes, ref: Reference, what: str) -> None:
    if count != ref.size or sha != ref.sha:
        raise SystemExit(
            f"{what}: read {count} bytes, SHA-256 {sha.hex()[:16]}...; expected {ref.size} bytes, "
            f"{ref.sha.hex()[:16]}...: the comparison would be meaningless"
        )


def mib_s(size: int, seconds: float) -> float:
    return size / MiB / seconds


# -- ours ------------------------------------------------------------------------------------------------------
def ours_warm(obs: jetstream_sync.ObjectStore) -> None:
    obs.put("warm-up", WARM)
    if obs.get_bytes("warm-up") != WARM:
        raise SystemExit("ours: the warm-up object read back wrong")
    obs.delete("warm-up")


def ours_read(obs: jetstream_sync.ObjectStore) -> tuple[int, bytes]:
    """Every byte of the object through readinto, hashed; (bytes, SHA-256)."""
    buffer = bytearray(READ_SIZE)
    view = memoryview(buffer)
    sha = hashlib.sha256()
    count = 0
    with obs.get(NAME) as reader:
        while n := reader.readinto(buffer):
            sha.update(view[:n])
            count += n
    return count, sha.digest()


def ours_put(url: str, bucket: str, ref: Reference) -> float:
    with jetstream_sync.connect(url, name="bench-ours") as nc:
        obs = nc.jetstream().object_store(bucket)
        ours_warm(obs)
        with open(ref.path, "rb") as source:
            start = time.perf_counter()
            info = obs.put(NAME, source)
            elapsed = time.perf_counter() - start
    check_put(info.size, info.digest, ref, "ours put")
    return mib_s(ref.size, elapsed)


def ours_get(url: str, ref: Reference) -> float:
    with jetstream_sync.connect(url, name="bench-ours") as nc:
        obs = nc.jetstream().object_store(GET_BUCKET)
        ours_warm(obs)
        start = time.perf_counter()
        count, sha = ours_read(obs)
        elapsed = time.perf_counter() - start
    check_get(count, sha, ref, "ours get")
    return mib_s(ref.size, elapsed)


# -- nats-py ---------------------------------------------------------------------------------------------------
async def natspy_warm(obs: Any) -> None:
    await obs.put("warm-up", WARM)
    if (await obs.get("warm-up")).data != WARM:
        raise SystemExit("nats-py: the warm-up object read back wrong")
    await obs.delete("warm-up")


async def natspy_put(url: str, bucket: str, ref: Reference) -> float:
    nc = await nats.connect(url, name="bench-natspy")
    try:
        obs = await nc.jetstream().object_store(bucket)
        await natspy_warm(obs)
        with open(ref.path, "rb") as source:
            start = time.perf_counter()
            info = await obs.put(NAME, source)
            elapsed = time.perf_counter() - start
    finally:
        await nc.close()
    check_put(info.size, info.digest, ref, "nats-py put")
    return mib_s(ref.size, elapsed)


async def natspy_get(url: str, ref: Reference, sink: bool) -> float:
    nc = await nats.connect(url, name="bench-natspy")
    try:
        obs = await nc.jetstream().object_store(GET_BUCKET)
        await natspy_warm(obs)
        start = time.perf_counter()
        if sink:
            into = Sink()
            await obs.get(NAME, writeinto=into)
            count, sha = into.count, into.sha.digest()
        else:
            data = (await obs.get(NAME)).data
            count, sha = len(data), hashlib.sha256(data).digest()
        elapsed = time.perf_counter() - start
    finally:
        await nc.close()
    check_get(count, sha, ref, "nats-py get" + (" (writeinto)" if sink else ""))
    return mib_s(ref.size, elapsed)


# -- rss: one operation in a fresh child process ---------------------------------------------------------------
def rss_child(args: argparse.Namespace) -> None:
    """Runs in the child: connect, warm up, note VmRSS (idle) and reset VmHWM, do the operation, print one JSON
    line with idle and peak."""
    ref = Reference(args.data, args.bytes, bytes.fromhex(args.sha))
    if args.rss_child.startswith("nats-py"):
        result = asyncio.run(_rss_child_natspy(args, ref))
    else:
        result = _rss_child_ours(args, ref)
    result["hwm_kib"] = proc_status_kib("VmHWM")
    print(json.dumps(result))


def _idle_mark() -> dict[str, Any]:
    gc.collect()
    idle = proc_status_kib("VmRSS")
    try:
        with open("/proc/self/clear_refs", "w") as refs:
            refs.write("5")  # resets VmHWM to the current RSS (Linux 4.0+)
        reset = True
    except OSError:
        reset = False
    return {"idle_kib": idle, "hwm_reset": reset}


def _rss_child_ours(args: argparse.Namespace, ref: Reference) -> dict[str, Any]:
    with jetstream_sync.connect(args.url, name="bench-rss") as nc:
        obs = nc.jetstream().object_store(args.bucket)
        ours_warm(obs)
        result = _idle_mark()
        if args.rss_child == "put":
            with open(ref.path, "rb") as source:
                info = obs.put(NAME, source)
            check_put(info.size, info.digest, ref, "ours put (rss)")
        else:
            check_get(*ours_read(obs), ref, "ours get (rss)")
        return result


async def _rss_child_natspy(args: argparse.Namespace, ref: Reference) -> dict[str, Any]:
    nc = await nats.connect(args.url, name="bench-rss")
    try:
        obs = await nc.jetstream().object_store(args.bucket)
        await natspy_warm(obs)
        result = _idle_mark()
        if args.rss_child == "nats-py-put":
            with open(ref.path, "rb") as source:
                info = await obs.put(NAME, source)
            check_put(info.size, info.digest, ref, "nats-py put (rss)")
        else:
            data = (await obs.get(NAME)).data
            check_get(len(data), hashlib.sha256(data).digest(), ref, "nats-py get (rss)")
            del data
        return result
    finally:
        await nc.close()


def run_child(url: str, mode: str, bucket: str, ref: Reference) -> dict[str, Any]:
    command = [sys.executable, os.path.abspath(__file__), "--rss-child", mode, "--url", url, "--bucket", bucket]
    command += ["--data", ref.path, "--bytes", str(ref.size), "--sha", ref.sha.hex()]
    done = subprocess.run(command, capture_output=True, text=True, timeout=3600, check=False)
    if done.returncode != 0:
        raise SystemExit(f"rss child {mode} failed: {done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


# -- the run ---------------------------------------------------------------------------------------------------
class Admin:
    """The admin client: buckets made and deleted around the measurements."""

    def __init__(self, url: str) -> None:
        self.nc = jetstream_sync.connect(url, name="bench-admin")
        self.js = self.nc.jetstream()
        self.count = 0

    def fresh_bucket(self, tag: str) -> str:
        self.count += 1
        bucket = f"bench-{tag}-{self.count}"
        self.js.create_object_store(ObjectStoreConfig(bucket=bucket))  # file storage: the default
        return bucket

    def delete_bucket(self, bucket: str) -> None:
        self.js.delete_object_store(bucket)

    def close(self) -> None:
        self.nc.close()


def measure_put(admin: Admin, who: str, url: str, ref: Reference) -> float:
    bucket = admin.fresh_bucket(f"put-{who}")
    try:
        if who == "ours":
            return ours_put(url, bucket, ref)
        return asyncio.run(natspy_put(url, bucket, ref))
    finally:
        admin.delete_bucket(bucket)


def run_case(fns: dict[str, Callable[[], float]], reps: int) -> dict[str, list[float]]:
    """``reps`` repetitions, the order reversed every one; per repetition each figure and ours / each other."""
    out: dict[str, list[float]] = {who: [] for who in fns}
    ratios: dict[str, list[float]] = {who: [] for who in fns if who != "ours"}
    order = list(fns)
    for rep in range(reps):
        results = {}
        for who in order if rep % 2 == 0 else order[::-1]:
            results[who] = fns[who]()
        for who, value in results.items():
            out[who].append(value)
            if who != "ours":
                ratios[who].append(results["ours"] / value)
    return {**out, **{f"ratio {who}": r for who, r in ratios.items()}}


def print_row(what: str, ours: list[float], theirs: list[float], ratios: list[float], target: float) -> None:
    ratio = statistics.median(ratios)
    verdict = "-" if target == 0 else ("PASS" if ratio >= target else "MISS")
    shown_target = "-" if target == 0 else f">={target:g}x"
    print(
        f"  {what:<40}{statistics.median(ours):>10.1f}{statistics.median(theirs):>10.1f}{ratio:>8.2f}x"
        f"{shown_target:>9}  {verdict:<7}  {min(ratios):.2f}-{max(ratios):.2f}",
        flush=True,
    )


def run_rss(admin: Admin, url: str, ref: Reference) -> None:
    print(
        f"\n  {'peak RSS above an idle client':<40}{'idle MiB':>10}{'peak MiB':>10}{'peak-idle':>10}"
        f"{'target':>9}  verdict",
        flush=True,
    )
    rows = [
        ("put", "ours put(file)"),
        ("nats-py-put", "nats-py put(file)"),
        ("get", "ours get, readinto 1 MiB"),
        ("nats-py-get", "nats-py get() (whole object)"),
    ]
    get_bucket = None
    try:
        for mode, label in rows:
            if mode.endswith("get") and get_bucket is None:
                get_bucket = admin.fresh_bucket("rss-get")
                with open(ref.path, "rb") as source:
                    admin.js.object_store(get_bucket).put(NAME, source)
            if mode.endswith("put"):
                bucket = admin.fresh_bucket("rss-put")
                try:
                    got = run_child(url, mode, bucket, ref)
                finally:
                    admin.delete_bucket(bucket)
            else:
                assert get_bucket is not None
                got = run_child(url, mode, get_bucket, ref)
            growth = (got["hwm_kib"] - got["idle_kib"]) / 1024
            ours = not mode.startswith("nats-py")
            verdict = ("PASS" if growth < 64 else "MISS") if ours else "-"
            reset = "" if got["hwm_reset"] else "  (VmHWM not reset: includes the warm-up)"
            print(
                f"  {label:<40}{got['idle_kib'] / 1024:>10.1f}{got['hwm_kib'] / 1024:>10.1f}{growth:>10.1f}"
                f"{'<64 MiB' if ours else '-':>9}  {verdict}{reset}",
                flush=True,
            )
    finally:
        if get_bucket is not None:
            admin.delete_bucket(get_bucket)


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="a 64 MiB object, 2 repetitions")
    parser.add_argument("--size", type=int, default=None, help="object size in MiB (default 256, --quick 64)")
    parser.add_argument("--reps", type=int, default=None, help="repetitions per case (default 3, --quick 2)")
    parser.add_argument("--only", metavar="IDS", help="comma-separated case ids: put,get,rss")
    # internal: the rss child
    parser.add_argument("--rss-child", choices=["put", "get", "nats-py-put", "nats-py-get"], help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--bucket", help=argparse.SUPPRESS)
    parser.add_argument("--data", help=argparse.SUPPRESS)
    parser.add_argument("--bytes", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--sha", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.reps = args.reps or (2 if args.quick else 3)
    args.size = args.size or (64 if args.quick else 256)
    args.wanted = set(args.only.split(",")) if args.only else {"put", "get", "rss"}
    if args.reps < 1 or args.size < 1 or args.wanted - {"put", "get", "rss"}:
        parser.error("--reps and --size must be >= 1, --only among put,get,rss")
    return args


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    if args.rss_child:
        rss_child(args)
        return 0
    started = time.perf_counter()
    env = environment(argv, script="benchmarks/object_store.py")
    print("jetstream_sync object store vs nats-py object store")
    for key in ("date", "machine", "python", "nats-py", "nats-server", "jetstream-sync", "command"):
        print(f"  {key + ':':<16}{env[key]}")
    mode = "quick" if args.quick else "full"
    print(
        f"  mode:           {mode}, {args.reps} repetitions, order reversed each, a {args.size} MiB object, "
        "file storage, 128 KiB chunks"
    )
    print("  load average:   {:.2f} {:.2f} {:.2f} at start".format(*env["loadavg_start"]), flush=True)
    with tempfile.TemporaryDirectory(prefix="bench-obs-") as tmp, EmbeddedServer() as server:
        ref = make_data(tmp, args.size * MiB)
        url = server.url
        warm_up_process(url)
        admin = Admin(url)
        try:
            print(
                f"\n  {'case (medians, MiB/s)':<40}{'ours':>10}{'nats-py':>10}{'ratio':>9}{'target':>9}"
                "  verdict  ratio min-max",
                flush=True,
            )
            if "put" in args.wanted:
                got = run_case(
                    {
                        "ours": lambda: measure_put(admin, "ours", url, ref),
                        "nats-py": lambda: measure_put(admin, "nats-py", url, ref),
                    },
                    args.reps,
                )
                print_row(f"put {args.size} MiB from a file", got["ours"], got["nats-py"], got["ratio nats-py"], 1.5)
            if "get" in args.wanted:
                admin.js.create_object_store(ObjectStoreConfig(bucket=GET_BUCKET))
                try:
                    with open(ref.path, "rb") as source:
                        info = admin.js.object_store(GET_BUCKET).put(NAME, source)
                    check_put(info.size, info.digest, ref, "the get case's object")
                    got = run_case(
                        {
                            "ours": lambda: ours_get(url, ref),
                            "nats-py": lambda: asyncio.run(natspy_get(url, ref, sink=False)),
                            "nats-py sink": lambda: asyncio.run(natspy_get(url, ref, sink=True)),
                        },
                        args.reps,
                    )
                finally:
                    admin.delete_bucket(GET_BUCKET)
                print_row(
                    f"get {args.size} MiB vs nats-py get()", got["ours"], got["nats-py"], got["ratio nats-py"], 1.5
                )
                print_row(
                    "  vs nats-py get(writeinto=sink)", got["ours"], got["nats-py sink"], got["ratio nats-py sink"], 0
                )
            if "rss" in args.wanted:
                run_rss(admin, url, ref)
        finally:
            admin.close()
    print(f"\n  checked: every put stored {args.size} MiB with the reference SHA-256; every get delivered")
    print("  exactly that many bytes with the reference SHA-256 (hashed here, in the timed part, on both sides)")
    print("  ratio: ours MiB/s / nats-py MiB/s (higher is better), the median of the per-repetition ratios;")
    print("  rss: one child per row, VmHWM after the operation minus VmRSS of the connected, warmed-up client")
    print("  load average:   {:.2f} {:.2f} {:.2f} at end".format(*os.getloadavg()))
    print(f"  total time:     {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
