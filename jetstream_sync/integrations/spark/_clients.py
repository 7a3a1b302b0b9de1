"""One client per worker process and connection settings, created on first use and reused across tasks.

Spark runs tasks in long-lived Python workers, forked from a daemon; a client inherited through fork() is
unusable (ForkedClientError), so the cache is keyed by the process id as well: a forked child never sees its
parent's clients and makes its own. Clients are never pickled; only ConnectionOptions travel.
"""

from __future__ import annotations

import logging
import os
import threading

from ...client import Client
from .options import ConnectionOptions, redacted

__all__ = ["client_for", "close_clients"]

log = logging.getLogger("jetstream_sync.spark")

_lock = threading.Lock()
_clients: dict[tuple[int, ConnectionOptions], Client] = {}


def client_for(options: ConnectionOptions) -> Client:
    """This process's client for ``options``, connecting on first use or after the last one closed."""
    pid = os.getpid()
    key = (pid, options)
    with _lock:
        client = _clients.get(key)
        if client is not None and not client.is_closed:
            return client
        for stale in [k for k in _clients if k[0] != pid]:
            del _clients[stale]  # inherited through fork: the parent owns it, so forget it without closing
        log.debug("connecting to %s in worker %d", redacted(options.servers), pid)
        client = options.connect()
        _clients[key] = client
        return client


def close_clients() -> None:
    """Close this process's cached clients (tests, or a worker that wants to let go of its connections)."""
    pid = os.getpid()
    with _lock:
        mine = [k for k in _clients if k[0] == pid]
        clients = [_clients.pop(k) for k in mine]
    for client in clients:
        client.close()
