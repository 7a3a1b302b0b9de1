"""The Spark guide opens with a program that runs as it stands: this runs it, as a reader would."""

from __future__ import annotations

import os
import sys

import pytest

pytest.importorskip("pyarrow")
pytest.importorskip("pyspark", minversion="4.2")

from tests.helpers import REPO_ROOT, run_opening_program

pytestmark = pytest.mark.spark

GUIDE = REPO_ROOT / "docs" / "guides" / "spark.md"


@pytest.mark.timeout(300)
def test_the_guides_opening_program_runs_as_it_stands(tmp_path):
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    result = run_opening_program(GUIDE, tmp_path, timeout=280, env=env)
    assert "[('orders.eu', 500), ('orders.us', 500)]" in result.stdout
    assert "COPIES holds 1000 messages" in result.stdout
