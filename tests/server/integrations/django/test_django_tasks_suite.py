"""Django's own task tests (``tests/tasks/`` of the installed Django 6.x's source distribution, taken at test time
as the cache tests are: djangosetup.py) against JetStreamBackend and a real nats-server.

Django tests its task API with its two built-in backends, so each of its test classes is run here with
``settings.TASKS["default"]`` naming ours instead:

- ``TaskTestCase`` (test_tasks.py): the Task API over a backend (enqueue, ``using``, results, validation).
- ``DummyBackendTestCase`` (test_dummy_backend.py): what a backend that stores tasks without running them
  answers: READY results, ``get_result``, the enqueue log, the check. JetStreamBackend is that, before a worker.
- ``ImmediateBackendTestCase`` (test_immediate_backend.py): what running a task records: status, return value,
  errors with class and traceback, timestamps, attempts, context, the ``django.tasks`` log lines. Run on
  :class:`RunsOnEnqueueBackend`, a JetStreamBackend whose ``enqueue`` then takes the task's message from its
  band consumer and runs it in the calling thread with the worker's own TaskRunner, so each case sees the
  outcome when enqueue returns, as it expects of Django's immediate backend.

Every case runs except those in :data:`SKIPPED_CASES`, each with its reason. test_custom_backend.py and the two
``...TransactionTestCase`` classes are not taken: they test how Django's base class and its own backends behave,
not what a backend does. On Django 5.2 with the django-tasks backport this module is skipped: the backport's
source distribution ships no tests (test_tasks.py and test_tasks_worker.py run there).
"""

from __future__ import annotations

import contextlib
import sys
import unittest
from typing import Any, ClassVar

import pytest

from tests.server.integrations.django.djangosetup import django_task_tests

TASK_TESTS_DIR, TASK_TESTS_MISSING = django_task_tests()
if TASK_TESTS_DIR is None:
    pytest.skip(f"Django's task tests are not available: {TASK_TESTS_MISSING}", allow_module_level=True)
if str(TASK_TESTS_DIR) not in sys.path:
    sys.path.append(str(TASK_TESTS_DIR))

from django.test import override_settings  # noqa: E402
from tasks import test_dummy_backend, test_immediate_backend, test_tasks  # noqa: E402  (Django's tests/tasks)

from jetstream_sync import errors  # noqa: E402
from jetstream_sync.integrations.django import get_jetstream  # noqa: E402
from jetstream_sync.integrations.django.tasks import JetStreamBackend, TaskWorker  # noqa: E402
from jetstream_sync.integrations.django.tasks._records import decode  # noqa: E402
from jetstream_sync.integrations.django.tasks._run import TaskRunner  # noqa: E402

_OURS = "jetstream_sync.integrations.django.tasks.JetStreamBackend"
_RUNS = f"{__name__}.RunsOnEnqueueBackend"

#: The cases of Django's classes that do not run against this backend, and why.
SKIPPED_CASES = {
    "TaskTestCase.test_using_correct_backend": "asserts that the default backend is Django's DummyBackend",
    "TaskTestCase.test_get_backend": "asserts that the default backend is Django's DummyBackend",
    "TaskTestCase.test_enqueue_task": "compares with DummyBackend.results, the dummy's in-memory list",
    "TaskTestCase.test_enqueue_task_async": "compares with DummyBackend.results, the dummy's in-memory list",
    "DummyBackendTestCase.test_using_correct_backend": "asserts isinstance(DummyBackend) and OPTIONS == {}",
    "DummyBackendTestCase.test_enqueue_task": "asserts the result is in DummyBackend.results (in-memory list)",
    "DummyBackendTestCase.test_enqueue_task_async": "asserts the result is in DummyBackend.results",
    "DummyBackendTestCase.test_refresh_result": "edits DummyBackend.results[0] in place to fake a finished task",
    "DummyBackendTestCase.test_refresh_result_async": "edits DummyBackend.results[0] in place",
    "DummyBackendTestCase.test_clear": "DummyBackend.clear() empties the dummy's list; results here expire by TTL",
    "ImmediateBackendTestCase.test_using_correct_backend": "asserts isinstance(ImmediateBackend) and OPTIONS == {}",
    "ImmediateBackendTestCase.test_cannot_get_result": "this backend supports get_result (supports_get_result)",
    "ImmediateBackendTestCase.test_cannot_refresh_result": "this backend supports refresh (supports_get_result)",
    "ImmediateBackendTestCase.test_cannot_pass_run_after": "this backend supports run_after (supports_defer)",
}


class RunsOnEnqueueBackend(JetStreamBackend):
    """JetStreamBackend that runs each task it enqueues before returning (for Django's immediate-backend cases):
    the message is taken from its band consumer and handed to the worker's TaskRunner in this thread. Messages
    of other tasks found first (one a KeyboardInterrupt case gave back) are termed."""

    def __init__(self, alias: str, params: dict[str, Any]) -> None:
        super().__init__(alias, params)
        self._worker: TaskWorker | None = None

    def enqueue(self, task: Any, args: Any, kwargs: Any) -> Any:
        result = super().enqueue(task, args, kwargs)
        if self._worker is None:
            self._worker = TaskWorker(self, [task.queue_name], worker_id="suite-worker")
            self._worker.prepare()
        band = self._worker.bands()[self.task_options.band_of(task.priority)]
        runner = TaskRunner(self, self._worker.store, "suite-worker")
        while True:
            (msg,) = list(band.fetch(1, expires=5))
            if decode(msg.data)["id"] == result.id:
                runner(msg)
                return self.get_result(result.id)
            msg.term()


def _stream_settings(name: str, backend: str, queues: list[str]) -> dict[str, Any]:
    options = {"STREAM": name, "RESULTS_BUCKET": f"{name}_results"}
    return {
        "default": {"BACKEND": backend, "QUEUES": queues, "OPTIONS": options},
        "immediate": {"BACKEND": "django.tasks.backends.immediate.ImmediateBackend", "QUEUES": []},
        "missing": {"BACKEND": "does.not.exist"},
    }


class _OnJetStream:
    """Each class runs on a stream of its own, deleted with its results bucket afterwards."""

    stream: ClassVar[str]

    def setUp(self) -> None:  # Django's setUp calls DummyBackend.clear(); results here need no clearing
        pass

    @classmethod
    def tearDownClass(cls) -> None:
        super().tearDownClass()  # type: ignore[misc]
        js = get_jetstream()
        for stream in (cls.stream, f"KV_{cls.stream}_results"):
            with contextlib.suppress(errors.StreamNotFoundError):
                js.delete_stream(stream)


def _skipping(cls: type) -> type:
    for case, reason in SKIPPED_CASES.items():
        owner, method = case.split(".")
        if cls.__name__ == f"JetStream{owner}":
            setattr(cls, method, unittest.skip(reason)(getattr(cls, method)))
    return cls


@_skipping
@override_settings(TASKS=_stream_settings("DJANGO_SUITE_TASKS", _OURS, ["default", "queue_1"]))
class JetStreamTaskTestCase(_OnJetStream, test_tasks.TaskTestCase):
    stream = "DJANGO_SUITE_TASKS"


@_skipping
@override_settings(TASKS=_stream_settings("DJANGO_SUITE_DUMMY", _OURS, []))
class JetStreamDummyBackendTestCase(_OnJetStream, test_dummy_backend.DummyBackendTestCase):
    stream = "DJANGO_SUITE_DUMMY"


@_skipping
@override_settings(TASKS=_stream_settings("DJANGO_SUITE_IMMEDIATE", _RUNS, []))
class JetStreamImmediateBackendTestCase(_OnJetStream, test_immediate_backend.ImmediateBackendTestCase):
    stream = "DJANGO_SUITE_IMMEDIATE"
