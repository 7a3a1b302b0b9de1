"""The transports under a connection: plain TCP (ours, through the socket gate), a socket the user's factory
made, and websockets. Part of the nats-py adapter (it subclasses nats-py's transports).

- `GatedTcpTransport` is nats-py's TCP transport made ours: its writes take the socket gate's lock
  (``_gate.py``) and its socket is read by a `ChunkReader` (``_reader.py``). TLS upgrades the
  same socket through asyncio's SSL transport, as nats-py does (the gate is never bound to a TLS socket).
- With ``socket_factory=`` (nats.go's SetCustomDialer), the same transport connects over the socket the factory
  returns instead of dialing itself: a proxy's tunnel, a UNIX socket to a sidecar, one end of a socketpair to an
  in-process server. The factory is user code that blocks, so it runs on the connect thread with
  ``connect_timeout`` as its bound (``_usercode.py``); reading and writing then take the plain-TCP fast path.
- ``ws://`` and ``wss://`` use nats-py's websocket transport (aiohttp; the ``websocket`` extra), with custom
  handshake headers. `WebSocketTransport` only changes its ``writelines``: nats-py sends every queued
  command as a websocket frame of its own, and a burst of 10,000 publishes became 10,000 frames; here a burst
  is one frame (the server reads a websocket as a byte stream, so commands may share frames).
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import Awaitable, Callable
from typing import Any

import nats.aio.transport

from ._gate import SocketGate
from ._reader import ChunkReader, open_chunked_connection

__all__ = ["Dial", "GatedTcpTransport", "WebSocketTransport", "open_on_socket"]

#: ``dial(host, port, timeout)``: a connected socket for the server at ``host:port`` (the socket factory's)
Dial = Callable[[str, int, float], Awaitable[socket.socket]]


async def open_on_socket(sock: socket.socket, limit: int) -> tuple[ChunkReader, asyncio.StreamWriter]:
    """`open_chunked_connection` over a socket that is connected already."""
    loop = asyncio.get_running_loop()
    reader = ChunkReader(limit, loop)
    protocol = asyncio.StreamReaderProtocol(reader, loop=loop)
    transport, _ = await loop.create_connection(lambda: protocol, sock=sock)
    return reader, asyncio.StreamWriter(transport, protocol, reader, loop)


class GatedTcpTransport(nats.aio.transport.TcpTransport):
    """nats-py's TCP transport whose writes and close take the socket gate's lock; it binds the gate to its plain
    connection when the client says the connection is ready, and unbinds it before a TLS upgrade or a close.
    With ``dial`` it connects over the socket that ``dial`` returns (the user's socket factory)."""

    def __init__(self, gate: SocketGate, dial: Dial | None = None) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self._gate = gate
        self._dial = dial

    def _socket_transport(self) -> asyncio.BaseTransport | None:
        writer = self._io_writer
        return writer.transport if isinstance(writer, asyncio.StreamWriter) else None

    async def connect(self, uri: Any, buffer_size: int, connect_timeout: int) -> None:
        """nats-py's connect, with a `ChunkReader` reading the socket (``_reader.py``)."""
        if self._dial is None:
            opened = open_chunked_connection(uri.hostname, uri.port, buffer_size)
        else:
            sock = await self._dial(uri.hostname, uri.port, float(connect_timeout))
            opened = open_on_socket(sock, buffer_size)
        reader, writer = await asyncio.wait_for(opened, connect_timeout)
        # as nats-py: the first reader and writer are kept, so a TLS upgrade does not let the GC close the socket
        self._bare_io_reader = self._io_reader = reader
        self._bare_io_writer = self._io_writer = writer

    def open_gate(self) -> None:
        """IO thread: the connection is ready for direct writes (see `NatsConnection.open_gate`)."""
        transport = self._socket_transport()
        if transport is not None:
            self._gate.bind(transport)

    async def connect_tls(self, uri: Any, ssl_context: ssl.SSLContext, buffer_size: int, connect_timeout: int) -> None:
        self._gate.unbind(self._socket_transport())  # the socket is about to belong to the TLS layer
        await super().connect_tls(uri, ssl_context, buffer_size, connect_timeout)

    def write(self, payload: bytes) -> None:
        with self._gate.lock:
            self._gate.flush_tail()
            super().write(payload)  # type: ignore[no-untyped-call]

    def writelines(self, payload: list[bytes]) -> None:
        with self._gate.lock:
            self._gate.flush_tail()
            super().writelines(payload)  # type: ignore[no-untyped-call]

    def close(self) -> None:
        with self._gate.lock:
            self._gate.unbind(self._socket_transport())
            super().close()  # type: ignore[no-untyped-call]


class WebSocketTransport(nats.aio.transport.WebSocketTransport):
    """nats-py's websocket transport, with three changes: a burst of commands is one frame (see the module
    docstring); the handshake is bounded by ``connect_timeout`` (nats-py passes it to aiohttp as the close
    timeout, so a server that accepts the TCP connection and never answers held the attempt for aiohttp's
    five-minute default); and an attempt that fails closes its aiohttp session (`discard`)."""

    async def connect(self, uri: Any, buffer_size: int, connect_timeout: int) -> None:
        self._ws = await self._open(uri.geturl(), None, connect_timeout)
        self._using_tls = False

    async def connect_tls(self, uri: Any, ssl_context: ssl.SSLContext, buffer_size: int, connect_timeout: int) -> None:
        if self._ws is not None and not self._ws.closed:
            if self._using_tls:
                return
            raise ConnectionError("a ws:// connection cannot be upgraded to TLS: use a wss:// URL")
        self._ws = await self._open(uri if isinstance(uri, str) else uri.geturl(), ssl_context, connect_timeout)
        self._using_tls = True

    async def _open(self, url: str, ssl_context: ssl.SSLContext | None, timeout: float) -> Any:
        import aiohttp  # present: nats-py's transport refuses to be made without it

        options: dict[str, Any] = {"ssl": ssl_context} if ssl_context is not None else {}
        ws_timeout = getattr(aiohttp, "ClientWSTimeout", None)  # aiohttp 3.10+; a float before (deprecated since)
        options["timeout"] = timeout if ws_timeout is None else ws_timeout(ws_close=timeout)
        client: Any = self._client
        opening = client.ws_connect(
            url,
            headers=self._get_custom_headers(),  # type: ignore[no-untyped-call]
            max_msg_size=0,
            **options,
        )
        return await asyncio.wait_for(opening, timeout)

    def writelines(self, payload: list[bytes]) -> None:
        if payload:
            self.write(payload[0] if len(payload) == 1 else b"".join(payload))  # type: ignore[no-untyped-call]

    async def discard(self) -> None:
        """Close the websocket and the aiohttp session of an attempt that failed (nats-py would keep them for
        the next attempt and leave the session unclosed if there is none)."""
        ws, client = self._ws, self._client
        self._ws = None
        self._client = None  # type: ignore[assignment]  # falsy now: nats-py makes a new transport for the next attempt
        if ws is not None and not ws.closed:
            await ws.close()
        if client is not None:
            await client.close()
