"""put's sources cut into chunks (``_source``): every kind, any piece size, type errors before sending."""

from __future__ import annotations

import io

import pytest

from jetstream_sync import errors
from jetstream_sync.jetstream.object_store._source import chunks_of

DATA = bytes(range(256)) * 4  # 1,024 bytes
SIZES = [100] * 10 + [24]


def test_bytes_bytearray_and_memoryview():
    for data in (DATA, bytearray(DATA), memoryview(DATA)):
        assert [len(c) for c in chunks_of(data, 100)] == SIZES
        assert b"".join(chunks_of(data, 100)) == DATA
    assert list(chunks_of(b"", 100)) == []
    assert [len(c) for c in chunks_of(memoryview(DATA).cast("I"), 100)] == SIZES  # bytes, whatever the format


def test_iterables_of_any_piece_size():
    assert [len(c) for c in chunks_of(iter([DATA[:3], DATA[3:500], DATA[500:]]), 100)] == SIZES
    assert [len(c) for c in chunks_of([DATA], 100)] == SIZES
    assert b"".join(chunks_of((DATA[i : i + 1] for i in range(len(DATA))), 100)) == DATA
    assert [len(c) for c in chunks_of([DATA[:200]], 100)] == [100, 100]  # an exact multiple: no empty chunk


def test_files_including_short_reads():
    assert [len(c) for c in chunks_of(io.BytesIO(DATA), 100)] == SIZES

    class Dribble:
        """A file whose reads return at most 7 bytes (a pipe or a socket does that)."""

        def __init__(self) -> None:
            self.pos = 0

        def read(self, n: int) -> bytes:
            piece = DATA[self.pos : self.pos + min(n, 7)]
            self.pos += len(piece)
            return piece

    assert [len(c) for c in chunks_of(Dribble(), 100)] == SIZES

    class DribbleInto:
        def __init__(self) -> None:
            self.pos = 0

        def readinto(self, buffer: memoryview) -> int:
            piece = DATA[self.pos : self.pos + min(len(buffer), 7)]
            buffer[: len(piece)] = piece
            self.pos += len(piece)
            return len(piece)

    assert b"".join(chunks_of(DribbleInto(), 100)) == DATA


def test_wrong_types_are_refused_when_made():
    for bad in ("text", 3.5, None, io.StringIO("text")):
        with pytest.raises(errors.InvalidTypeError):
            chunks_of(bad, 10)


def test_wrong_pieces_are_refused_when_met():
    chunks = chunks_of([b"ok", "not bytes"], 10)
    with pytest.raises(errors.InvalidTypeError):
        list(chunks)

    class TextRead:
        def read(self, n: int) -> str:
            return "text"

    with pytest.raises(errors.InvalidTypeError):
        list(chunks_of(TextRead(), 10))
