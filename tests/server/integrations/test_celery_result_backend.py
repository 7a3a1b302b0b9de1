"""The Celery result backend on its own (no worker): how results are stored and how a waiter learns of them.
Real nats-server; the worker-side behaviour is in test_celery_jetstream.py and Celery's own suite."""

from __future__ import annotations

import itertools
import threading
import time
from typing import Any

import pytest
from celery import Celery, states
from celery.exceptions import ChordError

import jetstream_sync
import jetstream_sync.integrations.celery as celery_integration

_numbers = itertools.count()


@pytest.fixture
def backend(nats_server) -> Any:
    app = Celery("results", broker="memory://", backend=f"jetstream://127.0.0.1:{nats_server.port}")
    app.conf.result_backend_transport_options = {"bucket": f"results_{next(_numbers)}"}
    return app.backend


def test_a_stored_success_is_never_overwritten(backend):
    """Celery's rule (a task run twice must not overwrite the run that succeeded), kept by a create and a
    compare-and-set: a first state, a later one over it, and no state over SUCCESS."""
    backend.store_result("t1", None, states.STARTED)
    assert backend.get_state("t1") == states.STARTED
    backend.store_result("t1", 42, states.SUCCESS)
    backend.store_result("t1", RuntimeError("second run"), states.FAILURE)
    backend.store_result("t1", None, states.STARTED)
    fresh = backend.get_task_meta("t1", cache=False)
    assert (fresh["status"], fresh["result"]) == (states.SUCCESS, 42)
    backend.forget("t1")
    backend.store_result("t1", 7, states.SUCCESS)  # forgotten: a delete marker is no value, so it is created
    assert backend.get_task_meta("t1", cache=False)["result"] == 7


def test_a_waiting_get_is_woken_by_the_write(backend):
    assert backend.bucket.bucket.startswith("results_")  # the bucket made before the timing
    stored: list[float] = []

    def store_later() -> None:
        time.sleep(0.3)  # the waiter is waiting by then (it waits up to 10 s)
        stored.append(time.monotonic())
        backend.store_result("t2", "done", states.SUCCESS)

    writer = threading.Thread(target=store_later)
    writer.start()
    meta = backend.wait_for("t2", timeout=10, interval=5)
    woken = time.monotonic()
    writer.join()
    assert meta["result"] == "done"
    assert woken - stored[0] < 1.0  # the notice, not the 5 s interval nor the re-read


def test_a_result_without_a_notice_is_read_again(backend, monkeypatch):
    """A value whose notice never came (written by another client with a plain put) is found by the waiter's
    re-read, within REREAD seconds."""
    monkeypatch.setattr(celery_integration, "REREAD", 0.5)
    meta = backend.encode({"status": states.SUCCESS, "result": 3, "task_id": "t3"})
    key = backend.get_key_for_task("t3")

    def put_later() -> None:
        time.sleep(0.2)  # the waiter is waiting by then (it has no notice to wait for: the put sends none)
        backend.bucket.put(key, meta.encode() if isinstance(meta, str) else meta)

    writer = threading.Thread(target=put_later)
    writer.start()
    started = time.monotonic()
    assert backend.wait_for("t3", timeout=10, interval=0.1)["result"] == 3
    writer.join()
    assert time.monotonic() - started < 5


def test_connection_errors_are_safe_to_retry(backend):
    assert backend.exception_safe_to_retry(jetstream_sync.errors.NotConnectedError())
    assert backend.exception_safe_to_retry(jetstream_sync.errors.TimeoutError("no answer"))
    assert not backend.exception_safe_to_retry(jetstream_sync.errors.InvalidArgumentError("key", "refused"))
    assert not backend.exception_safe_to_retry(ValueError("not ours"))


def test_a_group_waits_for_every_result(backend):
    ids = [f"g{n}" for n in range(5)]

    def store_all() -> None:
        for n, task_id in enumerate(ids):
            backend.store_result(task_id, n, states.SUCCESS)

    writer = threading.Thread(target=store_all)
    writer.start()
    got = dict(backend.get_many(ids, timeout=10))
    writer.join()
    assert {task_id: meta["result"] for task_id, meta in got.items()} == {t: n for n, t in enumerate(ids)}


class HeaderFailed(Exception):
    """The failure of a chord's header task in the test below."""


def test_a_get_woken_by_a_notice_checks_the_parents_first(backend, monkeypatch):
    """A chord whose header task fails stores the failure, then a ChordError on the body, a moment apart. A
    ``get()`` on the body woken by the body's notice checks the parents (Celery's ``on_interval``) before it
    returns, so it raises the header's exception, as with Celery's Redis backend."""
    app = backend.app
    header = app.AsyncResult("header-1")
    body = app.AsyncResult("body-1", parent=header)
    waiting = threading.Event()
    read_ready = backend._read_ready

    def read_then_tell(*args: Any) -> Any:
        found = read_ready(*args)
        waiting.set()  # subscribed and read: what is stored from now on is noticed
        return found

    monkeypatch.setattr(backend, "_read_ready", read_then_tell)

    def fail_header_then_body() -> None:
        waiting.wait(10)
        backend.mark_as_failure("header-1", HeaderFailed("the header"))
        backend.mark_as_failure("body-1", ChordError("Dependency header-1 raised HeaderFailed('the header')"))

    writer = threading.Thread(target=fail_header_then_body)
    writer.start()
    try:
        with pytest.raises(HeaderFailed):
            body.get(timeout=10, interval=5)  # the interval alone would not call on_interval in time
    finally:
        writer.join()
