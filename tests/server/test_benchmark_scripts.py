"""The benchmark scripts still run, at their smallest, as the docs tell users to run them.

They are measured by hand, never in tests (timings here would only be noise): this checks that each script
starts, runs every case of ours and nats-py's once, verifies what it read back and writes its report, so a
change of a shared helper cannot leave one of them broken until the next time somebody measures.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.helpers import REPO_ROOT

BENCHMARKS = REPO_ROOT / "benchmarks"


def run_script(name: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(BENCHMARKS / name), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=REPO_ROOT,
    )


def test_run_py_side_by_side_writes_its_results(tmp_path):
    result = run_script(
        "run.py",
        "--quick",
        "--reps",
        "1",
        "--only",
        "core_publish,kv_get",
        "--peers",
        "ours,nats-py",
        "--out",
        str(tmp_path),
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert "command:        python benchmarks/run.py --quick" in result.stdout
    (results,) = tmp_path.glob("*-quick.json")
    saved = json.loads(results.read_text())
    assert set(saved["samples"]) >= {"core_publish|128|ours", "core_publish|128|nats-py", "kv_get|128|ours"}
    assert saved["errors"] == []


def test_parser_py_compares_both_parser_paths():
    pytest.importorskip("jetstream_sync._runtime._cscan", reason="the compiled parser extension is not built here")
    result = run_script("parser.py", "--rounds", "1")
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert "checked: every message of every round reached the handler, on both paths" in result.stdout
    for row in ("| 128 B | parse only |", "| 16384 B | parse + Msg |"):
        assert row in result.stdout


def test_kv_py_lists_and_watches_both_clients():
    result = run_script("kv.py", "--quick", "--reps", "1", "--keys", "200")
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert "command:        python benchmarks/kv.py --quick" in result.stdout
    assert "checked: every listing and watch, on both sides, returned exactly the expected keys" in result.stdout


def test_codecs_py_runs_every_variant_and_checks_the_decoded_values():
    result = run_script("codecs.py", "--reps", "1", "--messages", "300")
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    for variant in ("raw:", "msgspec:", "json:"):
        assert variant in result.stdout and "x of raw" in result.stdout


def test_object_store_py_checks_every_byte_read_back():
    result = run_script("object_store.py", "--quick", "--reps", "1", "--size", "2")
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert "command:        python benchmarks/object_store.py --quick" in result.stdout
    assert "every get delivered" in result.stdout and "peak RSS above an idle client" in result.stdout


def test_services_py_runs_every_case_on_both_sides_and_checks_every_reply():
    result = run_script("services.py", "--reps", "1", "--seconds", "0.2")
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert "command:        python benchmarks/services.py --reps 1" in result.stdout
    assert "checked: every reply, on both sides, carried its own request's body; none was refused" in result.stdout
    for case in ("echo", "echo-256", "io"):
        assert f"| {case} |" in result.stdout


@pytest.mark.cluster
def test_kv_read_modes_py_measures_every_mode_on_a_cluster_and_one_server(tmp_path):
    result = run_script("kv_read_modes.py", "--quick", "--rounds", "1", "--out", str(tmp_path))
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert "command:        python benchmarks/kv_read_modes.py --quick" in result.stdout
    assert "checked: every get and get_many of an old key read back the value written" in result.stdout
    (results,) = tmp_path.glob("*-kv-read-modes-*-quick.json")
    saved = json.loads(results.read_text())
    assert set(saved["setups"]) == {"cluster", "single"}
    for setup in saved["setups"].values():
        assert set(setup["samples"]) == {
            f"{case}|{mode}"
            for case in ("own_write", "old_keys", "get_many")
            for mode in ("direct", "read_your_writes", "leader")
        }
        assert setup["stale"]["same|read_your_writes"]["stale"] == setup["stale"]["other|leader"]["stale"] == 0
    assert saved["violations"] == []


def test_django_task_backends_py_runs_and_checks_both_backends():
    pytest.importorskip("django_tasks_db", reason="benchmarks/django_task_backends.py needs django-tasks-db")
    result = run_script("django_task_backends.py", "--tasks", "20", "--reps", "1", "--only", "jetstream,sqlite")
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert "command:        python benchmarks/django_task_backends.py --tasks 20" in result.stdout
    assert "| jetstream |" in result.stdout and "| sqlite |" in result.stdout


def test_celery_brokers_py_runs_and_checks_every_result():
    result = run_script(
        "celery_brokers.py", "--tasks", "20", "--round-trips", "5", "--reps", "1", "--only", "jetstream,redis"
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert "command:        python benchmarks/celery_brokers.py --tasks 20" in result.stdout
    assert "| jetstream |" in result.stdout
    assert "| redis |" in result.stdout or "redis: not measured" in result.stdout  # Debian's redis-server, if any


def test_celery_round_trip_py_runs_and_reports_the_segments():
    result = run_script(
        "celery_round_trip.py", "--round-trips", "5", "--warmup", "2", "--reps", "1", "--only", "jetstream,redis"
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert "command:        python benchmarks/celery_round_trip.py --round-trips 5" in result.stdout
    assert "| round trip (delay() -> get() returns) | " in result.stdout
    assert "| get(): subscribed -> flushed | " in result.stdout  # the JetStream side's own steps were traced
    assert "| segment | jetstream | redis |" in result.stdout or "redis: not measured" in result.stdout
