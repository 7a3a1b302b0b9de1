"""uWSGI, for real: the version pip installs (the ``deploy`` extra, 2.0.27 or later) and 2.0.26, the last whose
Python threads are off unless asked for.

- **Prefork** (uWSGI's default: the app is imported in the master, the workers are forked from it in C): the
  app connects a client at import and publishes with it. uWSGI forks without regard for the GIL, so a worker
  forked while one of that client's threads holds it hangs for ever (seen here: 2 runs in about 40 under load,
  the worker in ``take_gil`` under ``uwsgi_python_master_fixup``); the client warns about it once, in the
  master, and that is all a plain prefork run checks. With ``--py-call-uwsgi-fork-hooks`` (the master takes the
  GIL before each fork) the workload runs: each worker's first use of the inherited client raises
  ForkedClientError at once, the work runs on a client each worker makes (``process_client``). With
  ``--lazy-apps`` each worker imports the app and connects itself.
- 3 workers, 4 HTTP threads: 24 requests, a worker killed with SIGKILL and respawned, 24 more, a drain. Every
  key is stored and finished once, nothing is left on the consumer, SIGTERM stops uWSGI with exit code 0
  within a few seconds, and the log has no traceback.
- **2.0.26 without ``--enable-threads``**: the first request's connect raises ThreadsDisabledError naming the
  flag. With it, the same app works and a core publish made as a request ends reaches the server while the
  worker is idle (without threads, it waited for the next request).

The old uWSGI is built once per Python from PyPI into ``~/.cache/jetstream-sync/uwsgi-2.0.26-py3.N`` (or under
``$XDG_CACHE_HOME``; about 20 s), where the deploy extra is installed; where it cannot be built, those tests skip
saying why.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import jetstream_sync
from tests.helpers import children, wait_until

from .harness import (
    SERVED,
    Served,
    assert_clean_log,
    check_outcome,
    console_script,
    drive_web_workers,
    http_json,
    stored,
    wait_serving,
    web_keys,
)

pytestmark = pytest.mark.deployment

WORKERS = 3
OLD_VERSION = "2.0.26"  # the last release whose Python threads are off by default
#: one build per Python: uWSGI embeds the libpython it was compiled against
OLD_UWSGI = (
    Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    / "jetstream-sync"
    / f"uwsgi-{OLD_VERSION}-py{sys.version_info[0]}.{sys.version_info[1]}"
)


def uwsgi_command(binary: Path, port: int, *flags: str, processes: int = WORKERS) -> list[str]:
    return [
        str(binary), "--http-socket", f"127.0.0.1:{port}", "--wsgi-file", str(SERVED / "deploy_wsgi.py"),
        "--master", "--processes", str(processes), "--need-app", "--die-on-term", "--disable-logging",
        "--home", sys.prefix, *flags,
    ]  # fmt: skip


MASTER_HAZARD = "WARNING jetstream_sync: a client is being made in uWSGI's master process"


def test_a_client_made_in_the_uwsgi_master_is_warned_about_once(deployment, tmp_path, unused_port):
    """Plain prefork: the warning comes from the master as it imports the app, before any fork; the run is
    killed after it (a worker may be hung on the GIL, which is what the warning is about)."""
    binary = console_script("uwsgi")
    env = {**deployment.env, "DEPLOY_CONNECT_AT_IMPORT": "1"}
    with Served(uwsgi_command(binary, unused_port), env, tmp_path / "uwsgi.log") as served:
        wait_until(lambda: "spawned uWSGI worker 3" in served.text(), timeout=30)
        text = served.text()
    assert text.count(MASTER_HAZARD) == 1, text[-3000:]
    assert f"{served.pid} {MASTER_HAZARD}" in text  # the master's process id
    assert "--py-call-uwsgi-fork-hooks" in text


@pytest.mark.parametrize(
    ("mode", "flags"), [("prefork-fork-hooks", ("--py-call-uwsgi-fork-hooks",)), ("lazy-apps", ("--lazy-apps",))]
)
def test_uwsgi_workers_work_across_a_killed_worker(deployment, tmp_path, unused_port, mode, flags):
    binary = console_script("uwsgi")
    env = {**deployment.env, "DEPLOY_CONNECT_AT_IMPORT": "1"}
    with Served(uwsgi_command(binary, unused_port, *flags), env, tmp_path / "uwsgi.log") as served:
        wait_serving(served, unused_port, WORKERS)
        answers = drive_web_workers(unused_port, served, WORKERS)
        if mode == "lazy-apps":  # the respawned worker imports the app itself: stop it once it has (4 s seen)
            wait_until(lambda: all(f"pid: {pid} (default app)" in served.text() for pid in children(served.pid)), 30)
        code, seconds = served.stop()
    check_outcome(deployment.js, web_keys())
    assert len({answer["pid"] for answer in answers}) >= 2  # served by several workers
    if mode == "lazy-apps":  # each worker imported the app and connected itself: nothing inherited
        assert not any("inherited" in answer for answer in answers)
        assert len(stored(deployment.js, "deploy.boot")) >= WORKERS
    else:  # the master connected at import; every worker's use of that client was refused at once
        assert {answer["inherited"] for answer in answers} == {"ForkedClientError"}, answers
        assert max(float(answer["inherited_seconds"]) for answer in answers) < 0.5  # type: ignore[arg-type]
        assert len(stored(deployment.js, "deploy.inherited")) == 0
    assert code == 0 and seconds < 5, (code, seconds)
    assert_clean_log(served.text())
    assert MASTER_HAZARD not in served.text()


@pytest.fixture(scope="session")
def old_uwsgi() -> Path:
    """uWSGI 2.0.26's binary, built from PyPI once per machine and Python (its sdist compiles in about 20 s).
    Only where the deploy extra is installed, as for the rest of the matrix (CI's other Pythons skip it)."""
    console_script("uwsgi")
    binary = OLD_UWSGI / "bin" / "uwsgi"
    if not binary.exists():
        built = subprocess.run(
            [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(OLD_UWSGI),
             f"uwsgi=={OLD_VERSION}"],
            capture_output=True, text=True, timeout=600, check=False,
        )  # fmt: skip
        if built.returncode != 0 or not binary.exists():
            pytest.skip(f"uWSGI {OLD_VERSION} could not be built from PyPI here: {built.stderr[-500:]}")
    return binary


def test_uwsgi_without_threads_is_refused_at_connect(deployment, tmp_path, unused_port, old_uwsgi):
    with Served(uwsgi_command(old_uwsgi, unused_port, processes=1), deployment.env, tmp_path / "uwsgi.log") as served:
        wait_serving(served, unused_port, 1)
        status, body = http_json(unused_port, "/work/k0")
        code, _ = served.stop()
    assert "Python threads support is disabled" in served.text()  # uWSGI's own word that threads are off
    assert (status, body.get("error")) == (500, "ThreadsDisabledError"), body
    assert str(body["message"]).startswith(f"uWSGI {OLD_VERSION} runs this process without Python threads")
    assert "--enable-threads" in str(body["message"])
    assert deployment.js.stream_info("DEPLOY").state.messages == 0  # refused before anything was sent
    assert code == 0


def test_uwsgi_with_enable_threads_works_and_sends_while_idle(deployment, tmp_path, unused_port, old_uwsgi):
    command = uwsgi_command(old_uwsgi, unused_port, "--enable-threads", processes=1)
    log = tmp_path / "uwsgi.log"
    with jetstream_sync.connect(deployment.url) as nc, Served(command, deployment.env, log) as served:
        notes = nc.subscribe("deploy.notify")
        wait_serving(served, unused_port, 1)
        keys = [f"k{i}" for i in range(10)]
        assert all(http_json(unused_port, f"/work/{key}")[0] == 200 for key in keys)
        for i in range(5):  # the publish is written by the IO thread after the response: the worker is idle
            assert http_json(unused_port, f"/notify/n{i}")[0] == 200
            assert notes.next_msg(timeout=3).data == f"n{i}".encode()
        code, seconds = served.stop()
    check_outcome(deployment.js, keys)
    assert "python threads support enabled" in served.text()
    assert code == 0 and seconds < 5, (code, seconds)
    assert_clean_log(served.text())
