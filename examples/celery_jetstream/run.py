#!/usr/bin/env python3
"""Celery on JetStream, in one command: an embedded nats-server, a prefork worker, a producer, a chord.

    python examples/celery_jetstream/run.py

Starts a nats-server and ``celery -A tasks worker --pool=prefork --concurrency=2`` (broker and result backend
both on the server), then sends 20 tasks and a chord of 10 additions whose body sums them, and prints the
results as ``get()`` returns them (it waits on a KV watch).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

try:
    from celery import chord
except ModuleNotFoundError as exc:  # say which extra to install, not an ImportError traceback
    sys.exit(f"this example needs the celery extra: pip install -e '.[server,celery]' (no module {exc.name!r})")

from jetstream_sync.testing import EmbeddedServer, ServerNotInstalledError

HERE = Path(__file__).resolve().parent


def main() -> None:
    with EmbeddedServer() as server:
        os.environ["JETSTREAM_URL"] = server.url
        sys.path.insert(0, str(HERE))
        import tasks  # configured for this server by JETSTREAM_URL

        env = {**os.environ, "PYTHONPATH": str(HERE)}
        worker = subprocess.Popen(
            [sys.executable, "-m", "celery", "--quiet", "-A", "tasks", "worker", "--pool=prefork",
             "--concurrency=2", "--loglevel=WARNING", "--without-heartbeat", "--without-mingle", "--without-gossip"],
            cwd=HERE, env=env,
        )  # fmt: skip
        try:
            results = [tasks.add.delay(i, i) for i in range(20)]
            print("20 additions:", [r.get(timeout=60) for r in results])
            pids = {tasks.pid.delay().get(timeout=60) for _ in range(20)}
            print(f"run by {len(pids)} pool process(es)")
            body = chord(tasks.add.s(i, 1) for i in range(10))(tasks.total.s())
            print("chord of 10:", body.get(timeout=60))
        finally:
            worker.terminate()
            worker.wait(30)


if __name__ == "__main__":
    try:
        main()
    except ServerNotInstalledError as exc:  # no nats-server to start: the message names the extra that has one
        sys.exit(str(exc))
