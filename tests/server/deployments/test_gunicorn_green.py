"""Green threads: gunicorn's gevent workers with ``--preload``, and eventlet's own WSGI server (gunicorn 27 has
no eventlet worker). With ``--preload`` the app connects in gunicorn's arbiter at import; each worker is forked,
then monkey-patched, so the client it makes runs its threads as greenlets.

The web workload (harness.drive_web_workers): 24 requests, for gunicorn one of its 2 workers killed with SIGKILL
and respawned, 24 more, a drain. Every key stored and finished once, nothing left on the consumer, the inherited
client refused at once with ForkedClientError, SIGTERM ends the server with exit code 0, no traceback, and each
process that served logged once at INFO that threading is monkey-patched (jetstream_sync._environment).

The sync and gthread workers run in tests/server/integrations/test_gunicorn.py.
"""

from __future__ import annotations

import re
import sys

import pytest

from .harness import (
    Served,
    assert_clean_log,
    check_outcome,
    console_script,
    drive_web_workers,
    require,
    wait_serving,
    web_keys,
)

pytestmark = pytest.mark.deployment

WORKERS = 2


def test_gunicorn_gevent_workers_work_across_a_killed_worker(deployment, tmp_path, unused_port):
    require("gevent")
    command = [
        str(console_script("gunicorn")), "deploy_wsgi:application", "--bind", f"127.0.0.1:{unused_port}",
        "--workers", str(WORKERS), "--worker-class", "gevent", "--worker-connections", "50", "--preload",
        "--timeout", "30", "--graceful-timeout", "10",
    ]  # fmt: skip
    env = {**deployment.env, "DEPLOY_CONNECT_AT_IMPORT": "1"}
    with Served(command, env, tmp_path / "gunicorn.log") as served:
        wait_serving(served, unused_port, WORKERS)
        answers = drive_web_workers(unused_port, served, WORKERS)
        code, seconds = served.stop()
    check_outcome(deployment.js, web_keys())
    assert {answer["inherited"] for answer in answers} == {"ForkedClientError"}, answers
    assert code == 0 and seconds < 10, (code, seconds)
    assert_noted_once_per_process("gevent", served.text(), answers)


def test_eventlet_wsgi_server_works(deployment, tmp_path, unused_port):
    require("eventlet")
    command = [sys.executable, "eventlet_serve.py", str(unused_port)]
    with Served(command, deployment.env, tmp_path / "eventlet.log") as served:
        wait_serving(served, unused_port, 0)
        answers = drive_web_workers(unused_port, None, 1)
        code, seconds = served.stop()
    check_outcome(deployment.js, web_keys())
    assert code == 0 and seconds < 10, (code, seconds)
    assert_noted_once_per_process("eventlet", served.text(), answers)


def assert_noted_once_per_process(runtime: str, text: str, answers: list[dict[str, object]]) -> None:
    assert_clean_log(text)
    noted = re.findall(rf"^(\d+) INFO jetstream_sync: {runtime} has monkey-patched threading", text, re.MULTILINE)
    served_by = {str(answer["pid"]) for answer in answers}
    assert served_by <= set(noted) and len(noted) == len(set(noted)), (noted, served_by)
