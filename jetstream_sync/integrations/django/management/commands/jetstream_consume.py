"""``manage.py jetstream_consume STREAM CONSUMER --handler dotted.path [--workers N]``: a durable consumer's
messages handed to a function of the project, with Django set up, until SIGTERM or Ctrl-C.

The handler is called with each [`Msg`][jetstream_sync.Msg] (``Consumer.consume(handler, workers=N)``):

- it **returns**: the message is acked, unless the handler already acked, nak'd or termed it itself;
- it **raises** an ``Exception``: the traceback is logged (``jetstream_sync.integrations``) and the
  message is nak'd (``--nak-delay`` seconds, default at once), so the server redelivers it, up to the
  consumer's ``max_deliver``; the command goes on with the next message. A handler that settled the message
  before raising keeps that settlement.
- it raises ``SystemExit`` or ``KeyboardInterrupt``: the consume ends and the command exits 1.

SIGTERM or SIGINT drains: no more pulls, the messages already received are handled and acked, then the command
exits 0 (within ``--drain-timeout`` seconds; after that the rest is left for redelivery and it exits 1); a
second signal stops at once.
The consumer must exist (create it with the stream, e.g. in a migration or a deploy step): a missing
stream or consumer, or a handler path that does not import, is a CommandError (exit 1) before anything runs.
Each process connects on its own (``get_client``), so the command runs as several replicas of a deployment.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser  # type: ignore[import-untyped]
from django.utils.module_loading import import_string  # type: ignore[import-untyped]

from jetstream_sync import errors
from jetstream_sync.integrations._consume import CommandFailed, run_until_signalled, settling
from jetstream_sync.integrations.django import get_jetstream
from jetstream_sync.message import Msg


class Command(BaseCommand):  # type: ignore[misc]
    help = (
        "Run --handler on every message of a durable pull consumer (acked when it returns, nak'd when it "
        "raises), with --workers threads, until SIGTERM or Ctrl-C, which drain and exit 0."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("stream", help="the stream's name")
        parser.add_argument("consumer", help="the durable consumer's name (it must exist)")
        parser.add_argument("--handler", required=True, help="dotted path of a function taking one message")
        parser.add_argument("--workers", type=int, default=1, help="handler threads (default 1)")
        parser.add_argument(
            "--max-messages", type=int, default=None, help="messages buffered ahead of the handler (default 500)"
        )
        parser.add_argument(
            "--nak-delay", type=float, default=None, help="seconds before a failed message is redelivered"
        )
        parser.add_argument(
            "--drain-timeout", type=float, default=30.0, help="seconds to finish buffered messages on stop"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        handler = self._handler(options["handler"])
        workers = options["workers"]
        if workers < 1:
            raise CommandError(f"--workers must be at least 1, got {workers}")
        stream, name = options["stream"], options["consumer"]
        try:
            consumer = get_jetstream().consumer(stream, name)
        except (errors.StreamNotFoundError, errors.ConsumerNotFoundError) as exc:
            raise CommandError(f"{stream}/{name}: {exc}") from exc
        except (errors.InvalidArgumentError, errors.InvalidTypeError) as exc:
            raise CommandError(str(exc)) from exc

        try:
            run_until_signalled(
                consumer,
                settling(handler, nak_delay=options["nak_delay"]),
                workers=workers,
                max_messages=options["max_messages"],
                drain_timeout=options["drain_timeout"],
                say=self._say,
            )
        except CommandFailed as exc:
            raise CommandError(str(exc)) from exc

    def _say(self, text: str) -> None:
        self.stdout.write(text)
        self.stdout.flush()

    def _handler(self, path: str) -> Callable[[Msg], object]:
        try:
            handler = import_string(path)
        except ImportError as exc:
            raise CommandError(f"--handler {path!r} cannot be imported: {exc}") from exc
        if not callable(handler):
            raise CommandError(f"--handler {path!r} is a {type(handler).__name__}, not a function")
        return handler  # type: ignore[no-any-return]
