"""Celery workers whose pool is not prefork: ``--pool=threads`` (tasks on threads of the worker's one process)
and ``--pool=gevent`` (Celery monkey-patches at startup, so the client's threads are greenlets).

40 tasks of the workload (publish with msg_id, take one message, record it, ack) run 4 at a time; every key is
stored and finished once, nothing is left on the consumer, SIGTERM's warm shutdown exits 0, the log has no
traceback, and under gevent the worker logged once that threading is monkey-patched. There is no pool process
to kill here: these pools run in the worker's one process. The prefork pool, with a pool process killed, runs
in tests/server/integrations/test_celery.py.
"""

from __future__ import annotations

import os
import re
import sys

import pytest

from tests.helpers import REPO_ROOT, wait_until
from tests.server.integrations.test_celery import send

from .harness import Served, assert_clean_log, check_outcome, require, stored

pytestmark = pytest.mark.deployment

TASKS = 40


@pytest.mark.parametrize("pool", ["threads", "gevent"])
def test_celery_pool_runs_the_workload(deployment, tmp_path, pool):
    if pool == "gevent":
        require("gevent")
    broker = tmp_path / "broker"
    broker.mkdir()
    env = {
        **deployment.env,
        "CELERY_BROKER_DIR": str(broker),
        "PYTHONPATH": os.pathsep.join([deployment.env["PYTHONPATH"], str(REPO_ROOT / "examples" / "celery_worker")]),
    }
    command = [
        sys.executable, "-m", "celery", "--quiet", "-A", "deploy_celery", "worker", f"--pool={pool}",
        "--concurrency=4", "--loglevel=INFO", "--without-heartbeat", "--without-mingle", "--without-gossip",
    ]  # fmt: skip
    keys = [f"t{i}" for i in range(TASKS)]
    # Sent before the worker starts: kombu's filesystem transport may read a task file while it is being written
    # (seen here under load: JSONDecodeError on an empty payload, and the worker's consumer loop restarts).
    send(env, "deploy.work", [[key] for key in keys])
    with Served(command, env, tmp_path / "worker.log") as served:
        try:
            wait_until(lambda: len(stored(deployment.js, "deploy.done.*")) == TASKS, timeout=60)
        except AssertionError:
            done = len(stored(deployment.js, "deploy.done.*"))
            raise AssertionError(f"{done} of {TASKS} tasks done in 60 s\n{served.text()[-4000:]}") from None
        code, seconds = served.stop()
    check_outcome(deployment.js, keys)
    assert code == 0 and seconds < 10, (code, seconds)
    text = served.text()
    assert_clean_log(text)
    noted = re.findall(r"^\d+ INFO jetstream_sync: gevent has monkey-patched threading", text, re.MULTILINE)
    assert len(noted) == (1 if pool == "gevent" else 0), text[-3000:]
