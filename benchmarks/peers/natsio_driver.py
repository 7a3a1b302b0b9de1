"""Benchmark driver for natsio (PyPI ``natsio``, asyncio, Python >= 3.13).

``benchmarks/run.py`` starts it in a Python >= 3.13 virtualenv with one job, a JSON object on argv[1] (the contract
is ``benchmarks/peers/README.md``): it opens one connection to ``url``, warms up with ``warmup`` operations of the
case's kind, times ``count`` of them with ``time.perf_counter`` (CPU with ``time.process_time`` over the same part)
and prints one JSON line on stdout::

    {"client": "natsio 1.0.1", "seconds": 0.81, "cpu": 0.79, "count": 30000, "p50_ms": 0.21, "p99_ms": 0.40}

Each case uses natsio's own API the way its documentation shows it:

    core_publish     ``await nc.publish()`` x count, then ``await nc.flush()``
    js_publish       ``await js.publish()`` one after another (latency of each)
    publish_async    ``await js.publish_async()`` with ``nc.jetstream(publish_async_max_pending=window)``,
                     then ``await js.publish_async_complete()``; every future's PubAck checked
    consume_ack      ``async with consumer.consume(max_messages=batch) as messages: async for msg in messages``,
                     ``await msg.ack()`` each
    consume_acknone  the same without acks
    messages_ack     the same as consume_ack: natsio's consume is an iterator already
    fetch_ack        ``await consumer.fetch(min(batch, left))`` loops, ``await msg.ack()`` each
    next_waiting     ``await consumer.next()`` (latency of each), ``await msg.ack()`` after the clock of the call
    kv_get/kv_put    ``await kv.get("k")`` / ``await kv.put("k", value)`` (latency of each)
    obj_put          ``await store.put(name, data)``
    obj_get          ``async with store.get("obj") as result: async for chunk in result`` (the streaming read, the
                     length summed; natsio verifies the digest)

Only natsio, the standard library and the drivers' ``_common.py`` (standard library only) are imported.
A failed check is a non-zero exit with the reason on stderr;
every wait is bounded (the whole run by OVERALL_TIMEOUT).
"""

import asyncio
import importlib.metadata
import json
import math
import sys
import time
import traceback
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import natsio
from _common import Job
from natsio.jetstream import Consumer, JetStreamContext, JsMsg, PubAck
from natsio.kv import KvEntry
from natsio.objectstore import ObjectStore

OVERALL_TIMEOUT = 120.0  # seconds, the whole run: connect, warm-up, measurement, close
WAIT = 60.0  # seconds, one bounded wait inside the run (flush, publish_async_complete)
STALL_WAIT = 30.0  # seconds publish_async may wait for room in its window before natsio raises
KEY = "k"  # kv cases
OBJECT = "obj"  # obj_get

T = TypeVar("T")


class DriverError(Exception):
    """A check failed: a count not reached, an ack with an error, a wrong size."""


@dataclass
class Measurement:
    """What one timed part produced."""

    seconds: float
    cpu: float
    latencies: list[float] = field(default_factory=list)


class Clock:
    """Wall time (perf_counter) and process CPU time (process_time) over one part of the run."""

    def __init__(self) -> None:
        self.wall = 0.0
        self.cpu = 0.0
        self.started = False

    def start(self) -> None:
        self.started = True
        self.wall = time.perf_counter()
        self.cpu = time.process_time()

    def stop(self, latencies: list[float] | None = None) -> Measurement:
        wall, cpu = time.perf_counter(), time.process_time()
        if not self.started:
            raise DriverError("the clock was never started")
        return Measurement(wall - self.wall, cpu - self.cpu, latencies or [])


# -- helpers ------------------------------------------------------------------------------------------------------
def payload_of(size: int) -> bytes:
    """``size`` bytes, ``i % 251`` (the pattern the object cases store)."""
    return (bytes(range(251)) * (size // 251 + 1))[:size]


def nearest_rank(sorted_values: list[float], percent: float) -> float:
    """Nearest-rank percentile of an ascending list."""
    rank = max(1, math.ceil(percent / 100 * len(sorted_values)))
    return sorted_values[rank - 1]


async def latency_loop(job: Job, call: Callable[[], Awaitable[T]], check: Callable[[T], None]) -> Measurement:
    """``warmup`` untimed calls, then ``count`` timed ones (each one's latency kept); every result checked."""
    for _ in range(job.warmup):
        check(await call())
    latencies: list[float] = []
    perf = time.perf_counter
    clock = Clock()
    clock.start()
    for _ in range(job.count):
        t = perf()
        result = await call()
        latencies.append(perf() - t)
        check(result)
    return clock.stop(latencies)


async def bind_consumer(js: JetStreamContext, job: Job) -> Consumer:
    job.need("stream", "consumer")
    stream = await js.stream(job.stream)
    return await stream.consumer(job.consumer)


# -- core and JetStream publish -----------------------------------------------------------------------------------
async def core_publish(nc: natsio.Client, job: Job) -> Measurement:
    job.need("subject")
    payload = payload_of(job.size)
    for _ in range(job.warmup):
        await nc.publish(job.subject, payload)
    await nc.flush(WAIT)
    clock = Clock()
    clock.start()
    for _ in range(job.count):
        await nc.publish(job.subject, payload)
    await nc.flush(WAIT)
    return clock.stop()


async def js_publish(nc: natsio.Client, job: Job) -> Measurement:
    job.need("stream", "subject")
    js = nc.jetstream()
    payload = payload_of(job.size)

    def check(ack: PubAck) -> None:
        if ack.stream != job.stream or ack.seq <= 0:
            raise DriverError(f"unexpected PubAck {ack!r}")

    return await latency_loop(job, lambda: js.publish(job.subject, payload), check)


async def _publish_window(
    js: JetStreamContext, subject: str, payload: bytes, count: int, window: int
) -> list[asyncio.Future[PubAck]]:
    """``count`` async publishes with at most ``window`` unacknowledged, then wait for every ack.

    natsio bounds the window itself (``publish_async_max_pending``, set to ``window``). Its stall counts the
    publish that is waiting, so with a window of 1 it would never wake: then each ack is awaited here instead.
    """
    futures: list[asyncio.Future[PubAck]] = []
    for _ in range(count):
        future = await js.publish_async(subject, payload)
        futures.append(future)
        if window == 1:
            await asyncio.wait((future,), timeout=WAIT)
    await js.publish_async_complete(timeout=WAIT)
    return futures


def check_acks(futures: list[asyncio.Future[PubAck]], stream: str, what: str) -> None:
    """Every future resolved, none with an error, every PubAck from ``stream`` (every future is looked at, so
    asyncio has no unretrieved exception to complain about)."""
    pending = sum(1 for future in futures if not future.done())
    if pending:
        raise DriverError(f"{what}: {pending} of {len(futures)} publishes have no ack after publish_async_complete")
    errors = [error for future in futures if (error := future.exception()) is not None]
    if errors:
        first = errors[0]
        raise DriverError(
            f"{what}: {len(errors)} of {len(futures)} publishes failed, the first: {type(first).__name__}: {first}"
        )
    strangers = {ack.stream for future in futures if (ack := future.result()).stream != stream}
    if strangers:
        raise DriverError(f"{what}: publishes acknowledged by stream(s) {sorted(strangers)}, not {stream!r}")


async def publish_async(nc: natsio.Client, job: Job) -> Measurement:
    job.need("stream", "subject", "window")
    js = nc.jetstream(publish_async_max_pending=max(job.window, 2), publish_async_stall_wait=STALL_WAIT)
    payload = payload_of(job.size)
    check_acks(await _publish_window(js, job.subject, payload, job.warmup, job.window), job.stream, "warm-up")
    clock = Clock()
    clock.start()
    futures = await _publish_window(js, job.subject, payload, job.count, job.window)
    measurement = clock.stop()
    check_acks(futures, job.stream, "publish_async")
    return measurement


# -- consuming ----------------------------------------------------------------------------------------------------
async def _consume(nc: natsio.Client, job: Job, *, ack: bool) -> Measurement:
    """``consume()`` iterated until warmup + count messages are handled; the clock covers the last ``count``."""
    job.need("batch")
    consumer = await bind_consumer(nc.jetstream(), job)
    total = job.warmup + job.count
    handled = 0
    clock = Clock()
    if job.warmup == 0:
        clock.start()
    measurement: Measurement | None = None
    async with consumer.consume(max_messages=job.batch) as messages:
        async for msg in messages:
            if ack:
                await msg.ack()
            handled += 1
            if handled == job.warmup:
                clock.start()
            if handled == total:
                measurement = clock.stop()
                break
    if measurement is None:
        raise DriverError(f"consume() ended after {handled} of {total} messages")
    return measurement


async def consume_ack(nc: natsio.Client, job: Job) -> Measurement:
    return await _consume(nc, job, ack=True)


async def consume_acknone(nc: natsio.Client, job: Job) -> Measurement:
    return await _consume(nc, job, ack=False)


async def _fetch_n(consumer: Consumer, count: int, batch: int) -> None:
    """Loops of ``fetch(min(batch, left))``, acking every message, until ``count`` are handled."""
    left = count
    while left > 0:
        msgs = await consumer.fetch(min(batch, left))  # natsio's default timeout (server-side expires): 5 s
        if not msgs:
            raise DriverError(f"fetch returned nothing with {left} of {count} messages still to come")
        for msg in msgs:
            await msg.ack()
        left -= len(msgs)


async def fetch_ack(nc: natsio.Client, job: Job) -> Measurement:
    job.need("batch")
    consumer = await bind_consumer(nc.jetstream(), job)
    await _fetch_n(consumer, job.warmup, job.batch)
    clock = Clock()
    clock.start()
    await _fetch_n(consumer, job.count, job.batch)
    return clock.stop()


async def next_waiting(nc: natsio.Client, job: Job) -> Measurement:
    consumer = await bind_consumer(nc.jetstream(), job)
    for _ in range(job.warmup):
        await (await consumer.next()).ack()
    latencies: list[float] = []
    perf = time.perf_counter
    clock = Clock()
    clock.start()
    for _ in range(job.count):
        t = perf()
        msg: JsMsg = await consumer.next()  # NoMessagesError after natsio's default 5 s
        latencies.append(perf() - t)
        await msg.ack()
    return clock.stop(latencies)


# -- key-value and object store -----------------------------------------------------------------------------------
async def kv_get(nc: natsio.Client, job: Job) -> Measurement:
    job.need("bucket")
    kv = await nc.jetstream().key_value(job.bucket)

    def check(entry: KvEntry) -> None:
        if len(entry.value) != job.size:
            raise DriverError(f"kv get returned {len(entry.value)} bytes, not {job.size}")

    return await latency_loop(job, lambda: kv.get(KEY), check)


async def kv_put(nc: natsio.Client, job: Job) -> Measurement:
    job.need("bucket")
    kv = await nc.jetstream().key_value(job.bucket)
    payload = payload_of(job.size)

    def check(revision: int) -> None:
        if revision <= 0:
            raise DriverError(f"kv put returned revision {revision}")

    return await latency_loop(job, lambda: kv.put(KEY, payload), check)


async def obj_put(nc: natsio.Client, job: Job) -> Measurement:
    job.need("bucket")
    store = await nc.jetstream().object_store(job.bucket)
    data = payload_of(job.size)

    async def put(name: str) -> None:
        info = await store.put(name, data)
        if info.size != job.size:
            raise DriverError(f"object {name} stored with size {info.size}, not {job.size}")

    for i in range(job.warmup):
        await put(f"w{i}")
    clock = Clock()
    clock.start()
    for i in range(job.count):
        await put(f"o{i}")
    return clock.stop()


async def read_object(store: ObjectStore, size: int) -> None:
    """One complete streaming read of OBJECT: the chunks counted as they arrive, not joined.

    ``store.get()`` is natsio's read (``get_bytes()`` is the same read plus a join); natsio checks the object's
    SHA-256 digest and size after the last chunk and raises DigestMismatchError on a mismatch.
    """
    length = 0
    async with store.get(OBJECT) as result:
        async for chunk in result:
            length += len(chunk)
    if length != size:
        raise DriverError(f"object {OBJECT} read as {length} bytes, not {size}")


async def obj_get(nc: natsio.Client, job: Job) -> Measurement:
    job.need("bucket")
    store = await nc.jetstream().object_store(job.bucket)
    for _ in range(job.warmup):
        await read_object(store, job.size)
    clock = Clock()
    clock.start()
    for _ in range(job.count):
        await read_object(store, job.size)
    return clock.stop()


CASES: dict[str, Callable[[natsio.Client, Job], Awaitable[Measurement]]] = {
    "core_publish": core_publish,
    "js_publish": js_publish,
    "publish_async": publish_async,
    "consume_ack": consume_ack,
    "consume_acknone": consume_acknone,
    "messages_ack": consume_ack,
    "fetch_ack": fetch_ack,
    "next_waiting": next_waiting,
    "kv_get": kv_get,
    "kv_put": kv_put,
    "obj_put": obj_put,
    "obj_get": obj_get,
}
LATENCY_CASES = frozenset({"js_publish", "next_waiting", "kv_get", "kv_put"})


# -- main ---------------------------------------------------------------------------------------------------------
async def run(job: Job) -> Measurement:
    """One connection, the case on it, the connection closed; all within OVERALL_TIMEOUT."""
    case = CASES[job.case]
    async with asyncio.timeout(OVERALL_TIMEOUT):
        nc = await natsio.connect(job.url, name="bench-natsio", allow_reconnect=False)
        try:
            return await case(nc, job)
        finally:
            await nc.close()


def result_line(job: Job, measurement: Measurement) -> str:
    result: dict[str, Any] = {
        "client": f"natsio {importlib.metadata.version('natsio')}",
        "seconds": round(measurement.seconds, 6),
        "cpu": round(measurement.cpu, 6),
        "count": job.count,
    }
    if job.case in LATENCY_CASES:
        latencies = sorted(measurement.latencies)
        if len(latencies) != job.count or not latencies:
            raise DriverError(f"{len(latencies)} latencies recorded for {job.count} calls")
        result["p50_ms"] = round(nearest_rank(latencies, 50) * 1000, 4)
        result["p99_ms"] = round(nearest_rank(latencies, 99) * 1000, 4)
    return json.dumps(result)


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: natsio_driver.py '<job JSON>'", file=sys.stderr)
        return 2
    case = "?"
    try:
        job = Job.parse(argv[1])
        case = job.case
        if case not in CASES:
            raise DriverError(f"unknown case {case!r} (known: {', '.join(CASES)})")
        if job.count <= 0 or job.warmup < 0:
            raise DriverError(
                f"count must be positive and warmup not negative (count {job.count}, warmup {job.warmup})"
            )
        measurement = asyncio.run(run(job))
        line = result_line(job, measurement)
    except (DriverError, ValueError) as exc:
        print(f"natsio_driver: {case}: {exc}", file=sys.stderr)
        return 1
    except TimeoutError as exc:
        # asyncio.timeout's own TimeoutError has no message; natsio's (a subclass) says which wait it was.
        reason = str(exc) or f"the run did not finish within {OVERALL_TIMEOUT:g} s"
        print(f"natsio_driver: {case}: timed out: {reason}", file=sys.stderr)
        return 1
    except Exception as exc:
        traceback.print_exc()
        print(f"natsio_driver: {case}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
