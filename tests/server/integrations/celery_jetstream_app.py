"""The Celery app of tests/server/integrations/test_celery_jetstream.py: JetStream as broker and result backend,
configured from the environment (JETSTREAM_URL, KOMBU_STREAM, KOMBU_ACK_WAIT, KOMBU_MAX_DELIVER, RUNS_DIR), with
tasks that leave a file per run in RUNS_DIR, so a test counts how often each task really ran."""

from __future__ import annotations

import os
import time
from pathlib import Path

from celery import Celery

import jetstream_sync.integrations.celery  # noqa: F401 - registers jetstream://

_url = os.environ["JETSTREAM_URL"].replace("nats://", "jetstream://", 1)
RUNS = Path(os.environ["RUNS_DIR"])

app = Celery("jstests", broker=_url, backend=_url)
app.conf.update(
    broker_transport_options={
        "stream": os.environ.get("KOMBU_STREAM", "KOMBU"),
        "prefix": os.environ.get("KOMBU_STREAM", "KOMBU").lower(),
        "ack_wait": float(os.environ.get("KOMBU_ACK_WAIT", "30")),
        "max_deliver": int(os.environ.get("KOMBU_MAX_DELIVER", "20")),
    },
    result_backend_transport_options={"bucket": os.environ.get("KOMBU_STREAM", "KOMBU").lower() + "_results"},
    task_acks_late=os.environ.get("ACKS_LATE", "1") == "1",
    task_reject_on_worker_lost=os.environ.get("REJECT_ON_LOST", "0") == "1",
    # a store that meets a server restart is tried again (ResultBackend.exception_safe_to_retry says which)
    result_backend_always_retry=True,
    result_backend_max_retries=20,
    worker_prefetch_multiplier=1,
    broker_connection_retry_on_startup=True,
)


def _ran(name: str) -> None:
    (RUNS / f"{name}.{os.getpid()}.{time.monotonic_ns()}").touch()


@app.task(name="t.add")
def add(x: int, y: int) -> int:
    return x + y


@app.task(name="t.total")
def total(numbers: list[int]) -> int:
    return sum(numbers)


@app.task(name="t.mark")
def mark(name: str, seconds: float = 0.0) -> float:
    """Runs ``seconds`` long; a file per run, named, is how the tests count runs."""
    _ran(f"start-{name}")
    time.sleep(seconds)  # the task's work: a task that takes this long (the tests kill workers during it)
    _ran(name)
    return time.time()


@app.task(name="t.record")
def record(n: int) -> int:
    """An idempotent task: each run leaves a file (``rec-<n>.*``); running it twice changes nothing else."""
    _ran(f"rec-{n}")
    return n * 2


@app.task(name="t.flaky", bind=True, max_retries=3, default_retry_delay=0.2)
def flaky(self, name: str, failures: int) -> int:  # type: ignore[no-untyped-def]
    _ran(name)
    if self.request.retries < failures:
        raise self.retry()
    return self.request.retries


@app.task(name="t.die")
def die(name: str) -> None:
    """A poison task: its process dies (SIGKILL of itself) every time it runs."""
    _ran(name)
    os.kill(os.getpid(), 9)
