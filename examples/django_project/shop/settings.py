"""Settings of the example project: the JetStream app, the key-value cache, no database."""

from __future__ import annotations

import os

SECRET_KEY = "example-only"
DEBUG = True
ALLOWED_HOSTS = ["127.0.0.1", "localhost", "testserver"]
ROOT_URLCONF = "shop.urls"
INSTALLED_APPS = ["jetstream_sync.integrations.django", "shop"]
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
