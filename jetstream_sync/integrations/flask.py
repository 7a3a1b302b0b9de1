"""The Flask extension: ``JETSTREAM_*`` settings, one client per worker process, ``flask jetstream consume`` and
``flask jetstream service``.

Install with ``pip install 'jetstream-sync[flask]'``::

    from jetstream_sync.integrations.flask import JetStream

    jetstream = JetStream()                                  # or JetStream(app)

    def create_app() -> Flask:
        app = Flask(__name__)
        app.config["JETSTREAM_SERVERS"] = "nats://127.0.0.1:4222"
        jetstream.init_app(app)                              # checks the settings; connects nothing

        @app.post("/orders")
        def new_order():
            ack = jetstream.js.publish("orders.new", request.get_data())
            return {"seq": ack.seq}

        return app

Settings are the keys of `jetstream_sync.integrations.SETTING_KEYS` with the prefix ``JETSTREAM_``:
``JETSTREAM_SERVERS`` (required: a URL, a comma-separated string or a list), ``JETSTREAM_NAME`` (default:
the app's import name), ``JETSTREAM_USER``/``JETSTREAM_PASSWORD``, ``JETSTREAM_TOKEN``,
``JETSTREAM_CREDENTIALS``, ``JETSTREAM_NKEY_SEED_FILE``, ``JETSTREAM_TLS_CA_FILE``,
``JETSTREAM_TLS_CERT_FILE``, ``JETSTREAM_TLS_KEY_FILE``, ``JETSTREAM_TLS_HOSTNAME``,
``JETSTREAM_CONNECT_TIMEOUT`` and ``JETSTREAM_TIMEOUT`` (seconds). ``app.config.from_prefixed_env()`` reads
them from ``FLASK_JETSTREAM_SERVERS`` and so on.
[`JetStream.init_app`][jetstream_sync.integrations.flask.JetStream.init_app] checks them all, so a bad setting fails
when the app is created, naming it (``app.config['JETSTREAM_TIMEOUT']: must be > 0 seconds``).

Nothing connects in ``init_app``: gunicorn and uWSGI create the app and then fork their workers, and a client
inherited through fork() is unusable. The client is made on first use, in the worker that uses it, by
[`jetstream_sync.integrations.process_client`][jetstream_sync.integrations.process_client] (one per process and
settings, shared by the worker's threads, closed when the process exits). Several apps, each with its own settings, may
share one extension object: each app's settings live in ``app.extensions["jetstream"]`` and the current app's are used.

The command group ``flask jetstream`` is registered on the app; see
[`consume_command`][jetstream_sync.integrations.flask.consume_command] and
[`service_command`][jetstream_sync.integrations.flask.service_command] (a NATS service of
[`jetstream_sync.services`][jetstream_sync.services], each handler in the app's context).
"""

from __future__ import annotations

import importlib
import logging
import threading
import weakref
from collections.abc import Callable

import attrs
import click
from flask import Flask, current_app, has_app_context
from flask.cli import AppGroup

from .. import errors
from .._runtime import after_fork
from ..client import Client
from ..jetstream import JetStream as JetStreamContext
from ..message import Msg
from ._clients import process_client
from ._connection import ConnectionSettings
from ._consume import CommandFailed, run_until_signalled, settling
from ._service import load_service, run_service_until_signalled

__all__ = [
    "CONFIG_PREFIX",
    "EXTENSION_KEY",
    "JetStream",
    "acking",
    "cli",
    "consume_command",
    "import_handler",
    "service_command",
    "settings_of",
]

log = logging.getLogger("jetstream_sync.flask")

#: where `JetStream.init_app` keeps an app's settings: ``app.extensions["jetstream"]``
EXTENSION_KEY = "jetstream"
#: Flask config keys carry this prefix before the names of ``SETTING_KEYS``
CONFIG_PREFIX = "JETSTREAM_"

_contexts_lock = threading.Lock()
# One JetStream context per client, so publish_async_complete() sees the publishes of the whole process;
# weak, so a closed and forgotten client takes its context with it.
_contexts: weakref.WeakKeyDictionary[Client, JetStreamContext] = weakref.WeakKeyDictionary()


def _fresh_after_fork() -> None:
    """In a forked worker: a new lock (one a request thread held at the fork would stay held) and no contexts
    of the parent's clients, which the worker cannot use."""
    global _contexts_lock, _contexts
    _contexts_lock = threading.Lock()
    _contexts = weakref.WeakKeyDictionary()


after_fork(_fresh_after_fork)


def settings_of(app: Flask) -> ConnectionSettings:
    """The connection settings [`JetStream.init_app`][jetstream_sync.integrations.flask.JetStream.init_app] checked for
    ``app``; RuntimeError if it was not run."""
    settings = app.extensions.get(EXTENSION_KEY)
    if not isinstance(settings, ConnectionSettings):
        raise RuntimeError(
            f"the JetStream extension is not initialised on app {app.import_name!r}: call jetstream.init_app(app)"
        )
    return settings


class JetStream:
    """The Flask extension: ``JetStream(app)``, or ``JetStream()`` then ``init_app(app)`` in an app factory.

    [`client`][jetstream_sync.integrations.flask.JetStream.client] and
    [`js`][jetstream_sync.integrations.flask.JetStream.js] belong to the current app (inside a request, a CLI command or
    an ``app.app_context()``). Outside any app context they fall back to the app given to the constructor, so a
    background thread of a single-app program can use them too; with ``init_app`` only, they need an app context, as
    Flask's own ``current_app`` does.
    """

    def __init__(self, app: Flask | None = None) -> None:
        self._app = app
        if app is not None:
            self.init_app(app)

    def init_app(self, app: Flask) -> None:
        """Check ``app.config``'s ``JETSTREAM_*`` settings, keep them in ``app.extensions["jetstream"]`` and
        register the ``flask jetstream`` commands. Connects nothing (see the module's documentation).

        Raises InvalidArgumentError or InvalidTypeError naming the setting, e.g.
        ``app.config['JETSTREAM_SERVERS']: is required``.
        """
        settings = ConnectionSettings.from_mapping(app.config, source="app.config", prefix=CONFIG_PREFIX)
        if settings.name is None:  # the server's connection list then shows which app a connection is
            settings = attrs.evolve(settings, name=app.import_name)
        app.extensions[EXTENSION_KEY] = settings
        app.cli.add_command(cli)

    def _current_app(self) -> Flask:
        if has_app_context():
            return current_app._get_current_object()  # type: ignore[attr-defined,no-any-return]
        if self._app is not None:
            return self._app
        raise RuntimeError(
            "jetstream.client needs an app: use it inside a request, a CLI command or `with app.app_context():`,"
            " or create the extension with JetStream(app)"
        )

    @property
    def settings(self) -> ConnectionSettings:
        """The current app's connection settings (as checked by ``init_app``)."""
        return settings_of(self._current_app())

    @property
    def client(self) -> Client:
        """This process's client for the current app's settings, connected on first use (in this process:
        a worker forked after the app was created makes its own). Shared by every thread of the process."""
        return process_client(self.settings)

    @property
    def js(self) -> JetStreamContext:
        """A JetStream context of [`client`][jetstream_sync.integrations.flask.JetStream.client], one per client (so
        ``publish_async_complete`` covers every publish_async of the process)."""
        client = self.client  # process_client ran check_process: after a C-level fork the lock is new
        with _contexts_lock:
            context = _contexts.get(client)
            if context is None:
                context = _contexts[client] = client.jetstream()
            return context


def import_handler(path: str) -> Callable[[Msg], object]:
    """The function named by ``path``, ``package.module:function`` (the function may be dotted:
    ``module:Class.method``). Raises click.BadParameter saying what is wrong, for ``--handler``."""
    module_name, colon, attribute = path.partition(":")
    if not colon or not module_name or not attribute:
        raise click.BadParameter(f"{path!r} is not of the form package.module:function", param_hint="'--handler'")
    try:
        target: object = importlib.import_module(module_name)
    except ImportError as exc:
        raise click.BadParameter(f"cannot import {module_name!r}: {exc}", param_hint="'--handler'") from None
    for part in attribute.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise click.BadParameter(f"{module_name!r} has no {attribute!r}", param_hint="'--handler'") from None
    if not callable(target):
        raise click.BadParameter(f"{path!r} is a {type(target).__name__}, not a function", param_hint="'--handler'")
    return target


def acking(handler: Callable[[Msg], object], app: Flask, nak_delay: float | None = None) -> Callable[[Msg], object]:
    """``handler`` run inside ``app``'s app context, acking for it: a message the handler left unacknowledged
    is acked when the handler returns and nak'ed (redelivered, after ``nak_delay`` seconds when given) when it
    raises; the exception then goes on to the consume's error handler. A handler that acked, nak'ed, termed
    it itself, or a consumer with ``AckPolicy.NONE``, gets nothing more sent."""
    return settling(handler, nak_delay=nak_delay, around=app.app_context, reraise=True)


cli = AppGroup("jetstream", help="JetStream commands of the jetstream-sync extension.")


@cli.command("consume")
@click.argument("stream")
@click.argument("consumer")
@click.option("--handler", "handler_path", required=True, help="The function run for each message: pkg.mod:func.")
@click.option("--workers", type=click.IntRange(min=1), default=1, show_default=True, help="Handler threads.")
@click.option(
    "--max-messages",
    type=click.IntRange(min=1),
    default=None,
    help="Messages pulled ahead and buffered (consume()'s max_messages; default 500).",
)
@click.option(
    "--nak-delay",
    type=click.FloatRange(min=0),
    default=None,
    help="Seconds before a message whose handler raised is redelivered (default: at once).",
)
@click.option(
    "--drain-timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=30.0,
    show_default=True,
    help="Seconds a drain may take after SIGTERM or SIGINT before the consume is stopped.",
)
def consume_command(
    stream: str,
    consumer: str,
    handler_path: str,
    workers: int,
    max_messages: int | None,
    nak_delay: float | None,
    drain_timeout: float,
) -> None:
    """Run HANDLER for every message of the durable pull consumer CONSUMER of STREAM, until SIGTERM or SIGINT.

    The handler gets the message (jetstream_sync.Msg) inside the app's context. A message it leaves
    unacknowledged is acked when it returns and nak'ed when it raises (logged; redelivered, after
    --nak-delay). SIGTERM or SIGINT drains: no more pulls, the buffered messages are handled, acks are
    flushed to the server, exit 0; a drain longer than --drain-timeout exits 1 (what is left is redelivered).
    Logs go to stderr at INFO unless the app configured logging. A second signal stops at once (the messages
    in hand finish; buffered ones are redelivered later). The consumer must exist; this command creates nothing.
    """
    handler = import_handler(handler_path)
    if not logging.getLogger().handlers:  # a worker's log is its output; an app that set up logging keeps its own
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    app: Flask = current_app._get_current_object()  # type: ignore[attr-defined]
    try:
        handle = process_client(settings_of(app)).jetstream().consumer(stream, consumer)
    except errors.JetStreamError as exc:
        raise click.ClickException(f"cannot consume {stream}/{consumer}: {exc}") from None

    def on_error(exc: BaseException) -> None:
        if isinstance(exc, errors.JetStreamError):
            log.warning("consume %s/%s: %s", stream, consumer, exc)
        else:
            log.error("consume %s/%s: the handler raised", stream, consumer, exc_info=exc)

    try:
        run_until_signalled(
            handle,
            acking(handler, app, nak_delay),
            workers=workers,
            max_messages=max_messages,
            drain_timeout=drain_timeout,
            say=lambda text: click.echo(text, err=True),
            error_handler=on_error,
        )
    except CommandFailed as exc:
        raise click.ClickException(str(exc)) from None


@cli.command("service")
@click.argument("service_path", metavar="SERVICE")
@click.option("--workers", type=click.IntRange(min=1), default=None, help="Handler threads (default: the service's).")
@click.option(
    "--stop-timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=30.0,
    show_default=True,
    help="Seconds a graceful stop may take after SIGTERM or SIGINT.",
)
def service_command(service_path: str, workers: int | None, stop_timeout: float) -> None:
    """Run the NATS service SERVICE (pkg.mod:service, a jetstream_sync.services.Service or a function returning
    one) until SIGTERM or SIGINT.

    Each handler runs inside the app's context, on one of the service's worker threads. A handler's return value
    is the reply; a ServiceError it raises becomes the error headers; anything else is logged and answered 500.
    SIGTERM or SIGINT stops gracefully: no new requests, those taken are finished and answered, exit 0; a stop
    longer than --stop-timeout exits 1 (what still waits is answered 503). A second signal stops at once (exit 1).
    Logs go to stderr at INFO unless the app configured logging.
    """
    if not logging.getLogger().handlers:  # a worker's log is its output; an app that set up logging keeps its own
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    app: Flask = current_app._get_current_object()  # type: ignore[attr-defined]
    try:
        service = load_service(service_path)
    except CommandFailed as exc:
        raise click.BadParameter(str(exc), param_hint="'SERVICE'") from None
    try:
        client = process_client(settings_of(app))
    except errors.JetStreamError as exc:
        raise click.ClickException(f"cannot connect: {exc}") from None
    try:
        run_service_until_signalled(
            service,
            client,
            workers=workers,
            stop_timeout=stop_timeout,
            say=lambda text: click.echo(text, err=True),
            around=app.app_context,
        )
    except CommandFailed as exc:
        raise click.ClickException(str(exc)) from None
