"""The AppConfig: registers the system check of ``settings.JETSTREAM``; connects nothing (see the package)."""

from __future__ import annotations

from django.apps import AppConfig  # type: ignore[import-untyped]
from django.core import checks  # type: ignore[import-untyped]

from .checks import check_jetstream_settings


class JetStreamConfig(AppConfig):  # type: ignore[misc]
    """``jetstream_sync.integrations.django`` in INSTALLED_APPS. ``ready()`` only registers the check: a
    connection made here would be inherited by every process forked after it (gunicorn --preload)."""

    name = "jetstream_sync.integrations.django"
    label = "jetstream_sync"
    verbose_name = "NATS JetStream"

    def ready(self) -> None:
        checks.register(check_jetstream_settings)
