#!/usr/bin/env python3
"""Services: requests a second through a service with a 4-thread pool (ours) against nats-py's micro, side by side.

Usage (from the repository root, in the dev venv):

    python benchmarks/services.py             # 5 interleaved repetitions of 5 s per case and side (~2 minutes)
    python benchmarks/services.py --quick     # 3 repetitions of 2 s
    python benchmarks/services.py --only echo --reps 7 --seconds 10 --window 64

Cases (the issue's target: ours ahead of nats-py, ratio ours / nats-py > 1):
    echo       the handler returns the request's 16-byte body, 32 requests in flight: what the service
               machinery itself costs, under a light load
    echo-256   the same with 256 requests in flight: a busy service
    io         the handler waits 1 ms (time.sleep for ours, asyncio.sleep for nats-py's: what each would write
               for a call to a database or another service), then returns the body; 32 in flight

Method: one EmbeddedServer. Each measurement runs the service in a process of its own (ours: a
``jetstream_sync.services.Service`` with ``workers=4`` on one client; nats-py's: ``nats.micro.add_service`` on
one asyncio client; ours with ``max_pending=1024``, so that no case's load is refused with 503) and the load in
another: one nats-py asyncio connection keeping the case's number of requests in flight (a reply's callback sends
the next request; ``--window`` sets it for every case), the same load program for both sides. The load runs 0.5 s
untimed (``--seconds`` if shorter), then counts the replies of ``--seconds``; every reply's body is checked
against its request's (a wrong one stops the run). The service process's CPU time over the timed part comes from
/proc (CPU us per request). The sides alternate, and which one goes first alternates with every repetition
(interleaved runs), so a machine that slows down or speeds up during the run weighs on both. Reported: requests
a second per side (median and range), and the ratio ours / nats-py per repetition and its median.

Two cores shared with other work make these numbers move: compare the ratios, and print the load average.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
#: case: (handler, requests in flight)
CASES = {"echo": ("echo", 32), "echo-256": ("echo", 256), "io": ("io", 32)}
SIDES = ("ours", "nats-py")
SUBJECT = "bench.svc"
BODY = b"0123456789abcdef"


# -- the service processes ------------------------------------------------------------------------------------
def serve_ours(url: str, handler: str, workers: int) -> None:
    import jetstream_sync
    from jetstream_sync.services import Request, Service

    service = Service("bench", "1.0.0", workers=workers, max_pending=1024)
    if handler == "echo":

        @service.endpoint(subject=SUBJECT)
        def echo(request: Request) -> bytes:
            return request.data

    else:

        @service.endpoint(subject=SUBJECT)
        def io(request: Request) -> bytes:
            time.sleep(0.001)
            return request.data

    with jetstream_sync.connect(url, name="bench-ours") as nc, service.start(nc) as instance:
        stop = _wait_for_sigterm()
        while not stop.is_set():
            stop.wait(0.05)  # a signal handler runs between the waits of the main thread
        instance.stop(10)


def _wait_for_sigterm() -> threading.Event:
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    return stop


def serve_natspy(url: str, handler_kind: str) -> None:
    import nats
    from nats.micro import add_service
    from nats.micro.request import Request as NatsPyRequest

    async def main() -> None:
        nc = await nats.connect(url, name="bench-natspy")
        service = await add_service(nc, name="bench", version="1.0.0")

        if handler_kind == "echo":

            async def handler(request: NatsPyRequest) -> None:
                await request.respond(request.data)

        else:

            async def handler(request: NatsPyRequest) -> None:
                await asyncio.sleep(0.001)
                await request.respond(request.data)

        await service.add_endpoint(name="svc", subject=SUBJECT, handler=handler)
        stop = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
        await stop.wait()
        await service.stop()
        await nc.close()

    asyncio.run(main())


# -- the load process -----------------------------------------------------------------------------------------
def load(url: str, seconds: float, window: int) -> None:
    """Keep ``window`` requests in flight for 0.5 s (at most ``seconds``) untimed, then ``seconds`` timed; print one
    JSON line."""
    import nats

    async def main() -> dict[str, Any]:
        nc = await nats.connect(url, name="bench-load", pending_size=64 * 1024 * 1024)
        inbox = nc.new_inbox()
        state = {"counting": False, "replies": 0, "wrong": 0, "refused": 0, "next": 0}

        async def send() -> None:
            n = state["next"]
            state["next"] = n + 1
            await nc.publish(SUBJECT, BODY + b"%d" % n, reply=f"{inbox}.{n}")

        async def on_reply(msg: Any) -> None:
            n = msg.subject.rsplit(".", 1)[1]
            if msg.headers and msg.headers.get("Nats-Service-Error-Code") == "503":
                state["refused"] += 1  # the service's back-pressure (none expected: the window fits)
            elif msg.data != BODY + n.encode() or msg.headers:
                state["wrong"] += 1
            if state["counting"]:
                state["replies"] += 1
            await send()

        await nc.subscribe(f"{inbox}.*", cb=on_reply)
        for _ in range(window):
            await send()
        await asyncio.sleep(min(0.5, seconds))  # untimed: connections warm, the service's threads started
        started = time.perf_counter()
        state["counting"] = True
        marker = Path(os.environ["BENCH_MARK"])
        marker.write_text("timed")  # the orchestrator reads the service's CPU time now
        await asyncio.sleep(seconds)
        state["counting"] = False
        elapsed = time.perf_counter() - started
        marker.write_text("done")
        await nc.drain()
        return {"replies": state["replies"], "seconds": elapsed, "wrong": state["wrong"], "refused": state["refused"]}

    print(json.dumps(asyncio.run(main())), flush=True)


# -- the orchestrator -----------------------------------------------------------------------------------------
def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` (Linux /proc), in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wait_for(condition: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} within {timeout:g}s")
        time.sleep(0.01)  # polling another process's progress: there is nothing to wait on


def measure(url: str, side: str, case: str, args: argparse.Namespace, marker: Path) -> dict[str, float]:
    """One run: the service process, then the load against it; requests a second and CPU us per request."""
    import jetstream_sync
    from jetstream_sync import errors

    role = "serve-ours" if side == "ours" else "serve-natspy"
    handler, window = CASES[case]
    window = args.window or window
    server = subprocess.Popen(
        [sys.executable, __file__, "--role", role, "--url", url, "--handler", handler, "--workers", str(args.workers)]
    )
    try:
        with jetstream_sync.connect(url, name="bench-probe") as nc:

            def answering() -> bool:
                # the endpoint itself, not PING: nats-py answers PING once add_service returns, before add_endpoint
                try:
                    return nc.request(SUBJECT, BODY, timeout=5).data == BODY
                except errors.NoRespondersError:
                    return False

            wait_for(answering, 30, f"the {side} service did not answer")
        marker.write_text("")
        env = {**os.environ, "BENCH_MARK": str(marker)}
        loader = subprocess.Popen(
            [sys.executable, __file__, "--role", "load", "--url", url, "--seconds", str(args.seconds),
             "--window", str(window)],
            stdout=subprocess.PIPE, text=True, env=env,
        )  # fmt: skip
        wait_for(lambda: marker.read_text() == "timed", 30, "the load did not start")
        cpu_start, load_start = cpu_seconds(server.pid), cpu_seconds(loader.pid)
        wait_for(lambda: marker.read_text() == "done", args.seconds + 30, "the load did not end")
        cpu = cpu_seconds(server.pid) - cpu_start
        load_cpu = cpu_seconds(loader.pid) - load_start
        out, _ = loader.communicate(timeout=60)
        if loader.returncode != 0:
            raise RuntimeError(f"the load process failed ({loader.returncode})")
        result = json.loads(out.strip().splitlines()[-1])
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
    if result["wrong"] or result["refused"]:
        raise RuntimeError(
            f"{side}/{case}: {result['wrong']} replies did not match their requests, {result['refused']} were refused"
        )
    if server.returncode != 0:
        raise RuntimeError(f"the {side} service exited with {server.returncode}")
    rate = result["replies"] / result["seconds"]
    return {
        "rate": rate,
        "cpu_us": cpu * 1e6 / max(1, result["replies"]),
        "load_cpu": load_cpu / result["seconds"],
    }


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    if args.role == "serve-ours":
        serve_ours(args.url, args.handler, args.workers)
        return 0
    if args.role == "serve-natspy":
        serve_natspy(args.url, args.handler)
        return 0
    if args.role == "load":
        load(args.url, args.seconds, args.window)
        return 0

    sys.path.insert(0, str(HERE))
    from run import environment

    from jetstream_sync.testing import EmbeddedServer

    env = environment(argv, "benchmarks/services.py")
    for key, value in env.items():
        print(f"{key + ':':<16}{value}")
    print(f"{'setup:':<16}ours workers={args.workers}; {args.seconds:g} s timed per run")
    samples: dict[str, dict[str, list[dict[str, float]]]] = {case: {side: [] for side in SIDES} for case in args.cases}
    marker = Path(f"/tmp/jetstream-sync-bench-services-{os.getpid()}")
    try:
        with EmbeddedServer() as server:
            for rep in range(args.reps):
                for case in args.cases:
                    order = SIDES if rep % 2 == 0 else SIDES[::-1]
                    for side in order:
                        sample = measure(server.url, side, case, args, marker)
                        samples[case][side].append(sample)
                        print(
                            f"rep {rep + 1} {case:<8} {side:<8} {sample['rate']:>9,.0f} req/s "
                            f"{sample['cpu_us']:>6.1f} CPU us/req; load process {sample['load_cpu']:.0%} CPU",
                            flush=True,
                        )
    finally:
        marker.unlink(missing_ok=True)
    print()
    print("| case | ours req/s (median, range) | nats-py req/s (median, range) | ours / nats-py per rep | median |")
    print("|---|---|---|---|---|")
    for case in args.cases:
        ours = [s["rate"] for s in samples[case]["ours"]]
        theirs = [s["rate"] for s in samples[case]["nats-py"]]
        ratios = [a / b for a, b in zip(ours, theirs, strict=True)]
        print(
            f"| {case} | {statistics.median(ours):,.0f} ({min(ours):,.0f}-{max(ours):,.0f}) "
            f"| {statistics.median(theirs):,.0f} ({min(theirs):,.0f}-{max(theirs):,.0f}) "
            f"| {' '.join(f'{r:.2f}' for r in ratios)} | {statistics.median(ratios):.2f}x |"
        )
    for case in args.cases:
        cpu = {side: statistics.median(s["cpu_us"] for s in samples[case][side]) for side in SIDES}
        loader = {side: statistics.median(s["load_cpu"] for s in samples[case][side]) for side in SIDES}
        print(
            f"{case}: the service's CPU per request: ours {cpu['ours']:.1f} us, nats-py {cpu['nats-py']:.1f} us; "
            f"the load process used {loader['ours']:.0%} / {loader['nats-py']:.0%} of a core"
        )
    print("checked: every reply, on both sides, carried its own request's body; none was refused")
    print(f"{'loadavg_end:':<16}{os.getloadavg()}")
    return 0


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="3 repetitions of 2 s")
    parser.add_argument("--reps", type=int, default=None, help="repetitions per case and side (default 5)")
    parser.add_argument("--seconds", type=float, default=None, help="timed seconds per run (default 5)")
    parser.add_argument("--window", type=int, default=None, help="requests in flight, for every case")
    parser.add_argument("--workers", type=int, default=4, help="our service's worker threads (default 4)")
    parser.add_argument("--only", help="comma-separated cases: " + ", ".join(CASES))
    parser.add_argument("--role", choices=("serve-ours", "serve-natspy", "load"), help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--handler", choices=("echo", "io"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.reps = args.reps or (3 if args.quick else 5)
    args.seconds = args.seconds or (2.0 if args.quick else 5.0)
    args.cases = [case for case in CASES if not args.only or case in args.only.split(",")]
    if args.only and set(args.only.split(",")) - set(CASES):
        parser.error(f"unknown cases: {sorted(set(args.only.split(',')) - set(CASES))}")
    if args.reps < 1 or args.seconds <= 0 or (args.window is not None and args.window < 1) or args.workers < 1:
        parser.error("--reps, --seconds, --window and --workers must be positive")
    return args


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
