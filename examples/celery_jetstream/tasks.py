"""A Celery app whose broker and result backend are JetStream: two settings and one import.

    JETSTREAM_URL=nats://127.0.0.1:4222 celery -A tasks worker --pool=prefork --concurrency=2

``import jetstream_sync.integrations.celery`` registers the ``jetstream://`` scheme for both; without the
import, set ``broker_transport = "jetstream_sync.integrations.kombu.Transport"`` and give the backend as
``"jetstream_sync.integrations.celery.ResultBackend+nats://host:4222"``.
"""

from __future__ import annotations

import os

from celery import Celery

import jetstream_sync.integrations.celery  # noqa: F401 - registers jetstream:// (broker and result backend)

_server = os.environ.get("JETSTREAM_URL", "nats://127.0.0.1:4222").replace("nats://", "jetstream://", 1)

app = Celery("tasks", broker=_server, backend=_server)
app.conf.update(
    task_acks_late=True,  # a task whose worker dies runs again elsewhere
    worker_prefetch_multiplier=4,
    result_expires=3600,
    broker_connection_retry_on_startup=True,
)


@app.task(name="tasks.add")
def add(x: int, y: int) -> int:
    return x + y


@app.task(name="tasks.total")
def total(numbers: list[int]) -> int:
    """A chord's body: runs once, after every part, with their results."""
    return sum(numbers)


@app.task(name="tasks.pid")
def pid() -> int:
    """Which pool process ran it (the example shows the work is spread)."""
    return os.getpid()
