"""One bucket's reads and writes against a real server: every method, and each typed error (raised before
anything is sent where the arguments alone are wrong)."""

from __future__ import annotations

from datetime import timezone

import pytest

from jetstream_sync import KeyValueEntry, KeyValueOp, errors
from tests.server.jetstream.kv.kvhelpers import bucket, consumers, fill, wait_no_consumers


# -- put / get ---------------------------------------------------------------------------------------------
def test_put_get(kv, name):
    r1 = kv.put("a.b", b"one")
    r2 = kv.put("c", b"")
    r3 = kv.put("a.b", bytearray(b"\x00\xffbin"))
    assert r1 < r2 < r3
    entry = kv.get("a.b")
    assert isinstance(entry, KeyValueEntry)
    assert (entry.bucket, entry.key, entry.value, entry.revision) == (name, "a.b", b"\x00\xffbin", r3)
    assert (entry.delta, entry.operation) == (0, KeyValueOp.PUT)
    assert entry.created.tzinfo is not None
    assert entry.created.astimezone(timezone.utc).year >= 2024
    assert kv.get("c").value == b""


def test_get_revision(kv):
    r1 = kv.put("k", b"1")
    r2 = kv.put("k", b"2")
    assert kv.get("k", revision=r1).value == b"1"
    assert kv.get("k", revision=r2).value == b"2"
    assert kv.get("k", revision=r1).revision == r1


def test_get_revision_of_another_key_is_not_found(kv):
    other = kv.put("other", b"x")
    kv.put("k", b"1")
    with pytest.raises(errors.KeyNotFoundError) as info:
        kv.get("k", revision=other)
    assert type(info.value) is errors.KeyNotFoundError


def test_get_revision_past_the_end_is_not_found(kv):
    last = kv.put("k", b"1")
    with pytest.raises(errors.KeyNotFoundError) as info:
        kv.get("k", revision=last + 100)
    assert type(info.value) is errors.KeyNotFoundError


def test_get_revision_of_a_delete_marker_is_key_deleted(kv):
    kv.put("k", b"1")
    kv.delete("k")
    marker = kv.history("k")[-1]
    with pytest.raises(errors.KeyDeletedError) as info:
        kv.get("k", revision=marker.revision)
    assert info.value.entry.operation is KeyValueOp.DELETE


def test_get_missing_key(kv):
    with pytest.raises(errors.KeyNotFoundError) as info:
        kv.get("never")
    assert type(info.value) is errors.KeyNotFoundError
    assert isinstance(info.value, errors.KeyValueError)


def test_history_is_bounded_by_the_bucket(js, name):
    kv = bucket(js, name, history=3)
    for i in range(5):
        kv.put("k", b"%d" % i)
    hist = kv.history("k")
    assert [e.value for e in hist] == [b"2", b"3", b"4"]
    assert [e.delta for e in hist] == [2, 1, 0]
    assert [e.revision for e in hist] == [3, 4, 5]


def test_history_of_a_missing_key(kv):
    kv.put("other", b"x")
    with pytest.raises(errors.KeyNotFoundError):
        kv.history("k")


# -- create / update ---------------------------------------------------------------------------------------
def test_create_and_key_exists(kv):
    rev = kv.create("k", b"first")
    assert kv.get("k").revision == rev
    with pytest.raises(errors.KeyExistsError) as info:
        kv.create("k", b"second")
    assert isinstance(info.value, errors.KeyWrongLastSequenceError)
    assert kv.get("k").value == b"first"


def test_create_over_a_deleted_key(kv):
    kv.put("k", b"1")
    kv.delete("k")
    rev = kv.create("k", b"again")
    assert kv.get("k").value == b"again" and kv.get("k").revision == rev
    with pytest.raises(errors.KeyExistsError):
        kv.create("k", b"third")


def test_create_over_a_purged_key(kv):
    kv.put("k", b"1")
    kv.purge("k")
    kv.create("k", b"again")
    assert kv.get("k").value == b"again"
    assert [e.operation for e in kv.history("k")] == [KeyValueOp.PURGE, KeyValueOp.PUT]


def test_update(kv):
    r1 = kv.put("k", b"1")
    r2 = kv.update("k", b"2", last=r1)
    assert r2 > r1
    with pytest.raises(errors.KeyWrongLastSequenceError) as info:
        kv.update("k", b"3", last=r1)
    assert type(info.value) is errors.KeyWrongLastSequenceError
    assert kv.get("k").value == b"2"
    assert kv.update("k", b"3", last=r2) > r2


def test_update_of_a_new_key_with_last_zero(kv):
    kv.update("k", b"1", last=0)
    assert kv.get("k").value == b"1"
    with pytest.raises(errors.KeyWrongLastSequenceError):
        kv.update("k", b"2", last=0)


# -- delete / purge ----------------------------------------------------------------------------------------
def test_delete_leaves_a_marker(kv, name):
    kv.put("k", b"1")
    kv.delete("k")
    with pytest.raises(errors.KeyDeletedError) as info:
        kv.get("k")
    marker = info.value.entry
    assert isinstance(marker, KeyValueEntry)
    assert (marker.key, marker.bucket, marker.operation, marker.value) == ("k", name, KeyValueOp.DELETE, b"")
    assert isinstance(info.value, errors.KeyNotFoundError)
    assert [e.operation for e in kv.history("k")] == [KeyValueOp.PUT, KeyValueOp.DELETE]
    assert kv.history("k")[-1].revision == marker.revision


def test_delete_with_last(kv):
    r1 = kv.put("k", b"1")
    kv.put("k", b"2")
    with pytest.raises(errors.KeyWrongLastSequenceError):
        kv.delete("k", last=r1)
    assert kv.get("k").value == b"2"
    kv.delete("k", last=kv.get("k").revision)
    with pytest.raises(errors.KeyDeletedError):
        kv.get("k")


def test_purge_drops_history(kv):
    for i in range(4):
        kv.put("k", b"%d" % i)
    kv.put("other", b"x")
    kv.purge("k")
    hist = kv.history("k")
    assert [(e.operation, e.value) for e in hist] == [(KeyValueOp.PURGE, b"")]
    with pytest.raises(errors.KeyDeletedError) as info:
        kv.get("k")
    assert info.value.entry.operation is KeyValueOp.PURGE
    assert kv.get("other").value == b"x"
    assert kv.status().values == 2


def test_purge_with_last(kv):
    r1 = kv.put("k", b"1")
    r2 = kv.put("k", b"2")
    with pytest.raises(errors.KeyWrongLastSequenceError):
        kv.purge("k", last=r1)
    assert len(kv.history("k")) == 2
    kv.purge("k", last=r2)
    assert [e.operation for e in kv.history("k")] == [KeyValueOp.PURGE]


def test_purge_deletes_now(kv):
    kv.put("del", b"1")
    kv.delete("del")
    kv.put("pur", b"1")
    kv.purge("pur")
    kv.put("live", b"1")
    assert kv.purge_deletes(older_than=None) == 2
    for key in ("del", "pur"):
        with pytest.raises(errors.KeyNotFoundError):
            kv.history(key)
    assert kv.get("live").value == b"1"
    assert kv.status().values == 1
    assert kv.purge_deletes(older_than=0) == 0


def test_purge_deletes_keeps_young_markers(kv, js, name):
    for i in range(3):
        kv.put("k", b"%d" % i)
    kv.delete("k")
    assert kv.purge_deletes() == 1  # default: markers younger than 30 minutes stay, their history goes
    assert [e.operation for e in kv.history("k")] == [KeyValueOp.DELETE]
    assert kv.purge_deletes(older_than=3600) == 1
    assert len(kv.history("k")) == 1
    wait_no_consumers(js, name)


# -- keys --------------------------------------------------------------------------------------------------
def test_keys(kv, js, name):
    assert list(kv.keys()) == []
    for key in ("a.1", "a.2", "b.1", "b.2.x", "c"):
        kv.put(key, b"v")
    kv.put("a.1", b"again")
    kv.delete("b.1")
    kv.put("gone", b"v")
    kv.purge("gone")
    assert sorted(kv.keys()) == ["a.1", "a.2", "b.2.x", "c"]
    assert sorted(kv.keys("a.*")) == ["a.1", "a.2"]
    assert sorted(kv.keys("b.>")) == ["b.2.x"]
    assert sorted(kv.keys("a.1", "c", "b.>")) == ["a.1", "b.2.x", "c"]
    assert sorted(kv.keys("a.*", ">")) == ["a.1", "a.2", "b.2.x", "c"]
    assert list(kv.keys("nothing.*")) == []
    assert len(list(kv.keys())) == len(set(kv.keys()))  # each key once, however often it was written
    wait_no_consumers(js, name)


def test_breaking_out_of_keys_leaves_no_consumer(kv, js, name, small_pulls):
    fill(js, kv, 5000)  # many pulls' worth, so the consumer is still busy when the loop stops
    it = kv.keys()
    assert next(it).startswith("k.")
    assert len(consumers(js, name)) == 1
    it.close()
    wait_no_consumers(js, name)
    for _key in kv.keys():  # noqa: SIM118 - keys() is a bucket call, not a dict's
        break
    wait_no_consumers(js, name)


# -- get_many ----------------------------------------------------------------------------------------------
def test_get_many(kv):
    revs = {k: kv.put(k, k.encode()) for k in ("a", "b", "c.d", "e")}
    kv.put("a", b"newer")
    kv.delete("b")
    kv.put("p", b"1")
    kv.purge("p")
    got = kv.get_many(["e", "a", "b", "c.d", "missing", "p"])
    assert list(got) == ["e", "a", "c.d"]  # in the order asked for; no live value: absent
    assert got["a"].value == b"newer" and got["a"].revision > revs["a"]
    assert got["c.d"].revision == revs["c.d"]
    assert all(e.operation is KeyValueOp.PUT for e in got.values())
    e = kv.get("e")
    assert (got["e"].key, got["e"].value, got["e"].revision, got["e"].bucket) == (e.key, e.value, e.revision, e.bucket)
    assert kv.get_many([]) == {}
    assert kv.get_many(iter(["a"]))["a"].value == b"newer"


def test_get_many_created_is_the_stored_time(js, kv):
    fill(js, kv, 100)
    keys = [f"k.{i}" for i in range(100)]
    many = kv.get_many(keys)
    assert [many[k].created for k in keys] == [kv.get(k).created for k in keys]


# -- refused before sending --------------------------------------------------------------------------------
BAD_KEYS = ["", ".a", "a.", "a..b", "a b", " a", "a ", "a*", "*", ">", "a.>"]


@pytest.fixture
def gone(js, name):
    """A handle on a bucket that was deleted: anything that reaches the server fails as a missing bucket, so
    an argument error from it was raised before sending."""
    kv = bucket(js, name)
    js.delete_key_value(name)
    return kv


@pytest.mark.parametrize("key", BAD_KEYS)
def test_bad_keys_are_refused_before_sending(gone, key):
    calls = [
        lambda: gone.put(key, b"v"),
        lambda: gone.get(key),
        lambda: gone.get(key, revision=1),
        lambda: gone.create(key, b"v"),
        lambda: gone.update(key, b"v", last=1),
        lambda: gone.delete(key),
        lambda: gone.purge(key),
        lambda: gone.history(key),
        lambda: gone.get_many(["ok", key]),
    ]
    for call in calls:
        with pytest.raises(errors.InvalidKeyError):
            call()


@pytest.mark.parametrize("pattern", ["", "a..b", "a*", "a.>.b", ".a"])
def test_bad_filters_are_refused_before_sending(gone, pattern):
    with pytest.raises(errors.InvalidKeyError):
        list(gone.keys(pattern))
    with pytest.raises(errors.InvalidKeyError):
        gone.watch(pattern)
    with pytest.raises(errors.InvalidKeyError):
        gone.watch(["ok.>", pattern])


def test_bad_values_and_revisions_are_refused_before_sending(gone):
    with pytest.raises(errors.InvalidTypeError):
        gone.put("k", "a str")
    with pytest.raises(errors.InvalidTypeError):
        gone.create("k", "a str")
    with pytest.raises(errors.InvalidTypeError):
        gone.update("k", "a str", last=1)
    with pytest.raises(errors.InvalidTypeError):
        gone.put("k", None)
    with pytest.raises(errors.InvalidTypeError):
        gone.get("k", revision="1")
    with pytest.raises(errors.InvalidArgumentError):
        gone.update("k", b"v", last=-1)
    with pytest.raises(errors.InvalidTypeError):
        gone.delete("k", last=True)
    with pytest.raises(errors.InvalidTypeError):
        gone.get_many("abc")


def test_a_value_over_max_payload_is_refused_before_sending(gone):
    too_big = b"x" * (gone.jetstream.client.max_payload + 1)
    with pytest.raises(errors.MaxPayloadError):
        gone.put("k", too_big)
    with pytest.raises(errors.MaxPayloadError):
        gone.create("k", too_big)


def test_conflicting_watch_options_are_refused_before_sending(gone):
    with pytest.raises(errors.InvalidArgumentError):
        gone.watch("k", include_history=True, updates_only=True)
    with pytest.raises(errors.InvalidArgumentError):
        gone.watch_all(updates_only=True, resume_from_revision=2)


# -- a deleted bucket --------------------------------------------------------------------------------------
def test_writes_to_a_deleted_bucket(gone):
    for call in (
        lambda: gone.put("k", b"v"),
        lambda: gone.create("k", b"v"),
        lambda: gone.update("k", b"v", last=1),
        lambda: gone.delete("k"),
        lambda: gone.purge("k"),
    ):
        with pytest.raises(errors.BucketNotFoundError):
            call()


def test_walks_of_a_deleted_bucket(gone):
    with pytest.raises(errors.BucketNotFoundError):
        list(gone.keys())
    with pytest.raises(errors.BucketNotFoundError):
        gone.history("k")
    with pytest.raises(errors.BucketNotFoundError):
        gone.watch_all()
    with pytest.raises(errors.BucketNotFoundError):
        gone.purge_deletes()


def test_get_of_a_deleted_bucket(gone):
    with pytest.raises(errors.BucketNotFoundError):
        gone.get("k")


def test_get_revision_of_a_deleted_bucket(gone):
    with pytest.raises(errors.BucketNotFoundError):
        gone.get("k", revision=1)


def test_status_of_a_deleted_bucket(gone):
    with pytest.raises(errors.BucketNotFoundError):
        gone.status()


def test_get_many_of_a_deleted_bucket(gone):
    with pytest.raises(errors.BucketNotFoundError):
        gone.get_many(["k"])
