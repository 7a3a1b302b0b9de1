"""The IO-thread check (``_runtime/_threads.py``): free when off, a typed error logged once when a marked method runs
on a wrong thread, on for this whole test session through the plugin, and a test that met a violation fails."""

from __future__ import annotations

import asyncio
import inspect
import logging
import os
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest

from jetstream_sync import errors
from jetstream_sync._delivery._pull import ContinuousPull
from jetstream_sync._delivery._push import PushEngine
from jetstream_sync._runtime import CHECK_THREADS_ENV, IOThreadChecks, io_thread_checks
from jetstream_sync._runtime._io import IOLoop
from jetstream_sync._runtime._port import Runtime
from jetstream_sync.subscription import Subscription
from tests.helpers import run_pytest


def make_engine_class(checks: IOThreadChecks) -> type[Any]:
    """A class with one IO-thread method and one coroutine, marked with ``checks``."""

    class Engine:
        runtime: object = None

        @checks.mark
        def on_message(self, value: int) -> int:
            return value + 1

        @checks.mark
        async def on_loop(self) -> str:
            return "ran"

    return Engine


def run_on_thread(fn: Any) -> BaseException | None:
    """Call ``fn()`` on a fresh thread; what it raised (None when nothing)."""
    raised: list[BaseException] = []

    def target() -> None:
        try:
            fn()
        except BaseException as exc:
            raised.append(exc)

    thread = threading.Thread(target=target, name="not-io")
    thread.start()
    thread.join(5)
    return raised[0] if raised else None


@pytest.fixture
def io_loop() -> Any:
    loop = IOLoop()
    yield loop
    loop.cancel_calls()
    loop.stop(2.0)


def test_off_the_class_holds_the_plain_function() -> None:
    checks = IOThreadChecks()
    engine = make_engine_class(checks)
    plain = vars(engine)["on_message"]
    assert inspect.isfunction(plain) and not hasattr(plain, "__wrapped__")
    assert engine().on_message(1) == 2  # and it runs anywhere, unchecked
    assert checks.methods == [(engine, "on_message"), (engine, "on_loop")]

    assert checks.enable() is False
    assert vars(engine)["on_message"].__wrapped__ is plain
    assert checks.enable(False) is True
    assert vars(engine)["on_message"] is plain  # the very function again: nothing left on the hot path


def test_on_a_call_from_another_thread_raises_and_is_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    checks = IOThreadChecks(enabled=True)
    engine = make_engine_class(checks)()
    caplog.set_level(logging.ERROR, logger="jetstream_sync")

    first = run_on_thread(lambda: engine.on_message(1))
    second = run_on_thread(lambda: engine.on_message(2))

    assert isinstance(first, errors.WrongThreadError) and isinstance(second, errors.WrongThreadError)
    assert isinstance(first, RuntimeError)
    assert first.method.endswith("make_engine_class.<locals>.Engine.on_message")
    assert first.thread == "thread 'not-io'"
    assert "on_message runs on its client's IO thread only, and was called on thread 'not-io'" in str(first)
    assert checks.violations == 2 and checks.last_violation is second
    logged = [r for r in caplog.records if r.levelno == logging.ERROR and "on_message" in r.getMessage()]
    assert len(logged) == 1  # once per method, however often it fires
    assert logged[0].stack_info  # where the wrong call came from


def test_on_the_io_thread_it_passes_and_a_coroutine_is_checked_where_it_runs(io_loop: IOLoop) -> None:
    checks = IOThreadChecks(enabled=True)
    engine = make_engine_class(checks)()

    async def on_io() -> int:
        return engine.on_message(41)

    assert io_loop.call(on_io(), 5.0, "test") == 42
    assert io_loop.call(engine.on_loop(), 5.0, "test") == "ran"  # created here, run on the IO thread
    assert checks.violations == 0

    with pytest.raises(errors.WrongThreadError, match="on_loop runs on its client's IO thread only"):
        asyncio.run(engine.on_loop())  # a loop of this thread is not an IO thread
    assert checks.violations == 1


def test_on_another_clients_io_thread_it_raises(io_loop: IOLoop) -> None:
    class OtherClient:
        in_io_thread = False  # what Runtime.in_io_thread says on an IO thread that is not its own

    checks = IOThreadChecks(enabled=True)
    engine = make_engine_class(checks)()
    engine.runtime = OtherClient()

    async def on_io() -> int:
        return engine.on_message(1)

    with pytest.raises(errors.WrongThreadError, match="the IO thread of another client"):
        io_loop.call(on_io(), 5.0, "test")


def test_a_method_marked_later_is_checked_at_once() -> None:
    checks = IOThreadChecks(enabled=True)
    engine = make_engine_class(checks)
    assert vars(engine)["on_message"].__wrapped__.__name__ == "on_message"
    assert isinstance(run_on_thread(lambda: engine().on_message(1)), errors.WrongThreadError)


def test_only_methods_can_be_marked() -> None:
    checks = IOThreadChecks()

    def nested() -> None:
        return None

    with pytest.raises(TypeError, match="io_thread marks methods"):
        checks.mark(nested)
    with pytest.raises(TypeError, match="io_thread marks methods"):
        checks.mark(run_on_thread)


def test_the_error_pickles() -> None:
    import pickle

    exc = errors.WrongThreadError("pkg.Engine.on_message", "thread 'x'")
    again = pickle.loads(pickle.dumps(exc))
    assert (type(again), again.method, again.thread, str(again)) == (type(exc), exc.method, exc.thread, str(exc))


@pytest.mark.skipif(os.environ.get(CHECK_THREADS_ENV) == "0", reason=f"{CHECK_THREADS_ENV}=0 turned the check off")
def test_this_session_runs_with_the_check_on() -> None:
    """The plugin turned the package's check on: the IO-thread methods are wrapped (the hot handlers too)."""
    checks = io_thread_checks()
    assert checks.enabled
    for owner, name in [
        (PushEngine, "_on_message"),
        (ContinuousPull, "_on_message"),
        (Subscription, "_on_message"),
        (Runtime, "send_now"),
    ]:
        assert (owner, name) in checks.methods
        assert hasattr(vars(owner)[name], "__wrapped__"), f"{owner.__name__}.{name} is not checked"
    assert len(checks.methods) > 100


PLUGIN_TEST = """
    import threading

    from jetstream_sync._runtime import io_thread


    class Engine:
        @io_thread
        def on_message(self):
            return None


    def swallow():
        try:
            Engine().on_message()
        except Exception:
            pass  # what a callback nobody watches does


    def test_a_swallowed_violation():
        thread = threading.Thread(target=swallow)
        thread.start()
        thread.join()


    def test_clean():
        assert Engine.on_message
"""


def write_plugin_test(tmp_path: Path, *, check_threads: bool = True) -> Path:
    (tmp_path / "conftest.py").write_text('pytest_plugins = ["jetstream_sync.testing"]\n')
    (tmp_path / "test_it.py").write_text(textwrap.dedent(PLUGIN_TEST))
    if check_threads:
        (tmp_path / "pytest.ini").write_text("[pytest]\njetstream_sync_check_threads = true\n")
    return tmp_path


def test_the_plugin_fails_a_test_whose_violation_was_swallowed(tmp_path: Path) -> None:
    done = run_pytest(write_plugin_test(tmp_path))
    out = done.stdout
    assert done.returncode == 1, out + done.stderr
    assert "2 passed, 1 error" in out, out
    assert "1 call(s) of an IO-thread method ran on another thread during this test" in out, out
    assert "test_it.Engine.on_message runs on its client's IO thread only" in out, out
    assert "jetstream_sync IO-thread check" in out, out  # the session's summary says it too


def test_the_plugin_leaves_it_off_when_told(tmp_path: Path) -> None:
    done = run_pytest(write_plugin_test(tmp_path), env={"JETSTREAM_SYNC_CHECK_THREADS": "0"})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 passed" in done.stdout


def test_the_plugin_leaves_it_off_unless_the_suite_asks(tmp_path: Path) -> None:
    """Off by default in a user's suite (each checked call costs about half a microsecond); the ini setting or
    the variable turns it on."""
    done = run_pytest(write_plugin_test(tmp_path, check_threads=False))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 passed" in done.stdout
    done = run_pytest(tmp_path, env={"JETSTREAM_SYNC_CHECK_THREADS": "1"})
    assert done.returncode == 1 and "1 call(s) of an IO-thread method" in done.stdout, done.stdout
