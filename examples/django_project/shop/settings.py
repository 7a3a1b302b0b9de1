"""Settings of the example project: the JetStream app, the key-value cache, Django tasks on JetStream, no
database."""

from __future__ import annotations

import os

SECRET_KEY = "example-only"
DEBUG = True
ALLOWED_HOSTS = ["127.0.0.1", "localhost", "testserver"]
ROOT_URLCONF = "shop.urls"
try:  # Django 6 has django.tasks built in; before it, the django-tasks backport is an app
    import django.tasks  # noqa: F401

    TASK_APPS: list[str] = []
except ImportError:
    TASK_APPS = ["django_tasks"]
INSTALLED_APPS = ["jetstream_sync.integrations.django", *TASK_APPS, "shop"]
DATABASES: dict[str, dict[str, str]] = {}

# One connection per process (made on first use), checked by `manage.py check`.
JETSTREAM = {"SERVERS": os.environ.get("NATS_URL", "nats://127.0.0.1:4222"), "NAME": "shop"}

# Django's cache on a key-value bucket, shared by every process of the deployment.
CACHES = {
    "default": {
        "BACKEND": "jetstream_sync.integrations.django.cache.KeyValueCache",
        "LOCATION": "shop_cache",
        "TIMEOUT": 300,
        "OPTIONS": {"STORAGE": "memory", "MAX_BYTES": 64 * 1024 * 1024},
    }
}

# Django tasks: enqueued to a stream, results in a key-value bucket; `manage.py jetstream_tasks_worker --queue
# emails` runs them.
TASKS = {
    "default": {
        "BACKEND": "jetstream_sync.integrations.django.tasks.JetStreamBackend",
        "QUEUES": ["default", "emails"],
        "OPTIONS": {"STREAM": "SHOP_TASKS", "STORAGE": "memory", "MAX_ATTEMPTS": 3, "RESULT_TTL": 24 * 3600},
    }
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {
        "shop": {"handlers": ["console"], "level": "INFO"},
        # the command's log: a handler that raised (with its traceback), consume warnings
        "jetstream_sync": {"handlers": ["console"], "level": "WARNING"},
    },
}
