"""nats-py's errors as ours: part of the nats-py adapter (with ``_nats.py`` and ``_parser.py``, the only modules
that import nats-py), so that users catch one hierarchy and a failed connect says why.

`translate_error` maps what nats-py raises or reports; `connect_failure` builds what ``connect()``
raises from everything nats-py reported while it tried the servers (nats-py itself ends with a bare
NoServersError); `redact_url` keeps credentials out of messages and logs.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Sequence

import nats.errors

from .. import errors
from ._parser import ServerProtocolViolation

__all__ = ["AttemptFailed", "connect_failure", "redact_url", "translate_error"]


class AttemptFailed(nats.errors.Error):
    """One connection attempt failed for a reason of ours (a user function, a seed): a nats-py error, so that
    nats-py counts the attempt as failed and goes on to the next server (an exception of another kind would end
    its reconnect task unseen). ``error`` is what the user sees (`translate_error` unwraps it)."""

    def __init__(self, error: errors.JetStreamError) -> None:
        super().__init__(str(error))
        self.error = error


# -ERR texts after which the same credentials will not work: retrying cannot help.
_AUTH_FAILURES = ("authorization violation", "authentication expired", "authentication revoked")

_TLS_HINT = (
    "check the tls= SSLContext: the CA it trusts (load_verify_locations), its client certificate if the server "
    "verifies clients (load_cert_chain), and tls_hostname against the server's certificate"
)


def _server_text(exc: BaseException) -> str:
    """The server's words from a nats-py error: ``nats: 'Authorization Violation'`` -> ``Authorization Violation``."""
    text = str(exc).strip()
    text = text.removeprefix("nats: ").strip()
    return text.strip("'").strip() or type(exc).__name__


def translate_error(exc: BaseException) -> BaseException:
    """nats-py's errors as ours, so users catch one hierarchy."""
    if isinstance(exc, AttemptFailed):
        return exc.error
    text = str(exc)
    lowered = text.lower()
    if isinstance(exc, nats.errors.AuthorizationError) or any(failure in lowered for failure in _AUTH_FAILURES):
        return errors.AuthorizationError(
            f"the server rejected the credentials ({_server_text(exc)}); "
            "fix user/password, token, nkey or credentials: retrying will not help"
        )
    if "permissions violation" in lowered:
        return errors.PermissionViolationError(f"the server refused: {_server_text(exc)}")
    if isinstance(exc, nats.errors.SlowConsumerError):
        return errors.SlowConsumerError(text)
    return exc


def _is_tls_failure(exc: BaseException) -> bool:
    """A TLS handshake or certificate failure (ssl.SSLCertVerificationError is also an OSError)."""
    return isinstance(exc, ssl.SSLError) or "ssl" in type(exc).__name__.lower()


def redact_url(url: str) -> str:
    """A server URL without the user:password@ or token@ part, for messages and logs."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        scheme, rest = "", url
    userinfo, at, hostport = rest.rpartition("@")
    if not at:
        return url
    return f"{scheme}{sep}***@{hostport}" if userinfo else url


def connect_failure(
    seen: Sequence[BaseException], raised: BaseException, servers: Sequence[str], tls: bool
) -> tuple[errors.JetStreamError, BaseException]:
    """What connect() raises, and its cause, from every error nats-py reported while it tried the servers.

    nats-py ends a failed first connect with a bare NoServersError; the reason is in what it reported before.
    Rejected credentials win (retrying cannot help), then a TLS failure, then the last error seen. ``tls``:
    the server asked for TLS, so a connection it dropped was most likely refused in the handshake (with TLS 1.3
    a server that wants a client certificate may close the connection before the client sees its alert).
    """
    where = [redact_url(url) for url in servers]
    ours = [exc for exc in seen if isinstance(exc, AttemptFailed)]
    for attempt in ours:  # a seed or a setting that cannot work: nothing else matters
        if isinstance(attempt.error, errors.InvalidArgumentError):
            return attempt.error, attempt.error.__cause__ or attempt
    for exc in seen:
        translated = translate_error(exc)
        if isinstance(translated, errors.AuthorizationError):
            return translated, exc
    if ours:  # a user function failed: what it raised is the cause
        return ours[-1].error, ours[-1].error.__cause__ or ours[-1]
    for exc in seen:
        if _is_tls_failure(exc):
            return errors.NoServersError(f"TLS handshake with {where} failed: {exc}; {_TLS_HINT}"), exc
    for exc in (*seen, raised):
        violation = _violation_in(exc)
        if violation is not None:
            message = f"{where} answered with something that is not NATS: {violation.reason}; is it a NATS server?"
            return errors.ProtocolError(message), violation
    cause = seen[-1] if seen else raised
    if tls and isinstance(cause, ConnectionError) and not isinstance(cause, ConnectionRefusedError):
        message = f"TLS handshake with {where} failed: the server closed the connection ({cause}); {_TLS_HINT}"
        return errors.NoServersError(message), cause
    message = f"could not connect to {where}: {_reason(cause)}; check the URL and that nats-server runs"
    return errors.NoServersError(message), cause


def _violation_in(exc: BaseException) -> ServerProtocolViolation | None:
    """The protocol violation behind ``exc``: nats-py re-raises what its connect step meets as its own error
    ("info message, json parse error"), with ours as the context."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, ServerProtocolViolation):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


def _reason(exc: BaseException) -> str:
    """An error's text for a message; a timeout (which has none) says what timed out."""
    text = str(exc).strip()
    if text:
        return text
    if isinstance(exc, (TimeoutError, asyncio.TimeoutError)):
        return (
            "timed out (connect_timeout): the address accepted the connection but no NATS handshake completed; "
            "is it a NATS server's client port, and is nothing in between holding the connection?"
        )
    return type(exc).__name__
