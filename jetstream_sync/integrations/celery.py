"""Celery: one client per worker process, from the app's configuration, flushed when the process ends.

    app = Celery("tasks", broker=...)
    app.conf.jetstream = {"SERVERS": ["nats://127.0.0.1:4222"], "NAME": "tasks"}
    jetstream = JetStream(app)

    @app.task
    def ship(order_id):
        jetstream.js.publish("orders.shipped", order_id.encode(), msg_id=order_id)

Celery's prefork pool forks its worker processes from the main one, and a client inherited through fork() is
unusable. So nothing connects when the app is made: :attr:`JetStream.client` connects in the process that first
uses it (``process_client``), and each pool process gets its own. A pool process can end without running
``atexit`` hooks (billiard leaves with ``os._exit``), which would drop publishes still buffered and acks not yet
sent; so the extension closes the process's clients on ``worker_process_shutdown`` (and the main process's on
``worker_shutdown``), which writes out what is buffered first.

The settings are the keys of ``ConnectionSettings.from_mapping`` (``SERVERS``, ``NAME``, ``CREDENTIALS``,
``TLS_CA_FILE``, ``TIMEOUT``, ...) in ``app.conf.jetstream`` (or the name given as ``setting``); they are
checked when the extension is made if the app has them by then, else on first use.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from celery import Celery, signals

from .. import errors
from ..client import Client
from ..jetstream import JetStream as JetStreamContext
from ._clients import close_process_clients, process_client
from ._connection import ConnectionSettings

__all__ = ["JetStream"]

log = logging.getLogger("jetstream_sync.integrations")


class JetStream:
    """The jetstream_sync extension of a Celery app: ``client`` and ``js`` of the current process."""

    def __init__(self, app: Celery, *, setting: str = "jetstream") -> None:
        if not isinstance(app, Celery):
            raise errors.InvalidTypeError("app", f"must be a celery.Celery, got {type(app).__name__}")
        if not isinstance(setting, str) or not setting:
            raise errors.InvalidArgumentError("setting", "must be the name of a key of app.conf")
        self.app = app
        self.setting = setting
        self._settings: ConnectionSettings | None = None
        if app.conf.get(setting) is not None:
            self.settings()  # checked now: a bad setting fails when the app is made, not in the first task
        signals.worker_process_shutdown.connect(_close_clients, weak=False)
        signals.worker_shutdown.connect(_close_clients, weak=False)

    def __repr__(self) -> str:
        return f"<JetStream for Celery app {self.app.main!r}>"

    def settings(self) -> ConnectionSettings:
        """The connection settings read from ``app.conf[setting]`` (read and checked once)."""
        if self._settings is None:
            raw = self.app.conf.get(self.setting)
            if not isinstance(raw, Mapping):
                raise errors.InvalidArgumentError(
                    f"app.conf.{self.setting}",
                    "must be a dict of connection settings, e.g. {'SERVERS': ['nats://127.0.0.1:4222']}",
                )
            self._settings = ConnectionSettings.from_mapping(raw, source=f"app.conf.{self.setting}")
        return self._settings

    @property
    def client(self) -> Client:
        """This process's client (connected on first use; a forked pool process connects its own)."""
        return process_client(self.settings())

    @property
    def js(self) -> JetStreamContext:
        """A JetStream context on this process's client (cheap: make one per use)."""
        return self.client.jetstream()


def _close_clients(**_: Any) -> None:
    """A worker process (or the main one) is ending: close its clients, writing out what they buffered."""
    log.debug("celery worker shutting down: closing this process's clients")
    close_process_clients()
