"""One client per process and connection settings, created on first use and shared by every integration.

A web or task worker is very often a process forked after the app was created (gunicorn, uWSGI, Celery's
prefork pool, Spark's Python workers), and a client inherited through fork() is unusable: its threads do
not exist in the child (ForkedClientError, docs/ARCHITECTURE.md "Rules: forks"). So nothing connects at
import or app creation; [`process_client`][jetstream_sync.integrations.process_client] connects in the process that
first asks, and a forked child never sees its parent's clients: it forgets them (without closing: they are the parent's,
and closing would touch sockets the parent still uses) and makes its own.

The child forgets through the client's fork detection (``_runtime.after_fork``), which also gives it a fresh
lock: a parent thread may have held the cache's lock at the moment of the fork, and that lock would stay held in
the child forever. It runs at once after ``os.fork()`` and, for a fork Python's hooks do not see (uWSGI's workers,
a C extension calling fork() directly), when the child first asks for a client (``check_process``).
Clients are closed when the process exits (``atexit``), so buffered publishes and acks reach the server.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading

from .._runtime import after_fork, check_process
from ..client import Client
from ._connection import ConnectionSettings, redacted

__all__ = ["close_process_clients", "process_client"]

log = logging.getLogger("jetstream_sync.integrations")


class _ProcessCache:
    """The clients of one process, by settings. ``lock`` guards the dict; each settings value has its own
    connect lock, so a slow connect (a server down: up to its connect timeout per URL) holds up only the
    threads that want that same client."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.clients: dict[ConnectionSettings, Client] = {}
        self.connecting: dict[ConnectionSettings, threading.Lock] = {}


_cache = _ProcessCache()


def _forget_inherited() -> None:
    """In a forked child: a new, empty cache with fresh locks. The parent's clients are left alone."""
    global _cache
    _cache = _ProcessCache()


after_fork(_forget_inherited)


def _current() -> _ProcessCache:
    check_process()  # a fork Python's hooks did not see runs _forget_inherited now
    return _cache


def process_client(settings: ConnectionSettings) -> Client:
    """This process's client for ``settings``: connected on first use, then shared by every thread.

    A closed client (closed by the user, or by the client itself after it gave up reconnecting) is replaced
    by a new one on the next call. After a fork the child gets its own client, never the parent's.
    Connection errors (NoServersError, AuthorizationError, InvalidArgumentError) reach the caller, and the
    next call tries again.
    """
    cache = _current()
    with cache.lock:
        client = cache.clients.get(settings)
        if client is not None and not client.is_closed:
            return client
        connecting = cache.connecting.setdefault(settings, threading.Lock())
    with connecting:
        with cache.lock:  # another thread may have connected while this one waited
            client = cache.clients.get(settings)
            if client is not None and not client.is_closed:
                return client
        log.debug("connecting to %s in process %d", redacted(settings.servers), os.getpid())
        client = settings.connect()
        with cache.lock:
            cache.clients[settings] = client
        return client


def close_process_clients() -> None:
    """Close this process's clients (at exit, in tests, or in a worker letting go of its connections).

    A later [`process_client`][jetstream_sync.integrations.process_client] connects again. A client that fails to close
    is logged and the others are still closed.
    """
    cache = _current()
    with cache.lock:
        clients = list(cache.clients.values())
        cache.clients.clear()
    for client in clients:
        try:
            client.close()
        except Exception:
            log.warning("closing %r failed", client, exc_info=True)


atexit.register(close_process_clients)
