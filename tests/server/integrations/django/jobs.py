"""Task functions for the tests of the JetStream task backend (module-level, as Django requires), importable in
the pytest process and in the worker processes the tests start (``tasks_settings``)."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from jetstream_sync.integrations.django.tasks._compat import FRAMEWORK

if FRAMEWORK == "django.tasks":
    from django.tasks import TaskContext, task
else:
    from django_tasks import TaskContext, task


@task()
def add(a: int, b: int) -> int:
    return a + b


@task()
async def add_async(a: int, b: int) -> int:
    return a + b


@task(takes_context=True)
def attempt_and_id(context: TaskContext, label: str) -> list[Any]:
    return [context.attempt, context.task_result.id, label]


@task()
def fail(message: str) -> None:
    raise ValueError(message)


@task(takes_context=True)
def fail_until(context: TaskContext, attempts: int) -> int:
    """Raises on every attempt before ``attempts``, then returns the attempt it succeeded on."""
    if context.attempt < attempts:
        raise RuntimeError(f"attempt {context.attempt} fails")
    return int(context.attempt)


@task()
def return_unserialisable() -> object:
    return object()


@task()
def stamp(label: str, seconds: float = 0.0) -> dict[str, Any]:
    """Which task ran, in which process (after ``seconds`` of work)."""
    time.sleep(seconds)  # the task's work
    return {"label": label, "pid": os.getpid()}


@task(takes_context=True)
def hold_first(context: TaskContext, marker: str, seconds: float) -> list[int]:
    """On its first attempt: write ``marker`` (the task started), then work ``seconds`` (a test kills, stops or
    drains the worker meanwhile). Later attempts return at once. Returns [attempt, pid]."""
    if context.attempt == 1:
        Path(marker).write_text(str(os.getpid()))
        time.sleep(seconds)  # the task's work
    return [int(context.attempt), os.getpid()]
