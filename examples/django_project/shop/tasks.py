"""A Django task: the receipt of an order, enqueued by the order view and run by
``manage.py jetstream_tasks_worker`` in another process."""

from __future__ import annotations

import logging

try:  # Django 6
    from django.tasks import task
except ImportError:  # Django 4.2-5.2 with the django-tasks backport
    from django_tasks import task

log = logging.getLogger("shop")


@task(priority=10, queue_name="emails")
def send_receipt(item: str, n: int) -> str:
    """Runs in the worker; what it returns is kept in the results bucket for the view to show."""
    receipt = f"receipt for order {n} ({item})"
    log.info("sent %s", receipt)
    return receipt
