"""The Django app: ``settings.JETSTREAM``, this process's client, a system check, a cache backend and a command.

Add ``"jetstream_sync.integrations.django"`` to ``INSTALLED_APPS`` and the connection settings::

    JETSTREAM = {"SERVERS": ["nats://127.0.0.1:4222"], "NAME": "shop", "TIMEOUT": 10}

(the keys are those of [`ConnectionSettings.from_mapping`][jetstream_sync.integrations.ConnectionSettings.from_mapping];
nothing Django-specific). Views, tasks and signals then call
[`get_client`][jetstream_sync.integrations.django.get_client] or
[`get_jetstream`][jetstream_sync.integrations.django.get_jetstream]. Nothing connects at import or in
``AppConfig.ready()``: the first call in a process connects, and a process forked after that (gunicorn with
``--preload``, Celery's prefork pool) connects again on its own first call instead of inheriting a client whose threads
do not exist there (docs/ARCHITECTURE.md, "Rules: forks"). The client is shared by every thread of the process and
closed when it exits.

``jetstream_sync.integrations.django.cache.KeyValueCache`` is a cache backend on a key-value bucket, and
``manage.py jetstream_consume`` runs a durable consumer's handler (see the command's help).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping

from ..._runtime import after_fork, check_process
from ...client import Client
from ...errors import InvalidArgumentError, InvalidTypeError
from ...jetstream.context import JetStream
from .._clients import close_process_clients, process_client
from .._connection import ConnectionSettings

__all__ = ["SETTING_NAME", "close_clients", "connection_settings", "get_client", "get_jetstream"]

#: the Django setting this app reads
SETTING_NAME = "JETSTREAM"

_parsed_lock = threading.Lock()
# The last settings.JETSTREAM read and what it gave: parsing checks files and builds TLS contexts, too much for
# every request, and comparing a copy also notices a settings change (override_settings in tests).
_parsed: tuple[dict[str, object], ConnectionSettings] | None = None


def _fresh_lock_after_fork() -> None:
    """In a forked worker: a new lock (one a request thread held at the fork would stay held for ever)."""
    global _parsed_lock
    _parsed_lock = threading.Lock()


after_fork(_fresh_lock_after_fork)


def connection_settings() -> ConnectionSettings:
    """``settings.JETSTREAM`` checked and read; ImproperlyConfigured naming the setting when it is wrong.

    Nothing connects here: this is what the system check runs too.
    """
    global _parsed
    from django.conf import settings  # type: ignore[import-untyped]
    from django.core.exceptions import ImproperlyConfigured  # type: ignore[import-untyped]

    raw = getattr(settings, SETTING_NAME, None)
    if raw is None:
        raise ImproperlyConfigured(
            f"settings.{SETTING_NAME} is not set: add {SETTING_NAME} = {{'SERVERS': ['nats://127.0.0.1:4222']}}"
        )
    snapshot = dict(raw) if isinstance(raw, Mapping) else None
    check_process()  # a worker forked in C (uWSGI) gets a fresh lock before it takes it
    with _parsed_lock:
        if snapshot is not None and _parsed is not None and _parsed[0] == snapshot:
            return _parsed[1]
    try:
        parsed = ConnectionSettings.from_mapping(raw, source=SETTING_NAME)
    except (InvalidArgumentError, InvalidTypeError) as exc:
        raise ImproperlyConfigured(str(exc)) from exc
    if snapshot is not None:
        with _parsed_lock:
            _parsed = (snapshot, parsed)
    return parsed


def get_client() -> Client:
    """This process's client for ``settings.JETSTREAM``: connected on first use, shared by every thread, never
    inherited through a fork. Connection errors (NoServersError, AuthorizationError) reach the caller and the
    next call tries again."""
    return process_client(connection_settings())


def get_jetstream() -> JetStream:
    """A JetStream context on [`get_client`][jetstream_sync.integrations.django.get_client]'s client (cheap: a context
    holds no server state)."""
    return get_client().jetstream()


def close_clients() -> None:
    """Close this process's clients (at the end of a script, or in tests before their server stops); the next
    [`get_client`][jetstream_sync.integrations.django.get_client] connects again. Without this they are closed when the
    process exits."""
    close_process_clients()
