"""The JetStream task backend against a real nats-server, with the worker running in this process (the same
TaskWorker the command runs): enqueue and results from the bucket, the outcomes Django defines (success, failure
with its traceback, async tasks, the context), retries, deferred tasks with and without message schedules, the
dead-letter place, the system check. Runs on Django 6's django.tasks and on the django-tasks backport."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.db import transaction
from django.test import override_settings
from django.utils import timezone

from jetstream_sync import errors
from jetstream_sync.integrations.django.tasks import (
    E002,
    E003,
    DeliveriesExhausted,
    JetStreamBackend,
    TaskWorker,
)
from jetstream_sync.integrations.django.tasks._compat import (
    InvalidTask,
    TaskResultDoesNotExist,
    TaskResultStatus,
    task_backends,
)
from tests.helpers import wait_until
from tests.server.integrations.django import jobs

BACKEND = "jetstream_sync.integrations.django.tasks.JetStreamBackend"


def tasks_setting(name: str, **options: Any) -> dict[str, Any]:
    base = {"STREAM": name, "RESULTS_BUCKET": f"{name}_results", "POLL_INTERVAL": 0.1, "ACK_WAIT": 5}
    return {"default": {"BACKEND": BACKEND, "QUEUES": [], "OPTIONS": {**base, **options}}}


@pytest.fixture
def backend(js, name) -> Iterator[JetStreamBackend]:
    """TASKS names a stream of this test's own (``js`` deletes every stream afterwards)."""
    with override_settings(TASKS=tasks_setting(name)):
        yield task_backends["default"]


@pytest.fixture
def options(js, name):
    """TASKS with other OPTIONS for one test: ``options(MAX_ATTEMPTS=3)`` returns the backend."""
    overrides = []

    def use(**more: Any) -> JetStreamBackend:
        setting = override_settings(TASKS=tasks_setting(name, **more))
        setting.enable()
        overrides.append(setting)
        return task_backends["default"]

    yield use
    for setting in reversed(overrides):
        setting.disable()


@pytest.fixture
def worker() -> Iterator[Any]:
    """``worker(threads=2)`` starts a TaskWorker of the default backend in this process; stopped afterwards."""
    running = []

    def start(threads: int = 2, queues: tuple[str, ...] = ("default",)) -> TaskWorker:
        tasks = TaskWorker(task_backends["default"], list(queues), worker_id="test-worker")
        running.append(tasks.consume(tasks.runner, workers=threads))
        return tasks

    yield start
    for context in running:
        context.drain()
        context.wait(10)


def finished(result: Any, timeout: float = 10.0) -> Any:
    """``result`` refreshed until its task finished."""

    def done() -> bool:
        result.refresh()
        return bool(result.is_finished)

    wait_until(done, timeout=timeout)
    return result


def test_enqueue_stores_a_ready_result_any_process_can_read(backend, js, name):
    result = jobs.add.enqueue(2, 3)
    assert result.status == TaskResultStatus.READY and result.args == [2, 3] and result.attempts == 0
    assert result.enqueued_at is not None and result.started_at is None and result.backend == "default"
    assert backend.get_result(result.id) == result
    assert jobs.add.get_result(result.id) == result
    assert js.stream_info(name).state.messages == 1  # waiting on its run subject until a worker takes it
    band = backend.task_options.band_of(0)
    assert js.stream(name).get_last_msg(f"{name.lower()}.run.default.{band}").data


def test_aenqueue_and_aget_result(backend):
    async def go() -> tuple[Any, Any]:
        result = await jobs.add.aenqueue(1, 1)
        return result, await jobs.add.aget_result(result.id)

    result, again = asyncio.run(go())
    assert again == result and again.status == TaskResultStatus.READY


def test_an_unknown_result_does_not_exist(backend):
    for result_id in ("0" * 32, "not a key", "x" * 65):
        with pytest.raises(TaskResultDoesNotExist):
            backend.get_result(result_id)


def test_queue_names_must_be_subject_tokens(backend):
    with pytest.raises(InvalidTask, match="cannot be used by the JetStream backend"):
        jobs.add.using(queue_name="emails.daily")
    assert jobs.add.using(queue_name="emails-daily").queue_name == "emails-daily"


def test_enqueue_in_a_transaction_publishes_at_once(backend, js, name):
    """Django's rule: a backend enqueues when called; the caller uses transaction.on_commit to wait."""
    with transaction.atomic():
        result = jobs.add.enqueue(1, 2)
        assert js.stream_info(name).state.messages == 1
        assert backend.get_result(result.id).status == TaskResultStatus.READY


def test_a_value_json_cannot_carry_is_refused_before_anything_is_sent(backend, js, name):
    with pytest.raises(TypeError, match="Unsupported type"):
        jobs.add.enqueue(timezone.now(), 1)
    assert name not in list(js.stream_names())  # refused before connecting, let alone publishing


def test_the_worker_records_success_failure_async_and_context(backend, worker):
    results = {
        "add": jobs.add.enqueue(20, 22),
        "async": jobs.add_async.enqueue(1, 2),
        "context": jobs.attempt_and_id.enqueue("x"),
        "fail": jobs.fail.enqueue("it broke"),
        "unserialisable": jobs.return_unserialisable.enqueue(),
    }
    worker(threads=2)
    for result in results.values():
        finished(result)
    assert results["add"].status == TaskResultStatus.SUCCESSFUL and results["add"].return_value == 42
    assert results["async"].return_value == 3
    context = results["context"]
    assert context.return_value == [1, context.id, "x"] and context.worker_ids == ["test-worker"]
    failed = results["fail"]
    assert failed.status == TaskResultStatus.FAILED and failed.attempts == 1
    assert failed.errors[0].exception_class is ValueError
    assert failed.errors[0].traceback.endswith("ValueError: it broke\n")
    with pytest.raises(ValueError, match="Task failed"):
        failed.return_value  # noqa: B018
    assert results["unserialisable"].errors[0].exception_class is TypeError
    for result in results.values():
        assert result.enqueued_at <= result.started_at <= result.last_attempted_at <= result.finished_at


def test_a_failing_task_is_retried_up_to_max_attempts(options, worker):
    options(MAX_ATTEMPTS=3, RETRY_DELAY=0.05)
    succeeds = jobs.fail_until.enqueue(3)
    gives_up = jobs.fail.enqueue("always")
    worker()
    finished(succeeds)
    assert succeeds.status == TaskResultStatus.SUCCESSFUL and succeeds.return_value == 3
    assert succeeds.attempts == 3 and [e.exception_class for e in succeeds.errors] == [RuntimeError, RuntimeError]
    finished(gives_up)
    assert gives_up.status == TaskResultStatus.FAILED and gives_up.attempts == 3 and len(gives_up.errors) == 3


@pytest.mark.parametrize("defer", ["schedule", "redelivery"])
def test_a_deferred_task_runs_within_a_second_after_run_after_and_not_before(options, worker, js, name, defer):
    backend = options(DEFER=defer)
    worker()
    run_after = timezone.now() + timedelta(seconds=1.5)
    result = jobs.add.using(run_after=run_after).enqueue(1, 1)
    assert backend.store().schedules is (defer == "schedule")
    if defer == "schedule":  # a schedule message waits, nothing is on the run subjects yet
        assert js.stream(name).get_last_msg(f"{name.lower()}.at.{result.id}").headers["Nats-Schedule"]
    finished(result, timeout=10)
    assert result.status == TaskResultStatus.SUCCESSFUL
    late = (result.started_at - run_after).total_seconds()
    assert 0 <= late < 1.0, late


def test_a_task_past_max_deliver_is_dead_lettered_and_failed(options, worker, js, name):
    """A worker that took the task and died (here: a fetch never acked) twice, with MAX_DELIVER 2: the next
    delivery does not run it but marks it FAILED and copies it to the dead-letter subject."""
    backend = options(MAX_DELIVER=2, ACK_WAIT=1)
    result = jobs.add.enqueue(1, 2)
    tasks = TaskWorker(backend, ["default"])
    tasks.prepare()
    band = tasks.bands()[backend.task_options.band_of(0)]
    taken: list[Any] = []
    for delivery in (1, 2):
        wait_until(lambda n=delivery: taken.extend(band.fetch(1, expires=1)) or len(taken) == n, timeout=5)
        assert taken[-1].metadata.num_delivered == delivery  # taken, never acked: redelivered after ACK_WAIT
    worker()
    finished(result)
    assert result.status == TaskResultStatus.FAILED and result.errors[-1].exception_class is DeliveriesExhausted
    dead = js.stream(name).get_last_msg(backend.task_options.dead_subject("default"))
    assert dead.headers["Django-Task-Dead-Reason"].startswith("delivered 3 times (MAX_DELIVER 2)")
    wait_until(lambda: js.stream_info(name).state.messages == 1)  # only the dead letter is left


def test_the_system_check_reports_options_and_queue_names(js, name):
    with override_settings(TASKS=tasks_setting(name, PRIORITY_BANDS=[10, 0])):
        problems = task_backends["default"].check()
        assert [p.id for p in problems] == [E002]
        assert "must lie in -100..100 and end with -100" in problems[0].msg
        with pytest.raises(ImproperlyConfigured, match="PRIORITY_BANDS"):
            TaskWorker(task_backends["default"], ["default"])
    setting = tasks_setting(name)
    setting["default"]["QUEUES"] = ["default", "bad queue"]
    with override_settings(TASKS=setting):
        assert [p.id for p in task_backends["default"].check()] == [E003]
    with override_settings(TASKS=tasks_setting(name, BOGUS=1)):
        assert "is not an option of this backend" in task_backends["default"].check()[0].msg
    with override_settings(TASKS=tasks_setting(name)):
        assert task_backends["default"].check() == []


def test_a_worker_runs_every_queue_it_is_given_and_only_those(options, worker):
    options()
    ours = [jobs.add.using(queue_name=queue).enqueue(1, n) for n, queue in enumerate(("default", "emails"))]
    other = jobs.add.using(queue_name="reports").enqueue(1, 1)
    worker(queues=("default", "emails"))
    assert [finished(r).return_value for r in ours] == [1, 2]
    other.refresh()
    assert other.status == TaskResultStatus.READY  # nobody runs the queue "reports"


def test_a_worker_refuses_a_queue_the_backend_does_not_list(js, name):
    setting = tasks_setting(name)
    setting["default"]["QUEUES"] = ["default"]
    with override_settings(TASKS=setting):
        with pytest.raises(errors.InvalidArgumentError, match="'emails' is not in TASKS"):
            TaskWorker(task_backends["default"], ["emails"])
        with pytest.raises(errors.InvalidArgumentError, match="is not a queue name"):
            TaskWorker(task_backends["default"], ["a.b"])
