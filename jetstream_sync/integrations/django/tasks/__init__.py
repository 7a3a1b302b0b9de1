"""Django's tasks (``django.tasks``, Django 6.0+; or the ``django-tasks`` backport on Django 4.2-5.2) on
JetStream: a backend that enqueues to a stream and keeps results in a key-value bucket, and the worker that
``manage.py jetstream_tasks_worker`` runs.

::

    TASKS = {
        "default": {
            "BACKEND": "jetstream_sync.integrations.django.tasks.JetStreamBackend",
            "QUEUES": ["default", "emails"],
            "OPTIONS": {"MAX_ATTEMPTS": 3, "RESULT_TTL": 7 * 24 * 3600},
        }
    }

The connection is ``settings.JETSTREAM``
([`jetstream_sync.integrations.django.get_client`][jetstream_sync.integrations.django.get_client]). The Django tasks
guide (docs/frameworks/django-tasks.md) describes the options, what priorities guarantee, deferred tasks, retries and
dead letters, and the worker.
"""

from __future__ import annotations

from ._compat import FRAMEWORK
from ._options import DEFAULT_BANDS, OPTION_KEYS, TaskOptions
from ._run import DeliveriesExhausted
from ._store import SCHEDULES_FROM
from .backend import E002, E003, JetStreamBackend
from .worker import TaskWorker, WorkerContext

__all__ = [
    "DEFAULT_BANDS",
    "E002",
    "E003",
    "FRAMEWORK",
    "OPTION_KEYS",
    "SCHEDULES_FROM",
    "DeliveriesExhausted",
    "JetStreamBackend",
    "TaskOptions",
    "TaskWorker",
    "WorkerContext",
]
