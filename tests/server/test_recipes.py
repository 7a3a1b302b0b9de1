"""Every program of the Recipes page runs as it stands and prints what the page says it prints.

Each ```python block of docs/guides/recipes.md is a whole program that starts its own embedded server: it is
saved to a file and run by a fresh interpreter, as a reader would run it, with a bounded timeout. Its output
must equal the ```text block the page shows under it ("It prints:", or "Both print:" after a side-by-side),
so a recipe that stops working, hangs or prints something else fails here rather than in a reader's terminal.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import attrs
import pytest

from tests.helpers import REPO_ROOT

PAGE = REPO_ROOT / "docs" / "guides" / "recipes.md"
#: a recipe is a few seconds' work (the work queue's retries wait 1.5 s); this bounds one that hangs
TIMEOUT = 60.0
#: the columns of a code block the site shows without scrolling
WIDTH = 80

_FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.MULTILINE | re.DOTALL)
_HEADING = re.compile(r"^## (.+)$", re.MULTILINE)
_PRINTS = re.compile(r"\bprints?:\s*$")


@attrs.frozen
class Recipe:
    """One program of the page: its section, its code, and the output the page shows for it."""

    section: str
    code: str
    expected: str

    @property
    def slug(self) -> str:
        return re.sub(r"[^a-z0-9]+", "_", self.section.lower()).strip("_")


def recipes(text: str) -> list[Recipe]:
    """Every python block of the page with the text block that follows it under a line ending "print(s):",
    the first such block after it (two programs side by side share one)."""
    found: list[Recipe] = []
    fences = list(_FENCE.finditer(text))
    for i, fence in enumerate(fences):
        if fence.group(1) != "python":
            continue
        headings = _HEADING.findall(text, 0, fence.start())
        assert headings, "a program before the page's first section"
        expected = None
        for later in fences[i + 1 :]:
            before = text[: later.start()].rstrip("\n").rsplit("\n", 1)[-1]
            if later.group(1) == "text" and _PRINTS.search(before):
                expected = later.group(2)
                break
        assert expected is not None, f"the program in {headings[-1]!r} has no 'It prints:' block after it"
        found.append(Recipe(headings[-1], fence.group(2), expected))
    return found


RECIPES = recipes(PAGE.read_text(encoding="utf-8"))


def test_the_page_has_a_program_for_every_recipe_the_issue_asks_for() -> None:
    sections = {recipe.section for recipe in RECIPES}
    assert len(RECIPES) == 8, [recipe.section for recipe in RECIPES]
    for wanted in ("work queue", "fan-out", "replay", "exactly-once", "request and reply", "cache", "nats-py"):
        assert any(wanted in section.lower() for section in sections), wanted


def test_every_line_of_every_program_fits_the_page() -> None:
    """The site shows about 80 columns of a code block before it scrolls sideways; a recipe is read and copied
    whole, so none of its lines (and no comment's end) is hidden off the edge."""
    wide = [
        f"{recipe.section}: {line!r}" for recipe in RECIPES for line in recipe.code.splitlines() if len(line) > WIDTH
    ]
    assert not wide, wide


@pytest.mark.parametrize("recipe", RECIPES, ids=[f"{i}-{r.slug}" for i, r in enumerate(RECIPES)])
def test_the_recipe_runs_and_prints_what_the_page_shows(recipe: Recipe, tmp_path: Path) -> None:
    program = tmp_path / f"{recipe.slug}.py"
    program.write_text(recipe.code, encoding="utf-8")
    result = subprocess.run(
        [sys.executable, str(program)], capture_output=True, text=True, timeout=TIMEOUT, cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout == recipe.expected, result.stderr[-3000:]
