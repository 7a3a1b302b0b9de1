"""Getting started and the README keep up with pyproject.toml and examples/: every extra listed, every example
listed with the extras it needs, the same in both places."""

from __future__ import annotations

import re

from tests.helpers import REPO_ROOT

GETTING_STARTED = (REPO_ROOT / "docs" / "getting-started.md").read_text(encoding="utf-8")
README = (REPO_ROOT / "README.md").read_text(encoding="utf-8")


def declared_extras() -> set[str]:
    """The keys of pyproject.toml's [project.optional-dependencies] (read as text: tomllib is 3.11+)."""
    text = (REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8")
    section = text.split("[project.optional-dependencies]\n", 1)[1].split("\n[", 1)[0]
    return set(re.findall(r"^([a-z][a-z-]*) = \[", section, re.MULTILINE))


def runnable_examples() -> set[str]:
    """Each example a user runs: a module with a __main__ block (Django's manage.py is the project's, not one)."""
    examples = REPO_ROOT / "examples"
    return {
        path.relative_to(examples).as_posix()
        for path in examples.rglob("*.py")
        if 'if __name__ == "__main__":' in path.read_text(encoding="utf-8") and path.name != "manage.py"
    }


def table_rows(text: str, first_cell: str) -> dict[str, list[str]]:
    """Rows of the Markdown tables in ``text`` whose first cell matches ``first_cell`` (one group: the key)."""
    rows = {}
    for line in text.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        found = re.fullmatch(first_cell, cells[0]) if line.startswith("|") else None
        if found:
            rows[found.group(1)] = cells[1:]
    return rows


def extras_of(cell: str) -> set[str]:
    return set(re.findall(r"`([a-z][a-z-]*)`", cell))


def test_getting_started_lists_every_extra():
    listed = table_rows(GETTING_STARTED, r"`([a-z][a-z-]*)`")
    assert set(listed) == declared_extras()


def test_getting_started_and_the_readme_list_every_example_with_the_same_extras():
    examples = runnable_examples()
    in_guide = table_rows(GETTING_STARTED, r"`python examples/(\S+)`")
    in_readme = table_rows(README, r"`(\S+\.py)`")
    assert set(in_guide) == examples
    assert set(in_readme) == examples
    for example in examples:
        guide_extras, readme_extras = extras_of(in_guide[example][1]), extras_of(in_readme[example][1])
        assert guide_extras == readme_extras, example
        assert "server" in guide_extras and guide_extras <= declared_extras(), example
        assert re.fullmatch(r"\d+(\.\d)? s( \(.*\))?", in_guide[example][2]), (example, in_guide[example][2])


def test_every_example_names_its_extras_in_the_message_it_ends_with():
    """The extras an example's own message names (its check at import) are those the tables give it."""
    in_readme = table_rows(README, r"`(\S+\.py)`")
    for example, cells in in_readme.items():
        source = (REPO_ROOT / "examples" / example).read_text(encoding="utf-8")
        if "_local_spark" in source:
            source += (REPO_ROOT / "examples" / "_local_spark.py").read_text(encoding="utf-8")
        named = {extra for extra in declared_extras() if f"needs the {extra} extra" in source}
        if "{extra} extra" in source:  # the message's extra in a variable
            named |= set(re.findall(r'extra = "([a-z-]+)"', source))
        assert named | {"server"} == extras_of(cells[1]), example
