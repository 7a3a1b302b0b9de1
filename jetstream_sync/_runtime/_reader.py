"""The read side of a plain TCP connection: the bytes the socket gave, handed to the parser as they are.

nats-py reads through an ``asyncio.StreamReader``: every received chunk is appended to a bytearray (a copy),
every ``read()`` copies it out again and deletes it from the front, and above twice the 32 KiB limit the
transport is paused and resumed (two ``epoll_ctl`` system calls per round). At 16 KiB messages that was a
quarter of the IO thread's time. `ChunkReader` keeps what the transport received as the bytes objects it
received (up to 256 KiB each) and hands them over one by one: no copy before the parser slices a payload out,
and pausing only behind a backlog of ``PAUSE_ABOVE`` bytes (memory stays bounded by it plus one chunk).

It stays an ``asyncio.StreamReader``, so nats-py's connection handshake, which reads lines, works unchanged:
until the first `read` everything goes through the stream reader's own buffer. It relies on the reader's
private members (``_buffer``, ``_eof``, ``_exception``, ``_transport``, ``_paused``, ``_wait_for_data``), the
same in CPython 3.10 to 3.13; ``tests/unit/runtime/test_reader.py`` checks them on every Python CI runs.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any

__all__ = ["PAUSE_ABOVE", "ChunkReader", "open_chunked_connection"]

#: received bytes waiting for the parser above which the socket is not read (the backlog's bound)
PAUSE_ABOVE = 1024 * 1024


class ChunkReader(asyncio.StreamReader):
    """A StreamReader whose `read` returns the received chunks themselves, once it has been called."""

    def __init__(self, limit: int, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(limit=limit, loop=loop)
        self._chunks: deque[bytes] = deque()
        self._chunked = 0  # bytes in _chunks
        self._chunk_mode = False  # set by the first read(): readline() no longer works after it

    @property
    def _inner(self) -> Any:
        """The StreamReader's private members (not in typeshed): _buffer, _eof, _exception, _transport,
        _paused, _wakeup_waiter and _wait_for_data."""
        return self

    def feed_data(self, data: bytes) -> None:  # type: ignore[override]  # the protocol gives bytes
        if not self._chunk_mode:
            super().feed_data(data)
            return
        if not data:
            return
        inner = self._inner
        self._chunks.append(bytes(data))  # a bytes object already, from the selector transport: no copy
        self._chunked += len(data)
        inner._wakeup_waiter()
        transport = inner._transport
        if transport is not None and not inner._paused and self._chunked > PAUSE_ABOVE:
            try:
                transport.pause_reading()
            except NotImplementedError:  # a transport that cannot pause: as asyncio's reader, stop trying
                inner._transport = None
            else:
                inner._paused = True

    def at_eof(self) -> bool:
        return not self._chunks and super().at_eof()

    async def read(self, n: int = -1) -> bytes:
        """The next received chunk (the first call: what the handshake left in the buffer, if anything); b""
        at the end of the stream. ``n`` is ignored: the parser takes any length."""
        inner = self._inner
        if not self._chunk_mode:
            self._chunk_mode = True
            if inner._buffer:
                data = bytes(inner._buffer)
                inner._buffer.clear()
                return data
        chunks = self._chunks
        while not chunks:
            if inner._exception is not None:
                raise inner._exception
            if inner._eof:
                return b""
            await inner._wait_for_data("read")  # resumes a paused transport first
        data = chunks.popleft()
        self._chunked -= len(data)
        if inner._paused and self._chunked <= PAUSE_ABOVE // 2:
            inner._paused = False
            inner._transport.resume_reading()
        return data


async def open_chunked_connection(host: str, port: int, limit: int) -> tuple[ChunkReader, asyncio.StreamWriter]:
    """``asyncio.open_connection`` with a `ChunkReader` on the read side."""
    loop = asyncio.get_running_loop()
    reader = ChunkReader(limit, loop)
    protocol = asyncio.StreamReaderProtocol(reader, loop=loop)
    transport, _ = await loop.create_connection(lambda: protocol, host, port)
    return reader, asyncio.StreamWriter(transport, protocol, reader, loop)
