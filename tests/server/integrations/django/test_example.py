"""examples/django_project/demo.py as a user runs it: one command, an embedded server, a clean exit."""

from __future__ import annotations

import subprocess
import sys

from tests.helpers import REPO_ROOT


def test_the_django_example_runs_end_to_end():
    result = subprocess.run(
        [sys.executable, str(REPO_ROOT / "examples" / "django_project" / "demo.py")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "System check identified no issues" in result.stdout
    assert "orders counted in the cache: 4" in result.stdout
    assert "fulfilled order 3 (flaky), delivery 2" in result.stdout
    # the one traceback comes after the line that says it is deliberate, inside the worker's output
    before, introduced, after = result.stdout.partition("The traceback in it is deliberate")
    assert introduced and "Traceback" not in before and after.count("Traceback (most recent call last)") == 1
    traceback_at = after.index("RuntimeError: the warehouse did not answer")
    assert traceback_at < after.index("--- end of the consume worker's output ---")
    assert "worker exited 0; orders acked: 4 of 4" in result.stdout
    assert "'status': 'SUCCESSFUL', 'attempts': 1, 'receipt': 'receipt for order 3 (flaky)'" in result.stdout
    assert result.stdout.count("sent receipt for order") == 4
    assert "tasks worker exited 0" in result.stdout
