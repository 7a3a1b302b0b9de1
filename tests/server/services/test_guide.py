"""The services guide opens with a program that runs as it stands: this runs it, as a reader would, and checks it
prints what the guide says it prints."""

from __future__ import annotations

from tests.helpers import REPO_ROOT, run_opening_program

GUIDE = REPO_ROOT / "docs" / "guides" / "services.md"


def test_the_guides_opening_program_prints_what_the_guide_says(tmp_path):
    text = GUIDE.read_text(encoding="utf-8")
    result = run_opening_program(GUIDE, tmp_path, timeout=60)
    printed = text.split("It prints:\n\n```text\n", 1)[1].split("```", 1)[0]
    assert result.stdout == printed
