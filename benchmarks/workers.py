#!/usr/bin/env python3
"""consume(workers=N, ordered_by=key) against the serial consume(), with a handler that does 1 ms of work.

Usage (from the repository root, in the dev venv):

    python benchmarks/workers.py                 # 5 repetitions of 4,000 messages over 50 keys
    python benchmarks/workers.py --reps 3 --messages 2000 --workers 4

Method: one EmbeddedServer; a stream filled once with the messages (subjects k0..k49, the key); for each
repetition and each variant (serial, then N workers with ordered_by=subject; the order is reversed every
repetition) a fresh durable consumer reads all of them with a handler that sleeps 1 ms (the stand-in for I/O
bound work, which is what a pool is for: CPU-bound Python handlers share one GIL) and acks. The figure is
messages per second from consume() to the last ack handed over; the ratio is per repetition, median reported.
Target (issue 11): 8 workers >= 5x the serial consume.
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time

import jetstream_sync
from jetstream_sync import ConsumerConfig, StreamConfig
from jetstream_sync.testing import EmbeddedServer

WORK = 0.001


def run_once(stream: jetstream_sync.Stream, name: str, count: int, workers: int) -> float:
    consumer = stream.create_consumer(ConsumerConfig(durable_name=name, max_ack_pending=-1))
    done = threading.Event()
    lock = threading.Lock()
    handled = [0]

    def handler(msg: jetstream_sync.Msg) -> None:
        time.sleep(WORK)
        msg.ack()
        with lock:
            handled[0] += 1
            if handled[0] == count:
                done.set()

    started = time.perf_counter()
    ctx = consumer.consume(handler, workers=workers, ordered_by=(lambda m: m.subject) if workers > 1 else None)
    if not done.wait(300):
        raise SystemExit(f"{name}: only {handled[0]} of {count} handled")
    rate = count / (time.perf_counter() - started)
    ctx.stop()
    ctx.wait(10)
    consumer.delete()
    return rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--messages", type=int, default=4000)
    parser.add_argument("--workers", type=int, default=8)
    args = parser.parse_args()
    with EmbeddedServer(jetstream=True) as server, jetstream_sync.connect(server.url) as nc:
        js = nc.jetstream()
        stream = js.create_stream(StreamConfig(name="WORKERS", subjects=["k.>"]))
        for i in range(args.messages):
            js.publish_async(f"k.{i % 50}", b"%d" % i)
        js.publish_async_complete(timeout=60)
        serial: list[float] = []
        pooled: list[float] = []
        for rep in range(args.reps):
            order = [1, args.workers] if rep % 2 == 0 else [args.workers, 1]
            for workers in order:
                rate = run_once(stream, f"r{rep}w{workers}", args.messages, workers)
                (serial if workers == 1 else pooled).append(rate)
        ratios = [p / s for p, s in zip(pooled, serial, strict=True)]
        print(f"consume(), 1 ms handler, {args.messages} messages over 50 keys, {args.reps} reps")
        print(f"  serial:                      {statistics.median(serial):8,.0f} msgs/s")
        print(f"  workers={args.workers}, ordered_by=subject: {statistics.median(pooled):8,.0f} msgs/s")
        verdict = "PASS" if statistics.median(ratios) >= 5 else "MISS"
        print(f"  ratio (median of per-rep):   {statistics.median(ratios):8.2f}x   target >= 5x  {verdict}")


if __name__ == "__main__":
    main()
