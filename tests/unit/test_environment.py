"""The environment checks of connect() on their own (no server, no uWSGI, gevent or eventlet): what uWSGI's
embedded module says decides the refusal, and a monkey-patched threading module is noted once.

tests/server/deployments/test_uwsgi.py makes the same decision inside a real uWSGI 2.0.26 and 2.0.31.
"""

from __future__ import annotations

import logging
import sys
import types

import pytest

import jetstream_sync
from jetstream_sync import _environment, errors
from tests.helpers import our_threads, run_in_fork


def uwsgi_module(**attributes: object) -> types.ModuleType:
    """A module shaped as uWSGI's embedded one: ``has_threads`` (0 or 1) and ``version`` (bytes)."""
    module = types.ModuleType("uwsgi")
    for name, value in attributes.items():
        setattr(module, name, value)
    return module


def test_outside_uwsgi_nothing_is_refused():
    assert _environment.uwsgi_threads_refusal(None) is None


def test_a_module_named_uwsgi_that_is_not_uwsgis_is_left_alone():
    assert _environment.uwsgi_threads_refusal(uwsgi_module()) is None


@pytest.mark.parametrize("version", [b"2.0.26", b"2.0.31"])
def test_uwsgi_with_threads_is_accepted(version):
    assert _environment.uwsgi_threads_refusal(uwsgi_module(has_threads=1, version=version)) is None


def test_uwsgi_without_threads_is_refused_naming_the_version_and_the_fixes():
    refusal = _environment.uwsgi_threads_refusal(uwsgi_module(has_threads=0, version=b"2.0.26"))
    assert refusal is not None
    assert refusal.startswith("uWSGI 2.0.26 runs this process without Python threads")
    assert "--enable-threads" in refusal and "--threads N" in refusal and "2.0.27 or later" in refusal


def test_uwsgi_without_a_version_is_still_refused():
    refusal = _environment.uwsgi_threads_refusal(uwsgi_module(has_threads=0))
    assert refusal is not None and refusal.startswith("uWSGI runs this process")


def test_connect_refuses_before_any_thread_starts_or_anything_is_sent(monkeypatch, unused_port):
    """Nothing listens on the port: a connect attempt would raise NoServersError, so ThreadsDisabledError
    shows the refusal came first; and no thread of the client was started."""
    monkeypatch.setitem(sys.modules, "uwsgi", uwsgi_module(has_threads=0, version=b"2.0.21"))
    before = set(our_threads())
    with pytest.raises(errors.ThreadsDisabledError, match=r"uWSGI 2\.0\.21 .*--enable-threads"):
        jetstream_sync.connect(f"nats://127.0.0.1:{unused_port}", connect_timeout=0.5)
    assert set(our_threads()) == before
    assert isinstance(errors.ThreadsDisabledError("x"), RuntimeError)


class FakeGeventMonkey:
    """gevent.monkey's question, answered from a set of patched module names."""

    def __init__(self, *patched: str) -> None:
        self.patched = set(patched)

    def is_module_patched(self, name: str) -> bool:
        return name in self.patched


class FakeEventletPatcher:
    def __init__(self, *patched: str) -> None:
        self.patched = set(patched)

    def is_monkey_patched(self, name: str) -> bool:
        return name in self.patched


@pytest.mark.parametrize(
    ("modules", "expected"),
    [
        ({}, None),
        ({"gevent.monkey": FakeGeventMonkey()}, None),  # imported, nothing patched
        ({"gevent.monkey": FakeGeventMonkey("socket", "select")}, None),  # threads are real threads
        ({"gevent.monkey": FakeGeventMonkey("threading", "socket")}, "gevent"),
        ({"eventlet.patcher": FakeEventletPatcher("socket")}, None),
        ({"eventlet.patcher": FakeEventletPatcher("thread")}, "eventlet"),
        ({"gevent.monkey": object(), "eventlet.patcher": object()}, None),  # not the libraries' modules
    ],
)
def test_a_monkey_patched_threading_module_is_recognised(modules, expected):
    assert _environment.green_runtime(modules) == expected


def test_a_patched_runtime_is_noted_once_per_process_at_info(monkeypatch, caplog):
    monkeypatch.setattr(_environment, "_noted", set())
    monkeypatch.setitem(sys.modules, "gevent.monkey", FakeGeventMonkey("threading"))
    with caplog.at_level(logging.INFO, logger="jetstream_sync"):
        _environment.check_environment()
        _environment.check_environment()
    notes = [r for r in caplog.records if "monkey-patched threading" in r.getMessage()]
    assert len(notes) == 1 and notes[0].levelno == logging.INFO
    assert "gevent.get_hub().threadpool" in notes[0].getMessage()


def uwsgi_master(
    worker_id: int = 0, mule_id: int = 0, spooler: bool = False, numproc: int = 3, **opt: object
) -> types.ModuleType:
    """uWSGI's module as the app's import sees it: ``worker_id()`` is 0 in the master, options in ``opt``."""
    return uwsgi_module(
        has_threads=1,
        version=b"2.0.31",
        numproc=numproc,
        worker_id=lambda: worker_id,
        mule_id=lambda: mule_id,
        i_am_the_spooler=lambda: spooler or None,
        opt={key.replace("_", "-"): value for key, value in opt.items()},
    )


@pytest.mark.parametrize(
    "uwsgi", [uwsgi_master(master=True), uwsgi_master(master=True, numproc=1), uwsgi_master(numproc=2)]
)
def test_a_client_made_in_uwsgis_master_is_a_hazard_named_with_its_fixes(uwsgi):
    hazard = _environment.uwsgi_master_hazard(uwsgi)
    assert hazard is not None and hazard.startswith("a client is being made in uWSGI's master process")
    assert "--py-call-uwsgi-fork-hooks" in hazard and "--lazy-apps" in hazard


@pytest.mark.parametrize(
    "uwsgi",
    [
        None,
        uwsgi_module(),  # not uWSGI's module
        uwsgi_module(has_threads=0),  # refused instead (ThreadsDisabledError)
        uwsgi_master(worker_id=1, lazy_apps=True),  # a worker importing the app itself
        uwsgi_master(mule_id=1),
        uwsgi_master(spooler=True),
        uwsgi_master(master=True, py_call_uwsgi_fork_hooks=True),  # the master takes the GIL before forking
        uwsgi_master(numproc=1),  # no master, one process: it is the only worker, unforked
    ],
)
def test_no_master_hazard_where_nothing_is_forked_after_or_the_fork_is_safe(uwsgi):
    assert _environment.uwsgi_master_hazard(uwsgi) is None


def test_the_master_hazard_is_warned_once_per_process(monkeypatch, caplog):
    monkeypatch.setattr(_environment, "_noted", set())
    monkeypatch.setitem(sys.modules, "uwsgi", uwsgi_master(master=True))
    with caplog.at_level(logging.INFO, logger="jetstream_sync"):
        _environment.check_environment()
        _environment.check_environment()
    warnings = [r for r in caplog.records if "uWSGI's master process" in r.getMessage()]
    assert len(warnings) == 1 and warnings[0].levelno == logging.WARNING


def test_an_unpatched_process_logs_nothing(monkeypatch, caplog):
    monkeypatch.setattr(_environment, "_noted", set())
    with caplog.at_level(logging.DEBUG, logger="jetstream_sync"):
        _environment.check_environment()
    assert not caplog.records


class Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def test_a_forked_child_notes_it_once_again(monkeypatch):
    """The note is per process: a worker forked from a noted parent says it under its own process id."""
    monkeypatch.setattr(_environment, "_noted", set())
    monkeypatch.setitem(sys.modules, "gevent.monkey", FakeGeventMonkey("threading"))
    _environment.check_environment()
    assert "green" in _environment._noted

    def child() -> bool:
        collect = Collect()
        logger = logging.getLogger("jetstream_sync")
        logger.addHandler(collect)
        logger.setLevel(logging.INFO)
        _environment.check_environment()
        _environment.check_environment()
        return [r.getMessage()[:36] for r in collect.records] == ["gevent has monkey-patched threading:"]

    assert run_in_fork(child) == 0
