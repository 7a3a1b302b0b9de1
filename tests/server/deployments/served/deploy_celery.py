"""The Celery app of the deployment matrix: examples/celery_worker/tasks.py's app (kombu's filesystem broker in
``CELERY_BROKER_DIR``) with the workload's two tasks, and INFO logging on stderr (the worker's log) where the
test looks for the gevent note."""

from __future__ import annotations

import logging
import sys

import workload
from tasks import app  # examples/celery_worker/tasks.py, on PYTHONPATH

logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(process)d %(levelname)s %(name)s: %(message)s")


@app.task(name="deploy.work")
def work(key: str) -> None:
    workload.work(key)


@app.task(name="deploy.drain")
def drain() -> None:
    workload.drain()


__all__ = ["app", "drain", "work"]
