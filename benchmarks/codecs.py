#!/usr/bin/env python3
"""The cost of a codec on consume(): raw bytes against ``codec=MsgspecCodec(Order)`` reading ``msg.value``.

Usage (from the repository root, in the dev venv):

    python benchmarks/codecs.py                  # 5 repetitions of 20,000 messages
    python benchmarks/codecs.py --reps 3 --messages 5000

Method: one EmbeddedServer; a stream filled once with the messages (a msgspec ``Order`` of four fields encoded
as JSON, about 60 bytes). For each repetition and each variant (the order alternates every repetition) a fresh
durable consumer with AckNone is read to its end by a serial consume(): "raw" reads ``msg.data`` and counts it;
"msgspec" passes ``codec=MsgspecCodec(Order)`` and reads ``msg.value.qty`` (one validated decode per message);
"json" does the same with the stdlib ``JsonCodec()``. The figure is messages per second from consume() to the
last message handled; the ratio to raw is per repetition, median reported. What it measures is the decode and
the per-message codec hook against a consume that otherwise costs the same; a shared machine makes the absolute
rates noisy, the ratio less so.
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
from collections.abc import Callable
from typing import Any

import msgspec

import jetstream_sync
from jetstream_sync import AckPolicy, ConsumerConfig, StreamConfig
from jetstream_sync.codecs import Codec, JsonCodec, MsgspecCodec
from jetstream_sync.testing import EmbeddedServer


class Order(msgspec.Struct):
    id: int
    sku: str
    qty: int
    note: str = ""


def run_once(
    stream: jetstream_sync.Stream, name: str, count: int, codec: Codec[Any] | None, read: Callable[[Any], int]
) -> float:
    consumer = stream.create_consumer(ConsumerConfig(durable_name=name, ack_policy=AckPolicy.NONE))
    done = threading.Event()
    handled = [0, 0]  # messages, checksum (so the read is not optimised away and is checked)

    def handler(msg: jetstream_sync.Msg) -> None:
        handled[1] += read(msg)
        handled[0] += 1
        if handled[0] == count:
            done.set()

    started = time.perf_counter()
    ctx = consumer.consume(handler, codec=codec)
    if not done.wait(300):
        raise SystemExit(f"{name}: only {handled[0]} of {count} handled")
    rate = count / (time.perf_counter() - started)
    ctx.stop()
    ctx.wait(10)
    consumer.delete()
    if codec is not None and handled[1] != sum(i % 7 for i in range(count)):
        raise SystemExit(f"{name}: the decoded values do not add up")
    return rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--messages", type=int, default=20_000)
    args = parser.parse_args()
    orders = MsgspecCodec(Order)
    variants: dict[str, tuple[Codec[Any] | None, Callable[[Any], int]]] = {
        "raw": (None, lambda msg: len(msg.data) & 0),
        "msgspec": (orders, lambda msg: msg.value.qty),
        "json": (JsonCodec(), lambda msg: msg.value["qty"]),
    }
    with EmbeddedServer(jetstream=True) as server, jetstream_sync.connect(server.url) as nc:
        js = nc.jetstream()
        stream = js.create_stream(StreamConfig(name="CODECS", subjects=["orders.>"]))
        for i in range(args.messages):
            js.publish_async("orders.new", Order(id=i, sku=f"sku-{i % 100}", qty=i % 7), codec=orders)
        js.publish_async_complete(timeout=60)
        rates: dict[str, list[float]] = {name: [] for name in variants}
        for rep in range(args.reps):
            order = list(variants) if rep % 2 == 0 else list(reversed(variants))
            for name in order:
                codec, read = variants[name]
                rates[name].append(run_once(stream, f"r{rep}{name}", args.messages, codec, read))
        print(f"consume(), serial, AckNone, {args.messages} messages of ~60 bytes, {args.reps} reps")
        for name in variants:
            ratio = statistics.median(r / raw for r, raw in zip(rates[name], rates["raw"], strict=True))
            print(f"  {name + ':':9} {statistics.median(rates[name]):10,.0f} msgs/s   {ratio:5.2f}x of raw")


if __name__ == "__main__":
    main()
