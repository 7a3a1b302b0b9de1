"""What the in-process comparisons with nats-py (``kv.py``, ``object_store.py``) share with each other and with
``run.py``: its environment report, and the measuring helpers of the peer drivers (``peers/_common.py``).

``run.py`` measures every client in a process of its own; these two scripts measure ours and nats-py's in one
process, for the operations ``run.py`` does not cover (listings, watches, 256 MiB objects, peak memory).
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import nats

import jetstream_sync

# benchmarks/ is on sys.path already (this module was found there); the drivers' helpers are one level down
sys.path.insert(0, str(Path(__file__).resolve().parent / "peers"))

from _common import percentile, proc_status_kib
from run import environment, save_results

__all__ = ["environment", "percentile", "proc_status_kib", "save_results", "warm_up_process"]


def warm_up_process(url: str) -> None:
    """Import and first-call costs of both libraries, paid once before any case."""
    with jetstream_sync.connect(url, name="bench-warmup") as nc:
        for _ in range(1000):
            nc.publish("bench.warmup", b"x")
        nc.flush(10)

    async def natspy() -> None:
        nc = await nats.connect(url, name="bench-warmup")
        for _ in range(1000):
            await nc.publish("bench.warmup", b"x")
        await nc.flush(10)
        await nc.close()

    asyncio.run(natspy())
