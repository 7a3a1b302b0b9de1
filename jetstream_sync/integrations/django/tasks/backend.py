"""``JetStreamBackend``: Django's task backend on JetStream (``settings.TASKS``, Django 6's ``django.tasks`` or
the ``django-tasks`` backport).

``enqueue`` writes the result document (status ``READY``) to the results bucket, then publishes the task to its
run subject (or, with a ``run_after`` in the future, a schedule message the server turns into the task at that
time), and returns the ``TaskResult``; ``get_result`` reads the bucket, from any process. Workers
(``manage.py jetstream_tasks_worker``, `worker`) run the tasks and write the outcome back.

Enqueue publishes at once, also inside ``transaction.atomic()``: Django's rule is that the caller wraps the
call in ``transaction.on_commit(partial(task.enqueue, ...))`` when the task must not run before the commit (a
worker in another process cannot see uncommitted rows), and every backend of Django's behaves that way.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Iterable
from typing import Any

from django.core import checks  # type: ignore[import-untyped]
from django.core.exceptions import ImproperlyConfigured  # type: ignore[import-untyped]
from django.utils import timezone  # type: ignore[import-untyped]
from django.utils.crypto import get_random_string  # type: ignore[import-untyped]

from .... import errors
from .. import get_client
from ._compat import BaseTaskBackend, InvalidTask, TaskResult, TaskResultDoesNotExist, TaskResultStatus, task_enqueued
from ._options import QUEUE_NAME, TaskOptions
from ._records import decode, encode, new_record, to_result
from ._store import TaskStore

__all__ = ["E002", "E003", "JetStreamBackend"]

log = logging.getLogger("jetstream_sync.integrations.django")

#: the system check's id for OPTIONS it cannot use
E002 = "jetstream_sync.E002"
#: the system check's id for a queue name that cannot be a subject token
E003 = "jetstream_sync.E003"
_RESULT_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")


class JetStreamBackend(BaseTaskBackend):  # type: ignore[misc]
    """Tasks through a JetStream stream, results in a key-value bucket (see the Django tasks guide).

    Every capability Django defines is supported: ``run_after`` (message schedules on nats-server 2.12+,
    redelivery at the time before that), priorities (run highest band first, see ``PRIORITY_BANDS``), results
    from any process (``get_result``/``aget_result``) and async task functions (the worker runs them with
    ``async_to_sync``). Thread-safe: one instance per alias and thread, as Django makes them, shares this
    process's client."""

    supports_defer = True
    supports_async_task = True
    supports_get_result = True
    supports_priority = True

    def __init__(self, alias: str, params: dict[str, Any]) -> None:
        super().__init__(alias, params)
        self._options: TaskOptions | None = None
        #: what is wrong with OPTIONS (reported by the system check, raised on use), or None
        self.options_error: str | None = None
        try:
            self._options = TaskOptions.from_mapping(self.options, source=f"TASKS[{alias!r}]['OPTIONS']")
        except (errors.InvalidArgumentError, errors.InvalidTypeError) as exc:
            self.options_error = str(exc)
        self._lock = threading.Lock()
        self._store: TaskStore | None = None

    @property
    def task_options(self) -> TaskOptions:
        """The parsed OPTIONS; ImproperlyConfigured when they are wrong."""
        if self._options is None:
            raise ImproperlyConfigured(self.options_error)
        return self._options

    def store(self) -> TaskStore:
        """This process's stream and bucket handles, opened on first use (connecting, and making the stream and
        bucket when missing), again after a fork or once the client was closed."""
        options = self.task_options
        client = get_client()
        with self._lock:
            store = self._store
            if store is None or store.client is not client or not store.usable:
                store = self._store = TaskStore.open(client, options)
            return store

    def validate_task(self, task: Any) -> None:
        """Django's checks, and that the queue name can be a subject token (letters, digits, ``_``, ``-``)."""
        super().validate_task(task)
        if QUEUE_NAME.fullmatch(task.queue_name) is None:
            raise InvalidTask(
                f"Queue name {task.queue_name!r} cannot be used by the JetStream backend: use 1 to 64 letters, "
                "digits, '_' or '-'."
            )

    def enqueue(self, task: Any, args: Any, kwargs: Any) -> Any:
        """Store the result as READY, then publish the task (or its schedule). A failed publish removes the
        result again and raises; nothing is left half-enqueued."""
        self.validate_task(task)
        result = TaskResult(
            task=task,
            id=get_random_string(32),
            status=TaskResultStatus.READY,
            enqueued_at=None,
            started_at=None,
            last_attempted_at=None,
            finished_at=None,
            args=args,
            kwargs=kwargs,
            backend=self.alias,
            errors=[],
            worker_ids=[],
        )  # its args and kwargs are normalised here: a value JSON cannot carry raises TypeError before sending
        object.__setattr__(result, "enqueued_at", timezone.now())
        record = new_record(result)
        data = encode(record)
        store = self.store()
        store.results.create(result.id, data)
        try:
            store.publish_task(record, data, task.run_after)
        except BaseException:
            try:
                store.results.purge(result.id)
            except errors.JetStreamError as exc:
                log.warning("tasks: the result %s of a task not enqueued could not be removed: %s", result.id, exc)
            raise
        task_enqueued.send(type(self), task_result=result)
        return result

    def get_result(self, result_id: str) -> Any:
        """The result ``result_id`` as its document stands now, from any process; TaskResultDoesNotExist when
        there is none (never enqueued here, or expired after RESULT_TTL)."""
        if not isinstance(result_id, str) or _RESULT_ID.fullmatch(result_id) is None:
            raise TaskResultDoesNotExist(result_id)
        try:
            entry = self.store().results.get(result_id)
        except errors.KeyNotFoundError:
            raise TaskResultDoesNotExist(result_id) from None
        return to_result(decode(entry.value))

    def check(self, **kwargs: Any) -> Iterable[Any]:
        """The system check of this alias (run by Django's task checks): OPTIONS, and queue names."""
        problems = []
        if self.options_error is not None:
            problems.append(
                checks.Error(
                    self.options_error,
                    hint="See the OPTIONS of the JetStream task backend in the Django tasks guide.",
                    obj=f"TASKS[{self.alias!r}]",
                    id=E002,
                )
            )
        bad = sorted(q for q in self.queues if QUEUE_NAME.fullmatch(q) is None)
        if bad:
            problems.append(
                checks.Error(
                    f"TASKS[{self.alias!r}]['QUEUES'] has names that cannot be subject tokens: {bad}",
                    hint="Use 1 to 64 letters, digits, '_' or '-' per queue name.",
                    obj=f"TASKS[{self.alias!r}]",
                    id=E003,
                )
            )
        return problems
