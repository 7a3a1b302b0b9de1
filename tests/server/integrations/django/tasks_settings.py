"""Settings of the worker processes the task tests start (``python -m django jetstream_tasks_worker`` with
``DJANGO_SETTINGS_MODULE=tests.server.integrations.django.tasks_settings``), taken from the environment the test
sets: ``NATS_URL``, and ``TASKS_OPTIONS`` (JSON) for the backend's OPTIONS, the same the test's own process
uses."""

from __future__ import annotations

import json
import os

from jetstream_sync.integrations.django.tasks._compat import FRAMEWORK

SECRET_KEY = "tests"
USE_TZ = True
INSTALLED_APPS = ["jetstream_sync.integrations.django"] + (["django_tasks"] if FRAMEWORK == "django_tasks" else [])
DATABASES: dict[str, dict[str, str]] = {}
JETSTREAM = {"SERVERS": os.environ.get("NATS_URL", "nats://127.0.0.1:4222"), "NAME": "task-worker"}
TASKS = {
    "default": {
        "BACKEND": "jetstream_sync.integrations.django.tasks.JetStreamBackend",
        "QUEUES": [],
        "OPTIONS": json.loads(os.environ.get("TASKS_OPTIONS", "{}")),
    }
}
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {"jetstream_sync": {"handlers": ["console"], "level": "INFO"}},
}
