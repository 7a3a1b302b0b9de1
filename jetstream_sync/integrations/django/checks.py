"""The system check: ``settings.JETSTREAM`` read exactly as
[`get_client`][jetstream_sync.integrations.django.get_client] will read it, without connecting.

``manage.py check`` (and ``runserver``, ``migrate``, ...) reports a wrong setting before the first request
meets it: a misspelt key, a missing ``SERVERS``, a credentials file that is not there, a bad timeout.
"""

from __future__ import annotations

from typing import Any

from django.core import checks  # type: ignore[import-untyped]
from django.core.exceptions import ImproperlyConfigured  # type: ignore[import-untyped]

from .._connection import SETTING_KEYS

__all__ = ["E001", "check_jetstream_settings"]

#: the id of the error a wrong settings.JETSTREAM gives
E001 = "jetstream_sync.E001"


def check_jetstream_settings(app_configs: Any = None, **kwargs: Any) -> list[Any]:
    """One ``checks.Error`` (id ``jetstream_sync.E001``) when ``settings.JETSTREAM`` is missing or wrong."""
    from . import connection_settings

    try:
        connection_settings()
    except ImproperlyConfigured as exc:
        return [
            checks.Error(
                str(exc),
                hint=(
                    "settings.JETSTREAM is a dict of connection settings, e.g. {'SERVERS': "
                    f"['nats://127.0.0.1:4222'], 'NAME': 'my-app'}}; the keys are {', '.join(SETTING_KEYS)}"
                ),
                id=E001,
            )
        ]
    return []
