"""wait_while: the bounded wait every gate uses ends on the condition, on close, or on time."""

from __future__ import annotations

import threading
import time

import pytest

from jetstream_sync import errors
from jetstream_sync._runtime import wait_while


def test_returns_when_the_condition_clears():
    cond = threading.Condition()
    state = {"busy": True}

    def clear() -> None:
        with cond:
            state["busy"] = False
            cond.notify_all()

    threading.Timer(0.05, clear).start()
    with cond:
        wait_while(cond, lambda: state["busy"], 5.0, closed=lambda: False, timed_out=lambda: AssertionError("late"))
    assert not state["busy"]


def test_raises_the_timeout_error_it_is_given():
    cond = threading.Condition()
    start = time.monotonic()
    with cond, pytest.raises(errors.PublishBackpressureError, match="stuck"):
        stuck = errors.PublishBackpressureError("stuck")
        wait_while(cond, lambda: True, 0.1, closed=lambda: False, timed_out=lambda: stuck)
    assert time.monotonic() - start >= 0.1


def test_close_wakes_a_waiter_without_a_notify():
    """A close that races the wait (no notify reaches it) is still seen within a tick, not after the timeout."""
    cond = threading.Condition()
    closed = threading.Event()
    threading.Timer(0.05, closed.set).start()
    start = time.monotonic()
    with cond, pytest.raises(errors.ConnectionClosedError):
        wait_while(cond, lambda: True, 30.0, closed=closed.is_set, timed_out=lambda: AssertionError("timed out"))
    assert time.monotonic() - start < 5.0  # the tick is 0.25 s; 30 s would mean the close was missed
