"""The Deployments guide opens with a program that runs as it stands: this runs it, as a reader would."""

from __future__ import annotations

import pytest

from tests.helpers import REPO_ROOT, run_opening_program

pytestmark = pytest.mark.deployment

GUIDE = REPO_ROOT / "docs" / "frameworks" / "deployments.md"


def test_the_guides_opening_program_runs_as_it_stands(tmp_path):
    result = run_opening_program(GUIDE, tmp_path, timeout=100)
    assert result.stdout == "ORDERS holds 30 orders\n"
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
