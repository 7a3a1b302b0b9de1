"""Benchmark driver for nats-py (asyncio): one job of ``benchmarks/run.py`` (contract: ``peers/README.md``).

nats-py has no continuous consume and no ``next()``: its ``pull_subscribe_bind`` + ``fetch(batch)`` loop is
the consume baseline, ``fetch(1)`` its next(). Acks are ``await msg.ack()``.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.metadata
import time
from collections.abc import AsyncIterator
from typing import Any

import nats
from _common import PATIENCE, Job, Stopwatch, check, run_driver

perf = time.perf_counter
CLIENT = f"nats-py {importlib.metadata.version('nats-py')}"


@contextlib.asynccontextmanager
async def connected(job: Job) -> AsyncIterator[Any]:
    """One connection for the run, closed at the end whatever happens."""
    nc = await nats.connect(job.url, name="bench-natspy")
    try:
        yield nc
    finally:
        await nc.close()


async def core_publish(job: Job) -> dict[str, Any]:
    payload, watch = job.payload, Stopwatch()
    async with connected(job) as nc:
        for _ in range(job.warmup):
            await nc.publish(job.subject, payload)
        await nc.flush(PATIENCE)
        watch.start()
        for _ in range(job.count):
            await nc.publish(job.subject, payload)
        await nc.flush(PATIENCE)
        watch.stop()
    return watch.measured.result(CLIENT, job.count)


async def js_publish(job: Job) -> dict[str, Any]:
    payload, watch = job.payload, Stopwatch()
    async with connected(job) as nc:
        js = nc.jetstream()
        for _ in range(job.warmup):
            await js.publish(job.subject, payload)
        with watch.running() as measured:
            for _ in range(job.count):
                t = perf()
                await js.publish(job.subject, payload)
                measured.latencies.append(perf() - t)
    return watch.measured.result(CLIENT, job.count)


async def publish_async(job: Job) -> dict[str, Any]:
    payload, watch = job.payload, Stopwatch()
    async with connected(job) as nc:
        js = nc.jetstream(publish_async_max_pending=job.window)

        async def publish_all(count: int) -> list[Any]:
            futures = [await js.publish_async(job.subject, payload) for _ in range(count)]
            await asyncio.wait_for(js.publish_async_completed(), PATIENCE)
            return futures

        await publish_all(job.warmup)
        watch.start()
        futures = await publish_all(job.count)
        watch.stop()
        failed = [f.exception() for f in futures if f.exception() is not None]
        check(not failed, f"{len(failed)} publishes failed, first: {failed[:1]}")
    return watch.measured.result(CLIENT, job.count)


async def fetch_loop(job: Job, ack: bool) -> dict[str, Any]:
    """fetch_ack, and the consume cases: nats-py's way of reading a pull consumer continuously."""
    watch = Stopwatch()
    async with connected(job) as nc:
        sub = await nc.jetstream().pull_subscribe_bind(durable=job.consumer, stream=job.stream)

        async def fetch_n(count: int) -> None:
            got = 0
            while got < count:
                msgs = await sub.fetch(min(job.batch, count - got), timeout=5.0)
                check(bool(msgs), f"fetch got nothing after {got} of {count} messages")
                if ack:
                    for msg in msgs:
                        await msg.ack()
                got += len(msgs)

        await fetch_n(job.warmup)
        watch.start()
        await fetch_n(job.count)
        watch.stop()
    return watch.measured.result(CLIENT, job.count)


async def next_waiting(job: Job) -> dict[str, Any]:
    watch = Stopwatch()
    async with connected(job) as nc:
        sub = await nc.jetstream().pull_subscribe_bind(durable=job.consumer, stream=job.stream)
        for _ in range(job.warmup):
            await (await sub.fetch(1, timeout=5.0))[0].ack()
        with watch.running() as measured:
            for _ in range(job.count):
                t = perf()
                msg = (await sub.fetch(1, timeout=5.0))[0]
                measured.latencies.append(perf() - t)
                await msg.ack()
    return watch.measured.result(CLIENT, job.count)


async def kv_get(job: Job) -> dict[str, Any]:
    watch = Stopwatch()
    async with connected(job) as nc:
        kv = await nc.jetstream().key_value(job.bucket)
        for _ in range(job.warmup):
            await kv.get("k")
        with watch.running() as measured:
            for _ in range(job.count):
                t = perf()
                await kv.get("k")
                measured.latencies.append(perf() - t)
        check(len((await kv.get("k")).value or b"") == job.size, "the value read back has the wrong size")
    return watch.measured.result(CLIENT, job.count)


async def kv_put(job: Job) -> dict[str, Any]:
    payload, watch = job.payload, Stopwatch()
    async with connected(job) as nc:
        kv = await nc.jetstream().key_value(job.bucket)
        for _ in range(job.warmup):
            await kv.put("k", payload)
        with watch.running() as measured:
            for _ in range(job.count):
                t = perf()
                await kv.put("k", payload)
                measured.latencies.append(perf() - t)
    return watch.measured.result(CLIENT, job.count)


async def obj_put(job: Job) -> dict[str, Any]:
    data, watch = bytes(i % 251 for i in range(job.size)), Stopwatch()
    async with connected(job) as nc:
        store = await nc.jetstream().object_store(job.bucket)
        for i in range(job.warmup):
            await store.put(f"w{i}", data)
        watch.start()
        for i in range(job.count):
            await store.put(f"o{i}", data)
        watch.stop()
    return watch.measured.result(CLIENT, job.count)


async def obj_get(job: Job) -> dict[str, Any]:
    watch = Stopwatch()
    async with connected(job) as nc:
        store = await nc.jetstream().object_store(job.bucket)
        for _ in range(job.warmup):
            check(len((await store.get("obj")).data or b"") == job.size, "the object read back has the wrong size")
        watch.start()
        sizes = [len((await store.get("obj")).data or b"") for _ in range(job.count)]
        watch.stop()
        check(sizes == [job.size] * job.count, f"objects read back with sizes {sorted(set(sizes))}")
    return watch.measured.result(CLIENT, job.count)


def on_loop(case: Any) -> Any:
    """A coroutine case as the plain function run_driver calls: a fresh event loop per run."""
    return lambda job: asyncio.run(case(job))


if __name__ == "__main__":
    run_driver(
        {
            "core_publish": on_loop(core_publish),
            "js_publish": on_loop(js_publish),
            "publish_async": on_loop(publish_async),
            "consume_ack": on_loop(lambda job: fetch_loop(job, ack=True)),
            "consume_acknone": on_loop(lambda job: fetch_loop(job, ack=False)),
            "messages_ack": on_loop(lambda job: fetch_loop(job, ack=True)),
            "fetch_ack": on_loop(lambda job: fetch_loop(job, ack=True)),
            "next_waiting": on_loop(next_waiting),
            "kv_get": on_loop(kv_get),
            "kv_put": on_loop(kv_put),
            "obj_put": on_loop(obj_put),
            "obj_get": on_loop(obj_get),
        }
    )
