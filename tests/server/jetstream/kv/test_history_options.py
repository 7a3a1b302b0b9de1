"""A key's history without its values (``meta_only``) and without its delete and purge markers
(``ignore_deletes``), as nats.go's History takes MetaOnly() and IgnoreDeletes(), against a real server."""

from __future__ import annotations

import pytest

from jetstream_sync import KeyValueOp, errors


def _view(entries):
    return [(e.value, e.revision, e.operation) for e in entries]


def test_meta_only_leaves_the_values_on_the_server(js, kv):
    first = kv.put("k", b"v" * 5000)
    kv.delete("k")
    third = kv.put("k", b"w" * 5000)
    full = kv.history("k")
    meta = kv.history("k", meta_only=True)
    assert [(e.revision, e.operation, e.created) for e in meta] == [(e.revision, e.operation, e.created) for e in full]
    assert [e.value for e in meta] == [b"", b"", b""]
    assert [e.revision for e in meta] == [first, first + 1, third]
    assert [e.value[:1] for e in full] == [b"v", b"", b"w"]


def test_ignore_deletes_leaves_the_markers_out(kv):
    kv.put("k", b"1")
    kv.delete("k")
    kv.put("k", b"2")
    kv.purge("k")  # a purge leaves its marker alone in the history
    kv.put("k", b"3")
    kv.put("k", b"4")
    assert _view(kv.history("k"))[-3:] == [
        (b"", 4, KeyValueOp.PURGE),
        (b"3", 5, KeyValueOp.PUT),
        (b"4", 6, KeyValueOp.PUT),
    ]
    assert _view(kv.history("k", ignore_deletes=True)) == [(b"3", 5, KeyValueOp.PUT), (b"4", 6, KeyValueOp.PUT)]
    both = kv.history("k", ignore_deletes=True, meta_only=True)
    assert _view(both) == [(b"", 5, KeyValueOp.PUT), (b"", 6, KeyValueOp.PUT)]


def test_a_key_with_only_markers_left_is_not_found(kv):
    kv.put("gone", b"1")
    kv.purge("gone")
    assert [e.operation for e in kv.history("gone")] == [KeyValueOp.PURGE]
    with pytest.raises(errors.KeyNotFoundError):
        kv.history("gone", ignore_deletes=True)
    with pytest.raises(errors.KeyNotFoundError):
        kv.history("never", meta_only=True)


def test_bad_options_are_refused_before_sending(js, kv, name):
    with pytest.raises(errors.InvalidTypeError) as info:
        kv.history("k", meta_only="yes")
    assert info.value.field == "meta_only"
    with pytest.raises(errors.InvalidTypeError) as info:
        kv.history("k", ignore_deletes=1)
    assert info.value.field == "ignore_deletes"
    assert list(js.consumer_names(f"KV_{name}")) == []
