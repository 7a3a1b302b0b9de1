"""The Celery app of the worker tests: the example's app, which also uses its client in the worker's main process
at import, before the prefork pool forks (as a ``--preload``-style app would), so the pool processes inherit a
process with a connected client and must make their own; plus a task that stays busy until it is killed."""

from __future__ import annotations

import os
import time

from tasks import app, jetstream  # examples/celery_worker/tasks.py, on PYTHONPATH

jetstream.js.publish("orders.boot", str(os.getpid()).encode())


@app.task(name="tests.busy")
def busy() -> None:
    """Say which pool process runs it, then work until the test kills that process (a worker dying mid-task)."""
    jetstream.js.publish("orders.busy", str(os.getpid()).encode())
    time.sleep(120)  # the simulated long task; the test SIGKILLs this process long before


__all__ = ["app", "busy"]
