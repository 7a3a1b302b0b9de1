"""``manage.py jetstream_service path.to.service [--workers N] [--stop-timeout S]``: a NATS service (ADR-32) of
the project, with Django set up, until SIGTERM or Ctrl-C.

The path names a [`jetstream_sync.services.Service`][jetstream_sync.services.Service] (``shop.services.orders`` or
``shop.services:orders``), or a function of no arguments returning one. Its handlers run on ``--workers`` threads (the
service's own ``workers`` by default); Django's database connections are looked after around each handler as around each
HTTP request (``close_old_connections`` before and after), so a long-running service process does not keep a
connection the database has closed. A handler's return value is the reply; a ``ServiceError`` it raises becomes
the error headers; anything else is logged with its traceback (``jetstream_sync``) and answered 500.

SIGTERM or SIGINT stops gracefully: the service takes no new requests, finishes and answers those it took, and the
command exits 0 (within ``--stop-timeout`` seconds; after that what still waits is answered 503 and it exits 1); a
second signal stops at once (exit 1). A path that does not import, or names no service, is a CommandError (exit 1)
before anything runs. Each process connects on its own (``get_client``), so the command runs as several replicas
of a deployment: the endpoints' queue groups share the requests among them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser  # type: ignore[import-untyped]
from django.db import close_old_connections  # type: ignore[import-untyped]

from jetstream_sync import errors
from jetstream_sync.integrations._consume import CommandFailed
from jetstream_sync.integrations._service import load_service, run_service_until_signalled
from jetstream_sync.integrations.django import get_client


@contextlib.contextmanager
def _database_request() -> Iterator[None]:
    """What Django does around an HTTP request (its request_started and request_finished signals)."""
    close_old_connections()
    try:
        yield
    finally:
        close_old_connections()


class Command(BaseCommand):  # type: ignore[misc]
    help = (
        "Run a NATS service (jetstream_sync.services.Service) until SIGTERM or Ctrl-C, which stop it gracefully "
        "(requests in hand are finished and answered) and exit 0."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("service", help="dotted path of a Service, or of a function returning one")
        parser.add_argument("--workers", type=int, default=None, help="handler threads (default: the service's)")
        parser.add_argument(
            "--stop-timeout", type=float, default=30.0, help="seconds to finish the requests in hand on stop"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        workers = options["workers"]
        if workers is not None and workers < 1:
            raise CommandError(f"--workers must be at least 1, got {workers}")
        if options["stop_timeout"] <= 0:
            raise CommandError(f"--stop-timeout must be > 0 seconds, got {options['stop_timeout']}")
        try:
            service = load_service(options["service"])
            client = get_client()
        except CommandFailed as exc:
            raise CommandError(str(exc)) from exc
        except errors.JetStreamError as exc:
            raise CommandError(f"cannot connect: {exc}") from exc
        try:
            run_service_until_signalled(
                service,
                client,
                workers=workers,
                stop_timeout=options["stop_timeout"],
                say=self._say,
                around=_database_request,
            )
        except CommandFailed as exc:
            raise CommandError(str(exc)) from exc

    def _say(self, text: str) -> None:
        self.stdout.write(text)
        self.stdout.flush()
