"""The transport's settings, read from a ``kombu.Connection``: where to connect and how to lay out the queues.

Where to connect comes the way kombu's other transports take it: the URL's host and port (kombu parses it:
``jetstream://host:4222``, or ``jetstreams://`` for TLS, or any scheme with ``transport=``), more servers as
kombu's ``;``-separated alternates (kombu switches to the next when a connect fails; a connected client fails
over by itself to every server its cluster announces), ``userid`` and ``password``
(kombu's ``user``/``password`` arguments or the URL's), ``ssl`` (Celery's ``broker_use_ssl``: ``True``, or a
dict with ``ca_certs``, ``certfile``, ``keyfile``, ``server_hostname``), ``connect_timeout``, and the
connection keys of the other integrations in lower case in ``transport_options`` (``token``, ``credentials``,
``nkey_seed_file``, ``name``, ``timeout``, ``tls_hostname``). All of it becomes a
[`ConnectionSettings`][jetstream_sync.integrations.ConnectionSettings], so a process has one client per distinct
setting.

The layout options (``transport_options`` too, Celery's ``broker_transport_options``) are in
[`Options`][jetstream_sync.integrations.kombu.Options].
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from ... import errors
from .._connection import ConnectionSettings

__all__ = ["OPTION_KEYS", "Options", "connection_settings", "options_from"]

#: the ``transport_options`` keys that are connection settings (the integrations' keys in lower case)
_CONNECTION_KEYS = ("name", "token", "credentials", "nkey_seed_file", "tls_hostname", "timeout")
_DEFAULT_PORT = 4222


def _positive(_instance: object, attribute: attrs.Attribute[Any], value: float) -> None:
    if value <= 0:
        raise errors.InvalidArgumentError(f"transport_options[{attribute.name!r}]", f"must be positive, got {value}")


def _steps(value: object) -> tuple[int, ...]:
    if not isinstance(value, (list, tuple)) or not value:
        raise errors.InvalidArgumentError(
            "transport_options['priority_steps']", f"must be a non-empty list of 0-9, got {value!r}"
        )
    steps = sorted({int(step) for step in value})
    if steps[0] < 0 or steps[-1] > 9:
        raise errors.InvalidArgumentError("transport_options['priority_steps']", f"must lie in 0-9, got {value!r}")
    return tuple(steps)


@attrs.frozen(kw_only=True)
class Options:
    """The transport options of the layout (``transport_options`` / Celery's ``broker_transport_options``).

    - ``stream`` (``"KOMBU"``) and ``prefix`` (``"kombu"``): the stream and the subjects (``<prefix>.>``) it
      captures. Two apps on one account that must not see each other's queues use two of each.
    - ``replicas`` (1), ``storage`` (``"file"``), ``max_age`` (0: none), ``max_bytes`` (-1),
      ``duplicate_window`` (120 s: how long a retried publish is recognised): the stream's, on creation.
    - ``ack_wait`` (30 s): how long after a worker's last keep-alive its unacked messages are redelivered, so
      how soon the tasks of a worker that died run elsewhere. Not a limit on a task's run time or ETA: a live
      worker keeps its messages with in-progress acks every third of it.
    - ``max_deliver`` (20, as RabbitMQ's quorum queues): deliveries of one message before the server gives up on
      it (a poison task that kills its worker); -1 for no limit. See ``dead_letters``.
    - ``dead_letters`` (True): a durable queue's messages that reach ``max_deliver``, or are rejected without
      requeue, are moved to the ``<stream>_DEAD`` stream by the consuming workers (``jetstream_sync``'s dead
      letter mover), where an operator sees them (``nats stream view KOMBU_DEAD``).
    - ``priority_steps`` ([0, 3, 6, 9]): the priority bands of a queue declared with ``max_priority`` (kombu's 0-9
      scale, higher first, as AMQP and unlike Redis); a message's band is the highest step at or below its
      priority.
    - ``queue_expires`` (300 s): how long a non-durable or auto-delete queue with no ``expires`` of its own
      outlives its last reader (the consumer's ``inactive_threshold``). Celery's remote-control reply queues
      set 10 s themselves.
    - ``pull_expires`` (5 s), ``pull_batch`` (100), ``unlimited_prefetch`` (1000): how long one pull waits,
      the most one pull asks for, and what a channel without a prefetch limit holds at most.
    """

    stream: str = "KOMBU"
    prefix: str = "kombu"
    replicas: int = 1
    storage: str = "file"
    max_age: float = 0.0
    max_bytes: int = -1
    duplicate_window: float = attrs.field(default=120.0, validator=_positive)
    ack_wait: float = attrs.field(default=30.0, validator=_positive)
    max_deliver: int = 20
    dead_letters: bool = True
    priority_steps: tuple[int, ...] = attrs.field(default=(0, 3, 6, 9), converter=_steps)
    queue_expires: float = attrs.field(default=300.0, validator=_positive)
    pull_expires: float = attrs.field(default=5.0, validator=_positive)
    pull_batch: int = attrs.field(default=100, validator=_positive)
    unlimited_prefetch: int = attrs.field(default=1000, validator=_positive)

    @property
    def dead_stream(self) -> str:
        """The dead-letter stream: ``<stream>_DEAD``."""
        return f"{self.stream}_DEAD"

    @property
    def dead_prefix(self) -> str:
        """The dead-letter stream's subjects: ``<prefix>-dead.<consumer>``."""
        return f"{self.prefix}-dead"


#: every ``transport_options`` key the transport reads (kombu's own keys, such as ``max_retries``, pass)
OPTION_KEYS = tuple(a.name for a in attrs.fields(Options)) + _CONNECTION_KEYS
#: kombu's and Celery's own transport options, which are not ours to check
_KOMBU_KEYS = frozenset(
    {"max_retries", "interval_start", "interval_step", "interval_max", "confirm_publish", "polling_interval",
     "visibility_timeout", "fanout_prefix", "fanout_patterns", "global_keyprefix", "client_properties"}
)  # fmt: skip


def options_from(transport_options: Mapping[str, Any]) -> Options:
    """The layout options of ``transport_options``; an unknown key raises InvalidArgumentError naming it."""
    values: dict[str, Any] = {}
    for key, value in transport_options.items():
        if key in _KOMBU_KEYS or key in _CONNECTION_KEYS:
            continue
        if key not in OPTION_KEYS:
            raise errors.InvalidArgumentError(
                f"transport_options[{key!r}]",
                f"is not an option of the JetStream transport (known: {', '.join(sorted(OPTION_KEYS))})",
            )
        values[key] = value
    try:
        return Options(**values)
    except (TypeError, ValueError) as exc:
        if isinstance(exc, errors.JetStreamError):
            raise
        raise errors.InvalidArgumentError("transport_options", str(exc)) from None


def _server_urls(client: Any) -> list[str]:
    """The connection's current host and port. kombu's ``;`` alternates stay kombu's: it switches to the next
    when a connect fails (its ``failover_strategy``); once connected, the client fails over by itself to the
    servers its cluster announces."""
    tls = bool(client.ssl) or client.transport_cls == "jetstreams"
    return [f"{'tls' if tls else 'nats'}://{client.hostname or 'localhost'}:{client.port or _DEFAULT_PORT}"]


def connection_settings(client: Any) -> ConnectionSettings:
    """The [`ConnectionSettings`][jetstream_sync.integrations.ConnectionSettings] of a ``kombu.Connection`` (see the
    module docstring)."""
    options = client.transport_options or {}
    mapping: dict[str, Any] = {"SERVERS": _server_urls(client)}
    for key in _CONNECTION_KEYS:
        if options.get(key) is not None:
            mapping[key.upper()] = options[key]
    if client.userid:
        mapping["USER"] = client.userid
        mapping["PASSWORD"] = client.password
    if client.connect_timeout:
        mapping["CONNECT_TIMEOUT"] = client.connect_timeout
    ssl = client.ssl
    if isinstance(ssl, Mapping):
        for ours, kombus in (("TLS_CA_FILE", "ca_certs"), ("TLS_CERT_FILE", "certfile"), ("TLS_KEY_FILE", "keyfile"),
                             ("TLS_HOSTNAME", "server_hostname")):  # fmt: skip
            if ssl.get(kombus):
                mapping[ours] = ssl[kombus]
    return ConnectionSettings.from_mapping(mapping, source="kombu connection")
