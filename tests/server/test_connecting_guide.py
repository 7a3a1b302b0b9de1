"""The Connecting guide opens with a program that runs as it stands: this runs it, as a reader would."""

from __future__ import annotations

from tests.helpers import REPO_ROOT, run_opening_program

GUIDE = REPO_ROOT / "docs" / "guides" / "connecting.md"


def test_the_guides_opening_program_runs_as_it_stands(tmp_path):
    result = run_opening_program(GUIDE, tmp_path, timeout=60)
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
