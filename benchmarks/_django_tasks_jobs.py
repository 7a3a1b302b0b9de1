"""The task benchmarks/django_task_backends.py enqueues: nothing but the framework's own cost."""

from __future__ import annotations

try:  # Django 6
    from django.tasks import task
except ImportError:  # the django-tasks backport
    from django_tasks import task


@task()
def noop(n: int) -> int:
    return n
