"""One import surface over Django's two task frameworks: ``django.tasks`` (Django 6.0+, Python 3.12+) and the
``django-tasks`` backport (module ``django_tasks``, for Django 4.2-5.2 on Python 3.10 and 3.11).

The backport is the same API under another module name, with two exceptions renamed (``InvalidTaskError`` for
``InvalidTask``, ``InvalidTaskBackendError`` for ``InvalidTaskBackend``) and its helpers in ``django_tasks.utils``
rather than ``django.utils``. ``django.tasks`` wins when both are importable: on Django 6 it is the framework
``settings.TASKS`` configures for ``@task`` functions written against Django itself. `FRAMEWORK` names the
module chosen, for messages.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from types import ModuleType
from typing import Any

__all__ = [
    "DEFAULT_TASK_PRIORITY",
    "FRAMEWORK",
    "TASK_MAX_PRIORITY",
    "TASK_MIN_PRIORITY",
    "BaseTaskBackend",
    "InvalidTask",
    "Task",
    "TaskContext",
    "TaskError",
    "TaskResult",
    "TaskResultDoesNotExist",
    "TaskResultStatus",
    "normalize_json",
    "task_backends",
    "task_enqueued",
    "task_finished",
    "task_started",
]


def _framework() -> tuple[str, ModuleType]:
    try:
        return "django.tasks", importlib.import_module("django.tasks")
    except ImportError:  # Django < 6: the django-tasks backport, next
        pass
    try:
        return "django_tasks", importlib.import_module("django_tasks")
    except ImportError:
        raise ImportError(
            "jetstream_sync.integrations.django.tasks needs Django's task framework: Django 6.0 or later "
            "(django.tasks), or the django-tasks backport package (pip install django-tasks) on Django 4.2-5.2"
        ) from None


#: the task framework in use: "django.tasks" or "django_tasks"
FRAMEWORK, _root = _framework()


def _part(module: str, name: str) -> Any:
    return getattr(importlib.import_module(f"{FRAMEWORK}.{module}" if module else FRAMEWORK), name)


_base = "base"
task_backends: Any = _root.task_backends
BaseTaskBackend: Any = _part("backends.base", "BaseTaskBackend")
DEFAULT_TASK_PRIORITY: int = _part(_base, "DEFAULT_TASK_PRIORITY")
TASK_MAX_PRIORITY: int = _part(_base, "TASK_MAX_PRIORITY")
TASK_MIN_PRIORITY: int = _part(_base, "TASK_MIN_PRIORITY")
Task: Any = _part(_base, "Task")
TaskContext: Any = _part(_base, "TaskContext")
TaskError: Any = _part(_base, "TaskError")
TaskResult: Any = _part(_base, "TaskResult")
TaskResultStatus: Any = _part(_base, "TaskResultStatus")
InvalidTask: type[Exception] = _part("exceptions", "InvalidTask" if FRAMEWORK == "django.tasks" else "InvalidTaskError")
TaskResultDoesNotExist: type[Exception] = _part("exceptions", "TaskResultDoesNotExist")
task_enqueued: Any = _part("signals", "task_enqueued")
task_finished: Any = _part("signals", "task_finished")
task_started: Any = _part("signals", "task_started")
normalize_json: Callable[[object], Any] = (
    importlib.import_module("django.utils.json").normalize_json
    if FRAMEWORK == "django.tasks"
    else _part("utils", "normalize_json")
)
