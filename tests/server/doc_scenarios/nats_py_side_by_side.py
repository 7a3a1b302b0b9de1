"""Scenario ``nats-py-side-by-side``: a block that shows the same worker loop in nats-py (asyncio) and in this
library, its halves headed ``# nats-py`` and ``# jetstream-sync``, runs both halves on one stream, one after the
other, each until its work is done.

The stream ORDERS (``orders.>``) holds 10 messages for each half. The nats-py half runs as written, top-level
``await`` included (compiled as asyncio's REPL compiles it), with ``js`` a nats-py JetStream context and ``nats``
imported; the jetstream-sync half on a thread with ``js`` ours. Each loop runs for ever as a worker's does: once
the consumer has no message left unacknowledged, the driver stops it from outside (the asyncio task cancelled,
the ``messages()`` iterator ``it`` stopped) and checks each half acknowledged its 10.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import time
from pathlib import Path
from typing import Any

import nats

import jetstream_sync
from jetstream_sync import StreamConfig
from jetstream_sync.testing import EmbeddedServer
from tests.helpers import wait_until
from tests.server.doc_scenarios import LoopThread, block_files


def caught_up(js: jetstream_sync.JetStream, acked: int) -> bool:
    info = js.consumer_info("ORDERS", "dispatch")
    return info.ack_floor.stream_seq == acked and info.num_pending == 0 and info.num_ack_pending == 0


async def nats_py_half(path: Path, code: str, url: str, ours: jetstream_sync.JetStream, acked: int) -> None:
    nc = await nats.connect(url)
    try:
        names: dict[str, Any] = {"js": nc.jetstream(), "nats": nats}
        compiled = compile(code, str(path), "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        loop = asyncio.ensure_future(eval(compiled, names))
        deadline = time.monotonic() + 15
        while not caught_up_soon(ours, acked):
            assert time.monotonic() < deadline and not loop.done(), f"the nats-py half: {loop!r}"
            await asyncio.sleep(0.05)  # the poll interval of this bounded wait for the loop's acks
        loop.cancel()  # a worker's shutdown; the loop must end by being cancelled, not by an error of its own
        with contextlib.suppress(asyncio.CancelledError):
            await loop
    finally:
        await nc.close()


def caught_up_soon(js: jetstream_sync.JetStream, acked: int) -> bool:
    try:
        return caught_up(js, acked)
    except jetstream_sync.errors.ConsumerNotFoundError:
        return False  # the half has not made its consumer yet


def run_block(path: Path, js: jetstream_sync.JetStream, url: str) -> None:
    text = path.read_text(encoding="utf-8")
    theirs, ours = text.split("# jetstream-sync\n")
    assert theirs.startswith("# nats-py\n"), "the block's halves are headed # nats-py and # jetstream-sync"
    acked = (
        js.consumer_info("ORDERS", "dispatch").ack_floor.stream_seq if "dispatch" in js.consumer_names("ORDERS") else 0
    )
    for n in range(10):
        js.publish("orders.new", b"%d" % n)
    asyncio.run(nats_py_half(path, theirs, url, js, acked + 10))
    # The nats-py half's last fetch (100 messages, 5 s) still waits at the server until the server has handled its
    # closed connection; under load that can come after the next publishes, which it would then take for nobody
    # (they wait for the ack wait, 30 s). Its pull is gone once the consumer shows no waiting request.
    wait_until(lambda: js.consumer_info("ORDERS", "dispatch").num_waiting == 0, timeout=15)
    for n in range(10, 20):
        js.publish("orders.new", b"%d" % n)
    names: dict[str, Any] = {"js": js}
    loop = LoopThread(path, ours, names)
    loop.start()
    wait_until(lambda: caught_up(js, acked + 20) or not loop.is_alive(), timeout=15)
    names["it"].stop()
    loop.join_ok(timeout=10)
    assert caught_up(js, acked + 20)
    print(f"{path.name}: the nats-py half acked 10 messages, the jetstream-sync half 10 more")


def main() -> None:
    with EmbeddedServer() as server, jetstream_sync.connect(server.url) as nc:
        js = nc.jetstream()
        js.create_stream(StreamConfig(name="ORDERS", subjects=["orders.>"]))
        for path in block_files():
            run_block(path, js, server.url)


if __name__ == "__main__":
    main()
