"""Scenario ``celery-settings``: a block of settings on the reader's Celery ``app`` (its broker and result
backend) makes that app's tasks run on JetStream.

For each block the driver makes an app with a task ``add(a, b)``, runs the block with ``app`` defined (the
reader's servers are the embedded server), starts an in-process worker (solo pool) and waits for ``add(1, 2)``'s
result through the result backend the block set.
"""

from __future__ import annotations

from celery import Celery
from celery.contrib.testing.worker import start_worker

from jetstream_sync.testing import EmbeddedServer
from tests.server.doc_scenarios import block_files, your_servers_to


def main() -> None:
    with EmbeddedServer() as server:
        for path in block_files():
            app = Celery(f"settings_{path.stem}")

            @app.task
            def add(a: int, b: int) -> int:
                return a + b

            code = your_servers_to(path.read_text(encoding="utf-8"), [server.url])
            exec(compile(code, str(path), "exec"), {"app": app})
            with start_worker(app, pool="solo", perform_ping_check=False):
                total = add.delay(1, 2).get(timeout=10)
            assert total == 3, total
            print(f"{path.name}: {app.conf.broker_url} and {app.conf.result_backend}: add(1, 2) = {total}")


if __name__ == "__main__":
    main()
