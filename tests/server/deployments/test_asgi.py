"""A Django ASGI app under uvicorn with 2 worker processes (uvicorn starts them with multiprocessing's spawn, so
nothing is inherited): half the requests run the workload in a sync view, half in an async view through
``sync_to_async``. 24 requests, one worker killed with SIGKILL and replaced by uvicorn, 24 more, then two in an
async view that calls the client directly on the loop's thread (it works, and the client logs its hint pointing
at ``sync_to_async`` once per process), a drain; every key stored and finished once, nothing left on the
consumer, SIGTERM ends uvicorn with exit code 0, no traceback."""

from __future__ import annotations

import concurrent.futures
import os
import re
import signal
import sys
from pathlib import Path

import pytest

from tests.helpers import children, wait_until

from .harness import Served, assert_clean_log, check_outcome, http_json, require, wait_serving, web_keys

pytestmark = pytest.mark.deployment

WORKERS = 2
REQUESTS = 24
HINT = "was called on a thread that runs an asyncio event loop"  # jetstream_sync._runtime._wait


def test_django_asgi_under_uvicorn_with_sync_and_async_views(deployment, tmp_path, unused_port):
    require("uvicorn")
    command = [
        sys.executable, "-m", "uvicorn", "deploy_asgi:application", "--host", "127.0.0.1", "--port", str(unused_port),
        "--workers", str(WORKERS), "--no-access-log",
    ]  # fmt: skip
    with Served(command, deployment.env, tmp_path / "uvicorn.log") as served:
        wait_serving(served, unused_port, WORKERS, spawned)

        def request(key: str) -> dict[str, object]:
            view = "work" if int(key[1:]) % 2 else "async-work"
            status, body = http_json(unused_port, f"/{view}/{key}")
            assert status == 200, body
            return body

        keys = web_keys(REQUESTS)
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            first = list(pool.map(request, keys[:REQUESTS]))
            victim = int(str(first[0]["pid"]))
            os.kill(victim, signal.SIGKILL)
            wait_until(lambda: victim not in spawned(served.pid) and len(spawned(served.pid)) == WORKERS, timeout=30)
            second = list(pool.map(request, keys[REQUESTS:]))
        for key in ("direct0", "direct1"):  # the client called on the loop's thread: works, and is pointed out
            status, body = http_json(unused_port, f"/direct-work/{key}")
            assert status == 200, body
        assert http_json(unused_port, "/drain")[0] == 200
        code, seconds = served.stop()
    check_outcome(deployment.js, [*keys, "direct0", "direct1"])
    hints = re.findall(rf"^(\d+) WARNING jetstream_sync: .*{HINT}.*sync_to_async", served.text(), re.MULTILINE)
    assert 1 <= len(hints) == len(set(hints)) <= 2, served.text()[-3000:]  # once in each process it happened in
    assert len({answer["pid"] for answer in first + second}) >= 2
    assert code == 0 and seconds < 10, (code, seconds)
    assert_clean_log(served.text())


def spawned(pid: int) -> set[int]:
    """uvicorn's worker processes: its children started by multiprocessing's spawn (not its resource tracker)."""
    found = set()
    for child in children(pid):
        try:
            if b"spawn_main" in Path(f"/proc/{child}/cmdline").read_bytes():
                found.add(child)
        except OSError:
            continue  # it ended in between
    return found
