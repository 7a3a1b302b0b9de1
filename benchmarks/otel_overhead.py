#!/usr/bin/env python3
"""What OpenTelemetry costs the hot paths: uninstrumented, and instrumented with the SDK, side by side in one run.

Usage (from the repository root, in the dev venv):

    python benchmarks/otel_overhead.py           # 5 repetitions (about a minute)
    python benchmarks/otel_overhead.py --reps 3

Cases, each measured uninstrumented ("off") and with ``jetstream_sync.integrations.otel.instrument()`` and an
SDK tracer provider whose spans go to a processor that drops them ("on", the span work without the export):
    publish     js.publish of 128 B, one after another: messages per second
    consume     consume(handler) + ack of 20,000 messages of 128 B: messages per second
    seam        the check every hot path makes while uninstrumented (``_telemetry.ACTIVE is not None``): ns

"Off" is what every user without the ``otel`` extra runs: the seam is one module attribute read per call, next
to a publish that costs hundreds of microseconds. The on/off ratio is what switching tracing on costs.
Repetitions alternate the order of off and on; medians and the per-repetition ratio range are printed.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
import timeit
from pathlib import Path

from opentelemetry.sdk.trace import SpanProcessor, TracerProvider

import jetstream_sync
from jetstream_sync import ConsumerConfig, StorageType, StreamConfig, _telemetry
from jetstream_sync.integrations import otel
from jetstream_sync.testing import EmbeddedServer

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run import environment

PAYLOAD = b"x" * 128
PUBLISHES = 3000
CONSUMED = 20_000


class _Drop(SpanProcessor):
    """Ends spans without exporting them: the instrumentation's own cost, not an exporter's."""


def publish_rate(js: jetstream_sync.JetStream) -> float:
    for _ in range(200):
        js.publish("bench.p", PAYLOAD)  # warm-up
    started = time.perf_counter()
    for _ in range(PUBLISHES):
        js.publish("bench.p", PAYLOAD)
    return PUBLISHES / (time.perf_counter() - started)


def consume_rate(js: jetstream_sync.JetStream, durable: str) -> float:
    for _ in range(CONSUMED):
        js.publish_async("bench.c", PAYLOAD)
    js.publish_async_complete(timeout=60)
    js.create_consumer("BENCH", ConsumerConfig(durable_name=durable, filter_subject="bench.c"))
    done = threading.Event()
    count = [0]

    def handler(msg: jetstream_sync.Msg) -> None:
        msg.ack()
        count[0] += 1
        if count[0] == CONSUMED:
            done.set()

    started = time.perf_counter()
    with js.consumer("BENCH", durable).consume(handler):
        if not done.wait(120):
            raise RuntimeError(f"consumed only {count[0]} of {CONSUMED}")
    rate = CONSUMED / (time.perf_counter() - started)
    js.delete_consumer("BENCH", durable)
    js.stream("BENCH").purge()
    return rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    provider = TracerProvider()
    provider.add_span_processor(_Drop())
    results: dict[tuple[str, str], list[float]] = {}
    with EmbeddedServer() as server, jetstream_sync.connect(server.url) as nc:
        js = nc.jetstream()
        js.create_stream(StreamConfig(name="BENCH", subjects=["bench.>"], storage=StorageType.MEMORY))
        for rep in range(args.reps):
            for mode in ("off", "on") if rep % 2 == 0 else ("on", "off"):
                if mode == "on":
                    otel.instrument(tracer_provider=provider)
                try:
                    results.setdefault(("publish", mode), []).append(publish_rate(js))
                    results.setdefault(("consume", mode), []).append(consume_rate(js, f"c{rep}{mode}"))
                finally:
                    otel.uninstrument()
    seam = min(timeit.repeat("_telemetry.ACTIVE is not None", globals={"_telemetry": _telemetry}, number=10**6))
    for key, value in environment(sys.argv[1:], script="benchmarks/otel_overhead.py").items():
        print(f"  {key + ':':<16}{value}")
    print(f"{'case':<10}{'off':>14}{'on':>14}{'on/off':>10}  per repetition")
    for case in ("publish", "consume"):
        off, on = results[(case, "off")], results[(case, "on")]
        ratios = [b / a for a, b in zip(off, on, strict=True)]
        print(
            f"{case:<10}{statistics.median(off):>12,.0f}/s{statistics.median(on):>12,.0f}/s"
            f"{statistics.median(ratios):>9.2f}x  {min(ratios):.2f}-{max(ratios):.2f}"
        )
    print(f"{'seam':<10}{seam * 1000:>12.1f}ns  (the whole cost while uninstrumented, per publish or request)")


if __name__ == "__main__":
    main()
