"""Scenario ``advisories-loop``: a block that reads advisories for ever (``for ev in events``) and hands each
``MaxDeliveriesExceeded`` to the reader's ``dead_letter(stream, seq)`` dead-letters a message no worker handles.

The driver runs the block on a thread of its own with ``js`` (a stream ORDERS on ``orders.>``) and a
``dead_letter`` that records what it is given; once the block's ``events`` exist, a worker that fails every
message (``nak``) on a consumer with ``max_deliver=2`` makes the server give up on one, until ``dead_letter`` was
called (bounded), and then stops the loop as a shutdown would: ``events.close()`` ends the iteration.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import jetstream_sync
from jetstream_sync import AckPolicy, ConsumerConfig, StreamConfig
from jetstream_sync.testing import EmbeddedServer
from tests.helpers import wait_until
from tests.server.doc_scenarios import LoopThread, block_files


def run_block(path: Path, js: jetstream_sync.JetStream, worker: jetstream_sync.Consumer) -> None:
    letters: list[tuple[str, int]] = []
    names: dict[str, Any] = {"js": js, "dead_letter": lambda stream, seq: letters.append((stream, seq))}
    loop = LoopThread(path, path.read_text(encoding="utf-8"), names)
    loop.start()
    wait_until(lambda: "events" in names or not loop.is_alive(), timeout=10)
    deadline = time.monotonic() + 20
    while not letters:  # a message the server gave up on, advised while the loop reads
        assert time.monotonic() < deadline and loop.is_alive(), f"no dead letter: {loop.raised!r}"
        if worker.info().num_pending == 0:
            js.publish("orders.new", b"no worker can handle this")
        for msg in worker.fetch(1, expires=0.5):
            msg.nak()
    names["events"].close()
    loop.join_ok(timeout=10)
    assert letters[0][0] == "ORDERS", letters
    print(f"{path.name}: dead_letter{letters[0]}")


def main() -> None:
    with EmbeddedServer() as server, jetstream_sync.connect(server.url) as nc:
        js = nc.jetstream()
        stream = js.create_stream(StreamConfig(name="ORDERS", subjects=["orders.>"]))
        policy = ConsumerConfig(durable_name="work", ack_policy=AckPolicy.EXPLICIT, max_deliver=2)
        worker = stream.create_or_update_consumer(policy)
        for path in block_files():
            run_block(path, js, worker)


if __name__ == "__main__":
    main()
