"""Scenario ``celery-app``: a block that is a Celery app module (``app``, and a task ``ship(order_id)`` that
publishes to ``orders.shipped`` and returns the stream sequence) runs its task on a worker.

The page's app names Redis as its broker, which this machine does not run: the driver points the app's broker and
result backend at the embedded nats-server instead (``jetstream://``, the two settings the page's next section
shows), makes the stream ORDERS, and runs two tasks on an in-process worker (solo pool), whose results must be
the sequences 1 and 2.
"""

from __future__ import annotations

from celery.contrib.testing.worker import start_worker

import jetstream_sync.integrations.celery  # noqa: F401  (registers jetstream:// with Celery)
from jetstream_sync import StreamConfig
from jetstream_sync.testing import EmbeddedServer
from tests.server.doc_scenarios import block_files, module_of


def main() -> None:
    with EmbeddedServer() as server:
        for path in block_files():
            module = module_of(path, [server.url])
            broker = server.url.replace("nats://", "jetstream://")
            module.app.conf.broker_url = module.app.conf.result_backend = broker
            module.jetstream.js.create_or_update_stream(StreamConfig(name="ORDERS", subjects=["orders.>"]))
            with start_worker(module.app, pool="solo", perform_ping_check=False):
                done = [module.ship.delay(f"order-{n}").get(timeout=10) for n in (1, 2)]
            assert done == [1, 2], done
            print(f"{path.name}: ship() returned {done}")


if __name__ == "__main__":
    main()
