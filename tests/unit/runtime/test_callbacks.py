"""CallbackRunner (the callbacks thread) and the watchdog's refusal of user code, without a server."""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Iterator

import pytest

from jetstream_sync._runtime import _callbacks
from jetstream_sync._runtime._callbacks import CALLBACKS_THREAD_NAME, CallbackRunner
from jetstream_sync._runtime._watchdog import Watchdog, check_library_code
from tests.helpers import wait_until


@pytest.fixture
def runner() -> Iterator[CallbackRunner]:
    runner = CallbackRunner()
    yield runner
    runner.stop(2.0)


class Gate:
    """A callback that blocks until released; ``entered`` is set once it runs."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()

    def __call__(self) -> None:
        self.entered.set()
        self.release.wait(10)


def test_callbacks_run_in_order_on_their_own_thread(runner: CallbackRunner) -> None:
    seen: list[tuple[int, str]] = []
    for i in range(500):
        runner.submit(lambda i=i: seen.append((i, threading.current_thread().name)))
    wait_until(lambda: len(seen) == 500)
    assert seen == [(i, CALLBACKS_THREAD_NAME) for i in range(500)]


def test_each_submitter_keeps_its_order(runner: CallbackRunner) -> None:
    seen: list[tuple[int, int]] = []

    def submit_all(who: int) -> None:
        for i in range(200):
            runner.submit(seen.append, (who, i))

    threads = [threading.Thread(target=submit_all, args=(who,)) for who in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(5)
    wait_until(lambda: len(seen) == 800)
    for who in range(4):
        assert [i for w, i in seen if w == who] == list(range(200))


def test_no_thread_until_the_first_callback(runner: CallbackRunner) -> None:
    assert runner.thread is None
    done = threading.Event()
    runner.submit(done.set)
    assert done.wait(5)
    thread: threading.Thread | None = runner.thread
    assert thread is not None and thread.daemon


@pytest.mark.parametrize("exc", [SystemExit, KeyboardInterrupt, RuntimeError])
def test_a_raising_callback_is_logged_and_later_ones_run(
    runner: CallbackRunner, exc: type[BaseException], caplog: pytest.LogCaptureFixture
) -> None:
    after = threading.Event()

    def raising() -> None:
        raise exc("from a user callback")

    runner.submit(raising)
    runner.submit(after.set)
    assert after.wait(5), "the callback after the raising one never ran"
    assert "raised; the callbacks thread goes on" in caplog.text
    assert "raising" in caplog.text  # the log names the callback


def test_a_full_queue_drops_new_callbacks_counts_them_and_warns_once(
    runner: CallbackRunner, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(_callbacks, "MAX_QUEUED", 3)
    stuck = Gate()
    ran: list[int] = []
    runner.submit(stuck)
    assert stuck.entered.wait(5)
    with caplog.at_level(logging.WARNING, logger="jetstream_sync"):
        for i in range(10):
            runner.submit(ran.append, i)
        assert runner.dropped == 7
        assert caplog.text.count("callbacks are dropped") == 1
        assert "Gate" in caplog.text  # names what holds the queue up
        stuck.release.set()
        wait_until(lambda: ran == [0, 1, 2])
        wait_until(lambda: "7 callbacks were dropped" in caplog.text)
        runner.submit(ran.append, 10)  # room again
        wait_until(lambda: ran == [0, 1, 2, 10])
    assert runner.dropped == 7


def test_the_closed_callback_is_queued_past_the_bound(runner: CallbackRunner, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_callbacks, "MAX_QUEUED", 1)
    stuck = Gate()
    ran: list[str] = []
    runner.submit(stuck)
    assert stuck.entered.wait(5)
    runner.submit(ran.append, "error")
    runner.submit(ran.append, "dropped")
    runner.submit(ran.append, "closed", always=True)
    stuck.release.set()
    wait_until(lambda: ran == ["error", "closed"])
    assert runner.dropped == 1


def test_stop_waits_only_its_bound_for_a_stuck_callback(caplog: pytest.LogCaptureFixture) -> None:
    runner = CallbackRunner()
    stuck = Gate()
    ran: list[str] = []
    runner.submit(stuck)
    assert stuck.entered.wait(5)
    runner.submit(ran.append, "queued")
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="jetstream_sync"):
        runner.stop(0.2)
    assert time.monotonic() - started < 1.0
    assert "is still running" in caplog.text and "Gate" in caplog.text
    runner.submit(ran.append, "after stop")  # refused once stopped
    assert runner.thread is not None and runner.thread.is_alive()
    stuck.release.set()
    runner.thread.join(5)
    assert not runner.thread.is_alive()
    assert ran == ["queued"]


def test_stop_runs_what_is_queued_then_ends_the_thread() -> None:
    runner = CallbackRunner()
    ran: list[int] = []
    for i in range(100):
        runner.submit(ran.append, i)
    runner.stop(5)
    assert ran == list(range(100))
    assert runner.thread is not None and not runner.thread.is_alive()


def test_a_callback_may_stop_its_own_runner() -> None:
    """A callback that closes the client stops the runner from the callbacks thread: no wait on itself."""
    runner = CallbackRunner()
    ran: list[str] = []
    held = Gate()
    runner.submit(held)  # holds the thread until both below are queued
    runner.submit(lambda: runner.stop(5))
    runner.submit(ran.append, "queued before the stop")
    held.release.set()
    assert runner.thread is not None
    runner.thread.join(5)
    assert not runner.thread.is_alive()
    assert ran == ["queued before the stop"]


def test_a_forked_child_drops_callbacks_without_a_thread(
    runner: CallbackRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(runner._fork_guard, "mark", [0])  # what the runner's process mark reads in a forked child
    runner.submit(lambda: None)
    assert runner.thread is None


def _user_function() -> None:
    """A function of the test module, standing for user code."""


def test_the_watchdog_refuses_user_code_and_runs_the_librarys() -> None:
    watchdog = Watchdog()
    runner = CallbackRunner()
    try:
        for user_code in (_user_function, Gate(), functools.partial(_user_function), print):
            with pytest.raises(RuntimeError, match="user code never runs on the watchdog"):
                watchdog.call_soon(user_code)
            with pytest.raises(RuntimeError, match="user code never runs on the watchdog"):
                watchdog.call_later(0.01, user_code)
        done = threading.Event()
        watchdog.call_soon(runner.submit, done.set)  # library code on the watchdog hands user code on
        assert done.wait(5)
    finally:
        watchdog.stop(2.0)
        runner.stop(2.0)


def test_check_library_code_judges_by_module() -> None:
    check_library_code(CallbackRunner().submit)
    check_library_code(functools.partial(_callbacks.callback_name))
    for user_code in (_user_function, lambda: None, Gate(), functools.partial(_user_function), print):
        with pytest.raises(RuntimeError, match="is not jetstream_sync code"):
            check_library_code(user_code)
