"""What ``put`` reads, cut into chunks: bytes, a binary file object, or an iterable of bytes-like pieces.

Every source becomes a lazy iterator of chunks of exactly the chunk size (the last may be shorter), so the
upload never holds more than one chunk of the source at a time, whatever the object's size, and a file that
returns short reads (a pipe, a socket) still makes full chunks, as nats.go's ``io.Reader`` loop does not.
The type is checked when the iterator is made, before anything is sent.
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Iterator
from typing import IO, Any, TypeAlias

from ... import errors

__all__ = ["ObjectData", "chunks_of"]

#: what ``put`` reads: bytes, a binary file object, or an iterable of bytes-like pieces of any size
ObjectData: TypeAlias = bytes | bytearray | memoryview | IO[bytes] | Iterable[bytes]

_KINDS = "bytes, a binary file or an iterable of bytes"


def chunks_of(data: object, size: int) -> Iterator[bytes]:
    """``data`` as chunks of ``size`` bytes, read lazily; InvalidTypeError now for what cannot be read."""
    if isinstance(data, str):
        raise errors.InvalidTypeError("data", f"must be {_KINDS}, got str; encode it first")
    if isinstance(data, (bytes, bytearray, memoryview)):
        return _slices(memoryview(data).cast("B"), size)
    if isinstance(data, io.TextIOBase):
        raise errors.InvalidTypeError("data", "the file is open in text mode; open it with 'rb'")
    if hasattr(data, "readinto"):
        return _from_readinto(data, size)
    if hasattr(data, "read"):
        return _from_read(data, size)
    if isinstance(data, Iterable):
        return _from_pieces(data, size)
    raise errors.InvalidTypeError("data", f"must be {_KINDS}, got {type(data).__name__}")


def _slices(view: memoryview, size: int) -> Iterator[bytes]:
    for start in range(0, len(view), size):
        yield bytes(view[start : start + size])


def _from_readinto(file: Any, size: int) -> Iterator[bytes]:
    """A binary file: one reused buffer, filled by as many reads as it takes."""
    buffer = bytearray(size)
    view = memoryview(buffer)
    while True:
        filled = 0
        while filled < size:
            n = file.readinto(view[filled:])
            if not n:
                break
            filled += n
        if filled:
            yield bytes(view[:filled])
        if filled < size:
            return


def _from_read(file: Any, size: int) -> Iterator[bytes]:
    """A file-like object with only ``read`` (a text file is refused at its first read)."""
    pending = bytearray()
    while True:
        piece = file.read(size - len(pending))
        if isinstance(piece, str):
            raise errors.InvalidTypeError("data", "the file is open in text mode; open it with 'rb'")
        if not piece:
            break
        pending += piece
        if len(pending) >= size:
            yield bytes(pending)
            pending.clear()
    if pending:
        yield bytes(pending)


def _from_pieces(pieces: Iterable[Any], size: int) -> Iterator[bytes]:
    """Pieces of any size, regrouped into chunks (a 1-byte or a 10 MiB piece alike)."""
    pending = bytearray()
    for piece in pieces:
        if not isinstance(piece, (bytes, bytearray, memoryview)):
            raise errors.InvalidTypeError("data", f"the iterable must yield bytes, got {type(piece).__name__}")
        pending += piece
        if len(pending) < size:
            continue
        start = 0
        with memoryview(pending) as view:
            while len(pending) - start >= size:
                yield bytes(view[start : start + size])
                start += size
        del pending[:start]
    if pending:
        yield bytes(pending)
