"""The Deployments guide opens with a program that runs as it stands: this runs it, as a reader would."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.helpers import REPO_ROOT, first_python_block

pytestmark = pytest.mark.deployment

GUIDE = REPO_ROOT / "docs" / "frameworks" / "deployments.md"


def test_the_guides_opening_program_runs_as_it_stands(tmp_path):
    program = tmp_path / "deployments_guide.py"
    program.write_text(first_python_block(GUIDE.read_text(encoding="utf-8")))
    result = subprocess.run(
        [sys.executable, str(program)], capture_output=True, text=True, timeout=100, cwd=tmp_path, check=False
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout == "ORDERS holds 30 orders\n"
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
