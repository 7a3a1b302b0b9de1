"""How many chunks an ObjectReader pulls at a time: about READ_BUDGET bytes, within READ_WINDOW_BOUNDS."""

from __future__ import annotations

import pytest

from jetstream_sync.jetstream.object_store.reader import READ_BUDGET, READ_WINDOW_BOUNDS, read_window
from jetstream_sync.models.object_store import ObjectInfo

KiB = 1024
MiB = 1024 * KiB


def info(size: int, chunks: int, max_chunk_size: int | None = None) -> ObjectInfo:
    return ObjectInfo(name="o", bucket="b", nuid="n", size=size, chunks=chunks, max_chunk_size=max_chunk_size)


@pytest.mark.parametrize(
    ("obj", "window"),
    [
        (info(16 * MiB, 128, 128 * KiB), 16),  # the default chunk size: 2 MiB
        (info(16 * MiB, 128), 16),  # written by a client that does not record the chunk size
        (info(100 * MiB, 100, MiB), 2),  # 1 MiB chunks: two, the fewest
        (info(64 * MiB, 8, 8 * MiB), 2),  # chunks over the budget still get a window of two
        (info(1 * MiB, 1024, KiB), 32),  # 1 KiB chunks: capped at the most
        (info(200 * KiB, 2), 20),  # a short last chunk makes the average smaller: at most twice the budget
    ],
)
def test_the_window_is_the_budget_over_the_chunk_size(obj, window):
    assert read_window(obj) == window
    fewest, most = READ_WINDOW_BOUNDS
    assert fewest <= window <= most


def test_a_window_of_default_chunks_is_the_budget():
    assert read_window(info(READ_BUDGET * 8, 128, 128 * KiB)) * 128 * KiB == READ_BUDGET
