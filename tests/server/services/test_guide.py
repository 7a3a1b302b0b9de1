"""The services guide opens with a program that runs as it stands: this runs it, as a reader would, and checks it
prints what the guide says it prints."""

from __future__ import annotations

import subprocess
import sys

from tests.helpers import REPO_ROOT, first_python_block

GUIDE = REPO_ROOT / "docs" / "guides" / "services.md"


def test_the_guides_opening_program_prints_what_the_guide_says(tmp_path):
    text = GUIDE.read_text(encoding="utf-8")
    program = tmp_path / "services_guide.py"
    program.write_text(first_python_block(text))
    result = subprocess.run(
        [sys.executable, str(program)], capture_output=True, text=True, timeout=60, cwd=tmp_path, check=False
    )
    assert result.returncode == 0, result.stderr[-3000:]
    printed = text.split("It prints:\n\n```text\n", 1)[1].split("```", 1)[0]
    assert result.stdout == printed
