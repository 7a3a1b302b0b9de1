"""Every ```python block of the documentation runs, so none can rot: README.md and docs/**/*.md.

The convention (docs/guides/testing.md, "The snippets of these docs", says it for writers; the parsing and the
runs are in tests/server/doc_snippets.py, the scenarios' drivers in tests/server/doc_scenarios/):

- A page's unmarked python blocks run **in order, as one program**, in a fresh interpreter, saved to a file in a
  temporary directory and run there, as a reader who pastes them one after the other would; a later block may
  use the names an earlier one made. The page's program is bounded by ``PAGE_TIMEOUT`` seconds (a page in
  ``PAGE_TIMEOUTS`` says why it needs longer), must exit 0 and must not log a traceback (a handler's exception
  is logged, not raised: the program would exit 0 all the same).
- A program that needs NATS starts its own ``EmbeddedServer`` (``jetstream_sync.testing``), as the guides' opening
  programs do: what a reader runs and what this test runs are the same text, and no port is shared between pages.
- A block that does not run as part of its page's program is preceded by a mark, an HTML comment
  ``<!-- snippet: KIND (...) -->`` on the last non-blank line before it. A mark of no known kind, or one that is
  not right before a python block, fails. The kinds, each run as a test of its own:

  - ``given (js, stream, name=literal)``: a short fragment "on your js" runs alone, after ``GIVEN_PREAMBLE`` (an
    ``EmbeddedServer`` with JetStream in a temporary directory, ``nc``, ``js``; ``CLUSTER_PREAMBLE``, a 3-node
    cluster, with ``cluster`` given), the lines that make the ``GIVENS`` it names and the ``name = literal``
    bindings it gives, closing both after it. With ``url`` or ``cluster`` given, the reader's servers in the
    block (every ``HOST:4222``) are the embedded ones (``your_servers_to``). An unknown given is refused.
  - ``pytest`` / ``pytest (conftest.py)``: the page's such blocks are the reader's test project, the latter its
    conftest.py; one pytest run in a temporary directory must pass every test function they define.
  - ``scenario (NAME)``: a part of a framework's project (a settings module, a Celery app, a gunicorn hook, a
    Spark fragment on the reader's session, a worker's endless loop); the page's blocks of that scenario are
    handed in order to its driver, ``tests/server/doc_scenarios/<name>.py``, which runs them as the framework
    would (``SCENARIOS`` says which extra it needs, without which it skips, and its markers and time bound).
  - ``run by (tests/....py)``: a whole program another test runs as it stands (a Spark job, a process pool, a
    reproducer's minutes on a cluster); that test must read the page, or the file the block includes.
  - ``skip (why; where it is tested)``: not run. Reported as a pytest skip with its reason (``pytest -rs`` lists
    them); it must still parse and name only what exists, and a test file its reason names must exist. For a
    block that cannot run here at a reasonable cost, naming the test that makes the same calls.
- A runnable block followed by "It prints:" and a ```text block promises that output: the page's output must
  hold each such text, in the page's order.
- A page in ``RUN_ELSEWHERE`` (the Recipes, each block a whole program) is run by its own test instead.
- Every guide (docs/guides, docs/frameworks) opens with a program run here: its first python block comes before
  its first section and is unmarked, or marked ``run by`` a test that reads the page.
"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from tests.helpers import REPO_ROOT
from tests.server.doc_scenarios import your_servers_to
from tests.server.doc_snippets import (
    _INCLUDED,
    GIVEN_PARAMS,
    GUIDES,
    PAGE_TIMEOUT,
    PAGE_TIMEOUTS,
    PAGES,
    PYTEST_PAGES,
    RUN_BY,
    RUN_ELSEWHERE,
    RUN_PAGE_PARAMS,
    SCENARIO_RUNS,
    SKIPPED,
    Block,
    _marks_without_a_block,
    _run_ids,
    blocks_of,
    check_what_a_fragment_names,
    program_of,
    promised_output,
    run_program,
    run_pytest_blocks,
    run_scenario,
)


@pytest.mark.timeout(max(PAGE_TIMEOUTS.values()) + 30)
@pytest.mark.parametrize("page", RUN_PAGE_PARAMS)
def test_the_pages_snippets_run_as_they_stand(page: Path, tmp_path: Path) -> None:
    result = run_program(page, tmp_path, PAGE_TIMEOUTS.get(page, PAGE_TIMEOUT))
    position = 0
    for text in promised_output(page):
        found = result.stdout.find(text, position)
        assert found >= 0, f"{_run_ids(page)} says its snippets print\n{text}\nthey printed\n{result.stdout}"
        position = found + len(text)


@pytest.mark.timeout(PAGE_TIMEOUT + 30)
@pytest.mark.parametrize("block", GIVEN_PARAMS)
def test_each_given_block_runs_after_its_givens(block: Block, tmp_path: Path) -> None:
    """A short fragment "on your js" stays short for its reader and still runs: after the givens it names."""
    run_program(block.page, tmp_path, block=block)


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


@pytest.mark.timeout(PAGE_TIMEOUT + 30)
@pytest.mark.parametrize("page", PYTEST_PAGES, ids=_run_ids)
def test_the_pages_pytest_blocks_pass_as_a_test_project(page: Path, tmp_path: Path) -> None:
    run_pytest_blocks(page, tmp_path)


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


def test_the_readers_servers_become_the_embedded_ones_each_host_on_a_node_the_scheme_kept() -> None:
    code = 'connect(["nats://n1:4222", "nats://n2:4222", "tls://n1:4222"])\nurl = "jetstream://127.0.0.1:4222"\n'
    nodes = ["nats://127.0.0.1:5001", "nats://127.0.0.1:5002"]
    assert your_servers_to(code, nodes) == (
        'connect(["nats://127.0.0.1:5001", "nats://127.0.0.1:5002", "tls://127.0.0.1:5001"])\n'
        'url = "jetstream://127.0.0.1:5001"\n'
    )
    assert your_servers_to('"nats://host:42220", "x:8222"', nodes) == '"nats://host:42220", "x:8222"'


def test_a_given_block_with_url_and_literals_runs_on_the_embedded_server(tmp_path: Path) -> None:
    page = _page(
        tmp_path,
        """\
        # A page

        <!-- snippet: given (url, order_id="order-1", data=b"x") -->
        ```python
        with jetstream_sync.connect("nats://nats:4222") as mine:
            print(order_id, data, mine.is_connected)
        ```
        """,
    )
    (block,) = blocks_of(page)
    assert (block.given, block.bound) == (("url",), (("order_id", "'order-1'"), ("data", "b'x'")))
    assert run_program(page, tmp_path, block=block).stdout == "order-1 b'x' True\n"


@pytest.mark.parametrize(
    ("mark", "refused"),
    [
        ("given (js, n=len('x'))", "must be a literal"),
        ("given (revision_of_v1)", r"needs \['kv'\]"),
        ("given (js stream)", "a given list reads"),
        ("scenario (no-such)", "no such scenario"),
    ],
)
def test_a_given_or_scenario_mark_that_cannot_run_is_refused(tmp_path: Path, mark: str, refused: str) -> None:
    page = _page(tmp_path, f"# A page\n\n<!-- snippet: {mark} -->\n```python\nx = 1\n```\n")
    with pytest.raises((AssertionError, pytest.fail.Exception), match=refused):
        blocks_of(page)


_PYTEST_PAGE = """\
# A page

<!-- snippet: pytest (conftest.py) -->
```python
pytest_plugins = ["jetstream_sync.testing"]
```

<!-- snippet: pytest -->
```python
import jetstream_sync


def test_connects(nats_url):
    with jetstream_sync.connect(nats_url) as nc:
        assert nc.is_connected
{more}```
"""


def test_a_pages_pytest_blocks_run_as_a_project_with_their_conftest(tmp_path: Path) -> None:
    page = _page(tmp_path, _PYTEST_PAGE.format(more=""))
    assert [block.pytest_file for block in blocks_of(page)] == ["conftest.py", "test_page_9.py"]
    project = tmp_path / "project"
    project.mkdir()
    assert "1 passed" in run_pytest_blocks(page, project).stdout


@pytest.mark.parametrize(
    "more",
    ["\n\ndef test_fails():\n    assert False\n", "\n\ndef test_skips():\n    import pytest\n\n    pytest.skip()\n"],
    ids=["failing", "skipping"],
)
def test_a_pytest_block_whose_test_fails_or_skips_fails(tmp_path: Path, more: str) -> None:
    page = _page(tmp_path, _PYTEST_PAGE.format(more=more))
    project = tmp_path / "project"
    project.mkdir()
    with pytest.raises(AssertionError, match="2 tests should pass"):
        run_pytest_blocks(page, project)


@pytest.mark.parametrize("code", ['--8<-- "examples/no_such.py"\n', '--8 < --"examples/quickstart.py"\n', "print(1)\n"])
def test_a_block_run_by_a_test_that_reads_neither_it_nor_its_page_fails(tmp_path: Path, code: str) -> None:
    page = _page(
        tmp_path, f"# A page\n\n<!-- snippet: run by (tests/server/test_examples.py) -->\n```python\n{code}```\n"
    )
    (block,) = blocks_of(page)
    with pytest.raises(AssertionError, match="does not read"):
        test_a_block_run_by_a_test_is_read_by_that_test(block)


def test_a_scenario_whose_block_fails_fails(tmp_path: Path) -> None:
    code = "from flask import Flask\n\njetstream = None\n\n\ndef create_app():\n    return Flask(__name__)\n"
    page = _page(tmp_path, f"# A page\n\n<!-- snippet: scenario (flask-app) -->\n```python\n{code}```\n")
    project = tmp_path / "project"
    project.mkdir()
    with pytest.raises(AssertionError, match=r"page\.md \(flask-app\) failed"):
        run_scenario(page, "flask-app", project)
