"""ConnectOptions: everything a connection is made with, defined and validated once.

``connect(url, name=..., timeout=...)`` and ``Client(ConnectOptions(...))`` build the same object, so both
validate alike: every bad value raises a typed error naming the option before any thread starts or any byte
is sent. Secrets (password, token, nkey seed, credentials in URLs) are kept out of ``repr()`` and logs.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import re
import socket
import ssl
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from . import errors
from ._runtime import redact_url
from ._runtime._auth import split_credentials
from ._usage_errors import SERVER_SCHEMES
from ._validate import MAX_INBOX_PREFIX, check_subject, to_seconds

if TYPE_CHECKING:
    from .health import StatsCallback

__all__ = [
    "DEFAULT_URL",
    "ConnectOptions",
    "ErrorCallback",
    "EventCallback",
    "ReconnectDelayCallback",
    "SignatureCallback",
    "SocketFactory",
    "TextCallback",
    "UserInfoCallback",
]

DEFAULT_URL = "nats://127.0.0.1:4222"
DEFAULT_PENDING_SIZE = 2 * 1024 * 1024

#: error_callback(exc): asynchronous errors (slow consumer, permission violation, ...), on the callbacks thread
ErrorCallback = Callable[[BaseException], object]
#: connected/disconnected/reconnected/closed/discovered-servers callbacks, on the callbacks thread
EventCallback = Callable[[], object]
#: token_callback() and user_jwt_callback(): the token or the user JWT, read at every connection attempt
TextCallback = Callable[[], str]
#: user_info_callback(): ``(user, password)``, read at every connection attempt
UserInfoCallback = Callable[[], tuple[str, str]]
#: signature_callback(nonce): the raw 64-byte ed25519 signature of the server's nonce by the user's nkey
SignatureCallback = Callable[[bytes], bytes]
#: socket_factory(host, port, timeout): a connected stream socket for that server (nats.go's CustomDialer)
SocketFactory = Callable[[str, int, float], socket.socket]
#: reconnect_delay_callback(attempts): seconds to wait before trying a server again (nats.go's CustomReconnectDelay)
ReconnectDelayCallback = Callable[[int], float]

_WEBSOCKET = ("ws", "wss")
_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")  # an HTTP token (RFC 9110)
_NKEY_USER = re.compile(r"^U[A-Z2-7]{55}$")  # a user's public nkey: base32, 56 characters


def _scheme(url: str) -> str:
    return url.partition("://")[0].lower() if "://" in url else "nats"


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
    return parse_servers("servers", value)


def parse_servers(field: str, value: object) -> tuple[str, ...]:
    """The server URLs of ``connect(servers=...)`` and of the integrations' ``SERVERS`` setting, checked before
    any connection attempt: one URL, a comma-separated string of them (``"nats://a:4222,nats://b:4222"``, as an
    environment variable holds them) or a sequence. ``field`` names the argument in errors (InvalidTypeError,
    InvalidArgumentError; InvalidServerURLError for a URL no server can have, naming the accepted schemes)."""
    if isinstance(value, str):
        entries: list[object] = list(value.split(","))
    elif isinstance(value, Sequence) and not isinstance(value, (bytes, bytearray)):
        entries = list(value)
    else:
        raise errors.InvalidTypeError(field, f"must be a URL or a list of URLs, got {type(value).__name__}")
    servers: list[str] = []
    for index, entry in enumerate(entries):
        if not isinstance(entry, str):
            raise errors.InvalidTypeError(field, f"entry {index} must be a URL string, got {type(entry).__name__}")
        url = entry.strip()
        if not url:
            raise errors.InvalidArgumentError(field, f"entry {index} is empty; give URLs such as nats://host:4222")
        servers.append(_server_url(field, url))
    if not servers:
        raise errors.InvalidArgumentError(field, "lists no URL; give at least one, e.g. 'nats://127.0.0.1:4222'")
    return tuple(servers)


def _server_url(field: str, url: str) -> str:
    """``url`` when a client can connect to it (nats-py's rules: a known scheme, or ``host[:port]`` taken as
    ``nats://``); otherwise InvalidServerURLError, so that a typo is not reported later as a DNS failure."""
    scheme, sep, _rest = url.partition("://")
    shown = redact_url(url)
    if sep:
        if scheme.lower() not in SERVER_SCHEMES:
            raise errors.InvalidServerURLError(field, shown, scheme, f"has the scheme {scheme!r}")
        return f"{scheme.lower()}://{_rest}"  # nats-py knows the schemes in lower case only ("NATS://" was a DNS error)
    try:
        parsed = urllib.parse.urlsplit(f"nats://{url}")
        valid = bool(parsed.hostname) and not (parsed.path or parsed.query or parsed.fragment)
        valid = valid and (parsed.port is None or parsed.port > 0)  # .port: ValueError when not a number in range
    except ValueError:
        valid = False
    if not valid:
        head = url.partition(":")[0]
        found = head if ":" in url and head.isalpha() else ""
        raise errors.InvalidServerURLError(field, shown, found, "is not a server URL (no '://' after a scheme?)")
    return url


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


def _credentials_data(value: object) -> str | None:
    """The text of a .creds file (from an environment variable or a secret manager); checked by its blocks
    only, and never shown: the message says what is missing."""
    if value is None:
        return None
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    if not isinstance(value, str):
        raise errors.InvalidTypeError("credentials_data", f"must be a str (a .creds file's text), got {type(value)}")
    if split_credentials(value) is None:
        raise errors.InvalidArgumentError(
            "credentials_data",
            "holds no user JWT and seed: give the whole text of a .creds file (-----BEGIN NATS USER JWT----- ... "
            "-----BEGIN USER NKEY SEED----- ...)",
        )
    return value


def _ws_headers(value: object) -> tuple[tuple[str, tuple[str, ...]], ...] | None:
    """Websocket handshake headers as ``((name, (value, ...)), ...)``: hashable, and checked for what would
    break the HTTP request (a name that is not a token, CR or LF in a value)."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise errors.InvalidTypeError("ws_headers", f"must be a dict of header name to value(s), got {type(value)}")
    headers: list[tuple[str, tuple[str, ...]]] = []
    for name, values in value.items():
        if not isinstance(name, str) or not _HEADER_NAME.match(name):
            raise errors.InvalidArgumentError("ws_headers", f"{name!r} is not an HTTP header name")
        items = (values,) if isinstance(values, str) else tuple(values) if isinstance(values, Sequence) else None
        if not items or not all(isinstance(item, str) and "\r" not in item and "\n" not in item for item in items):
            raise errors.InvalidArgumentError(
                "ws_headers", f"the value of {name!r} must be a str or a list of str without CR or LF"
            )
        headers.append((name, items))
    return tuple(headers)


def _nkey(_inst: object, attr: attrs.Attribute[Any], value: object) -> None:
    if value is not None and (not isinstance(value, str) or not _NKEY_USER.match(value)):
        raise errors.InvalidArgumentError(attr.name, "must be a user's public nkey (56 characters starting with U)")


def _jitter(value: object) -> float:
    return to_seconds("reconnect_jitter", value, allow_zero=True)


def _jitter_tls(value: object) -> float:
    return to_seconds("reconnect_jitter_tls", value, allow_zero=True)


def _first_connect_wait(value: object) -> float:
    return to_seconds("first_connect_wait", value, allow_zero=True)


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


#: the shortest stats period: below it the snapshots (and their PINGs) would be the client's main traffic
MIN_STATS_INTERVAL = 0.1


def _stats_interval(value: object) -> float:
    seconds = to_seconds("stats_interval", value)
    if seconds < MIN_STATS_INTERVAL:
        raise errors.InvalidArgumentError(
            "stats_interval", f"must be at least {MIN_STATS_INTERVAL:g}s, got {seconds:g}"
        )
    return seconds


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
    """Everything [`jetstream_sync.connect`][jetstream_sync.connect] accepts, validated on construction.

    ``timeout`` is the default for blocking calls that are not given one. Callbacks run one at a time, in the
    order of their events, on the client's callbacks thread ("jetstream-sync-callbacks"), never on the IO or
    the watchdog thread: a callback that blocks delays only later callbacks, never the connection, heartbeat
    checks or ``close()`` (which waits for it half a second at most; past 10,000 waiting, new callbacks are
    dropped and counted in ``client.stats["callbacks_dropped"]``). ``max_reconnect_attempts=-1`` reconnects
    forever. The first connect fails fast (each server tried at most twice) unless ``retry_on_failed_connect``;
    the reconnect policy applies once connected.

    The functions a connection attempt has to wait for (``token_callback``, ``user_info_callback``,
    ``user_jwt_callback``, ``signature_callback``, ``socket_factory``, ``reconnect_delay_callback``) run on the
    "jetstream-sync-connect" thread instead, bounded by ``connect_timeout`` (``reconnect_delay_callback``: one
    second): one that raises or hangs fails that attempt with ConnectCallbackError, never the IO thread. Every
    option, with its nats.go and nats.js name, is in the Connecting guide (docs/guides/connecting.md).
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
    # -- a first connect that waits (nats.go RetryOnFailedConnect, ConnectHandler) ---------------------------
    retry_on_failed_connect: bool = attrs.field(default=False, converter=bool)
    first_connect_wait: float = attrs.field(default=0.0, converter=_first_connect_wait)
    connected_callback: EventCallback | None = attrs.field(default=None, validator=_callback)
    # -- credentials from memory and from callbacks, read at every connection attempt ----------------------
    credentials_data: str | None = attrs.field(default=None, converter=_credentials_data, repr=False)
    user_jwt: str | None = attrs.field(default=None, validator=_optional_text, repr=False)
    user_jwt_callback: TextCallback | None = attrs.field(default=None, validator=_callback)
    nkey: str | None = attrs.field(default=None, validator=_nkey)
    signature_callback: SignatureCallback | None = attrs.field(default=None, validator=_callback)
    token_callback: TextCallback | None = attrs.field(default=None, validator=_callback)
    user_info_callback: UserInfoCallback | None = attrs.field(default=None, validator=_callback)
    # -- transports ------------------------------------------------------------------------------------------
    tls_handshake_first: bool = attrs.field(default=False, converter=bool)
    ws_headers: tuple[tuple[str, tuple[str, ...]], ...] | None = attrs.field(
        default=None, converter=_ws_headers, repr=lambda h: repr(None if h is None else tuple(n for n, _ in h))
    )
    socket_factory: SocketFactory | None = attrs.field(default=None, validator=_callback)
    # -- reconnect tuning ------------------------------------------------------------------------------------
    dont_randomize: bool = attrs.field(default=False, converter=bool)
    reconnect_jitter: float = attrs.field(default=0.1, converter=_jitter)
    reconnect_jitter_tls: float = attrs.field(default=1.0, converter=_jitter_tls)
    reconnect_delay_callback: ReconnectDelayCallback | None = attrs.field(default=None, validator=_callback)
    ignore_discovered_servers: bool = attrs.field(default=False, converter=bool)
    discovered_servers_callback: EventCallback | None = attrs.field(default=None, validator=_callback)
    # -- health: stats_callback(ClientStats) every stats_interval seconds, on the callbacks thread --------------
    stats_callback: StatsCallback | None = attrs.field(default=None, validator=_callback)
    stats_interval: float = attrs.field(default=5.0, converter=_stats_interval)

    def __attrs_post_init__(self) -> None:
        if self.user is None and self.password is not None:
            raise errors.InvalidArgumentError("password", "given without user")
        if self.first_connect_wait and not self.retry_on_failed_connect:
            raise errors.InvalidArgumentError(
                "first_connect_wait", "waits for a connection made in the background: set retry_on_failed_connect=True"
            )
        self._check_auth()
        self._check_transports()

    def _check_auth(self) -> None:
        """One way to give each secret; a JWT needs something to sign the server's nonce with, and the nkeys
        package where a seed signs here."""
        for given, instead in (("token", "token_callback"), ("user", "user_info_callback")):
            if getattr(self, given) is not None and getattr(self, instead) is not None:
                raise errors.InvalidArgumentError(instead, f"and {given} are two ways to give it; keep one")
        jwts = [f for f in ("credentials", "credentials_data", "user_jwt", "user_jwt_callback") if getattr(self, f)]
        signers = [f for f in ("nkey_seed", "nkey_seed_file", "signature_callback") if getattr(self, f) is not None]
        if len(jwts) > 1:
            raise errors.InvalidArgumentError(jwts[1], f"and {jwts[0]} both give the user JWT; keep one")
        if len(signers) > 1:
            raise errors.InvalidArgumentError(signers[1], f"and {signers[0]} both sign the nonce; keep one")
        if jwts and jwts[0] in ("credentials", "credentials_data") and signers:
            raise errors.InvalidArgumentError(signers[0], f"is not needed: {jwts[0]} holds the user's seed")
        if jwts and jwts[0] in ("user_jwt", "user_jwt_callback") and not signers:
            raise errors.InvalidArgumentError(
                jwts[0], "needs a way to sign the server's nonce: nkey_seed, nkey_seed_file or signature_callback"
            )
        if self.nkey is not None and (self.signature_callback is None or jwts):
            raise errors.InvalidArgumentError(
                "nkey", "is for nkey authentication with signature_callback (a JWT carries its own public key)"
            )
        if self.signature_callback is not None and not jwts and self.nkey is None:
            raise errors.InvalidArgumentError(
                "signature_callback", "signs for user_jwt, user_jwt_callback or nkey; give one of them"
            )
        signs_here = ("credentials_data" in jwts) or (jwts and signers and signers[0] != "signature_callback")
        if signs_here and importlib.util.find_spec("nkeys") is None:
            field = "credentials_data" if "credentials_data" in jwts else signers[0]
            raise errors.InvalidArgumentError(field, "needs the nkeys package: pip install nkeys")

    def _check_transports(self) -> None:
        """The URLs' schemes against the transport options; websockets need aiohttp."""
        schemes = {_scheme(url) for url in self.servers}
        if schemes & set(_WEBSOCKET):
            if schemes - set(_WEBSOCKET):
                raise errors.InvalidArgumentError(
                    "servers", "mixes ws:// or wss:// URLs with others; a client uses websockets or not"
                )
            if importlib.util.find_spec("aiohttp") is None:
                raise errors.InvalidArgumentError(
                    "servers", "ws:// and wss:// need aiohttp: pip install 'jetstream-sync[websocket]'"
                )
            for field in ("socket_factory", "tls_handshake_first"):
                if getattr(self, field):
                    raise errors.InvalidArgumentError(field, "applies to nats:// and tls:// servers, not websockets")
        elif self.ws_headers is not None:
            raise errors.InvalidArgumentError("ws_headers", "are sent in a websocket handshake: use ws:// or wss://")

    @property
    def default_timeout(self) -> float:
        """The same as ``timeout``: the default for blocking calls (the name earlier releases used)."""
        return self.timeout

    def nkey_field(self) -> str:
        """The option that made nats-py use nkeys, for error messages."""
        if self.credentials is not None:
            return "credentials"
        return "nkey_seed" if self.nkey_seed is not None else "nkey_seed_file"

    def ws_connection_headers(self) -> dict[str, list[str]] | None:
        """``ws_headers`` in the shape nats-py takes them."""
        return None if self.ws_headers is None else {name: list(values) for name, values in self.ws_headers}
