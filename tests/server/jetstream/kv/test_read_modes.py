"""Read modes and compare-and-set ids on one server (the cluster behaviour is in tests/server/cluster)."""

from __future__ import annotations

import pytest

from jetstream_sync import KeyValueConfig, StreamConfig, errors
from jetstream_sync.jetstream._consistency import known_revisions_of


@pytest.mark.parametrize("mode", ["direct", "read_your_writes", "leader"])
def test_every_read_mode_reads_the_value_and_the_revision(js, name, mode):
    kv = js.create_key_value(KeyValueConfig(bucket=name), read=mode)
    assert kv.read == mode
    rev = kv.put("a", b"1")
    kv.put("b", b"2")
    assert (kv.get("a").value, kv.get("a").revision) == (b"1", rev)
    assert kv.get("a", revision=rev).value == b"1"
    assert {k: e.value for k, e in kv.get_many(["a", "b", "none"]).items()} == {"a": b"1", "b": b"2"}
    kv.delete("a")
    with pytest.raises(errors.KeyDeletedError):
        kv.get("a")


def test_a_read_mode_per_call_overrides_the_handle(kv):
    kv.put("a", b"1")
    assert kv.get("a", read="leader").value == b"1"
    assert kv.get_many(["a"], read="direct")["a"].value == b"1"


@pytest.mark.parametrize("bad", ["strong", None])
def test_an_unknown_read_mode_is_refused_before_anything_is_sent(js, kv, bad):
    with pytest.raises(errors.InvalidArgumentError, match="read_your_writes"):
        js.key_value(kv.bucket, read=bad)
    with pytest.raises(errors.InvalidArgumentError, match="read_your_writes"):
        kv.get("a", read="strong")


def test_a_key_whose_history_was_purged_is_not_found_and_forgotten(kv, client):
    """What the client knows of a key does not outlive the key: once its history is purged from the stream (by
    anyone), the leader's "not found" is believed, and the key forgotten (no leader read for it any more)."""
    kv.put("gone", b"1")
    kv.purge("gone")
    kv.purge_deletes(older_than=None)
    with pytest.raises(errors.KeyNotFoundError):
        kv.get("gone")
    known = known_revisions_of(client)
    assert known.known(kv.jetstream.api_prefix, kv._incarnation, kv.prefix + "gone") == 0


def test_each_compare_and_set_carries_its_own_message_id(kv):
    rev = kv.create("k", b"1")
    rev = kv.update("k", b"2", last=rev)
    ids = [entry_id(kv, r) for r in (rev - 1, rev)]
    assert all(ids) and ids[0] != ids[1]
    with pytest.raises(errors.KeyWrongLastSequenceError):
        kv.update("k", b"3", last=rev - 1)


def entry_id(kv, revision: int) -> str | None:
    return kv.jetstream.stream(kv.stream_name).get_msg(revision).headers.get("Nats-Msg-Id")


def test_a_bucket_made_anew_under_a_handle_is_read_without_holding_it_to_the_old_revisions(js, name):
    """Revisions start at 1 again in a bucket deleted and created anew: the old handle's reads find the new
    incarnation (its stream's creation time) instead of taking revision 1 for a stale answer."""
    # Another stream keeps the account's store directory in use: nats-server removes that directory, when empty,
    # on a goroutine after deleting an account's last stream, which can race the next create's mkdir (CI once
    # saw "error creating store for stream", 500/10049, with four suites running at once).
    js.create_stream(StreamConfig(name=f"{name}_OTHER", subjects=[f"{name}.other"]))
    old = js.create_key_value(KeyValueConfig(bucket=name))
    old.put("k", b"1")
    old.put("k", b"2")
    js.delete_key_value(name)
    js.create_key_value(KeyValueConfig(bucket=name)).put("k", b"new")
    assert (old.get("k").value, old.get("k").revision) == (b"new", 1)
    assert old.put("k", b"newer") == 2 and old.get("k").value == b"newer"
