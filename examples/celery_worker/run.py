#!/usr/bin/env python3
"""Run a Celery worker (prefork pool, 3 processes) whose tasks publish and consume, against an embedded server.

    python examples/celery_worker/run.py

Starts a nats-server, the worker (`celery -A tasks worker --pool=prefork --concurrency=3`), sends 30 record
tasks and then bill tasks, and waits until the stream holds 30 recorded and 30 billed orders.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

try:
    import celery  # noqa: F401 - the worker runs as python -m celery
except ModuleNotFoundError as exc:  # say which extra to install, not an ImportError traceback
    sys.exit(f"this example needs the celery extra: pip install -e '.[server,celery]' (no module {exc.name!r})")

import jetstream_sync
from jetstream_sync import ConsumerConfig, StreamConfig
from jetstream_sync.testing import EmbeddedServer, ServerNotInstalledError

HERE = Path(__file__).resolve().parent
ORDERS = 30


def wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.1)  # polling the stream's state


def main() -> None:
    with EmbeddedServer() as server, tempfile.TemporaryDirectory() as broker:
        env = {**os.environ, "JETSTREAM_URL": server.url, "CELERY_BROKER_DIR": broker, "PYTHONPATH": str(HERE)}
        os.environ.update({"JETSTREAM_URL": server.url, "CELERY_BROKER_DIR": broker})
        sys.path.insert(0, str(HERE))
        import tasks  # the same app, configured for this server and broker folder

        with jetstream_sync.connect(server.url) as nc:
            js = nc.jetstream()
            js.create_stream(StreamConfig(name="ORDERS", subjects=["orders.>"]))
            js.create_stream(StreamConfig(name="BILLING", subjects=["billing.>"]))
            js.create_consumer("ORDERS", ConsumerConfig(durable_name="billing"))
            worker = subprocess.Popen(
                [sys.executable, "-m", "celery", "--quiet", "-A", "tasks", "worker", "--pool=prefork",
                 "--concurrency=3", "--loglevel=WARNING", "--without-heartbeat", "--without-mingle",
                 "--without-gossip"],
                cwd=HERE, env=env,
            )  # fmt: skip
            try:
                for i in range(ORDERS):
                    tasks.record.delay(f"order-{i}")
                wait_for(lambda: js.stream_info("ORDERS").state.messages == ORDERS, 60, "the recorded orders")
                for _ in range(ORDERS // 10):
                    tasks.bill.delay(10)
                wait_for(lambda: js.stream_info("BILLING").state.messages == ORDERS, 60, "the billed orders")
                print(f"recorded {ORDERS} orders and billed {ORDERS}, in 3 worker processes")
            finally:
                worker.terminate()
                worker.wait(30)


if __name__ == "__main__":
    try:
        main()
    except ServerNotInstalledError as exc:  # no nats-server to start: the message names the extra that has one
        sys.exit(str(exc))
