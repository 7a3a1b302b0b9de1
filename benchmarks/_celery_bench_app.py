"""The Celery app of benchmarks/celery_brokers.py: broker and result backend from the environment
(BENCH_BROKER, BENCH_BACKEND, BENCH_STREAM), ``task_acks_late`` on, and one task that returns when it ran."""

from __future__ import annotations

import os
import time

from celery import Celery

import jetstream_sync.integrations.celery  # noqa: F401 - registers jetstream:// (broker and result backend)

app = Celery("bench", broker=os.environ["BENCH_BROKER"], backend=os.environ["BENCH_BACKEND"])
_stream = os.environ.get("BENCH_STREAM", "BENCH")
app.conf.update(
    task_acks_late=True,
    broker_connection_retry_on_startup=True,
    broker_transport_options={"stream": _stream, "prefix": _stream.lower()}
    if os.environ["BENCH_BROKER"].startswith("jetstream")
    else {},
    result_backend_transport_options={"bucket": f"{_stream.lower()}_results"}
    if os.environ["BENCH_BACKEND"].startswith("jetstream")
    else {},
    worker_hijack_root_logger=False,
)


@app.task(name="bench.stamp")  # type: ignore[untyped-decorator]
def stamp(n: int) -> tuple[int, float, float]:
    """No work: the broker's and the backend's cost is what is measured. Returns ``n`` and when it ran."""
    started = time.time()
    return n, started, time.time()
