"""Threads, racing writers and server restarts: what the compare-and-set metadata writes and the ordered
consumer under every read are there for."""

from __future__ import annotations

import concurrent.futures
import hashlib
import io
import shutil
import time

import pytest

import jetstream_sync
from jetstream_sync import ObjectMeta, ObjectStoreConfig, errors
from tests.helpers import wait_until

from .obshelpers import chunk_messages


def test_concurrent_puts_and_reads_of_different_names(obs):
    def work(i: int) -> bytes:
        payload = bytes([i]) * (100_000 + i * 1000)
        obs.put(f"obj-{i}", payload)
        return obs.get_bytes(f"obj-{i}")

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        results = list(pool.map(work, range(16)))
    assert [len(r) for r in results] == [100_000 + i * 1000 for i in range(16)]
    assert sorted(i.name for i in obs.list()) == sorted(f"obj-{i}" for i in range(16))


def test_racing_puts_of_one_name_leave_no_orphaned_chunks(js, obs):
    """Every put purges the version it replaced; with blind metadata writes two puts that read the same
    previous version would both purge it and one of their own versions would be left without metadata."""

    def put(i: int) -> None:
        for j in range(4):
            obs.put("hot", bytes([i, j]) * 150_000)  # 300,000 bytes: 3 chunks

    with concurrent.futures.ThreadPoolExecutor(6) as pool:
        list(pool.map(put, range(6)))
    info = obs.info("hot")
    assert chunk_messages(js, obs) == info.chunks == 3
    assert len(obs.get_bytes("hot")) == 300_000  # digest verified


def test_update_meta_racing_puts_never_points_at_purged_chunks(js, obs):
    obs.put("doc", b"v0" * 100_000)
    stop = time.monotonic() + 1.5

    def writer() -> int:
        n = 0
        while time.monotonic() < stop:
            obs.put("doc", b"%02d" % (n % 100) * 100_000)
            n += 1
        return n

    def describer() -> int:
        n = 0
        while time.monotonic() < stop:
            obs.update_meta("doc", ObjectMeta(description=f"rev {n}"))
            n += 1
        return n

    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        puts, updates = pool.submit(writer), pool.submit(describer)
        assert puts.result() > 0 and updates.result() > 0
    assert len(obs.get_bytes("doc")) == 200_000  # digest verified: the metadata names live chunks
    assert chunk_messages(js, obs) == obs.info("doc").chunks


def test_replaced_while_reading_says_so_without_waiting_out_the_timeout(obs):
    obs.put("doc", b"1" * 8_000_000)  # 62 chunks: more than a read window
    with obs.get("doc") as r:  # the default 30 s chunk timeout
        assert r.read(10) == b"1" * 10
        obs.put("doc", b"2" * 10)  # purges the chunks the reader has not received yet
        started = time.monotonic()
        with pytest.raises(errors.DigestMismatchError, match="replaced or deleted while it was read"):
            while r.read(64 * 1024):
                pass
        assert time.monotonic() - started < 10
    assert obs.get_bytes("doc") == b"2" * 10


def test_deleted_while_reading_says_so(obs):
    obs.put("doc", b"1" * 8_000_000)
    with obs.get("doc") as r:
        assert r.read(10)
        obs.delete("doc")
        with pytest.raises(errors.DigestMismatchError, match="replaced or deleted"):
            r.read()


def test_a_read_survives_a_server_restart(nats_server_function):
    """The ordered consumer under the reader replaces its server-side consumer after the restart and goes on
    after the last chunk handed out: the object reads back whole, digest verified."""
    data = hashlib.sha256(b"restart").digest() * 131_072  # 4 MiB, 32 chunks
    with jetstream_sync.connect(nats_server_function.url, max_reconnect_attempts=-1, reconnect_wait=0.1) as nc:
        js = nc.jetstream(timeout=5)
        obs = js.create_object_store(ObjectStoreConfig(bucket="restart"))
        obs.put("big", data)
        got = io.BytesIO()
        with obs.get("big") as r:
            got.write(r.read(1024 * 1024))
            nats_server_function.restart()
            shutil.copyfileobj(r, got)
        assert got.getvalue() == data


def test_a_watch_survives_a_server_restart(nats_server_function):
    with jetstream_sync.connect(nats_server_function.url, max_reconnect_attempts=-1, reconnect_wait=0.1) as nc:
        js = nc.jetstream(timeout=5)
        obs = js.create_object_store(ObjectStoreConfig(bucket="restart"))
        obs.put("before", b"1")
        with obs.watch() as w:
            assert w.next(5).name == "before" and w.next(5) is None
            nats_server_function.restart()
            wait_until(lambda: nc.is_connected, timeout=10)
            obs.put("after", b"2")
            assert w.next(20).name == "after"
