"""A real Celery worker (prefork pool, 3 processes) whose tasks publish and consume, against a real nats-server.

The broker is kombu's filesystem transport (no broker server); the app is examples/celery_worker/tasks.py, used
in the worker's main process before the pool forks. A pool process is killed and respawned mid-run; every task
still publishes, nothing raises ForkedClientError, and the worker shuts down warm with exit code 0.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import celery
import pytest

import jetstream_sync
from jetstream_sync import ConsumerConfig, StreamConfig, errors
from jetstream_sync.integrations.celery import JetStream
from tests.helpers import REPO_ROOT, children, wait_until

EXAMPLE = REPO_ROOT / "examples" / "celery_worker"


@pytest.fixture
def worker(nats_server_function, tmp_path):
    env = {
        **os.environ,
        "JETSTREAM_URL": nats_server_function.url,
        "CELERY_BROKER_DIR": str(tmp_path / "broker"),
        "PYTHONPATH": os.pathsep.join([str(EXAMPLE), str(REPO_ROOT / "tests" / "server" / "integrations")]),
    }
    (tmp_path / "broker").mkdir()
    with jetstream_sync.connect(nats_server_function.url) as nc:
        js = nc.jetstream()
        js.create_stream(StreamConfig(name="ORDERS", subjects=["orders.>"], allow_direct=True))
        js.create_stream(StreamConfig(name="BILLING", subjects=["billing.>"]))
        js.create_consumer("ORDERS", ConsumerConfig(durable_name="billing", filter_subject="orders.recorded"))
        log = tmp_path / "worker.log"
        with log.open("w") as out:
            process = subprocess.Popen(
                [sys.executable, "-m", "celery", "--quiet", "-A", "celery_app", "worker", "--pool=prefork",
                 "--concurrency=3", "--loglevel=INFO", "--without-heartbeat", "--without-mingle",
                 "--without-gossip"],
                env=env, stdout=out, stderr=subprocess.STDOUT,
            )  # fmt: skip
        try:
            wait_until(lambda: len(children(process.pid)) == 3, timeout=30)
            yield process, js, env, log
        finally:
            if process.poll() is None:
                process.kill()
                process.wait(10)


def send(env: dict[str, str], name: str, args_list: list[list[object]]) -> None:
    """Send tasks from this process through the same filesystem broker (a fresh app on the worker's settings)."""
    code = (
        "import json, sys; from tasks import app\n"
        "for args in json.loads(sys.argv[2]): app.send_task(sys.argv[1], args=args)\n"
    )
    subprocess.run([sys.executable, "-c", code, name, json.dumps(args_list)], env=env, check=True, timeout=60)


def test_a_prefork_worker_publishes_and_consumes_across_a_killed_pool_process(worker):
    process, js, env, log = worker
    send(env, "tasks.record", [[f"order-{i}"] for i in range(30)])
    wait_until(lambda: _count(js, "orders.recorded") == 30, timeout=30)
    pids = {m.data.split(b" by ")[1] for m in _messages(js, "orders.recorded")}
    assert len(pids) >= 2  # the work was spread over the pool processes
    assert _count(js, "orders.boot") == 1  # the main process used its client before the pool forked

    # Kill a pool process in the middle of a task (one waiting for work may hold the pool's queue lock, and
    # billiard cannot recover that lock: a limitation of the prefork pool, not of the client).
    send(env, "tests.busy", [[]])
    wait_until(lambda: _count(js, "orders.busy") == 1, timeout=30)
    victim = int(_messages(js, "orders.busy")[0].data)
    assert victim in children(process.pid)
    os.kill(victim, signal.SIGKILL)
    wait_until(lambda: len(children(process.pid)) == 3 and victim not in children(process.pid), timeout=30)

    send(env, "tasks.record", [[f"order-{i}"] for i in range(30, 60)])
    wait_until(lambda: _count(js, "orders.recorded") == 60, timeout=30)
    send(env, "tasks.bill", [[10]] * 6)
    wait_until(lambda: js.stream_info("BILLING").state.messages == 60, timeout=30)
    assert js.consumer_info("ORDERS", "billing").num_ack_pending == 0

    process.send_signal(signal.SIGTERM)
    assert process.wait(30) == 0
    text = log.read_text()
    assert "ForkedClientError" not in text and "Traceback" not in text, text[-3000:]


def test_bad_settings_fail_when_the_app_is_made():
    app = celery.Celery("bad")
    app.conf.jetstream = {"SERVERS": ["nats://127.0.0.1:4222"], "NO_SUCH_KEY": 1}
    with pytest.raises(errors.InvalidArgumentError, match="NO_SUCH_KEY"):
        JetStream(app)


def test_settings_missing_are_reported_on_first_use():
    app = celery.Celery("none")
    extension = JetStream(app)
    with pytest.raises(errors.InvalidArgumentError, match=r"app.conf.jetstream"):
        extension.client  # noqa: B018 - the property connects


def _messages(js: jetstream_sync.JetStream, subject: str) -> list[jetstream_sync.StoredMsg]:
    return list(js.stream("ORDERS").get_msgs(1, 1000, subjects=[subject]))


def _count(js: jetstream_sync.JetStream, subject: str) -> int:
    return len(_messages(js, subject))
