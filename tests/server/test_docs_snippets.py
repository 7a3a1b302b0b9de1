"""Every ```python block of the documentation runs, so none can rot: README.md and docs/**/*.md.

The convention (docs/guides/testing.md, "The snippets of these docs", says it for writers):

- A page's python blocks run **in order, as one program**, in a fresh interpreter, saved to a file in a temporary
  directory and run there, as a reader who pastes them one after the other would; a later block may use the names
  an earlier one made. The page's program is bounded by ``PAGE_TIMEOUT`` seconds, must exit 0 and must not log a
  traceback (a handler's exception is logged, not raised: the program would exit 0 all the same).
- A program that needs NATS starts its own ``EmbeddedServer`` (``jetstream_sync.testing``), as the guides' opening
  programs do: what a reader runs and what this test runs are the same text, and no port is shared between pages.
- A block that cannot run as it stands (a settings fragment, a Celery config, a Spark job that needs Java, a
  cluster, an API summary with your own names in it) is preceded by an HTML comment that says why and where it
  is tested instead: ``<!-- snippet: skip (Django settings fragment; run by tests/server/integrations/django/...)
  -->``. Each such block is reported as a pytest skip with its reason (``pytest -rs`` lists them); a mark without a
  reason, a mark of another kind, or a mark that is not right before a python block fails.
- A short fragment "on your js" that a reader reads in context is preceded by ``<!-- snippet: given (js, stream)
  -->``: it runs on its own, as one program, after ``GIVEN_PREAMBLE`` (an ``EmbeddedServer`` with JetStream in a
  temporary directory, ``nc``, ``js``) and the lines that make the ``GIVENS`` it names (``stream``: ORDERS on
  ``orders.>``; ``kv``: the bucket ``flags``; ``handler``; ``on_error``), closing both after it; it is bounded,
  must exit 0 and log no traceback as a page's program, and is reported as a test of its own. An unknown given is
  refused.
- A runnable block followed by "It prints:" and a ```text block promises that output: the page's output must
  hold each such text, in the page's order.
- A page in ``RUN_ELSEWHERE`` (the Recipes, each block a whole program) is run by its own test instead.
- Every guide (docs/guides, docs/frameworks) opens with a program run here: its first python block comes before
  its first section and is not skipped, unless its skip names the test under tests/ that runs it.
"""

from __future__ import annotations

import ast
import importlib
import os
import re
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

import jetstream_sync
from tests.helpers import REPO_ROOT
from tests.server.doc_scenarios import SCENARIOS, your_servers_to

#: seconds one page's program may take (each starts an interpreter and usually an embedded nats-server)
PAGE_TIMEOUT = 30.0
#: pages whose program needs longer, and why (each page's run stays bounded)
PAGE_TIMEOUTS = {
    REPO_ROOT / "docs" / "guides" / "testing.md": 60.0,  # a 3-node cluster's step-down, a 5 s KV workload (15 s)
}

#: pages whose every block is a whole program that a test of their own runs, each on its own and checking its
#: output: not run again here, and not held to the opening-program rule (a page of many programs, no one common
#: case)
RUN_ELSEWHERE = {
    REPO_ROOT / "docs" / "guides" / "recipes.md": REPO_ROOT / "tests" / "server" / "test_recipes.py",
}
PAGES = [
    page for page in [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").rglob("*.md"))] if page not in RUN_ELSEWHERE
]
GUIDES = [page for page in PAGES if page.parent.name in ("guides", "frameworks")]

_FENCE_OPEN = re.compile(r"^(?P<indent>\s*)```python\s*$")
_MARK = re.compile(r"^\s*<!--\s*snippet:(?P<body>.*?)-->\s*$")
#: the kinds of mark, each with what it takes in its parentheses (see the module docstring)
_SKIP = re.compile(r"^\s*skip\s+\((?P<reason>.*\S.*)\)\s*$")
_GIVEN = re.compile(r"^\s*given\s+\((?P<names>.*\S)\s*\)\s*$")
_RUN_BY = re.compile(r"^\s*run by\s+\((?P<test>tests/[\w/.-]*\.py)\)\s*$")
_PYTEST = re.compile(r"^\s*pytest(?:\s+\((?P<file>conftest\.py)\))?\s*$")
_SCENARIO = re.compile(r"^\s*scenario\s+\((?P<name>[\w-]+)\)\s*$")
_KINDS_SAID = (
    "'skip (why; where it is tested)', 'given (js, stream, ...)', 'run by (tests/....py)', 'pytest', "
    "'pytest (conftest.py)' or 'scenario (name)'"
)

#: what a ``<!-- snippet: given (...) -->`` block may take as given, each made by the lines here before the block
#: runs (``nc`` and ``js`` always are); docs/guides/testing.md, "The snippets of these docs", lists them for writers
GIVENS = {
    "nc": "",
    "js": "",
    "url": "",
    "cluster": "",
    "stream": 'stream = js.create_stream(StreamConfig(name="ORDERS", subjects=["orders.>"]))\n',
    "kv": 'kv = js.create_key_value(KeyValueConfig(bucket="flags", history=5))\n',
    "revision_of_v1": 'revision_of_v1 = kv.put("k", b"v1")\n',
    "handle": "def handle(msg):\n    print(msg.subject, msg.data)\n",
    "handler": "def handler(msg):\n    msg.ack()\n",
    "on_error": "def on_error(error):\n    print('on_error:', repr(error))\n",
}
#: givens that only make sense with another one, made first
_GIVEN_NEEDS = {"revision_of_v1": "kv"}
#: the lines every given block runs after: an embedded server with JetStream in a temporary directory, ``nc``, ``js``
GIVEN_PREAMBLE = """\
import jetstream_sync
from jetstream_sync import KeyValueConfig, StreamConfig
from jetstream_sync.testing import EmbeddedServer

server = EmbeddedServer()
server.start()
urls = [server.url]
nc = jetstream_sync.connect(server.url)
js = nc.jetstream()
"""
#: the same with ``cluster`` given: a 3-node JetStream cluster instead (named east, its nodes tagged ssd, for a
#: placement), ``nc`` on all its nodes, ``js`` with a timeout longer than an election (the docs' advice for a cluster)
CLUSTER_PREAMBLE = """\
import jetstream_sync
from jetstream_sync import KeyValueConfig, StreamConfig
from jetstream_sync.testing import EmbeddedCluster

server = EmbeddedCluster(size=3, name="east", config='server_tags: ["ssd"]')
server.start()
urls = list(server.urls)
nc = jetstream_sync.connect(urls)
js = nc.jetstream(timeout=30)
"""


@dataclass(frozen=True)
class Block:
    """One ```python block of a page: where it starts (1-based line of its fence), its code, and its mark: a
    skip's reason, the givens it runs after (names, and ``name=literal`` bindings as source text), the test that
    runs it, its file in the page's pytest project, or the scenario that runs it."""

    page: Path
    line: int
    code: str
    skip: str | None = None
    given: tuple[str, ...] | None = None
    bound: tuple[tuple[str, str], ...] = ()
    run_by: str | None = None
    pytest_file: str | None = None
    scenario: str | None = None

    @property
    def in_the_pages_program(self) -> bool:
        """Unmarked: a part of the page's program."""
        return (self.skip, self.given, self.run_by, self.pytest_file, self.scenario) == (None,) * 5

    @property
    def where(self) -> str:
        page = self.page.relative_to(REPO_ROOT) if self.page.is_relative_to(REPO_ROOT) else self.page.name
        return f"{page}:{self.line}"


def _mark_before(lines: list[str], fence: int) -> str | None:
    """The text of the ``<!-- snippet: ... -->`` comment on the last non-blank line before ``fence``, if any."""
    index = fence - 1
    while index >= 0 and not lines[index].strip():
        index -= 1
    found = _MARK.match(lines[index]) if index >= 0 else None
    return found.group("body") if found else None


def _givens(where: str, said: str) -> dict[str, object]:
    """What ``given (...)`` names, read as a call's arguments: givens by name, then ``name=literal`` bindings."""
    try:
        call = ast.parse(f"_({said})", mode="eval").body
    except SyntaxError:
        call = None
    assert isinstance(call, ast.Call), f"{where}: a given list reads 'given (js, stream, name=literal)': {said!r}"
    names = [arg.id if isinstance(arg, ast.Name) else ast.unparse(arg) for arg in call.args]
    unknown = [name for name in names if name not in GIVENS]
    assert not unknown, f"{where}: no such given {unknown}; the givens are {sorted(GIVENS)}"
    missing = [_GIVEN_NEEDS[name] for name in names if _GIVEN_NEEDS.get(name, name) not in names]
    assert not missing, f"{where}: a given needs {missing} given too"
    bound = []
    for keyword in call.keywords:
        try:
            ast.literal_eval(keyword.value)
        except ValueError:
            pytest.fail(f"{where}: given {keyword.arg}= must be a literal: {ast.unparse(keyword.value)}")
        bound.append((keyword.arg, ast.unparse(keyword.value)))
    return {"given": tuple(names), "bound": tuple(bound)}


def _mark_of(where: str, page: Path, line: int, body: str) -> dict[str, object]:
    """The fields of a block that ``body``, the text of its mark, sets; a mark of no known kind fails."""
    if found := _SKIP.match(body):
        return {"skip": found.group("reason").strip()}
    if found := _GIVEN.match(body):
        return _givens(where, found.group("names"))
    if found := _RUN_BY.match(body):
        return {"run_by": found.group("test")}
    if found := _PYTEST.match(body):
        return {"pytest_file": found.group("file") or f"test_{page.stem.replace('-', '_')}_{line}.py"}
    if found := _SCENARIO.match(body):
        assert found.group("name") in SCENARIOS, f"{where}: no such scenario; the scenarios are {sorted(SCENARIOS)}"
        return {"scenario": found.group("name")}
    raise AssertionError(f"{where}: a snippet mark must read {_KINDS_SAID}: {body!r}")


def blocks_of(page: Path) -> list[Block]:
    """The python blocks of ``page`` in order, dedented (a block may sit in a list item); a malformed mark fails."""
    lines = page.read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    index = 0
    while index < len(lines):
        opening = _FENCE_OPEN.match(lines[index])
        if opening is None:
            index += 1
            continue
        end = index + 1
        while end < len(lines) and lines[end].strip() != "```":
            end += 1
        assert end < len(lines), f"{page}:{index + 1}: a python block that never closes"
        body = _mark_before(lines, index)
        marked = {} if body is None else _mark_of(f"{page}:{index + 1}", page, index + 1, body)
        code = textwrap.dedent("\n".join(lines[index + 1 : end])) + "\n"
        found.append(Block(page, index + 1, code, **marked))  # type: ignore[arg-type]
        index = end + 1
    return found


def _marks_without_a_block(page: Path) -> list[int]:
    """Lines of ``page`` holding a snippet mark that is not right before a python block (a mark left behind)."""
    lines = page.read_text(encoding="utf-8").splitlines()
    stray = []
    fenced = False  # inside a fenced block: a mark shown as an example there is text, not a mark
    for index, line in enumerate(lines):
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif _MARK.match(line) and not fenced:
            after = index + 1
            while after < len(lines) and not lines[after].strip():
                after += 1
            if after == len(lines) or not _FENCE_OPEN.match(lines[after]):
                stray.append(index + 1)
    return stray


def _run_ids(page: Path) -> str:
    return str(page.relative_to(REPO_ROOT))


RUN_PAGES = [page for page in PAGES if any(block.in_the_pages_program for block in blocks_of(page))]
SKIPPED = [block for page in PAGES for block in blocks_of(page) if block.skip is not None]


_PRINTS = re.compile(r"^```\n\s*It prints:\n\n```text\n(?P<text>.*?)^```$", re.MULTILINE | re.DOTALL)


GIVEN_BLOCKS = [block for page in PAGES for block in blocks_of(page) if block.given is not None]


def given_program_of(block: Block) -> str:
    """A given block's program: the preamble (a cluster's with ``cluster`` given), the givens it names and the
    literals it binds, then the block, everything closed after it. With ``url`` or ``cluster`` given, the block's
    servers (``HOST:4222``) are the embedded ones' (``your_servers_to``), replaced as the program runs."""
    assert block.given is not None
    made = "".join(GIVENS[name] for name in GIVENS if name in block.given)
    made += "".join(f"{name} = {value}\n" for name, value in block.bound)
    code = f"# {block.where}\n{block.code}"
    preamble = CLUSTER_PREAMBLE if "cluster" in block.given else GIVEN_PREAMBLE
    if {"url", "cluster"} & set(block.given):
        preamble = f"import sys\n\nsys.path.insert(0, {str(REPO_ROOT)!r})\n{preamble}"
        preamble += "from tests.server.doc_scenarios import your_servers_to\n"
        code = f"exec(compile(your_servers_to({block.code!r}, urls), {block.where!r}, 'exec'))\n"
    body = textwrap.indent(code, "    ")
    return f"{preamble}try:\n{textwrap.indent(made, '    ')}{body}finally:\n    nc.close()\n    server.stop()\n"


def promised_output(page: Path) -> list[str]:
    """What the page says its runnable blocks print: each "It prints:" text block right after a python block that
    is not skipped, in order."""
    lines = page.read_text(encoding="utf-8").splitlines(keepends=True)
    promised = []
    for block in blocks_of(page):
        if not block.in_the_pages_program:
            continue
        close = block.line + block.code.count("\n")  # the index of the block's closing fence
        found = _PRINTS.match("".join(lines[close:]))
        if found:
            promised.append(found.group("text"))
    return promised


def program_of(page: Path) -> str:
    """The page's program: its runnable blocks in order, each headed by a comment naming its line."""
    parts = [f"# {block.where}\n{block.code}" for block in blocks_of(page) if block.in_the_pages_program]
    return "\n".join(parts)


def run_program(
    page: Path, tmp_path: Path, timeout: float = PAGE_TIMEOUT, *, block: Block | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the page's program (or one given ``block``'s) as a reader would: saved to a file of its own and run
    there by a fresh interpreter. Fails the test when it does not end within ``timeout`` seconds (a snippet that
    hangs), exits other than 0 or logs a traceback."""
    name = _run_ids(page) if page.is_relative_to(REPO_ROOT) else page.name
    if block is not None:
        name = block.where
    program = tmp_path / f"{page.stem.replace('-', '_')}_snippets.py"
    program.write_text(program_of(page) if block is None else given_program_of(block), encoding="utf-8")
    try:
        result = subprocess.run(
            [sys.executable, str(program)], capture_output=True, text=True, timeout=timeout, cwd=tmp_path
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"{name}: its snippets did not end within {timeout}s (one hangs?): {exc.stderr!r}")
    assert result.returncode == 0, f"{name}'s snippets failed:\n{result.stderr[-4000:]}"
    assert "Traceback" not in result.stderr, f"{name}'s snippets logged an error:\n{result.stderr[-4000:]}"
    return result


@pytest.mark.timeout(max(PAGE_TIMEOUTS.values()) + 30)
@pytest.mark.parametrize("page", RUN_PAGES, ids=_run_ids)
def test_the_pages_snippets_run_as_they_stand(page: Path, tmp_path: Path) -> None:
    result = run_program(page, tmp_path, PAGE_TIMEOUTS.get(page, PAGE_TIMEOUT))
    position = 0
    for text in promised_output(page):
        found = result.stdout.find(text, position)
        assert found >= 0, f"{_run_ids(page)} says its snippets print\n{text}\nthey printed\n{result.stdout}"
        position = found + len(text)


@pytest.mark.timeout(PAGE_TIMEOUT + 30)
@pytest.mark.parametrize("block", GIVEN_BLOCKS, ids=lambda block: block.where)
def test_each_given_block_runs_after_its_givens(block: Block, tmp_path: Path) -> None:
    """A short fragment "on your js" stays short for its reader and still runs: after the givens it names."""
    run_program(block.page, tmp_path, block=block)


RUN_BY = [block for page in PAGES for block in blocks_of(page) if block.run_by is not None]
_INCLUDED = re.compile(r'^--8<--\s*"(?P<path>[^"]+)"\s*$')


@pytest.mark.parametrize("block", RUN_BY, ids=lambda block: block.where)
def test_a_block_run_by_a_test_is_read_by_that_test(block: Block) -> None:
    """A block another test runs as it stands (a Spark job, a process pool, a reproducer's minutes on a cluster)
    names that test, which must read the page, or the file the block includes (``--8<-- "examples/..."``)."""
    assert block.run_by is not None
    test = REPO_ROOT / block.run_by
    assert test.exists(), f"{block.where}: its mark names {block.run_by}, which does not exist"
    included = _INCLUDED.match(block.code.strip())
    read = Path(included.group("path")).name if included else block.page.name
    assert read in test.read_text(encoding="utf-8"), f"{block.where}: {block.run_by} does not read {read}"


def pytest_blocks_of(page: Path) -> list[Block]:
    return [block for block in blocks_of(page) if block.pytest_file is not None]


PYTEST_PAGES = [page for page in PAGES if pytest_blocks_of(page)]


def run_pytest_blocks(page: Path, tmp_path: Path, timeout: float = PAGE_TIMEOUT) -> subprocess.CompletedProcess[str]:
    """Run the page's ``pytest`` blocks as the reader's test project: each a test module of its own, the
    ``pytest (conftest.py)`` blocks its conftest.py (without one, the plugin is loaded with ``-p``), in a fresh
    pytest in ``tmp_path``. Every test function the blocks define must pass; none may skip or fail."""
    blocks = pytest_blocks_of(page)
    for block in blocks:
        with (tmp_path / (block.pytest_file or "")).open("a", encoding="utf-8") as file:
            file.write(f"# {block.where}\n{block.code}")
    tests = sum(len(re.findall(r"^def test_", block.code, re.MULTILINE)) for block in blocks)
    plugin = [] if (tmp_path / "conftest.py").exists() else ["-p", "jetstream_sync.testing"]
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", *plugin]
    try:
        result = subprocess.run(
            [*command, str(tmp_path)], capture_output=True, text=True, timeout=timeout, cwd=tmp_path
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"{_run_ids(page)}: its pytest blocks did not end within {timeout}s: {exc.stdout!r}")
    summary = result.stdout.strip().splitlines()[-1] if result.stdout.strip() else ""
    assert result.returncode == 0 and re.match(rf"{tests} passed in ", summary), (
        f"{_run_ids(page)}'s pytest blocks: {tests} tests should pass:\n{result.stdout[-4000:]}{result.stderr[-2000:]}"
    )
    return result


@pytest.mark.timeout(PAGE_TIMEOUT + 30)
@pytest.mark.parametrize("page", PYTEST_PAGES, ids=_run_ids)
def test_the_pages_pytest_blocks_pass_as_a_test_project(page: Path, tmp_path: Path) -> None:
    run_pytest_blocks(page, tmp_path)


def scenario_blocks_of(page: Path, scenario: str) -> list[Block]:
    return [block for block in blocks_of(page) if block.scenario == scenario]


SCENARIO_RUNS = [
    pytest.param(
        page,
        name,
        id=f"{_run_ids(page)}-{name}",
        marks=[getattr(pytest.mark, marker) for marker in SCENARIOS[name].markers],
    )
    for page in PAGES
    for name in sorted({block.scenario for block in blocks_of(page) if block.scenario is not None})
]


def run_scenario(page: Path, scenario: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """Run the page's blocks of ``scenario`` through its driver (tests/server/doc_scenarios), each saved to a file
    of its own, bounded by the scenario's timeout; it must exit 0 and log no traceback."""
    spec = SCENARIOS[scenario]
    for module in spec.needs:
        pytest.importorskip(module)
    files = []
    for block in scenario_blocks_of(page, scenario):
        files.append(tmp_path / f"block_{block.line}.py")
        files[-1].write_text(block.code, encoding="utf-8")
    driver = f"tests.server.doc_scenarios.{scenario.replace('-', '_')}"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))}
    where = f"{_run_ids(page)} ({scenario})"
    try:
        result = subprocess.run(
            [sys.executable, "-m", driver, *map(str, files)],
            capture_output=True,
            text=True,
            timeout=spec.timeout,
            cwd=tmp_path,
            env=env,
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"{where}: did not end within {spec.timeout}s: {exc.stderr!r}")
    assert result.returncode == 0, f"{where} failed:\n{result.stdout[-2000:]}{result.stderr[-4000:]}"
    assert "Traceback" not in result.stderr, f"{where} logged an error:\n{result.stderr[-4000:]}"
    return result


@pytest.mark.timeout(330)
@pytest.mark.parametrize(("page", "scenario"), SCENARIO_RUNS)
def test_the_pages_scenario_blocks_run_in_their_framework(page: Path, scenario: str, tmp_path: Path) -> None:
    run_scenario(page, scenario, tmp_path)


@pytest.mark.parametrize("block", SKIPPED, ids=lambda block: block.where)
def test_skipped_snippets_say_why(block: Block) -> None:
    """Each block that does not run is listed (``pytest -rs``) with its reason, so the count is in every run."""
    assert block.skip is not None
    for named in re.findall(r"tests/[\w/.-]*\w", block.skip):
        assert (REPO_ROOT / named).exists(), f"{block.where}: its skip names {named}, which does not exist"
    check_what_a_fragment_names(block)
    pytest.skip(f"{block.where}: {block.skip}")


def check_what_a_fragment_names(block: Block) -> None:
    """A block that does not run still cannot rot silently: it must parse, every ``jetstream_sync`` import it makes
    must import, and every ``jetstream_sync.<name>`` it uses must exist (a renamed API fails here)."""
    try:
        tree = ast.parse(block.code, filename=block.where)
    except SyntaxError as exc:
        pytest.fail(f"{block.where}: the snippet does not parse: {exc}")
    try:
        _check_names(block, tree)
    except ImportError as exc:
        if "pip install 'jetstream-sync[" not in str(exc):
            raise
        pytest.skip(f"{block.where}: {block.skip} (its imports need an extra not installed here: {exc})")


def _check_names(block: Block, tree: ast.AST) -> None:
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "jetstream_sync":
            module = importlib.import_module(node.module or "")
            for alias in node.names:
                if alias.name != "*" and not hasattr(module, alias.name):
                    importlib.import_module(f"{node.module}.{alias.name}")  # a submodule, or ImportError here
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "jetstream_sync":
                    importlib.import_module(alias.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "jetstream_sync":
            assert hasattr(jetstream_sync, node.attr), f"{block.where}: jetstream_sync.{node.attr} does not exist"


@pytest.mark.parametrize("page", PAGES, ids=_run_ids)
def test_every_snippet_mark_sits_right_before_a_python_block(page: Path) -> None:
    stray = _marks_without_a_block(page)
    assert not stray, f"{_run_ids(page)}: snippet marks before no python block, on lines {stray}"


@pytest.mark.parametrize("page", GUIDES, ids=_run_ids)
def test_every_guide_opens_with_a_program_that_runs(page: Path) -> None:
    """The common case first: the guide's first python block comes before its first section (``## ``), and it is
    run by this module as a part of the page's program, or by the test its ``run by`` mark names."""
    text = page.read_text(encoding="utf-8")
    blocks = blocks_of(page)
    assert blocks, f"{_run_ids(page)} has no python block: open it with a program of the common case"
    first = blocks[0]
    first_section = next((n for n, line in enumerate(text.splitlines(), 1) if line.startswith("## ")), None)
    assert first_section is None or first.line < first_section, f"{first.where}: the opening program comes late"
    assert first.in_the_pages_program or first.run_by is not None, (
        f"{first.where}: the opening program must stand alone and run here, or be marked 'run by (tests/...)' "
        "by a test that runs it (test_a_block_run_by_a_test_is_read_by_that_test checks that test reads the page)"
    )


def _page(tmp_path: Path, text: str) -> Path:
    page = tmp_path / "page.md"
    page.write_text(textwrap.dedent(text), encoding="utf-8")
    return page


def test_a_pages_program_is_its_runnable_blocks_in_order_and_a_skip_keeps_its_reason(tmp_path: Path) -> None:
    page = _page(
        tmp_path,
        """\
        # A page

        ```python
        a = 1
        ```

        <!-- snippet: skip (a fragment (with parentheses); tested in tests/helpers.py) -->
        ```python
        never_run()
        ```

        - a list item:

          ```python
          print(a + 1)
          ```
        """,
    )
    blocks = blocks_of(page)
    assert [(block.line, block.skip) for block in blocks] == [
        (3, None),
        (8, "a fragment (with parentheses); tested in tests/helpers.py"),
        (14, None),
    ]
    assert [block.code for block in blocks if block.skip is None] == ["a = 1\n", "print(a + 1)\n"]


@pytest.mark.parametrize(
    "mark", ["<!-- snippet: skip -->", "<!-- snippet: skip ( ) -->", "<!-- snippet: run -->", "<!-- snippet: -->"]
)
def test_a_mark_without_a_reason_or_of_another_kind_is_refused(tmp_path: Path, mark: str) -> None:
    page = _page(tmp_path, f"# A page\n\n{mark}\n```python\nx = 1\n```\n")
    with pytest.raises(AssertionError, match="a snippet mark must read"):
        blocks_of(page)


def test_a_mark_before_no_python_block_is_found_and_one_shown_in_a_fence_is_not(tmp_path: Path) -> None:
    page = _page(
        tmp_path,
        """\
        # A page

        <!-- snippet: skip (left behind) -->
        Some text.

        ```markdown
        <!-- snippet: skip (an example of a mark) -->
        ```
        """,
    )
    assert _marks_without_a_block(page) == [3]


@pytest.mark.parametrize("page", RUN_ELSEWHERE, ids=_run_ids)
def test_a_page_run_elsewhere_is_read_by_its_test(page: Path) -> None:
    assert page.name in RUN_ELSEWHERE[page].read_text(encoding="utf-8")


def test_a_snippet_that_hangs_fails_within_the_timeout(tmp_path: Path) -> None:
    page = _page(tmp_path, "# A page\n\n```python\nimport threading\n\nthreading.Event().wait()\n```\n")
    with pytest.raises(pytest.fail.Exception, match=r"did not end within 1\.0s"):
        run_program(page, tmp_path, timeout=1.0)


def test_a_snippet_that_logs_a_traceback_fails(tmp_path: Path) -> None:
    code = "import threading\n\nthread = threading.Thread(target=lambda: 1 / 0)\nthread.start()\nthread.join()\n"
    page = _page(tmp_path, f"# A page\n\n```python\n{code}```\n")
    with pytest.raises(AssertionError, match="logged an error"):
        run_program(page, tmp_path)


@pytest.mark.parametrize(
    ("code", "raised", "says"),
    [
        ("from jetstream_sync import NoSuchName\n", ModuleNotFoundError, "jetstream_sync.NoSuchName"),
        ("import jetstream_sync\njetstream_sync.no_such_call()\n", AssertionError, "jetstream_sync.no_such_call"),
        ("js.publish(\n", pytest.fail.Exception, "does not parse"),
    ],
    ids=["renamed-import", "renamed-attribute", "syntax"],
)
def test_a_skipped_fragment_that_names_what_does_not_exist_fails(
    tmp_path: Path, code: str, raised: type[BaseException], says: str
) -> None:
    page = _page(tmp_path, f"# Page\n\n<!-- snippet: skip (a fragment) -->\n```python\n{code}```\n")
    (block,) = blocks_of(page)
    with pytest.raises(raised, match=re.escape(says)):
        check_what_a_fragment_names(block)


def test_a_given_block_runs_alone_after_its_givens_and_a_failing_one_is_caught(tmp_path: Path) -> None:
    page = _page(
        tmp_path,
        """\
        # A page

        <!-- snippet: given (stream, kv) -->
        ```python
        print(js.publish("orders.new", b"x").stream, kv.put("k", b"v"))
        ```

        <!-- snippet: given (js) -->
        ```python
        js.stream_info("NO_SUCH_STREAM")
        ```
        """,
    )
    works, fails = blocks_of(page)
    assert (works.given, fails.given) == (("stream", "kv"), ("js",))
    assert program_of(page) == ""
    assert run_program(page, tmp_path, block=works).stdout == "ORDERS 1\n"
    with pytest.raises(AssertionError, match=r"page\.md:9's snippets failed"):
        run_program(page, tmp_path, block=fails)


def test_an_unknown_given_is_refused(tmp_path: Path) -> None:
    page = _page(tmp_path, "# A page\n\n<!-- snippet: given (js, orders) -->\n```python\nx = 1\n```\n")
    with pytest.raises(AssertionError, match=r"no such given \['orders'\]"):
        blocks_of(page)
