"""A watcher on 10,000 keys through a server restart and a cut connection: after each fault every later put
is seen, nothing is handed out twice, and no consumer is left behind once it is closed."""

from __future__ import annotations

import itertools

import jetstream_sync
from jetstream_sync import KeyValueConfig, KeyValueOp, StorageType, errors
from tests.helpers import wait_until
from tests.server.jetstream.kv.kvhelpers import fill, quiet, wait_no_consumers

KEYS = 10_000


def writable(kv) -> bool:
    """True once a put goes through (JetStream is back after a restart or reconnect)."""
    try:
        kv.put("probe", b"x")
    except (errors.JetStreamError, TimeoutError):
        return False
    return True


def test_watcher_on_10k_keys_through_restart_and_cut(nats_server_function, fault_proxy):
    server = nats_server_function
    with jetstream_sync.connect(fault_proxy.url, reconnect_wait=0.1, max_reconnect_attempts=-1, timeout=2) as nc:
        js = nc.jetstream(timeout=2)
        kv = js.create_key_value(KeyValueConfig(bucket="faults", history=3, storage=StorageType.FILE))
        fill(js, kv, KEYS)
        seen = []

        def read(n: int) -> None:
            for _ in range(n):
                entry = w.next(10)
                assert entry is not None, f"a second None after {len(seen)} entries"
                seen.append(entry)

        def put_and_read(round_: str, n: int = 200) -> list[int]:
            revs = [kv.put(f"k.{i}", round_.encode()) for i in range(n)]
            start = len(seen)
            read(n)
            got = seen[start:]
            assert [(e.key, e.value, e.revision) for e in got] == [
                (f"k.{i}", round_.encode(), r) for i, r in enumerate(revs)
            ], round_
            return revs

        w = kv.watch("k.>")
        try:
            read(KEYS // 2)
            reconnects = nc.reconnects
            server.restart()  # in the middle of the initial values
            wait_until(lambda: nc.reconnects > reconnects and nc.is_connected, timeout=10)
            read(KEYS - KEYS // 2)
            assert w.next(10) is None  # the initial values are done once, whatever happened in between
            assert sorted(e.key for e in seen) == sorted(f"k.{i}" for i in range(KEYS))
            wait_until(lambda: writable(kv), timeout=10)
            put_and_read("after-restart")

            reconnects = nc.reconnects
            fault_proxy.cut()
            wait_until(lambda: nc.reconnects > reconnects and nc.is_connected, timeout=10)
            wait_until(lambda: writable(kv), timeout=10)
            put_and_read("after-cut")

            server.restart()  # while caught up: the watcher waits at the server when it goes away
            wait_until(lambda: writable(kv), timeout=10)
            put_and_read("after-second-restart")
            kv.delete("k.1")
            deleted = w.next(10)
            assert (deleted.key, deleted.operation) == ("k.1", KeyValueOp.DELETE)
            seen.append(deleted)
            assert quiet(w)
        finally:
            w.stop()
        revisions = [e.revision for e in seen]
        assert all(a < b for a, b in itertools.pairwise(revisions)), "a revision handed out twice or out of order"
        assert len(seen) == KEYS + 3 * 200 + 1
        wait_no_consumers(js, "faults")
