"""Per-key TTLs on a bucket with limit_marker_ttl (nats-server 2.11+), the markers they leave, and get_many
over more keys than one batched request holds."""

from __future__ import annotations

from datetime import timedelta

import pytest

from jetstream_sync import KeyValueOp, errors
from tests.helpers import wait_until
from tests.server.jetstream.kv.kvhelpers import bucket, fill, gone, stored_last, take, until_none


def test_create_with_ttl_disappears_and_a_watcher_sees_the_marker(js, name):
    kv = bucket(js, name, history=5, limit_marker_ttl=timedelta(seconds=1))
    kv.put("stays", b"v")
    with kv.watch("lock.>") as w:
        assert w.next(2) is None
        rev = kv.create("lock.a", b"me", ttl=1)
        assert w.next(2).revision == rev
        with pytest.raises(errors.KeyExistsError):
            kv.create("lock.a", b"other", ttl=1)
        marker = w.next(4)  # the server removes the value after 1s and leaves a marker
    assert marker.key == "lock.a" and marker.revision > rev
    assert marker.operation is KeyValueOp.PURGE  # Nats-Marker-Reason: MaxAge, read as nats.go does
    assert marker.value == b""
    assert gone(kv, "lock.a")
    assert kv.get("stays").value == b"v"
    assert "lock.a" not in set(kv.keys())
    # the lock is free again: create takes the marker's place
    kv.create("lock.a", b"next", ttl=timedelta(seconds=30))
    assert kv.get("lock.a").value == b"next"


def test_marker_itself_expires(js, name):
    kv = bucket(js, name, limit_marker_ttl=1)
    kv.create("k", b"v", ttl=1)
    wait_until(lambda: gone(kv, "k"), timeout=4)
    wait_until(lambda: kv.status().values == 0, timeout=4)  # the 1s marker goes as well
    with pytest.raises(errors.KeyNotFoundError) as info:
        kv.get("k")
    assert type(info.value) is errors.KeyNotFoundError


def test_purge_with_ttl_removes_its_marker(js, name):
    # nats-server 2.15 raises a message's TTL to at least limit_marker_ttl, so the bucket's is 1s as well
    kv = bucket(js, name, history=3, limit_marker_ttl=1)
    for key in ("a", "b"):
        kv.put(key, b"1")
        kv.put(key, b"2")
    kv.purge("a", ttl=1)
    kv.purge("b")
    assert [e.operation for e in kv.history("a")] == [KeyValueOp.PURGE]
    wait_until(lambda: kv.status().values == 1, timeout=4)
    with pytest.raises(errors.KeyNotFoundError):
        kv.history("a")
    assert [e.operation for e in kv.history("b")] == [KeyValueOp.PURGE]  # no ttl: the marker stays


def test_bucket_ttl_leaves_a_marker(js, name):
    kv = bucket(js, name, ttl=1, limit_marker_ttl=30)
    kv.put("k", b"v")
    with kv.watch("k") as w:
        assert [e.value for e in until_none(w)] == [b"v"]
        (marker,) = take(w, 1, timeout=4)
    assert marker.operation is KeyValueOp.PURGE
    with pytest.raises(errors.KeyDeletedError) as info:
        kv.get("k")
    assert info.value.entry.revision == marker.revision


def test_a_lock_with_one_key_of_history_frees_itself_and_the_marker_stays(js, name):
    # history 1: the server keeps the key's own TTL (with more history it raises a TTL below
    # limit_marker_ttl to limit_marker_ttl, so that no marker is missed)
    kv = bucket(js, name, limit_marker_ttl=timedelta(seconds=30))
    with kv.watch("lock") as w:
        assert w.next(2) is None
        rev = kv.create("lock", b"me", ttl=timedelta(seconds=1))
        assert stored_last(js, kv, "lock").headers["Nats-TTL"] in ("1000ms", "1s", "1")
        assert w.next(2).revision == rev
        marker = w.next(4)
    assert (marker.key, marker.operation, marker.value) == ("lock", KeyValueOp.PURGE, b"")
    stored = stored_last(js, kv, "lock")
    assert stored.seq == marker.revision
    assert stored.headers["Nats-Marker-Reason"] == "MaxAge"  # what the server writes: no KV-Operation header
    assert "KV-Operation" not in stored.headers
    with pytest.raises(errors.KeyDeletedError) as info:
        kv.get("lock")
    assert (info.value.entry.revision, info.value.entry.operation) == (marker.revision, KeyValueOp.PURGE)
    assert [e.operation for e in kv.history("lock")] == [KeyValueOp.PURGE]
    assert list(kv.keys()) == []
    assert kv.get_many(["lock"]) == {}
    assert kv.create("lock", b"you") > marker.revision  # free: create takes the marker's place


def test_the_bucket_ttl_marker_says_max_age(js, name):
    kv = bucket(js, name, ttl=1, limit_marker_ttl=30, history=3)
    kv.put("k", b"1")
    kv.put("k", b"2")
    wait_until(lambda: gone(kv, "k"), timeout=5)
    stored = stored_last(js, kv, "k")
    assert stored.headers["Nats-Marker-Reason"] == "MaxAge"
    hist = kv.history("k")
    assert [(e.operation, e.value) for e in hist] == [(KeyValueOp.PURGE, b"")]  # the values went, the marker stays


def test_purge_with_ttl_writes_the_ttl_on_the_marker(js, name):
    kv = bucket(js, name, limit_marker_ttl=60)
    kv.put("k", b"1")
    kv.purge("k", ttl=timedelta(minutes=2))
    headers = stored_last(js, kv, "k").headers
    assert (headers["KV-Operation"], headers["Nats-Rollup"]) == ("PURGE", "sub")
    assert headers["Nats-TTL"] in ("120000ms", "120s", "2m0s", "120")


def test_ttl_below_a_second_is_refused_before_sending(js, name):
    kv = bucket(js, name, limit_marker_ttl=1)
    js.delete_key_value(name)
    with pytest.raises(errors.InvalidArgumentError) as info:
        kv.create("k", b"v", ttl=0.5)
    assert info.value.field == "ttl"
    with pytest.raises(errors.InvalidArgumentError):
        kv.purge("k", ttl=timedelta(milliseconds=10))


def test_ttl_without_limit_marker_ttl_is_refused_before_sending(js, name):
    kv = bucket(js, name)
    js.delete_key_value(name)  # anything sent would fail as a missing bucket
    with pytest.raises(errors.InvalidArgumentError) as info:
        kv.create("k", b"v", ttl=1)
    assert info.value.field == "ttl"
    with pytest.raises(errors.InvalidArgumentError):
        kv.purge("k", ttl=1)


def test_get_many_1500_keys(js, name):
    kv = bucket(js, name)
    fill(js, kv, 1500)
    kv.delete("k.7")
    kv.purge("k.1499")
    last = kv.put("k.0", b"newest")
    wanted = [f"k.{i}" for i in range(1500)] + ["missing"]
    got = kv.get_many(wanted)
    assert len(got) == 1498
    assert list(got) == [k for k in wanted if k not in ("k.7", "k.1499", "missing")]
    assert got["k.0"].value == b"newest" and got["k.0"].revision == last
    assert got["k.1200"].value == b"v" and got["k.1200"].revision == 1201


def test_put_and_update_with_ttl(js, name):
    kv = bucket(js, name, limit_marker_ttl=1)
    kv.put("p", b"1", ttl=1)
    rev = kv.put("u", b"1", ttl=timedelta(seconds=60))
    assert stored_last(js, kv, "p").headers["Nats-TTL"] in ("1000ms", "1s", "1")
    kv.update("u", b"2", last=rev, ttl=1)
    wait_until(lambda: gone(kv, "p") and gone(kv, "u"), timeout=5)  # both end by their own TTL
    rev = kv.put("n", b"1", ttl=1)
    kv.update("n", b"2", last=rev)  # an update without ttl replaces the value with one that never ends
    assert "Nats-TTL" not in (stored_last(js, kv, "n").headers or {})
    with pytest.raises(errors.KeyWrongLastSequenceError):
        kv.update("n", b"3", last=rev, ttl=1)
    plain = bucket(js, name + "P")
    with pytest.raises(errors.InvalidArgumentError):
        plain.put("k", b"v", ttl=1)  # refused before sending, as create's
    with pytest.raises(errors.InvalidArgumentError):
        kv.put("k", b"v", ttl=0.5)
