"""ConnectOptions: everything a connection is made with, defined and validated once.

``connect(url, name=..., timeout=...)`` and ``Client(ConnectOptions(...))`` build the same object, so both
validate alike: every bad value raises a typed error naming the option before any thread starts or any byte
is sent. Secrets (password, token, nkey seed, credentials in URLs) are kept out of ``repr()`` and logs.
"""

from __future__ import annotations

import asyncio
import os
import ssl
from collections.abc import Callable, Sequence
from typing import Any

import attrs

from . import errors
from ._runtime import redact_url
from ._validate import MAX_INBOX_PREFIX, check_subject, to_seconds

__all__ = ["DEFAULT_URL", "ConnectOptions", "ErrorCallback", "EventCallback"]

DEFAULT_URL = "nats://127.0.0.1:4222"
DEFAULT_PENDING_SIZE = 2 * 1024 * 1024

#: error_callback(exc): asynchronous errors (slow consumer, permission violation, ...), on the callbacks thread
ErrorCallback = Callable[[BaseException], object]
#: disconnected/reconnected/closed callbacks, on the callbacks thread
EventCallback = Callable[[], object]


def _servers(value: object) -> tuple[str, ...]:
    servers = (value,) if isinstance(value, str) else tuple(value) if isinstance(value, Sequence) else ()
    if not servers:
        raise errors.InvalidArgumentError("servers", f"must be a URL or a list of URLs, got {_shown(value)}")
    for index, server in enumerate(servers):
        if not isinstance(server, str) or not server.strip():
            # only the faulty entry is shown, and never another entry's credentials
            raise errors.InvalidArgumentError(
                "servers", f"entry {index} must be a non-empty URL string, got {_shown(server)}"
            )
    return servers


def _shown(value: object) -> str:
    """``value`` for an error message, with credentials in a URL (``user:password@``, ``token@``) redacted."""
    if isinstance(value, str):
        return repr(redact_url(value))
    if isinstance(value, Sequence):
        return f"a {type(value).__name__} of {len(value)}"
    return type(value).__name__


def _existing_file(field: str, value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, (str, os.PathLike)):
        raise errors.InvalidTypeError(field, f"must be a path, got {type(value).__name__}")
    path = os.fspath(value)
    if not isinstance(path, str) or not os.path.isfile(path):
        raise errors.InvalidArgumentError(field, f"file {path!r} does not exist")
    return path


def _credentials(value: object) -> str | None:
    """A .creds file holding a user JWT and its seed (what ``nsc`` writes); checked by its markers only, so no
    secret is read into a message. A seed alone belongs in ``nkey_seed_file``."""
    path = _existing_file("credentials", value)
    if path is None:
        return None
    try:
        with open(path, "rb") as file:
            text = file.read()
    except OSError as exc:
        raise errors.InvalidArgumentError("credentials", f"file {path!r} cannot be read: {exc.strerror}") from None
    if b"BEGIN NATS USER JWT" not in text:
        hint = "; a file with only a seed goes in nkey_seed_file=" if b"BEGIN USER NKEY SEED" in text else ""
        raise errors.InvalidArgumentError(
            "credentials", f"file {path!r} holds no user JWT (-----BEGIN NATS USER JWT-----){hint}"
        )
    if b"BEGIN USER NKEY SEED" not in text:
        raise errors.InvalidArgumentError(
            "credentials", f"file {path!r} holds no user seed (-----BEGIN USER NKEY SEED-----)"
        )
    return path


def _nkey_seed_file(value: object) -> str | None:
    return _existing_file("nkey_seed_file", value)


def _optional_text(_inst: object, attr: attrs.Attribute[Any], value: object) -> None:
    if value is not None and not isinstance(value, str):
        raise errors.InvalidTypeError(attr.name, f"must be a str or None, got {type(value).__name__}")


def _connect_timeout(value: object) -> float:
    return to_seconds("connect_timeout", value)


def _reconnect_wait(value: object) -> float:
    return to_seconds("reconnect_wait", value, allow_zero=True)


def _ping_interval(value: object) -> float:
    return to_seconds("ping_interval", value)


def _timeout(value: object) -> float:
    return to_seconds("timeout", value)


def _inbox_prefix(value: object) -> str:
    """Every reply subject starts with it, so it is kept short enough for any protocol line to fit."""
    prefix = check_subject("inbox_prefix", value)
    size = len(prefix.encode())
    if size > MAX_INBOX_PREFIX:
        raise errors.InvalidArgumentError(
            "inbox_prefix", f"is {size} bytes; at most {MAX_INBOX_PREFIX} (every reply subject starts with it)"
        )
    return prefix


def _int(minimum: int | None, hint: str) -> Callable[[object, attrs.Attribute[Any], object], None]:
    def check(_inst: object, attr: attrs.Attribute[Any], value: object) -> None:
        if isinstance(value, bool) or not isinstance(value, int):
            raise errors.InvalidTypeError(attr.name, f"must be an int{hint}, got {type(value).__name__}")
        if minimum is not None and value < minimum:
            raise errors.InvalidArgumentError(attr.name, f"must be an int >= {minimum}, got {value}")

    return check


def _tls(_inst: object, attr: attrs.Attribute[Any], value: object) -> None:
    if value is not None and not isinstance(value, ssl.SSLContext):
        raise errors.InvalidTypeError(attr.name, f"must be an ssl.SSLContext, got {type(value).__name__}")


def _callback(_inst: object, attr: attrs.Attribute[Any], value: object) -> None:
    if value is None:
        return
    if not callable(value):
        raise errors.InvalidTypeError(attr.name, "must be callable")
    if asyncio.iscoroutinefunction(value):
        raise errors.InvalidTypeError(attr.name, "must be a plain function; jetstream_sync runs no user coroutines")


@attrs.frozen(kw_only=True)
class ConnectOptions:
    """Everything :func:`jetstream_sync.connect` accepts, validated on construction.

    ``timeout`` is the default for blocking calls that are not given one. Callbacks run one at a time, in the
    order of their events, on the client's callbacks thread ("jetstream-sync-callbacks"), never on the IO or
    the watchdog thread: a callback that blocks delays only later callbacks, never the connection, heartbeat
    checks or ``close()`` (which waits for it half a second at most; past 10,000 waiting, new callbacks are
    dropped and counted in ``client.stats["callbacks_dropped"]``). ``max_reconnect_attempts=-1`` reconnects
    forever. The first connect fails fast (each server tried at most twice); the reconnect policy applies once
    connected.
    """

    servers: tuple[str, ...] = attrs.field(
        default=(DEFAULT_URL,), converter=_servers, repr=lambda servers: repr(tuple(map(redact_url, servers)))
    )
    name: str | None = attrs.field(default=None, validator=_optional_text)
    user: str | None = attrs.field(default=None, validator=_optional_text)
    password: str | None = attrs.field(default=None, validator=_optional_text, repr=False)
    token: str | None = attrs.field(default=None, validator=_optional_text, repr=False)
    credentials: str | None = attrs.field(default=None, converter=_credentials)
    nkey_seed: str | None = attrs.field(default=None, validator=_optional_text, repr=False)
    nkey_seed_file: str | None = attrs.field(default=None, converter=_nkey_seed_file)
    tls: ssl.SSLContext | None = attrs.field(default=None, validator=_tls)
    tls_hostname: str | None = attrs.field(default=None, validator=_optional_text)
    connect_timeout: float = attrs.field(default=2.0, converter=_connect_timeout)
    allow_reconnect: bool = attrs.field(default=True, converter=bool)
    max_reconnect_attempts: int = attrs.field(default=60, validator=_int(None, " (-1 for forever)"))
    reconnect_wait: float = attrs.field(default=2.0, converter=_reconnect_wait)
    ping_interval: float = attrs.field(default=120.0, converter=_ping_interval)
    max_outstanding_pings: int = attrs.field(default=2, validator=_int(1, ""))
    pending_size: int = attrs.field(default=DEFAULT_PENDING_SIZE, validator=_int(0, ""))
    inbox_prefix: str = attrs.field(default="_INBOX", converter=_inbox_prefix)
    no_echo: bool = attrs.field(default=False, converter=bool)
    timeout: float = attrs.field(default=5.0, converter=_timeout)
    error_callback: ErrorCallback | None = attrs.field(default=None, validator=_callback)
    disconnected_callback: EventCallback | None = attrs.field(default=None, validator=_callback)
    reconnected_callback: EventCallback | None = attrs.field(default=None, validator=_callback)
    closed_callback: EventCallback | None = attrs.field(default=None, validator=_callback)

    def __attrs_post_init__(self) -> None:
        if self.user is None and self.password is not None:
            raise errors.InvalidArgumentError("password", "given without user")

    @property
    def default_timeout(self) -> float:
        """The same as ``timeout``: the default for blocking calls (the name earlier releases used)."""
        return self.timeout

    def nkey_field(self) -> str:
        """The option that made nats-py use nkeys, for error messages."""
        if self.credentials is not None:
            return "credentials"
        return "nkey_seed" if self.nkey_seed is not None else "nkey_seed_file"
