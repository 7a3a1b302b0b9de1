"""Settings of the processes benchmarks/django_task_backends.py starts (enqueuer and worker), from the
environment: ``BENCH_BACKEND`` (the variant: jetstream, jetstream-t4, sqlite, sqlite-nosync, postgres,
postgres-nosync), ``BENCH_SQLITE`` (the database file), ``BENCH_PG_HOST`` and ``BENCH_PG_PORT``, ``NATS_URL`` and
``BENCH_STREAM``."""

from __future__ import annotations

import os

SECRET_KEY = "benchmark"
USE_TZ = True
DEFAULT_AUTO_FIELD = "django.db.models.AutoField"
_BACKEND = os.environ.get("BENCH_BACKEND", "jetstream")
try:
    import django.tasks  # noqa: F401

    _TASK_APPS: list[str] = []
except ImportError:
    _TASK_APPS = ["django_tasks"]
INSTALLED_APPS = ["jetstream_sync.integrations.django", *_TASK_APPS, "django_tasks_db"]
if _BACKEND.startswith("postgres"):
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": "postgres",
            "USER": "postgres",
            "HOST": os.environ.get("BENCH_PG_HOST", "127.0.0.1"),
            "PORT": os.environ.get("BENCH_PG_PORT", "5432"),
            # db_worker calls close_old_connections() around each task: without a persistent connection it
            # would connect to PostgreSQL again for every task, which no production worker would be set up to do
            "CONN_MAX_AGE": None,
            # -nosync: commits return before their WAL record is flushed to disk
            "OPTIONS": {"options": "-c synchronous_commit=off"} if _BACKEND.endswith("nosync") else {},
        }
    }
else:
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": os.environ.get("BENCH_SQLITE", "bench.sqlite3"),
            # -nosync: write-ahead log, synced at checkpoints rather than at each commit
            "OPTIONS": (
                {"init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"}
                if _BACKEND.endswith("nosync")
                else {}
            ),
        }
    }
JETSTREAM = {"SERVERS": os.environ.get("NATS_URL", "nats://127.0.0.1:4222"), "NAME": "bench"}
if _BACKEND.startswith("jetstream"):
    _STREAM = os.environ.get("BENCH_STREAM", "BENCH_TASKS")
    TASKS = {
        "default": {
            "BACKEND": "jetstream_sync.integrations.django.tasks.JetStreamBackend",
            "OPTIONS": {"STREAM": _STREAM, "RESULTS_BUCKET": f"{_STREAM}_results", "STORAGE": "file"},
        }
    }
else:
    TASKS = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend"}}
