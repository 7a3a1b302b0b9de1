"""The harness of tests/server/test_docs_snippets.py: it finds the documentation's python blocks and their
marks, and builds and runs their programs (a page's, a given block's, a page's pytest project, a scenario's).

The marks and what each run requires are described for readers of the tests in test_docs_snippets.py's
docstring, and for writers of the pages in docs/guides/testing.md, "The snippets of these docs".
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
from tests.server.doc_scenarios import SCENARIOS

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
    """The page as the tests name it: its path in the repository (a page of a self-test: its file name)."""
    return str(page.relative_to(REPO_ROOT)) if page.is_relative_to(REPO_ROOT) else page.name


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
    name = _run_ids(page)
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


def _cluster_marks(program: str) -> list[pytest.MarkDecorator]:
    """A run that starts a cluster carries the ``cluster`` marker, as the suite's cluster tests do (CI's variant
    runs leave them out: the main run has them)."""
    return [pytest.mark.cluster] if "EmbeddedCluster(" in program else []


#: the pages' programs and the given blocks as test parameters, each with its markers
RUN_PAGE_PARAMS = [pytest.param(page, id=_run_ids(page), marks=_cluster_marks(program_of(page))) for page in RUN_PAGES]
GIVEN_PARAMS = [
    pytest.param(block, id=block.where, marks=_cluster_marks(given_program_of(block))) for block in GIVEN_BLOCKS
]


RUN_BY = [block for page in PAGES for block in blocks_of(page) if block.run_by is not None]


_INCLUDED = re.compile(r'^--8<--\s*"(?P<path>[^"]+)"\s*$')


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
