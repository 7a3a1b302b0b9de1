"""Celery with JetStream as broker (jetstream_sync.integrations.kombu.Transport) and result backend
(jetstream_sync.integrations.celery.ResultBackend): real prefork workers, real nats-server.

Each test gets its own stream, subject prefix and result bucket (celery_jetstream_app.py reads them from the
environment), and the tasks leave a file per run, so a test counts how often a task really ran.
"""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from celery import chord, group
from celery.result import ResultSet

import jetstream_sync
from jetstream_sync.integrations._clients import close_process_clients
from tests.helpers import REPO_ROOT, children, wait_until

HERE = Path(__file__).resolve().parent
_numbers = itertools.count()


class Env:
    """One test's Celery world: its environment, its app (imported fresh), and the workers it started."""

    def __init__(self, url: str, tmp: Path, **extra: str) -> None:
        n = next(_numbers)
        self.stream = f"CJ{os.getpid()}_{n}"
        self.runs = tmp / "runs"
        self.runs.mkdir(exist_ok=True)
        self.env = {
            **os.environ,
            "JETSTREAM_URL": url,
            "RUNS_DIR": str(self.runs),
            "KOMBU_STREAM": self.stream,
            "PYTHONPATH": os.pathsep.join([str(HERE), str(REPO_ROOT)]),
            **extra,
        }
        self.tmp = tmp
        self.workers: list[subprocess.Popen[bytes]] = []
        self.url = url

    def app(self) -> Any:
        saved = dict(os.environ)
        os.environ.update({k: v for k, v in self.env.items() if k != "PYTHONPATH"})
        try:
            sys.modules.pop("celery_jetstream_app", None)
            sys.path.insert(0, str(HERE))
            import celery_jetstream_app

            return celery_jetstream_app
        finally:
            os.environ.clear()
            os.environ.update(saved)

    def worker(self, name: str, concurrency: int = 2) -> subprocess.Popen[bytes]:
        log = (self.tmp / f"{name}.log").open("wb")
        process = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "celery_jetstream_app", "worker", "--pool=prefork",
             f"--concurrency={concurrency}", "--loglevel=INFO", "-n", f"{name}@%h", "--without-heartbeat",
             "--without-mingle", "--without-gossip"],
            env=self.env, stdout=log, stderr=subprocess.STDOUT, cwd=self.tmp,
        )  # fmt: skip
        self.workers.append(process)
        wait_until(lambda: len(children(process.pid)) >= concurrency, timeout=30)
        return process

    def celery(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "celery", "-A", "celery_jetstream_app", *args],
            env=self.env, capture_output=True, text=True, timeout=timeout, cwd=self.tmp,
        )  # fmt: skip

    def runs_of(self, name: str) -> list[Path]:
        return sorted(self.runs.glob(f"{name}.*"))

    def close(self) -> None:
        for process in self.workers:
            if process.poll() is None:
                process.kill()
                process.wait(10)

    def log(self, name: str) -> str:
        return (self.tmp / f"{name}.log").read_text(errors="replace")


@pytest.fixture
def world(nats_server, tmp_path) -> Iterator[Any]:
    made: list[Env] = []

    def make(**extra: str) -> Env:
        env = Env(nats_server.url, tmp_path, **extra)
        made.append(env)
        return env

    yield make
    for env in made:
        env.close()
    # the result backend's client in this process (one per process, as in a worker) closes with the test
    close_process_clients()


def test_tasks_groups_chords_and_results_through_a_prefork_worker(world):
    env = world()
    app = env.app()
    env.worker("w1")
    assert app.add.delay(2, 3).get(timeout=30) == 5
    assert group(app.add.s(i, i) for i in range(10))().get(timeout=30) == [i * 2 for i in range(10)]
    assert chord(app.add.s(i, 1) for i in range(10))(app.total.s()).get(timeout=30) == 55
    result = app.add.delay(1, 1)
    assert result.get(timeout=30) == 2
    result.forget()
    assert app.app.AsyncResult(result.id).state == "PENDING"  # forgotten: nothing stored any more
    # the layout an operator sees: one stream for the queues, a consumer per queue
    with jetstream_sync.connect(env.url) as nc:
        js = nc.jetstream()
        names = {c.name for c in js.consumers(env.stream)}
        assert "celery" in names
        assert js.stream_info(env.stream).config.retention.value == "interest"


def test_a_countdown_longer_than_ack_wait_runs_once_on_time(world):
    env = world(KOMBU_ACK_WAIT="2")
    app = env.app()
    env.worker("w1")
    sent = time.time()
    result = app.mark.apply_async(("late",), countdown=6)
    ran_at = result.get(timeout=30)
    assert ran_at - sent >= 6
    assert ran_at - sent < 9
    time.sleep(3)  # more than an ack wait after: a redelivery would have run it again by now
    assert len(env.runs_of("late")) == 1


def test_retries_and_revokes(world):
    env = world()
    app = env.app()
    env.worker("w1")
    assert app.flaky.delay("flaky", 2).get(timeout=30) == 2
    assert len(env.runs_of("flaky")) == 3
    revoked = app.mark.apply_async(("revoked",), countdown=3)
    revoked.revoke()
    assert app.mark.apply_async(("after",), countdown=4).get(timeout=30)
    assert env.runs_of("revoked") == []


def test_remote_control_ping_status_and_shutdown(world):
    env = world()
    env.app()
    worker = env.worker("w1")
    ping = env.celery("inspect", "ping", "--timeout=5")
    assert ping.returncode == 0 and "pong" in ping.stdout, ping.stdout + ping.stderr
    status = env.celery("status", "--timeout=5")
    assert status.returncode == 0 and "1 node online" in status.stdout, status.stdout + status.stderr
    env.celery("control", "shutdown", "--timeout=2")  # the shutdown command sends no reply (exit 69 says so)
    assert worker.wait(30) == 0, env.log("w1")[-3000:]
    with jetstream_sync.connect(env.url) as nc:  # the reply queues expire with their readers (x-expires 10 s)
        js = nc.jetstream()
        replies = [c for c in js.consumers(env.stream) if "reply" in c.name]
        assert all(c.config.inactive_threshold for c in replies)


@pytest.mark.parametrize("acks_late", [True, False])
def test_a_worker_killed_mid_task(world, acks_late):
    """With acks_late the task runs again on the other worker, one ack wait after the kill; without, it
    does not (it was acked when it started)."""
    env = world(KOMBU_ACK_WAIT="2", ACKS_LATE="1" if acks_late else "0")
    app = env.app()
    first = env.worker("w1", concurrency=1)
    app.mark.delay("long", 4)
    wait_until(lambda: env.runs_of("start-long"), timeout=30)
    first.kill()
    for pid in children(first.pid):
        os.kill(pid, signal.SIGKILL)
    first.wait(10)
    env.worker("w2", concurrency=1)
    if acks_late:
        wait_until(lambda: env.runs_of("long"), timeout=30)
        assert len(env.runs_of("start-long")) == 2
    else:
        time.sleep(6)  # two ack waits: a redelivery would have started it again by now
        assert len(env.runs_of("start-long")) == 1


def test_a_poison_task_ends_in_the_dead_letter_stream(world):
    env = world(KOMBU_ACK_WAIT="2", KOMBU_MAX_DELIVER="3", REJECT_ON_LOST="1")
    app = env.app()
    env.worker("w1", concurrency=1)
    app.die.delay("poison")
    with jetstream_sync.connect(env.url) as nc:
        js = nc.jetstream()
        wait_until(lambda: _dead(js, f"{env.stream}_DEAD") == 1, timeout=60)
    assert len(env.runs_of("poison")) == 3


def _dead(js: jetstream_sync.JetStream, stream: str) -> int:
    try:
        return js.stream_info(stream).state.messages
    except jetstream_sync.errors.StreamNotFoundError:
        return 0


@pytest.mark.parametrize(
    "count",
    [1000, pytest.param(10_000, marks=[pytest.mark.celery_full, pytest.mark.timeout(1200)])],
)
def test_a_server_restart_during_a_run_of_tasks(nats_server_function, tmp_path, count):
    """nats-server restarted (same port and store) while a prefork worker with acks_late runs ``count``
    idempotent tasks: every task runs at least once, and every result is there. The default run has 1,000
    tasks; ``-m celery_full`` runs the 10,000 of the issue."""
    env = Env(nats_server_function.url, tmp_path, KOMBU_ACK_WAIT="5")
    try:
        app = env.app()
        results = [app.record.delay(n) for n in range(count)]
        worker = env.worker("w1")
        wait_until(lambda: len(_recorded(env)) >= count // 4, timeout=300, interval=0.2)
        assert len(_recorded(env)) < count, "the worker finished before the restart: nothing was tested"
        nats_server_function.restart()
        wait_until(lambda: len(_recorded(env)) == count, timeout=900, interval=0.2)
        assert ResultSet(results).join_native(timeout=300) == [n * 2 for n in range(count)]
        assert worker.poll() is None, env.log("w1")[-3000:]
    finally:
        env.close()


def _recorded(env: Env) -> set[str]:
    """The tasks of test_a_server_restart_during_a_run_of_tasks that ran at least once."""
    return {entry.name.split(".", 1)[0] for entry in os.scandir(env.runs) if entry.name.startswith("rec-")}
