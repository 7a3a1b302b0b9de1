"""How a client connects: the nats-py keywords its options become, and the state of its connection that user
threads read and wait on (connected yet, last error, reconnecting).

The first connect tries each server once, fast, on the IO thread (``Runtime.connect``). Without
``retry_on_failed_connect`` a failure ends there, raised. With it, the connection goes on in the background as
a lost connection would (nats.go's RetryOnFailedConnect): ``connect()`` returns at once, or after up to
``first_connect_wait`` seconds; calls made meanwhile behave as while reconnecting (publishes buffered up to
``pending_size``, requests and flushes bounded by their timeouts, subscriptions sent once connected), and
`ConnectionState` is what ``wait_connected()``, ``is_reconnecting`` and ``last_error`` read.
"""

from __future__ import annotations

import random
import threading
from collections import deque
from collections.abc import Callable, Coroutine, Mapping
from typing import TYPE_CHECKING, Any

from .. import errors
from ._auth import ConnectAuth
from ._translate import connect_failure, translate_error
from ._usercode import BlockingCalls
from ._wait import wait_while

if TYPE_CHECKING:
    from ..options import ConnectOptions

__all__ = ["ConnectionState", "nats_py_keywords", "reconnect_delay"]

#: the errors of the attempts made while connecting in the background that a failed wait explains itself with
_KEPT_ERRORS = 20
#: the bound on a reconnect_delay_callback call (it computes a number; one that takes longer is not used)
_DELAY_CALLBACK_BOUND = 1.0

Callback = Callable[..., Coroutine[Any, Any, object]]


def nats_py_keywords(options: ConnectOptions, callbacks: Mapping[str, Callback]) -> dict[str, Any]:
    """nats-py's ``connect()`` keywords for ``options``, with the first connect's fail-fast policy (each server
    tried at most twice, without a wait in between, as nats.go's first connect); ``callbacks`` are the
    runtime's nats-py callbacks by keyword (``error_cb``, ...)."""
    kwargs: dict[str, Any] = {
        "servers": list(options.servers),
        "name": options.name,
        "connect_timeout": options.connect_timeout,
        "allow_reconnect": options.allow_reconnect,
        "max_reconnect_attempts": 1,
        "reconnect_time_wait": 0,
        "ping_interval": options.ping_interval,
        "max_outstanding_pings": options.max_outstanding_pings,
        "pending_size": options.pending_size,
        "inbox_prefix": options.inbox_prefix,
        "no_echo": options.no_echo,
        "dont_randomize": options.dont_randomize,
        **callbacks,
    }
    nkeys_by_nats_py = ConnectAuth.signs_for_nats_py(options)  # a JWT with a seed is signed for by _auth.py
    optional = {
        "user": options.user,
        "password": options.password,
        "token": options.token,
        "user_credentials": options.credentials,
        "nkeys_seed": options.nkey_seed_file if nkeys_by_nats_py else None,
        "nkeys_seed_str": options.nkey_seed if nkeys_by_nats_py else None,
        "tls": options.tls,
        "tls_hostname": options.tls_hostname,
        "tls_handshake_first": options.tls_handshake_first or None,
        "ws_connection_headers": options.ws_connection_headers(),
    }
    kwargs.update({key: value for key, value in optional.items() if value is not None})
    return kwargs


async def reconnect_delay(
    options: ConnectOptions | None, calls: BlockingCalls, attempts: int, wait: float, tls: bool
) -> tuple[float, errors.ConnectCallbackError | None]:
    """IO thread: how long after its last attempt a server that failed ``attempts`` times is tried again:
    ``reconnect_delay_callback(attempts)`` (on the connect thread, bounded), else ``wait`` plus a random jitter
    (``reconnect_jitter_tls`` for TLS), as nats.go. A failing callback gives the default and the failure."""
    callback = options.reconnect_delay_callback if options is not None else None
    failure: errors.ConnectCallbackError | None = None
    if callback is not None:
        try:
            delay = await calls.run("reconnect_delay_callback", callback, attempts, timeout=_DELAY_CALLBACK_BOUND)
            if isinstance(delay, (int, float)) and not isinstance(delay, bool) and 0 <= delay < float("inf"):
                return float(delay), None
            failure = errors.ConnectCallbackError(
                f"reconnect_delay_callback returned {delay!r}; it must return seconds as a number >= 0"
            )
        except errors.ConnectCallbackError as exc:
            failure = exc
    jitter = 0.0
    if options is not None:
        jitter = options.reconnect_jitter_tls if tls else options.reconnect_jitter
    return wait + random.uniform(0, jitter), failure


class ConnectionState:
    """Whether the client ever connected, what last went wrong, and a wait for the connection. Written on the
    IO thread (and by close()), read and waited on by any thread."""

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._up = False
        self._closed = False
        #: the first connection was made (a connection made in the background counts once it is)
        self.ever_connected = False
        #: the errors of the connection attempts since it was last up (bounded)
        self.attempt_errors: deque[BaseException] = deque(maxlen=_KEPT_ERRORS)
        self._last_error: BaseException | None = None
        self._noted: BaseException | None = None

    @property
    def last_error(self) -> errors.JetStreamError | None:
        """The last error that cost the connection or an attempt at it, as ours (the nats-py one chained)."""
        return self._last_error if isinstance(self._last_error, errors.JetStreamError) else None

    def note(self, error: BaseException, *, attempt: bool = False) -> None:
        """An error to remember (``attempt``: a failed connection attempt, kept for a failed wait's message).
        The same error noted again (translated, by the error report that follows) changes nothing."""
        if error is self._noted or (self._noted is not None and translate_error(self._noted) is error):
            return
        self._noted = error
        if attempt:
            self.attempt_errors.append(error)
        self._last_error = error if isinstance(error, errors.JetStreamError) else _as_ours(error, attempt)

    def connected(self) -> bool:
        """The connection is up; True the first time."""
        with self._cond:
            first = not self.ever_connected
            self._up = self.ever_connected = True
            self.attempt_errors.clear()
            self._cond.notify_all()
        return first

    def disconnected(self) -> None:
        with self._cond:
            self._up = False

    def closed(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def wait_failure(self, options: ConnectOptions) -> tuple[errors.JetStreamError, BaseException]:
        """What connect() raises when ``first_connect_wait`` passed without a connection, and its cause."""
        failure, cause = connect_failure(
            list(self.attempt_errors), errors.TimeoutError("no server answered"), options.servers, False
        )
        message = f"{failure} (retried for first_connect_wait={options.first_connect_wait:g}s)"
        if isinstance(failure, errors.InvalidArgumentError):
            return failure, cause
        return type(failure)(message), cause

    def wait_connected(self, timeout: float, is_connected: Callable[[], bool]) -> bool:
        """Wait at most ``timeout`` seconds for the connection; False when it did not come. Raises
        ConnectionClosedError once the client closed (the reconnect attempts ran out, or close())."""
        with self._cond:
            try:
                wait_while(
                    self._cond,
                    lambda: not (self._up and is_connected()),
                    timeout,
                    closed=lambda: self._closed,
                    timed_out=lambda: errors.TimeoutError("not connected"),
                )
            except errors.TimeoutError:
                return False
        return True


def _as_ours(error: BaseException, attempt: bool) -> errors.JetStreamError:
    """A nats-py or socket error as ours: a failed attempt at a server, or the loss of the connection."""
    translated = translate_error(error)
    if isinstance(translated, errors.JetStreamError):
        return translated
    text = str(error).strip() or type(error).__name__
    wrapped: errors.JetStreamError
    if attempt:
        wrapped = errors.NoServersError(f"a connection attempt failed: {text}")
    else:
        wrapped = errors.NotConnectedError(f"the connection was lost: {text}")
    wrapped.__cause__ = error
    return wrapped
