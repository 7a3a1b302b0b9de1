"""multiprocessing's start methods with a connected client in the parent (this test's own): a
ProcessPoolExecutor of 3 processes per method runs the workload for 12 keys, each process on a client of its
own (``process_client``). Every key stored and finished once, nothing left on the consumer.

Python 3.12+ warns (DeprecationWarning) when a process with threads forks, and a connected client has threads:
with ``fork`` that warning comes, with ``spawn`` and ``forkserver`` (which start their processes without
forking this one) it does not. Before 3.12 nothing warns.
"""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import os
import sys
import warnings

import pytest

from .harness import SERVED, check_outcome

pytestmark = pytest.mark.deployment


def work_in_pool(key: str) -> int:
    """Run in a pool process: the workload for ``key``; returns that process's id."""
    import workload  # from SERVED, on the pool process's sys.path (spawn and forkserver copy the parent's)

    return int(str(workload.work(key)["pid"]))


@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
def test_process_pool_workers_run_the_workload(deployment, monkeypatch, method):
    monkeypatch.syspath_prepend(str(SERVED))
    monkeypatch.setenv("NATS_URL", deployment.url)
    keys = [f"{method}{i}" for i in range(12)]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with concurrent.futures.ProcessPoolExecutor(3, mp_context=multiprocessing.get_context(method)) as pool:
            pids = set(pool.map(work_in_pool, keys))
    check_outcome(deployment.js, keys)
    assert os.getpid() not in pids
    fork_warnings = [w for w in caught if w.category is DeprecationWarning and "fork()" in str(w.message)]
    assert bool(fork_warnings) == (method == "fork" and sys.version_info >= (3, 12)), fork_warnings
