"""ConnectionSettings: how an integration connects, as plain hashable values read from a framework's settings.

Flask, Django and Spark all hold connection settings in places that outlive a connection (a config dict, a
settings module, Spark's options) and connect later, in whatever process ends up doing the work: a gunicorn
worker forked after the app was created, a Spark executor. So the settings are kept as file paths and
strings (an ``ssl.SSLContext`` neither pickles nor hashes), hash as the key of the per-process client cache
(``_clients.process_client``), and become a client only in
[`ConnectionSettings.connect`][jetstream_sync.integrations.ConnectionSettings.connect], the one connect implementation
the integrations share.

[`ConnectionSettings.from_mapping`][jetstream_sync.integrations.ConnectionSettings.from_mapping] reads a framework's
settings dict (``JETSTREAM = {"SERVERS": ...}`` in Django, ``JETSTREAM_SERVERS`` in Flask's config) and checks
everything a connect would, up front, so a bad setting fails when the app starts, naming the setting as the user wrote
it, rather than in the first request.
"""

from __future__ import annotations

import logging
import os
import ssl
from collections.abc import Mapping, Sequence
from typing import ClassVar

import attrs

from .. import errors
from .._runtime import redact_url
from .._validate import to_seconds
from ..client import Client
from ..options import ConnectOptions, parse_servers

__all__ = ["SETTING_KEYS", "ConnectionSettings", "redacted"]

log = logging.getLogger("jetstream_sync.integrations")

#: The keys `ConnectionSettings.from_mapping` reads, each naming the field of the same name in lower case.
SETTING_KEYS: tuple[str, ...] = (
    "SERVERS",
    "NAME",
    "USER",
    "PASSWORD",
    "TOKEN",
    "CREDENTIALS",
    "NKEY_SEED_FILE",
    "TLS_CA_FILE",
    "TLS_CERT_FILE",
    "TLS_KEY_FILE",
    "TLS_HOSTNAME",
    "CONNECT_TIMEOUT",
    "TIMEOUT",
    "CREDENTIALS_DATA",
    "TLS_HANDSHAKE_FIRST",
    "RETRY_ON_FAILED_CONNECT",
    "FIRST_CONNECT_WAIT",
    "MAX_RECONNECT_ATTEMPTS",
    "RECONNECT_WAIT",
)
_TEXT_KEYS = ("NAME", "USER", "PASSWORD", "TOKEN", "TLS_HOSTNAME", "CREDENTIALS_DATA")
_SECRET_KEYS = ("PASSWORD", "TOKEN", "CREDENTIALS_DATA")  # kept as given (a secret may end in a space)
_FILE_KEYS = ("CREDENTIALS", "NKEY_SEED_FILE", "TLS_CA_FILE", "TLS_CERT_FILE", "TLS_KEY_FILE")
_SECONDS_KEYS = ("CONNECT_TIMEOUT", "TIMEOUT", "RECONNECT_WAIT")
_BOOL_KEYS = ("TLS_HANDSHAKE_FIRST", "RETRY_ON_FAILED_CONNECT")


def redacted(servers: Sequence[str]) -> str:
    """The server URLs for messages and logs, without user:password@ or token@."""
    return ", ".join(redact_url(url) for url in servers)


def _server_tuple(value: str | Sequence[str]) -> tuple[str, ...]:
    """A tuple whatever sequence was given, so that the settings stay hashable (a list would not be)."""
    return (value,) if isinstance(value, str) else tuple(value)


def _renamed(exc: errors.InvalidArgumentError | errors.InvalidTypeError, field: str) -> errors.JetStreamError:
    """The same error naming ``field`` (the setting as the user wrote it) instead of the attribute."""
    message = str(exc).removeprefix(f"{exc.field}: ")
    return type(exc)(field, message)


@attrs.frozen(kw_only=True)
class ConnectionSettings:
    """How an integration connects: hashable (it keys the per-process client cache), secrets out of repr().

    Only values that survive a fork, a pickle and a hash are kept: file paths rather than an SSLContext,
    which [`tls_context`][jetstream_sync.integrations.ConnectionSettings.tls_context] builds where the connection is
    made. Build it directly, or from a framework's settings dict with
    [`from_mapping`][jetstream_sync.integrations.ConnectionSettings.from_mapping], which checks every value first.
    ``timeout`` is the default of the client's blocking calls; ``connect_timeout`` bounds each connection attempt.

    A worker that may start before NATS (Kubernetes starts pods in any order) sets ``retry_on_failed_connect``:
    the client is made at once and connects in the background, with ``max_reconnect_attempts`` (-1: forever)
    and ``reconnect_wait`` as its policy. A web worker (gunicorn, Django, Flask) leaves ``first_connect_wait``
    at 0: it serves requests meanwhile, publishes are buffered and requests time out. A worker that can do
    nothing without NATS (a Celery or consume worker) sets ``first_connect_wait`` (seconds) so that its first
    use waits for the connection, and fails, letting the orchestrator restart it, if none came by then.
    ``credentials_data`` is the text of a .creds file, from an environment variable or a secret manager.
    """

    #: What each field is called where the user wrote it, for error messages; a subclass (Spark's camelCase
    #: ConnectionOptions) renames. A field missing here is named as the attribute.
    option_names: ClassVar[Mapping[str, str]] = {}

    servers: tuple[str, ...] = attrs.field(converter=_server_tuple, repr=lambda servers: repr(redacted(servers)))
    name: str | None = None
    user: str | None = None
    password: str | None = attrs.field(default=None, repr=False)
    token: str | None = attrs.field(default=None, repr=False)
    credentials: str | None = None
    nkey_seed_file: str | None = None
    tls_ca_file: str | None = None
    tls_cert_file: str | None = None
    tls_key_file: str | None = None
    tls_hostname: str | None = None
    connect_timeout: float = 5.0
    timeout: float = 10.0
    credentials_data: str | None = attrs.field(default=None, repr=False)
    tls_handshake_first: bool = False
    retry_on_failed_connect: bool = False
    first_connect_wait: float = 0.0
    max_reconnect_attempts: int = 60
    reconnect_wait: float = 2.0

    @classmethod
    def from_mapping(cls, mapping: Mapping[str, object], *, source: str, prefix: str = "") -> ConnectionSettings:
        """Read a framework's settings dict: ``{"SERVERS": ..., "CREDENTIALS": ..., "TIMEOUT": ...}``.

        The keys are `SETTING_KEYS` (upper case, as Flask and Django settings are); ``SERVERS`` is
        required: a URL, a comma-separated string of URLs or a list of them. A ``None`` value counts as not
        set (``os.environ.get`` of a missing variable). Files must exist, timeouts are positive seconds (int,
        float or timedelta), and the whole is checked as a connect would check it (credentials files, TLS
        files loaded into a context), so nothing is left to fail on first use.

        ``source`` names the mapping in errors: ``source="JETSTREAM"`` reports ``JETSTREAM['SERVERS']``.
        With ``prefix`` (Flask's ``JETSTREAM_``) the keys are read as ``prefix + KEY`` from a mapping that
        holds other settings too, and only the keys starting with the prefix are checked.

        Raises [`InvalidArgumentError`][jetstream_sync.errors.InvalidArgumentError] or
        [`InvalidTypeError`][jetstream_sync.errors.InvalidTypeError] whose ``field`` is that name, saying what to do.
        """
        if not isinstance(mapping, Mapping):
            raise errors.InvalidTypeError(
                source,
                f"must be a dict of connection settings ({', '.join(SETTING_KEYS)}), got {type(mapping).__name__}",
            )

        def label(key: str) -> str:
            return f"{source}[{prefix + key!r}]"

        values: dict[str, object] = {}
        for raw_key, value in mapping.items():
            if not isinstance(raw_key, str):
                raise errors.InvalidTypeError(source, f"setting names must be strings, got {raw_key!r}")
            if not raw_key.startswith(prefix):
                continue
            key = raw_key[len(prefix) :]
            if key not in SETTING_KEYS:
                hint = f"settings are upper case: {prefix + key.upper()!r}" if key.upper() in SETTING_KEYS else ""
                known = ", ".join(prefix + k for k in SETTING_KEYS)
                raise errors.InvalidArgumentError(
                    label(key), f"is not a connection setting; {hint or 'remove it or fix the name'} (known: {known})"
                )
            if value is not None:
                values[key] = value
        if "SERVERS" not in values:
            raise errors.InvalidArgumentError(
                label("SERVERS"), "is required: the NATS URL, e.g. 'nats://127.0.0.1:4222', or a list of URLs"
            )
        fields: dict[str, object] = {"servers": parse_servers(label("SERVERS"), values.pop("SERVERS"))}
        for key, value in values.items():
            if key in _TEXT_KEYS:
                fields[key.lower()] = _text(label(key), value, strip=key not in _SECRET_KEYS)
            elif key in _FILE_KEYS:
                fields[key.lower()] = _file(label(key), value)
            elif key in _SECONDS_KEYS:
                fields[key.lower()] = to_seconds(label(key), value, allow_zero=key == "RECONNECT_WAIT")
            elif key in _BOOL_KEYS:
                fields[key.lower()] = _flag(label(key), value)
            elif key == "FIRST_CONNECT_WAIT":
                fields["first_connect_wait"] = to_seconds(label(key), value, allow_zero=True)
            elif key == "MAX_RECONNECT_ATTEMPTS":
                fields["max_reconnect_attempts"] = _attempts(label(key), value)
        for lone, needs in (("PASSWORD", "USER"), ("TLS_KEY_FILE", "TLS_CERT_FILE")):
            if lone in values and needs not in values:
                raise errors.InvalidArgumentError(label(lone), f"is set without {prefix + needs}; set both or neither")
        for first, second in (("TOKEN", "USER"), ("CREDENTIALS", "NKEY_SEED_FILE")):
            if first in values and second in values:
                raise errors.InvalidArgumentError(
                    label(first), f"and {prefix + second} are two ways to authenticate; keep one of them"
                )
        settings = cls(**fields)  # type: ignore[arg-type]
        try:
            settings.connect_options()
        except (errors.InvalidArgumentError, errors.InvalidTypeError) as exc:
            raise _renamed(exc, label(exc.field.upper())) from None
        return settings

    def option_name(self, field: str) -> str:
        """``field`` (an attribute name) as the user spelled it, for error messages."""
        return self.option_names.get(field, field)

    def tls_context(self) -> ssl.SSLContext | None:
        """The TLS context of the CA and client certificate files, or None when neither is set (a ``tls://``
        URL then verifies with the system's CAs). Built where the connection is made: it neither pickles nor
        hashes. A missing or unreadable file raises InvalidArgumentError naming the attribute."""
        if self.tls_ca_file is None and self.tls_cert_file is None:
            return None
        for field in ("tls_ca_file", "tls_cert_file", "tls_key_file"):
            path = getattr(self, field)
            if path is not None and not os.path.isfile(path):
                raise errors.InvalidArgumentError(field, f"file {path!r} does not exist on this machine")
        try:
            context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=self.tls_ca_file)
        except ssl.SSLError as exc:
            raise errors.InvalidArgumentError("tls_ca_file", f"holds no usable CA certificate: {exc}") from None
        if self.tls_cert_file is not None:
            try:
                context.load_cert_chain(self.tls_cert_file, self.tls_key_file)
            except ssl.SSLError as exc:
                raise errors.InvalidArgumentError(
                    "tls_cert_file", f"and its key are not a usable certificate and private key: {exc}"
                ) from None
        return context

    def connect_options(self) -> ConnectOptions:
        """The [`ConnectOptions`][jetstream_sync.ConnectOptions] these settings stand for, validated (naming
        attributes)."""
        return ConnectOptions(
            servers=self.servers,
            name=self.name,
            user=self.user,
            password=self.password,
            token=self.token,
            credentials=self.credentials,
            nkey_seed_file=self.nkey_seed_file,
            tls=self.tls_context(),
            tls_hostname=self.tls_hostname,
            connect_timeout=self.connect_timeout,
            timeout=self.timeout,
            credentials_data=self.credentials_data,
            tls_handshake_first=self.tls_handshake_first,
            retry_on_failed_connect=self.retry_on_failed_connect,
            first_connect_wait=self.first_connect_wait,
            max_reconnect_attempts=self.max_reconnect_attempts,
            reconnect_wait=self.reconnect_wait,
        )

    def connect(self) -> Client:
        """A new connected client (each call makes one; integrations share them through ``process_client``).

        A bad value raises InvalidArgumentError naming the option as the user wrote it; a refused connection
        raises what [`jetstream_sync.connect`][jetstream_sync.connect] raises (NoServersError, AuthorizationError)."""
        try:
            options = self.connect_options()
        except (errors.InvalidArgumentError, errors.InvalidTypeError) as exc:
            raise _renamed(exc, self.option_name(exc.field)) from None
        log.debug("connecting to %s", redacted(self.servers))
        return Client(options)


def _text(field: str, value: object, *, strip: bool) -> str:
    if not isinstance(value, str):
        raise errors.InvalidTypeError(field, f"must be a string, got {type(value).__name__}")
    text = value.strip() if strip else value
    if not text.strip():
        raise errors.InvalidArgumentError(field, "must not be empty; leave it out (or None) to not set it")
    return text


def _flag(field: str, value: object) -> bool:
    """A yes/no setting: True or False (read an environment variable into a bool in the settings file)."""
    if isinstance(value, bool):
        return value
    raise errors.InvalidTypeError(field, f"must be True or False, got {type(value).__name__}")


def _attempts(field: str, value: object) -> int:
    """A number of attempts: an int, -1 for forever."""
    if isinstance(value, bool) or not isinstance(value, int) or value < -1:
        raise errors.InvalidArgumentError(field, f"must be an int >= -1 (-1: forever), got {value!r}")
    return value


def _file(field: str, value: object) -> str:
    if not isinstance(value, (str, os.PathLike)):
        raise errors.InvalidTypeError(field, f"must be a file path (str or Path), got {type(value).__name__}")
    path = os.fspath(value)
    if not isinstance(path, str) or not path.strip():
        raise errors.InvalidArgumentError(field, "must be a file path; leave it out (or None) to not set it")
    if not os.path.isfile(path):
        where = "" if os.path.isabs(path) else f" (relative to the working directory {os.getcwd()!r})"
        raise errors.InvalidArgumentError(field, f"file {path!r} does not exist{where}; give an existing file")
    return path
