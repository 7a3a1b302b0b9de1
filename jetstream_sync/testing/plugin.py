"""The pytest plugin of jetstream_sync.testing: fixtures that give tests a real nats-server, or a FaultProxy before one.

Loaded by ``pytest_plugins = ["jetstream_sync.testing"]`` in a top-level conftest.py (the package's own
``pytest_plugins`` names this module), or by naming it directly: ``pytest_plugins = ["jetstream_sync.testing.plugin"]``
or ``-p jetstream_sync.testing.plugin``. The fixtures:

- ``nats_server``: one server for the whole session; streams persist between tests.
- ``nats_server_function``: a fresh server for one test, for tests that restart, kill or fill it.
- ``nats_url``: the session server's client URL.
- ``fault_proxy``: a started FaultProxy in front of a fresh server, to stall, delay, cut or refuse connections.
- ``nats_cluster``: a fresh 3-node JetStream cluster (an EmbeddedCluster), for tests of replicated streams,
  elections, node failures and partitions.

A test that fails on a server error (an APIError with a 5xx code, such as 500 "error creating store for stream",
whose cause the server only logs) gets a report section "nats-server log" for each server of these fixtures that
logged something since the test began
([`pytest_runtest_makereport`][jetstream_sync.testing.plugin.pytest_runtest_makereport]).

The IO-thread check can be on for the whole session
([`pytest_configure`][jetstream_sync.testing.plugin.pytest_configure]): every library method marked as running on
the IO thread only then raises `WrongThreadError` when called on another thread, and a test during which that
happened fails, even when the error went to a callback nobody saw (docs/ARCHITECTURE.md, "Checked at run time").
``jetstream_sync_check_threads = true`` in the ini file (this project's own suite sets it), or
``JETSTREAM_SYNC_CHECK_THREADS=1`` in the environment, turns it on; off by default, since every checked call
costs about half a microsecond and a user's suite is testing the user's code.

A module of its own so that only a test run imports pytest (code that just starts an EmbeddedServer does not), and
so that the proxy module is imported only when a test asks for ``fault_proxy``.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Generator, Iterator
from typing import TYPE_CHECKING, Any

import pytest

from .._runtime import CHECK_THREADS_ENV, check_io_threads, io_thread_checks
from ..errors import APIError
from ._server import EmbeddedServer

if TYPE_CHECKING:
    import pluggy

    from ._cluster import EmbeddedCluster
    from ._proxy import FaultProxy

__all__ = [
    "fault_proxy",
    "nats_cluster",
    "nats_server",
    "nats_server_function",
    "nats_url",
    "pytest_addoption",
    "pytest_configure",
    "pytest_runtest_makereport",
    "pytest_runtest_setup",
    "pytest_sessionfinish",
    "pytest_terminal_summary",
]

_LOG_LINES = 100  # at most, of a server's log in a failed test's report
_LOG_SIZES = pytest.StashKey[dict[int, int]]()  # id(server) -> its log size when the test's setup began

# The servers of these fixtures that exist now, by id. Tests run one at a time in a process (pytest-xdist runs
# several processes), so these are the ones the current test can have used: the session server and its own.
_alive: dict[int, EmbeddedServer] = {}


@contextlib.contextmanager
def _reported(*servers: EmbeddedServer) -> Iterator[None]:
    """While the block runs, a failing test's report shows what ``servers`` logged (see pytest_runtest_makereport)."""
    _alive.update((id(server), server) for server in servers)
    try:
        yield
    finally:
        for server in servers:
            _alive.pop(id(server), None)


_CHECK_THREADS_INI = "jetstream_sync_check_threads"


def pytest_addoption(parser: pytest.Parser) -> None:
    """The ini setting ``jetstream_sync_check_threads`` (default false): the IO-thread check in this session."""
    parser.addini(
        _CHECK_THREADS_INI,
        "check that jetstream_sync's IO-thread methods run on the IO thread only (WrongThreadError otherwise)",
        type="bool",
        default=False,
    )


def pytest_configure(config: pytest.Config) -> None:
    """Turn the IO-thread check on for the session when the ini setting ``jetstream_sync_check_threads = true`` or
    ``JETSTREAM_SYNC_CHECK_THREADS=1`` asks for it (the variable, when set, wins: ``0`` turns it off). Runs on
    pytest's thread."""
    setting = os.environ.get(CHECK_THREADS_ENV, "")
    enabled = setting != "0" if setting else bool(config.getini(_CHECK_THREADS_INI))
    check_io_threads(enabled)


@pytest.fixture(autouse=True)
def _io_thread_violations() -> Iterator[None]:
    """Fail the test (in its teardown) when an IO-thread method ran on another thread meanwhile: the
    WrongThreadError may have been raised into an asyncio callback or a fast handler, where it is only logged."""
    checks = io_thread_checks()
    before = checks.violations
    yield
    if checks.violations != before:
        pytest.fail(
            f"{checks.violations - before} call(s) of an IO-thread method ran on another thread during this test; "
            f"the last: {checks.last_violation}",
            pytrace=False,
        )


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """A session in which an IO-thread method ran on another thread fails, even when no test was running then
    (a module or session fixture's teardown). Runs on pytest's thread."""
    if io_thread_checks().violations and exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Say how many calls ran on a wrong thread in the session, and the last one (nothing when none did)."""
    checks = io_thread_checks()
    if checks.violations:
        terminalreporter.write_sep("=", "jetstream_sync IO-thread check", red=True)
        terminalreporter.write_line(
            f"{checks.violations} call(s) of IO-thread methods ran on another thread; the last: {checks.last_violation}"
        )


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Before the test's fixtures: where each running server's log ends. Runs on pytest's thread."""
    item.stash[_LOG_SIZES] = {key: server.log_size for key, server in _alive.items()}


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, None]:
    """When a test's setup or call fails on a server error, add what each server logged since the setup began.

    A 5xx answer names no cause ("error creating store for stream"): the server logs it (``Stream create failed
    for '$G > NAME': ...``), and the log is deleted when the server stops, so a failure on a loaded CI machine
    would otherwise not explain itself. A server started by the test's own setup shows its whole log (at most
    100 lines, the last); one that logged nothing meanwhile is left out. Runs on pytest's thread."""
    outcome: pluggy.Result[pytest.TestReport] = yield
    report = outcome.get_result()
    if not (report.failed and call.excinfo is not None and _is_server_error(call.excinfo.value)):
        return
    sizes = item.stash.get(_LOG_SIZES, {})
    for key, server in list(_alive.items()):
        text = server.log_tail(_LOG_LINES, since=sizes.get(key, 0))
        if text:
            report.sections.append((f"nats-server log {server.url} (since the test began)", text))


def _is_server_error(exc: BaseException | None) -> bool:
    """An APIError with a 5xx code, raised or in the chain of what was raised."""
    seen = 0
    while exc is not None and seen < 20:  # a chain is short; the bound only guards against a cycle
        if isinstance(exc, APIError) and exc.code >= 500:
            return True
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return False


@pytest.fixture(scope="session")
def nats_server() -> Iterator[EmbeddedServer]:
    """One nats-server with JetStream for the whole session; streams persist between tests."""
    with EmbeddedServer() as server, _reported(server):
        yield server


@pytest.fixture
def nats_server_function() -> Iterator[EmbeddedServer]:
    """A fresh nats-server for one test, for tests that restart, kill or fill it."""
    with EmbeddedServer() as server, _reported(server):
        yield server


@pytest.fixture(scope="session")
def nats_url(nats_server: EmbeddedServer) -> str:
    """The session server's client URL."""
    return nats_server.url


@pytest.fixture
def fault_proxy(nats_server_function: EmbeddedServer) -> Iterator[FaultProxy]:
    """A started FaultProxy in front of a fresh nats-server (``nats_server_function``); connect to its url."""
    from ._proxy import FaultProxy  # here, not at the top: sessions without fault tests never load the proxy

    with FaultProxy(nats_server_function) as proxy:
        yield proxy


@pytest.fixture
def nats_cluster() -> Iterator[EmbeddedCluster]:
    """A fresh 3-node JetStream cluster on loopback; ``urls`` for ``connect``, ``servers[i]`` to stop, kill or
    restart a node, ``leader_of`` / ``step_down`` / ``partition`` for elections and partitions."""
    from ._cluster import EmbeddedCluster  # here: sessions without cluster tests never load it

    with EmbeddedCluster(size=3) as cluster, _reported(*cluster.servers):
        yield cluster
