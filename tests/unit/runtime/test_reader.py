"""ChunkReader (``_runtime/_reader.py``) over a real loopback socket: lines before the first read, chunks handed
over as received, a bounded backlog, end of stream and errors; and the StreamReader internals it relies on."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from jetstream_sync._runtime import _reader
from jetstream_sync._runtime._reader import ChunkReader, open_chunked_connection


def test_the_stream_reader_members_it_relies_on_exist_on_this_python():
    async def check() -> None:
        reader = asyncio.StreamReader()
        for name in ("_buffer", "_eof", "_exception", "_transport", "_paused", "_wakeup_waiter", "_wait_for_data"):
            assert hasattr(reader, name), name

    asyncio.run(check())


def serve(talk: Callable[[asyncio.StreamWriter], Awaitable[None]]) -> Callable[..., Awaitable[object]]:
    """Runs ``scenario(reader)`` against a loopback server that writes with ``talk``."""

    def run(scenario: Callable[[ChunkReader], Awaitable[object]]) -> object:
        async def main() -> object:
            async def handle(_r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
                await talk(w)
                w.close()

            server = await asyncio.start_server(handle, "127.0.0.1", 0)
            port = server.sockets[0].getsockname()[1]
            reader, writer = await open_chunked_connection("127.0.0.1", port, 32768)
            try:
                return await asyncio.wait_for(scenario(reader), 10)
            finally:
                writer.close()
                server.close()

        return asyncio.run(main())

    return run  # type: ignore[return-value]


async def read_all(reader: ChunkReader) -> bytes:
    parts = []
    while True:
        chunk = await reader.read(32768)
        if not chunk:
            return b"".join(parts)
        parts.append(chunk)


def test_lines_before_the_first_read_then_everything_in_order_and_eof():
    body = bytes(range(256)) * 4096  # 1 MiB

    async def talk(w: asyncio.StreamWriter) -> None:
        w.write(b"INFO {}\r\nPONG\r\n" + body[:1000])
        await w.drain()
        w.write(body[1000:])
        await w.drain()

    async def scenario(reader: ChunkReader) -> tuple[bytes, bytes, bytes, bool]:
        first = await reader.readline()
        second = await reader.readline()
        rest = await read_all(reader)
        return first, second, rest, reader.at_eof()

    first, second, rest, eof = serve(talk)(scenario)
    assert (first, second) == (b"INFO {}\r\n", b"PONG\r\n")
    assert rest == body and eof


def test_a_backlog_pauses_reading_and_nothing_is_lost(monkeypatch):
    monkeypatch.setattr(_reader, "PAUSE_ABOVE", 64 * 1024)
    body = b"".join(i.to_bytes(4, "big") for i in range(1 << 20))  # 4 MiB of distinct words

    async def talk(w: asyncio.StreamWriter) -> None:
        w.write(body)
        await w.drain()

    async def scenario(reader: ChunkReader) -> tuple[bytes, bool]:
        await reader.read(1)  # chunk mode from here on
        paused = False
        parts = []
        for _ in range(200):  # let the transport fill the backlog while we do not read
            await asyncio.sleep(0.002)
            paused = paused or reader._inner._paused
            if paused:
                break
        assert reader._chunked <= 64 * 1024 + 256 * 1024  # the bound plus one chunk
        parts.append(await read_all(reader))
        return b"".join(parts), paused

    got, paused = serve(talk)(scenario)
    assert paused
    assert body.endswith(got) and len(body) - len(got) < 256 * 1024  # all but the first read's chunk


def test_an_error_on_the_connection_is_raised_by_read():
    async def talk(w: asyncio.StreamWriter) -> None:
        await asyncio.sleep(0.05)

    async def scenario(reader: ChunkReader) -> None:
        assert await reader.read() == b""  # empty buffer: the first read goes on waiting, then EOF
        reader.set_exception(ConnectionResetError("gone"))
        await reader.read()

    with pytest.raises(ConnectionResetError, match="gone"):
        serve(talk)(scenario)
