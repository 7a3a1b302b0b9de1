"""Large objects: streamed in from a generator and out through a 2 KiB-at-a-time reader, with the memory of the
process bounded by a few chunks whatever the size.

The 64 MiB test always runs; the 1 GiB one is a soak test (``python -m pytest -m soak -k 1_gib``). RSS is
VmRSS from /proc/self/status, measured against the same process with its client connected and idle.
"""

from __future__ import annotations

import base64
import gc
import hashlib
import logging
from collections.abc import Iterator

import pytest

from jetstream_sync import ObjectStore, ObjectStoreConfig

from .obshelpers import CHUNK, MiB

log = logging.getLogger("jetstream_sync.tests")

READ_SIZE = 2048


def _rss() -> int:
    """This process's resident set size in bytes (Linux)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS in /proc/self/status")


class _Peak:
    """The highest RSS seen among samples."""

    def __init__(self) -> None:
        self.value = _rss()

    def sample(self) -> None:
        self.value = max(self.value, _rss())


def _blocks(total: int, sha, peak: _Peak) -> Iterator[bytes]:
    """``total`` bytes of varied data in 64 KiB pieces, hashed as they are produced; samples RSS as it goes."""
    piece = 64 * 1024
    for i in range(total // piece):
        block = (i.to_bytes(8, "big") + b"object-store") * (piece // 20) + b"\0" * (piece % 20)
        sha.update(block)
        if i % 16 == 0:
            peak.sample()
        yield block


def _round_trip(obs: ObjectStore, total: int) -> tuple[int, int]:
    """Put ``total`` bytes from a generator and read them back 2 KiB at a time; the peak RSS growth over an
    idle client during the put and during the read."""
    obs.put("warm-up", b"w" * 3 * CHUNK)  # the code paths of a put and a read, loaded before the baseline
    assert obs.get_bytes("warm-up") == b"w" * 3 * CHUNK
    gc.collect()
    idle = _rss()
    sha = hashlib.sha256()
    put_peak = _Peak()
    info = obs.put("big", _blocks(total, sha, put_peak))
    put_peak.sample()
    assert info.size == total and info.chunks == total // CHUNK
    assert info.digest == "SHA-256=" + base64.urlsafe_b64encode(sha.digest()).decode()
    read_peak = _Peak()
    check = hashlib.sha256()
    received = 0
    with obs.get("big") as r:
        while piece := r.read(READ_SIZE):  # the read that returns b"" is the one that verified the digest
            check.update(piece)
            received += len(piece)
            if received % MiB == 0:
                read_peak.sample()
    read_peak.sample()
    assert received == total and check.digest() == sha.digest()
    return put_peak.value - idle, read_peak.value - idle


def test_64_mib_from_a_generator_read_2_kib_at_a_time_in_bounded_memory(obs):
    put_growth, read_growth = _round_trip(obs, 64 * MiB)
    log.info("64 MiB: RSS above an idle client: put %.1f MiB, read %.1f MiB", put_growth / MiB, read_growth / MiB)
    assert put_growth < 16 * MiB, f"put grew RSS by {put_growth / MiB:.1f} MiB"
    assert read_growth < 16 * MiB, f"read grew RSS by {read_growth / MiB:.1f} MiB"


@pytest.mark.soak
@pytest.mark.timeout(600)
def test_1_gib_from_a_generator_read_2_kib_at_a_time_in_bounded_memory(js, name):
    obs = js.create_object_store(ObjectStoreConfig(bucket=name))
    put_growth, read_growth = _round_trip(obs, 1024 * MiB)
    log.info("1 GiB: RSS above an idle client: put %.1f MiB, read %.1f MiB", put_growth / MiB, read_growth / MiB)
    assert put_growth < 64 * MiB, f"put grew RSS by {put_growth / MiB:.1f} MiB"
    assert read_growth < 64 * MiB, f"read grew RSS by {read_growth / MiB:.1f} MiB"
    js.delete_object_store(name)  # 1 GiB of stream: gone before the next test
