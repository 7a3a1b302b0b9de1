"""The Errors guide's programs run as they stand (each saved to a file and run by a fresh interpreter, as a
reader would), and print what their comments say."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.helpers import REPO_ROOT

GUIDE = REPO_ROOT / "docs" / "guides" / "errors.md"
# the page's opening program comes first (run by tests/server/test_docs_snippets.py); these follow it
BLOCKS = re.findall(r"^```python\n(.*?)^```$", GUIDE.read_text(encoding="utf-8"), re.MULTILINE | re.DOTALL)[1:]
EXPECTED = [
    ("the wrong scheme", ["http", "servers: 'http://127.0.0.1:4222' has the scheme 'http'; a server URL is nats://"]),
    ("one client per process", ["done in the child"]),
    ("a missing stream", ["ORDERS"]),
]


def test_the_guide_has_the_programs_this_test_runs():
    assert len(BLOCKS) == len(EXPECTED)


@pytest.mark.parametrize(
    ("index", "expected"), [(i, e[1]) for i, e in enumerate(EXPECTED)], ids=[e[0] for e in EXPECTED]
)
def test_each_program_runs_and_prints_what_it_says(tmp_path, index, expected):
    program = tmp_path / f"errors_guide_{index}.py"
    program.write_text(BLOCKS[index])
    result = subprocess.run([sys.executable, str(program)], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    assert len(lines) == len(expected), result.stdout
    assert all(line.startswith(start) for line, start in zip(lines, expected, strict=True)), result.stdout
