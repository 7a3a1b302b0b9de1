"""Benchmark driver for jetstream-sync: one job of ``benchmarks/run.py`` (contract: ``peers/README.md``).

Each case is written the way a user of this client would write it: blocking calls, ``consume(handler)`` for
the continuous consume, ``msg.ack()`` (coalesced, fire and forget) for acks.
"""

from __future__ import annotations

import importlib.metadata
import threading
import time
from typing import Any

from _common import PATIENCE, Job, Stopwatch, check, proc_status_kib, run_driver, timed_calls

import jetstream_sync
from jetstream_sync import Msg

perf = time.perf_counter
CLIENT = f"jetstream-sync {importlib.metadata.version('jetstream-sync')}"


def connect(job: Job) -> jetstream_sync.Client:
    return jetstream_sync.connect(job.url, name="bench-ours")


def core_publish(job: Job) -> dict[str, Any]:
    payload, watch = job.payload, Stopwatch()
    with connect(job) as nc:
        for _ in range(job.warmup):
            nc.publish(job.subject, payload)
        nc.flush(PATIENCE)
        with watch.running():
            for _ in range(job.count):
                nc.publish(job.subject, payload)
            nc.flush(PATIENCE)
    return watch.measured.result(CLIENT, job.count)


def js_publish(job: Job) -> dict[str, Any]:
    payload, watch = job.payload, Stopwatch()
    with connect(job) as nc:
        js = nc.jetstream()
        for _ in range(job.warmup):
            js.publish(job.subject, payload)
        with watch.running() as measured:
            timed_calls(job.count, lambda: js.publish(job.subject, payload), measured.latencies)
    return watch.measured.result(CLIENT, job.count)


def publish_async(job: Job) -> dict[str, Any]:
    payload, watch = job.payload, Stopwatch()
    with connect(job) as nc:
        js = nc.jetstream(max_pending=job.window)

        def publish_all(count: int) -> list[Any]:
            futures = [js.publish_async(job.subject, payload) for _ in range(count)]
            js.publish_async_complete(PATIENCE)
            return futures

        publish_all(job.warmup)
        with watch.running():
            futures = publish_all(job.count)
        failed = [f.exception() for f in futures if f.exception() is not None]
        check(not failed, f"{len(failed)} publishes failed, first: {failed[:1]}")
    return watch.measured.result(CLIENT, job.count)


def consume(job: Job, ack: bool) -> dict[str, Any]:
    watch, done, seen = Stopwatch(), threading.Event(), 0

    def handler(msg: Msg) -> None:
        nonlocal seen
        if ack:
            msg.ack()
        seen += 1
        if seen == job.warmup:
            watch.start()
        elif seen == job.total:
            watch.stop()
            done.set()

    with connect(job) as nc:
        consumer = nc.jetstream().consumer(job.stream, job.consumer)
        if job.warmup == 0:
            watch.start()
        context = consumer.consume(handler, max_messages=job.batch)
        finished = done.wait(PATIENCE)
        context.stop()
        context.wait(10)
    check(finished, f"consume handled {seen} of {job.total} messages in {PATIENCE:g} s")
    return watch.measured.result(CLIENT, job.count)


def messages_ack(job: Job) -> dict[str, Any]:
    """``consumer.messages()`` iterated on this thread, each message acked: the iterator form of consume."""
    watch, seen = Stopwatch(), 0
    with connect(job) as nc:
        consumer = nc.jetstream().consumer(job.stream, job.consumer)
        if job.warmup == 0:
            watch.start()
        deadline = time.monotonic() + PATIENCE
        with consumer.messages(max_messages=job.batch) as messages:
            for msg in messages:
                msg.ack()
                seen += 1
                if seen == job.warmup:
                    watch.start()
                elif seen == job.total:
                    watch.stop()
                    break
                elif time.monotonic() > deadline:
                    break
    check(seen == job.total, f"messages() handed out {seen} of {job.total} messages in {PATIENCE:g} s")
    return watch.measured.result(CLIENT, job.count)


def slow_consume_rss(job: Job) -> dict[str, Any]:
    """A handler slower than the stream (0.2 ms a message): the peak RSS above the connected client's must stay
    within ``batch`` (the consume's max_messages) x the message size plus working memory."""
    watch, done, seen = Stopwatch(), threading.Event(), 0

    def handler(msg: Msg) -> None:
        nonlocal seen
        time.sleep(0.0002)
        msg.ack()
        seen += 1
        if seen == job.total:
            done.set()

    with connect(job) as nc:
        consumer = nc.jetstream().consumer(job.stream, job.consumer)
        baseline = proc_status_kib("VmRSS")
        with watch.running():
            context = consumer.consume(handler, max_messages=job.batch)
            finished = done.wait(PATIENCE)
            context.stop()
            context.wait(10)
        peak = proc_status_kib("VmHWM")
    check(finished, f"consume handled {seen} of {job.total} messages in {PATIENCE:g} s")
    return {**watch.measured.result(CLIENT, job.count), "rss_over_kib": peak - baseline}


def fetch_ack(job: Job) -> dict[str, Any]:
    watch = Stopwatch()

    def fetch_n(consumer: jetstream_sync.Consumer, count: int) -> None:
        got = 0
        while got < count:
            before = got
            for msg in consumer.fetch(min(job.batch, count - got), expires=5.0):
                msg.ack()
                got += 1
            check(got > before, f"fetch got nothing after {got} of {count} messages")

    with connect(job) as nc:
        consumer = nc.jetstream().consumer(job.stream, job.consumer)
        fetch_n(consumer, job.warmup)
        with watch.running():
            fetch_n(consumer, job.count)
    return watch.measured.result(CLIENT, job.count)


def next_waiting(job: Job) -> dict[str, Any]:
    watch = Stopwatch()
    with connect(job) as nc:
        consumer = nc.jetstream().consumer(job.stream, job.consumer)
        for _ in range(job.warmup):
            consumer.next(timeout=5.0).ack()
        with watch.running() as measured:
            for _ in range(job.count):
                t = perf()
                msg = consumer.next(timeout=5.0)
                measured.latencies.append(perf() - t)
                msg.ack()
    return watch.measured.result(CLIENT, job.count)


def kv_get(job: Job) -> dict[str, Any]:
    watch = Stopwatch()
    with connect(job) as nc:
        kv = nc.jetstream().key_value(job.bucket)
        for _ in range(job.warmup):
            kv.get("k")
        with watch.running() as measured:
            timed_calls(job.count, lambda: kv.get("k"), measured.latencies)
        check(len(kv.get("k").value) == job.size, "the value read back has the wrong size")
    return watch.measured.result(CLIENT, job.count)


def kv_put(job: Job) -> dict[str, Any]:
    payload, watch = job.payload, Stopwatch()
    with connect(job) as nc:
        kv = nc.jetstream().key_value(job.bucket)
        for _ in range(job.warmup):
            kv.put("k", payload)
        with watch.running() as measured:
            timed_calls(job.count, lambda: kv.put("k", payload), measured.latencies)
    return watch.measured.result(CLIENT, job.count)


def obj_put(job: Job) -> dict[str, Any]:
    data, watch = bytes(i % 251 for i in range(job.size)), Stopwatch()
    with connect(job) as nc:
        store = nc.jetstream().object_store(job.bucket)
        for i in range(job.warmup):
            store.put(f"w{i}", data)
        with watch.running():
            for i in range(job.count):
                store.put(f"o{i}", data)
    return watch.measured.result(CLIENT, job.count)


def read_object(store: jetstream_sync.ObjectStore) -> int:
    """The streaming read (as the natsio and nats.js drivers do): chunks as they come, the SHA-256 checked at
    the end by the reader; returns the size read."""
    size = 0
    with store.get("obj") as reader:
        while chunk := reader.read(1 << 20):
            size += len(chunk)
    return size


def obj_get(job: Job) -> dict[str, Any]:
    watch = Stopwatch()
    with connect(job) as nc:
        store = nc.jetstream().object_store(job.bucket)
        for _ in range(job.warmup):
            check(read_object(store) == job.size, "the object read back has the wrong size")
        with watch.running():
            sizes = [read_object(store) for _ in range(job.count)]
        check(sizes == [job.size] * job.count, f"objects read back with sizes {sorted(set(sizes))}")
    return watch.measured.result(CLIENT, job.count)


if __name__ == "__main__":
    run_driver(
        {
            "core_publish": core_publish,
            "js_publish": js_publish,
            "publish_async": publish_async,
            "consume_ack": lambda job: consume(job, ack=True),
            "consume_acknone": lambda job: consume(job, ack=False),
            "messages_ack": messages_ack,
            "fetch_ack": fetch_ack,
            "next_waiting": next_waiting,
            "kv_get": kv_get,
            "kv_put": kv_put,
            "obj_put": obj_put,
            "obj_get": obj_get,
            "slow_consume_rss": slow_consume_rss,
        }
    )
