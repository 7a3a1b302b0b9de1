"""What the deployment matrix's tests share: the served processes, and the checks made from outside them.

A test starts a real server or worker (``Served``), drives it as its users would (HTTP, Celery's broker, a
notebook), and then checks only what can be seen from outside: the stream's contents (``check_outcome``), the
consumer's counts, exit codes, how long a shutdown took, and the log (``assert_clean_log``).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

import attrs
import pytest

import jetstream_sync
from tests.helpers import REPO_ROOT, children, wait_until

#: the served apps' directory: on the served processes' PYTHONPATH (beside the repository's root)
SERVED = Path(__file__).resolve().parent / "served"
STREAM = "DEPLOY"
CONSUMER = "work"
INSTALL = "pip install -e '.[deploy]'"


@attrs.define
class Deployment:
    """The stream and consumer a deployment works on, and the environment its processes get."""

    js: jetstream_sync.JetStream
    url: str
    env: dict[str, str]


def console_script(name: str) -> Path:
    """A console script installed beside this Python (``uwsgi``, ``gunicorn``, ``uvicorn``), or skip."""
    path = Path(sys.executable).parent / name
    if not path.exists():
        pytest.skip(f"{name} is not installed beside {sys.executable} ({INSTALL})")
    return path


def require(module: str) -> None:
    """Skip unless ``module`` is installed; it is not imported here (gevent and eventlet patch what they touch)."""
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} is not installed ({INSTALL})")


def check_outcome(js: jetstream_sync.JetStream, keys: list[str]) -> None:
    """Every key published once (its msg_id ``in-<key>`` stored once) and finished once, and the consumer holds
    nothing: no message pending, none delivered and left unacked."""
    ids = [m.headers.get("Nats-Msg-Id") for m in stored(js, "deploy.in.*")]
    assert sorted(ids) == sorted(f"in-{key}" for key in keys), "a msg_id stored twice, or one missing"
    done = [m.subject.removeprefix("deploy.done.") for m in stored(js, "deploy.done.*")]
    assert sorted(done) == sorted(keys), "a message not finished, or finished under two msg_ids"
    info = js.consumer_info(STREAM, CONSUMER)
    assert (info.num_pending, info.num_ack_pending) == (0, 0), "the consumer still holds messages"


def stored(js: jetstream_sync.JetStream, subject: str) -> list[jetstream_sync.StoredMsg]:
    """The messages the deployment stream holds on ``subject`` (wildcards allowed)."""
    return js.stream(STREAM).get_msgs(1, 10_000, subjects=[subject])


def http_json(port: int, path: str, timeout: float = 30) -> tuple[int, dict[str, object]]:
    """GET ``path`` of the served app: its status and JSON body (an error status is an answer too)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=timeout) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def assert_clean_log(text: str) -> None:
    """No traceback, no exception ignored at exit, no thread that died with an exception."""
    for marker in ("Traceback", "Exception ignored", "Exception in thread"):
        assert marker not in text, text[-4000:]


class Served:
    """A served process (a uWSGI master, a gunicorn arbiter, a Celery worker, uvicorn) in a session of its own,
    its output in ``log``. Leaving the ``with`` block kills whatever of its session is left (this process's own
    children only, by process group)."""

    def __init__(self, command: list[str], env: dict[str, str], log: Path, cwd: Path = SERVED) -> None:
        self.log = log
        with log.open("w") as out:
            self.process = subprocess.Popen(
                command, env=env, stdout=out, stderr=subprocess.STDOUT, cwd=cwd, start_new_session=True
            )
        self.pid = self.process.pid

    def __enter__(self) -> Served:
        return self

    def __exit__(self, *exc_info: object) -> None:
        with contextlib.suppress(ProcessLookupError):  # everything of its session has ended already
            os.killpg(self.pid, signal.SIGKILL)
        if self.process.poll() is None:
            self.process.wait(10)

    def stop(self, sig: signal.Signals = signal.SIGTERM, timeout: float = 30) -> tuple[int, float]:
        """Send ``sig`` and wait for the exit: its code and how long it took (seconds)."""
        start = time.monotonic()
        self.process.send_signal(sig)
        try:
            code = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            left = self.left()
            raise AssertionError(f"not stopped {timeout} s after {sig.name}: {left}\n{self.text()[-6000:]}") from None
        return code, time.monotonic() - start

    def left(self) -> str:
        """The processes of its session still there, and (served apps register faulthandler on SIGUSR2) their
        threads' stacks appended to the log."""
        listed = subprocess.run(
            ["ps", "-o", "pid,ppid,stat,etime,cmd", "-g", str(self.pid)], capture_output=True, text=True, check=False
        ).stdout
        for line in listed.splitlines()[1:]:
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.kill(int(line.split()[0]), signal.SIGUSR2)
        time.sleep(1)  # the stacks are written by the processes themselves; a moment for them to reach the log
        return listed

    def text(self) -> str:
        return self.log.read_text(errors="replace")


def served_env(deployment_url: str, **extra: str) -> dict[str, str]:
    """The environment of a served process: NATS_URL, the served apps and the repository on PYTHONPATH."""
    path = os.pathsep.join([str(SERVED), str(REPO_ROOT)])
    return {**os.environ, "NATS_URL": deployment_url, "PYTHONPATH": path, "PYTHONUNBUFFERED": "1", **extra}


def drive_web_workers(
    port: int, master: Served | None, workers: int, requests: int = 24, threads: int = 4
) -> list[dict[str, object]]:
    """The web workload: ``requests`` keys ``a<i>`` from ``threads`` threads, then (given the ``master`` that
    supervises ``workers`` worker processes) a worker killed with SIGKILL between requests, which the master
    must replace, then ``requests`` keys ``b<i>``, and a drain. Every answer must be 200; the answers are
    returned for the test's own checks (which worker answered, what it reported)."""
    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        first = list(pool.map(lambda i: http_json(port, f"/work/a{i}"), range(requests)))
        assert all(status == 200 for status, _ in first), first
        if master is not None:
            victim = int(str(first[0][1]["pid"]))
            os.kill(victim, signal.SIGKILL)
            wait_until(lambda: victim not in children(master.pid) and len(children(master.pid)) == workers, timeout=30)
        second = list(pool.map(lambda i: http_json(port, f"/work/b{i}"), range(requests)))
        assert all(status == 200 for status, _ in second), second
    status, _ = http_json(port, "/drain")
    assert status == 200
    return [body for _, body in first + second]


def wait_serving(served: Served, port: int, workers: int, worker_pids: Callable[[int], set[int]] = children) -> None:
    """Wait until ``served`` has ``workers`` worker processes (``worker_pids`` of its pid: its children; 0: it
    serves itself) and its app answers HTTP."""

    def ready() -> bool:
        assert served.process.poll() is None, served.text()[-3000:]
        if len(worker_pids(served.pid)) != workers:
            return False
        try:
            return http_json(port, "/nothing", timeout=2)[0] == 404
        except OSError:
            return False

    wait_until(ready, timeout=30)


def web_keys(requests: int = 24) -> list[str]:
    return [f"{half}{i}" for half in "ab" for i in range(requests)]
