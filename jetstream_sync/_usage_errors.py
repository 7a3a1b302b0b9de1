"""Errors of a program's set-up rather than the server's answers, part of
[`jetstream_sync.errors`][jetstream_sync.errors].

They live here only so that errors.py stays under 700 lines: errors.py imports them all (and lists them in its
``__all__``), so ``errors.InvalidServerURLError`` is the name to use; each class reports that module as its own.
"""

from __future__ import annotations

from typing import Any

from .errors import InvalidArgumentError, JetStreamError

__all__ = ["ClientNotPicklableError", "InvalidServerURLError", "SERVER_SCHEMES"]

#: The URL schemes a client connects with (nats-py's): ``nats://`` and ``tls://`` over TCP, ``ws://`` and
#: ``wss://`` over websockets; a URL without ``://`` is taken as ``nats://host[:port]``.
SERVER_SCHEMES = ("nats", "tls", "ws", "wss")


class InvalidServerURLError(InvalidArgumentError):
    """A server URL ``connect()`` (or an integration's ``SERVERS`` setting) cannot connect to: a scheme other
    than ``nats://``, ``tls://``, ``ws://`` or ``wss://`` (``http://``, a typo such as ``nat://``), or text that is
    no URL (``tcp:/x``, ``nats//host``). Raised before any connection attempt, so it is never mistaken for a
    server that is down. ``url`` is the URL without credentials, ``scheme`` the scheme found ("" when none)."""

    def __init__(self, field: str, url: str, scheme: str, problem: str) -> None:
        self.url = url
        self.scheme = scheme
        self.problem = problem
        accepted = ", ".join(f"{name}://" for name in SERVER_SCHEMES)
        super().__init__(
            field,
            f"{url!r} {problem}; a server URL is nats://host:port (tls:// for TLS, ws:// or wss:// for "
            f"websockets; the accepted schemes: {accepted}), or host:port for nats://",
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.field, self.url, self.scheme, self.problem))


class ClientNotPicklableError(JetStreamError, TypeError):
    """A client, or something that holds one (the JetStream context, a stream or consumer handle, a KV bucket, an
    object store, a subscription, a consume), was pickled: passed to a process made with the ``spawn`` or
    ``forkserver`` start method, sent through a ``multiprocessing`` queue, or captured by a Spark task.

    A client is a live connection with threads of its own, which no other process can use. Create one client
    per process instead: connect in the function the process runs (or a pool ``initializer``, or once per
    partition in Spark) and pass it what it needs to connect (the server URL, the stream's name). A
    ``TypeError``, as pickle's own refusals are. See the Deployments guide, "multiprocessing"."""

    def __init__(self, what: str = "a jetstream_sync Client") -> None:
        self.what = what
        super().__init__(
            f"{what} cannot be pickled (a client is a connection with threads of this process, which no other "
            "process can use): create one client per process. Connect in the code the process runs, e.g. "
            "`with jetstream_sync.connect(url) as nc:` in the worker function or a multiprocessing Pool "
            "initializer (in Spark, once per partition in mapPartitions / foreachPartition), and pass the server "
            "URL and names instead of the client; see docs/frameworks/deployments.md#multiprocessing"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.what,))


for _name in ("ClientNotPicklableError", "InvalidServerURLError"):  # tracebacks and pickles name the public module
    globals()[_name].__module__ = "jetstream_sync.errors"
