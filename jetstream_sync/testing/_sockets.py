"""The sockets of the test servers: a proxied connection (`_Link`) and the listener and selector helpers that the
fault proxy and the scripted server share.

Kept apart from ``_proxy.py`` so that the scripted server (``_scripted.py``) uses them without loading the proxy,
and so that the proxy module holds the forwarding and the faults only.
"""

from __future__ import annotations

import contextlib
import errno
import os
import selectors
import socket
import threading

__all__ = ["LOOPBACK"]

#: the one address the test servers listen on and forward to
LOOPBACK = "127.0.0.1"
_CONNECT_PENDING = frozenset(
    {errno.EINPROGRESS, errno.EWOULDBLOCK, errno.EALREADY, getattr(errno, "WSAEWOULDBLOCK", errno.EWOULDBLOCK)}
)


class _Link:
    """One client connection and its upstream; the connection's own thread is the only one that closes them."""

    def __init__(self, ident: int, client: socket.socket) -> None:
        self.ident = ident
        self.client = client
        self.upstream: socket.socket | None = None
        self.thread: threading.Thread | None = None
        self.closed = threading.Event()
        self._lock = threading.Lock()

    def attach(self, upstream: socket.socket) -> bool:
        """Keep the upstream socket, unless the link was aborted while connecting."""
        with self._lock:
            if self.closed.is_set():
                return False
            self.upstream = upstream
            return True

    def abort(self) -> None:
        """From any thread: both peers see the connection end now (FIN); the link's thread then closes the sockets."""
        with self._lock:
            self.closed.set()
            for sock in (self.client, self.upstream):
                if sock is not None:
                    with contextlib.suppress(OSError):
                        sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        with self._lock:
            self.closed.set()
            for sock in (self.client, self.upstream):
                if sock is not None:
                    _close_socket(sock)


def _bind_listener(port: int) -> socket.socket:
    """Bound now, listening from start(): until then a connection is refused rather than left waiting."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        if os.name != "nt":  # so a fixed port can be taken again while old connections sit in TIME_WAIT
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((LOOPBACK, port))
    except BaseException:
        sock.close()
        raise
    return sock


def _set_interest(selector: selectors.BaseSelector, wanted: dict[socket.socket, int]) -> None:
    for sock, events in wanted.items():
        key = selector.get_map().get(sock)
        if key is None:
            if events:
                selector.register(sock, events)
        elif not events:
            selector.unregister(sock)
        elif key.events != events:
            selector.modify(sock, events)


def _close_socket(sock: socket.socket) -> None:
    """Shut down (so the peer sees the end even if the fd were shared), then close; errors do not matter here."""
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    sock.close()
