"""LightFuture behaves as a concurrent.futures.Future in every way a caller can observe."""

from __future__ import annotations

import concurrent.futures
import threading

import pytest

from jetstream_sync._runtime import LightFuture


def later(fn, delay: float = 0.05) -> None:
    threading.Timer(delay, fn).start()


def test_result_and_exception_after_the_fact():
    f: LightFuture[int] = LightFuture()
    f.set_result(3)
    assert f.done() and f.result() == 3 and f.exception() is None
    g: LightFuture[int] = LightFuture()
    g.set_exception(ValueError("boom"))
    with pytest.raises(ValueError, match="boom"):
        g.result()
    assert isinstance(g.exception(), ValueError)


def test_a_waiting_thread_is_woken():
    f: LightFuture[int] = LightFuture()
    later(lambda: f.set_result(5))
    assert f.result(timeout=2) == 5
    g: LightFuture[int] = LightFuture()
    with pytest.raises(concurrent.futures.TimeoutError):  # what a stock Future raises (the builtin from 3.11)
        g.result(timeout=0.05)


def test_done_callbacks_run_once_resolved():
    f: LightFuture[int] = LightFuture()
    seen: list[int] = []
    f.add_done_callback(lambda fut: seen.append(fut.result()))
    f.set_result(7)
    assert seen == [7]
    f.add_done_callback(lambda fut: seen.append(fut.result()))  # already done: runs at once
    assert seen == [7, 7]


def test_wait_and_as_completed():
    futures = [LightFuture() for _ in range(5)]
    later(lambda: [f.set_result(i) for i, f in enumerate(futures)])
    done, not_done = concurrent.futures.wait(futures, timeout=2)
    assert len(done) == 5 and not not_done
    more = [LightFuture() for _ in range(3)]
    later(lambda: [f.set_result(1) for f in more])
    assert sorted(f.result() for f in concurrent.futures.as_completed(more, timeout=2)) == [1, 1, 1]


def test_cancel_and_double_set_are_refused():
    f: LightFuture[int] = LightFuture()
    assert f.cancel() and f.cancelled()
    with pytest.raises(concurrent.futures.InvalidStateError):
        f.set_result(1)
    g: LightFuture[int] = LightFuture()
    g.set_result(1)
    with pytest.raises(concurrent.futures.InvalidStateError):
        g.set_result(2)
    assert not g.cancel()


def test_many_threads_resolve_and_wait_concurrently():
    futures = [LightFuture() for _ in range(2000)]
    results: list[int] = []
    lock = threading.Lock()

    def waiter(chunk):
        for f in chunk:
            value = f.result(timeout=5)
            with lock:
                results.append(value)

    waiters = [threading.Thread(target=waiter, args=(futures[i::4],)) for i in range(4)]
    for t in waiters:
        t.start()
    for i, f in enumerate(futures):
        f.set_result(i)
    for t in waiters:
        t.join(10)
    assert sorted(results) == list(range(2000))
