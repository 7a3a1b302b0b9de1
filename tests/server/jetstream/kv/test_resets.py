"""Walks of a bucket whose consumer is replaced half-way (deleted, or a message lost on the connection): keys(),
purge_deletes() and a watcher's initial values must still be each key's latest entry, once.

They read with deliver policy last-per-subject. The bucket is laid out so that a walk restarted *by sequence*
after its first messages shows the difference: a key written twice would come twice, a key deleted after its
first value would look alive, and a key deleted and then written again would look deleted."""

from __future__ import annotations

import collections

import pytest

import jetstream_sync
from jetstream_sync import KeyValueConfig, KeyValueOp, errors
from tests.server.jetstream.kv.kvhelpers import bucket, consumers, fill, until_none, wait_no_consumers

KEYS = 2000


def lay_out(js, kv) -> dict[str, bytes]:
    """KEYS keys, then: one written twice, one deleted, one deleted and written again. Returns the live values."""
    fill(js, kv, KEYS)
    kv.put("k.1500", b"again")
    kv.delete("k.1600")
    kv.delete("k.1700")
    kv.put("k.1700", b"alive")
    live = {f"k.{i}": b"v" for i in range(KEYS)}
    live.update({"k.1500": b"again", "k.1700": b"alive"})
    del live["k.1600"]
    return live


def delete_consumers(js, kv) -> None:
    names = consumers(js, kv.bucket)
    assert len(names) == 1
    js.delete_consumer(kv.stream_name, names[0])


def test_keys_through_a_deleted_consumer(js, name, small_pulls):
    kv = bucket(js, name, history=5)
    live = lay_out(js, kv)
    it = kv.keys()
    got = [next(it)]  # the first batch is in; most of the walk is still on the server
    delete_consumers(js, kv)
    got += list(it)
    assert [k for k, n in collections.Counter(got).items() if n > 1] == []
    assert "k.1600" not in got
    assert sorted(got) == sorted(live)
    wait_no_consumers(js, name)


def test_watch_initial_values_through_a_deleted_consumer(js, name):
    kv = bucket(js, name, history=5)
    live = lay_out(js, kv)
    with kv.watch_all() as w:
        first = w.next(5)
        delete_consumers(js, kv)
        initial = [first, *until_none(w)]
        latest = {e.key: e for e in initial}
        assert len(initial) == len(latest), "a key came twice before the initial values were done"
        assert {k: e.value for k, e in latest.items() if e.operation is KeyValueOp.PUT} == live
        assert latest["k.1600"].operation is KeyValueOp.DELETE
        rev = kv.put("k.1", b"after")
        entry = w.next(5)
        assert (entry.key, entry.revision) == ("k.1", rev)


def test_watch_through_a_deleted_consumer_ends_in_the_latest_state(js, name):
    """What holds even with the reset bug: revisions increase, and replaying the entries gives the bucket's state."""
    kv = bucket(js, name, history=5)
    live = lay_out(js, kv)
    with kv.watch_all() as w:
        first = w.next(5)
        delete_consumers(js, kv)
        initial = [first, *until_none(w)]
    revisions = [e.revision for e in initial]
    assert revisions == sorted(set(revisions))
    state: dict[str, bytes] = {}
    for e in initial:
        if e.operation is KeyValueOp.PUT:
            state[e.key] = e.value
        else:
            state.pop(e.key, None)
    assert state == live
    wait_no_consumers(js, name)


def test_purge_deletes_through_a_lost_message_keeps_live_values(fault_proxy):
    with jetstream_sync.connect(fault_proxy.url) as nc:
        js = nc.jetstream()
        kv = js.create_key_value(KeyValueConfig(bucket="resets", history=5))
        fill(js, kv, 300)
        kv.delete("k.250")
        kv.put("k.250", b"alive")  # deleted once, alive now
        kv.put("k.260", b"1")
        kv.delete("k.260")  # deleted now
        # purge_deletes walks the bucket's last entries; lose its 10th message so its consumer is replaced
        lost = fault_proxy.drop_next("downstream", reply="$JS.ACK.KV_resets.>", skip=9)
        cleared = kv.purge_deletes(older_than=None)
        assert lost.wait(timeout=5)
        assert kv.get("k.250").value == b"alive"
        assert cleared == 1
        with pytest.raises(errors.KeyNotFoundError):
            kv.history("k.260")
