"""The Connecting guide opens with a program that runs as it stands: this runs it, as a reader would."""

from __future__ import annotations

import subprocess
import sys

from tests.helpers import REPO_ROOT, first_python_block

GUIDE = REPO_ROOT / "docs" / "guides" / "connecting.md"


def test_the_guides_opening_program_runs_as_it_stands(tmp_path):
    program = tmp_path / "connecting_guide.py"
    program.write_text(first_python_block(GUIDE.read_text(encoding="utf-8")))
    result = subprocess.run(
        [sys.executable, str(program)], capture_output=True, text=True, timeout=60, cwd=tmp_path, check=False
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.splitlines() == [
        "connected: False reconnecting: True",
        "connected: True round trip under a second: True",
        "queued before NATS was up",
    ]
    assert "Traceback" not in result.stderr, result.stderr[-3000:]


def test_the_guide_names_every_option():
    """Every ConnectOptions field is in the guide's tables (the README says connecting works with every option)."""
    import attrs

    from jetstream_sync import ConnectOptions

    text = GUIDE.read_text(encoding="utf-8")
    missing = [field.name for field in attrs.fields(ConnectOptions) if f"`{field.name}" not in text]
    assert not missing, f"options missing from docs/guides/connecting.md: {missing}"
