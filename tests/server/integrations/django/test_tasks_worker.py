"""``manage.py jetstream_tasks_worker`` as a deployment runs it: worker processes (``python -m django`` with
``tasks_settings``) against a real nats-server, tasks enqueued from this process. Higher priority runs first
under a backlog; a worker killed mid-task leaves the task to another (or, past MAX_DELIVER, to the dead
letters); a server restart loses no enqueued task; SIGTERM drains, a second signal stops at once and gives the
running task back; --processes forks workers that share the queue."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.test import override_settings
from django.utils import timezone

from jetstream_sync.integrations.django import close_clients, get_client
from jetstream_sync.integrations.django.tasks import DeliveriesExhausted
from jetstream_sync.integrations.django.tasks._compat import TaskResultStatus, task_backends
from tests.helpers import REPO_ROOT, wait_until
from tests.server.integrations.django import jobs
from tests.server.integrations.django.test_tasks import finished, tasks_setting

SETTINGS = "tests.server.integrations.django.tasks_settings"


class Workers:
    """Worker processes of one test, their output in files; all killed at the end."""

    def __init__(self, url: str, options: dict[str, Any], tmp: Path) -> None:
        self.url = url
        self.options = options
        self.tmp = tmp
        self.started: list[subprocess.Popen[bytes]] = []

    def start(self, *args: str) -> subprocess.Popen[bytes]:
        env = {
            **os.environ,
            "NATS_URL": self.url,
            "DJANGO_SETTINGS_MODULE": SETTINGS,
            "TASKS_OPTIONS": json.dumps(self.options),
            "PYTHONPATH": str(REPO_ROOT),
        }
        n = len(self.started)
        out, err = (self.tmp / f"worker{n}.out").open("wb"), (self.tmp / f"worker{n}.err").open("wb")
        command = [sys.executable, "-m", "django", "jetstream_tasks_worker", *args]
        process = subprocess.Popen(command, stdout=out, stderr=err, env=env, cwd=REPO_ROOT)
        out.close()
        err.close()
        self.started.append(process)
        wait_until(lambda: "tasks worker" in self.output(process) or process.poll() is not None, timeout=30)
        assert process.poll() is None, self.errors(process)
        return process

    def output(self, process: subprocess.Popen[bytes]) -> str:
        return (self.tmp / f"worker{self.started.index(process)}.out").read_text()

    def errors(self, process: subprocess.Popen[bytes]) -> str:
        return (self.tmp / f"worker{self.started.index(process)}.err").read_text()

    def stop_all(self) -> None:
        for process in self.started:
            if process.poll() is None:
                process.kill()
                process.wait(10)


def worker_id(process: subprocess.Popen[bytes]) -> str:
    return f"{os.uname().nodename}:{process.pid}"[-64:]


@pytest.fixture
def workers(nats_server, js, name, tmp_path) -> Iterator[Any]:
    """``workers(**options)`` sets TASKS here and returns the Workers that start processes with the same."""
    made: list[Workers] = []
    settings: list[Any] = []

    def use(url: str | None = None, **more: Any) -> Workers:
        options = {**tasks_setting(name, **more)["default"]["OPTIONS"]}
        setting = override_settings(TASKS=tasks_setting(name, **more))
        setting.enable()
        settings.append(setting)
        made.append(Workers(url or nats_server.url, options, tmp_path))
        return made[-1]

    yield use
    for group in made:
        group.stop_all()
    for setting in reversed(settings):
        setting.disable()


def test_higher_priority_runs_first_under_a_backlog(workers):
    """45 tasks in three bands, enqueued interleaved before any worker runs; one worker thread takes them
    highest band first, and in the order enqueued within a band."""
    group = workers()
    enqueued = {priority: [] for priority in (80, 0, -60)}
    for n in range(15):
        for priority in (-60, 0, 80):
            enqueued[priority].append(jobs.stamp.using(priority=priority).enqueue(f"{priority}/{n}"))
    group.start("--threads", "1")
    results = [finished(r, timeout=30) for band in enqueued.values() for r in band]
    order = [r.return_value["label"] for r in sorted(results, key=lambda r: r.started_at)]
    assert order == [f"{p}/{n}" for p in (80, 0, -60) for n in range(15)]


def test_a_worker_killed_mid_task_leaves_it_to_another(workers, tmp_path):
    group = workers(ACK_WAIT=2)
    marker = tmp_path / "started"
    result = jobs.hold_first.enqueue(str(marker), 60)
    first = group.start()
    wait_until(marker.exists, timeout=20)
    first.kill()  # SIGKILL: no drain, no nak; the server redelivers after ACK_WAIT
    first.wait(10)
    second = group.start()
    finished(result, timeout=20)
    assert result.status == TaskResultStatus.SUCCESSFUL
    assert result.return_value == [2, second.pid] and result.worker_ids == [worker_id(first), worker_id(second)]


def test_a_task_whose_workers_keep_dying_goes_to_the_dead_letters(workers, js, name, tmp_path):
    group = workers(ACK_WAIT=1, MAX_DELIVER=1)
    marker = tmp_path / "started"
    result = jobs.hold_first.enqueue(str(marker), 60)
    first = group.start()
    wait_until(marker.exists, timeout=20)
    first.kill()
    first.wait(10)
    group.start()
    finished(result, timeout=20)
    assert result.status == TaskResultStatus.FAILED and result.errors[-1].exception_class is DeliveriesExhausted
    assert result.worker_ids == [worker_id(first)]  # not run again
    dead = js.stream(name).get_last_msg(task_backends["default"].task_options.dead_subject("default"))
    assert json.loads(dead.data)["id"] == result.id


def test_a_server_restart_loses_no_enqueued_task(nats_server_function, workers):
    url = nats_server_function.url
    group = workers(url)  # first: the fixture's TASKS override is undone after this JETSTREAM one
    with override_settings(JETSTREAM={"SERVERS": [url], "NAME": "django-tests-restart"}):
        try:
            before = [jobs.add.enqueue(n, n) for n in range(10)]
            nats_server_function.restart()
            wait_until(lambda: get_client().is_connected, timeout=20)
            after = [jobs.add.enqueue(n, 100) for n in range(10)]
            group.start("--threads", "2")
            results = [finished(r, timeout=30) for r in before + after]
            assert [r.return_value for r in results] == [2 * n for n in range(10)] + [n + 100 for n in range(10)]
        finally:
            close_clients()  # the next test's client is the session server's


def test_sigterm_drains_the_running_task(workers, tmp_path):
    group = workers()
    marker = tmp_path / "started"
    result = jobs.hold_first.enqueue(str(marker), 1.5)
    worker = group.start()
    wait_until(marker.exists, timeout=20)
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(30) == 0, group.errors(worker)
    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL and result.return_value == [1, worker.pid]
    assert "drained" in group.output(worker)


def test_a_second_signal_stops_at_once_and_gives_the_task_back(workers, tmp_path):
    group = workers(ACK_WAIT=30)
    marker = tmp_path / "started"
    result = jobs.hold_first.enqueue(str(marker), 60)
    worker = group.start()
    wait_until(marker.exists, timeout=20)
    worker.send_signal(signal.SIGTERM)
    wait_until(lambda: "draining" in group.output(worker), timeout=10)
    began = time.monotonic()
    worker.send_signal(signal.SIGINT)
    worker.wait(20)
    stopped_in = time.monotonic() - began
    assert stopped_in < 3, f"the second signal stopped the worker after {stopped_in:.1f} s, not at once"
    assert "their messages were given back" in group.errors(worker)
    result.refresh()
    assert result.status == TaskResultStatus.RUNNING
    other = group.start()  # the message was nak'd: taken now, not after ACK_WAIT's 30 s
    finished(result, timeout=10)
    assert result.return_value == [2, other.pid]


def test_processes_share_the_queue_and_stop_on_sigterm(workers):
    group = workers()
    parent = group.start("--processes", "2", "--threads", "2")
    wait_until(lambda: group.output(parent).count("consuming") == 2, timeout=30)  # both children are ready
    results = [jobs.stamp.enqueue(str(n), 0.05) for n in range(40)]
    for result in results:
        finished(result, timeout=30)
    assert len({r.return_value["pid"] for r in results}) == 2, "both worker processes ran tasks"
    assert parent.pid not in {r.return_value["pid"] for r in results}
    parent.send_signal(signal.SIGTERM)
    try:
        code = parent.wait(30)
    except subprocess.TimeoutExpired:
        pytest.fail(f"not stopped 30 s after SIGTERM:\n{group.output(parent)}\n{group.errors(parent)}")
    assert code == 0, group.errors(parent)
    assert "all 2 worker processes stopped" in group.output(parent)


def test_a_deferred_task_waits_for_run_after_in_a_worker_process(workers):
    group = workers()
    worker = group.start()
    run_after = timezone.now() + timedelta(seconds=1.5)
    result = jobs.stamp.using(run_after=run_after).enqueue("later")
    finished(result, timeout=20)
    late = (result.started_at - run_after).total_seconds()
    assert 0 <= late < 1.0, late
    assert result.return_value["pid"] == worker.pid


def test_the_command_refuses_what_it_cannot_run(workers):
    group = workers()
    env = {**os.environ, "NATS_URL": group.url, "DJANGO_SETTINGS_MODULE": SETTINGS, "PYTHONPATH": str(REPO_ROOT)}
    env["TASKS_OPTIONS"] = json.dumps(group.options)
    for args, expected in (
        (["--threads", "0"], "--threads must be at least 1"),
        (["--backend", "nope"], "--backend 'nope'"),
        (["--queue", "a.b"], "'a.b' is not a queue name"),
    ):
        done = subprocess.run(
            [sys.executable, "-m", "django", "jetstream_tasks_worker", *args],
            capture_output=True,
            text=True,
            env=env,
            cwd=REPO_ROOT,
            timeout=60,
        )
        assert done.returncode == 1 and expected in done.stderr, done.stderr
