"""Watchers against a real server: the initial values and the one None, each option, several filters,
bounded waits, and the server-side consumer gone when the watch ends."""

from __future__ import annotations

import contextlib
import threading
import time

import pytest

from jetstream_sync import KeyValueOp, errors
from tests.helpers import wait_until
from tests.server.jetstream.kv.kvhelpers import consumers, quiet, take, until_none, wait_no_consumers


def test_empty_bucket_none_first_then_changes(kv, js, name):
    with kv.watch_all() as w:
        assert w.next(10) is None
        assert quiet(w)
        rev = kv.put("a", b"1")
        entry = w.next(10)
        assert (entry.key, entry.value, entry.revision, entry.operation) == ("a", b"1", rev, KeyValueOp.PUT)
        assert w.revision == rev
        kv.delete("a")
        kv.purge("a")
        assert [e.operation for e in take(w, 2)] == [KeyValueOp.DELETE, KeyValueOp.PURGE]
        assert consumers(js, name) != []
    wait_no_consumers(js, name)


def test_initial_values_are_the_latest_of_each_key_then_none(kv, js, name):
    kv.put("a", b"1")
    kv.put("b", b"1")
    kv.put("a", b"2")
    kv.put("c", b"1")
    kv.delete("c")
    with kv.watch_all() as w:
        initial = until_none(w)
        assert [(e.key, e.value, e.operation) for e in initial] == [
            ("b", b"1", KeyValueOp.PUT),
            ("a", b"2", KeyValueOp.PUT),
            ("c", b"", KeyValueOp.DELETE),
        ]
        assert initial[-1].delta == 0
        assert w.initial_done
        assert quiet(w)
        kv.put("b", b"2")
        assert w.next(10).value == b"2"
    wait_no_consumers(js, name)


def test_next_timeout_is_our_timeout_error(kv):
    with kv.watch("k") as w:
        assert w.next(10) is None
        with pytest.raises(errors.TimeoutError) as info:
            w.next(0.2)
        assert isinstance(info.value, TimeoutError)


def test_include_history(kv):
    for i in range(3):
        kv.put("k", b"%d" % i)
    kv.put("other", b"x")
    kv.delete("k")
    with kv.watch("k", include_history=True) as w:
        got = until_none(w)
    assert [(e.value, e.operation) for e in got] == [
        (b"0", KeyValueOp.PUT),
        (b"1", KeyValueOp.PUT),
        (b"2", KeyValueOp.PUT),
        (b"", KeyValueOp.DELETE),
    ]


def test_ignore_deletes_still_sends_none_once(kv):
    kv.put("a", b"1")
    kv.put("b", b"1")
    kv.delete("b")  # the newest initial entry is a marker: the None must come anyway
    with kv.watch_all(ignore_deletes=True) as w:
        assert [(e.key, e.value) for e in until_none(w)] == [("a", b"1")]
        kv.delete("a")
        kv.purge("b")
        kv.put("c", b"1")
        entry = w.next(10)
        assert (entry.key, entry.operation) == ("c", KeyValueOp.PUT)
        assert quiet(w)


def test_ignore_deletes_when_every_initial_entry_is_a_marker(kv):
    kv.put("a", b"1")
    kv.delete("a")
    kv.put("b", b"1")
    kv.purge("b")
    with kv.watch_all(ignore_deletes=True) as w:
        assert w.next(10) is None
        assert quiet(w)


def test_meta_only(kv):
    r1 = kv.put("a", b"value-a")
    with kv.watch_all(meta_only=True) as w:
        first = w.next(10)
        assert (first.key, first.value, first.revision) == ("a", b"", r1)
        assert w.next(10) is None
        r2 = kv.put("a", b"second")
        kv.delete("a")
        e2, e3 = take(w, 2)
        assert (e2.value, e2.revision, e2.operation) == (b"", r2, KeyValueOp.PUT)
        assert e3.operation is KeyValueOp.DELETE


def test_updates_only_has_no_none(kv):
    kv.put("a", b"old")
    with kv.watch_all(updates_only=True) as w:
        assert quiet(w)
        kv.put("a", b"new")
        kv.put("b", b"new")
        assert [(e.key, e.value) for e in take(w, 2)] == [("a", b"new"), ("b", b"new")]
        assert quiet(w)


def test_resume_from_revision(kv):
    revs = [kv.put("k", b"%d" % i) for i in range(5)]
    kv.put("other", b"x")
    with kv.watch("k", resume_from_revision=revs[2]) as w:
        got = until_none(w)
        assert [e.revision for e in got] == revs[2:]
        assert [e.value for e in got] == [b"2", b"3", b"4"]
        r = kv.put("k", b"5")
        assert w.next(10).revision == r


def test_resume_after_the_last_revision(kv):
    last = kv.put("k", b"1")
    with kv.watch("k", resume_from_revision=last + 1) as w:
        assert w.next(10) is None
        r = kv.put("k", b"2")
        assert w.next(10).revision == r


def test_several_filters(kv, js, name):
    for key in ("a.1", "a.2.x", "b.1", "b.2.x", "c"):
        kv.put(key, b"0")
    with kv.watch(["a.*", "b.>", "c"]) as w:
        assert sorted(e.key for e in until_none(w)) == ["a.1", "b.1", "b.2.x", "c"]
        for key in ("a.2.x", "a.9", "b.9.y", "zz", "c"):
            kv.put(key, b"1")
        assert [e.key for e in take(w, 3)] == ["a.9", "b.9.y", "c"]
        assert quiet(w)
    wait_no_consumers(js, name)


def test_single_key_filter_is_exact(kv):
    kv.put("a", b"1")
    kv.put("a.b", b"1")
    kv.put("ab", b"1")
    with kv.watch("a") as w:
        assert [e.key for e in until_none(w)] == ["a"]


def test_stop_ends_iteration_and_next(kv, js, name):
    w = kv.watch_all()
    got = []
    t = threading.Thread(target=lambda: got.extend(w))
    t.start()
    kv.put("a", b"1")
    wait_until(lambda: len(got) == 2)  # the None, then the entry
    w.stop()
    t.join(5)
    assert not t.is_alive()
    assert got[0] is None and got[1].key == "a"
    with pytest.raises(errors.IteratorClosedError):
        w.next(0.1)
    wait_no_consumers(js, name)


def test_exit_by_an_exception_leaves_no_consumer(kv, js, name):
    kv.put("a", b"1")
    with pytest.raises(ZeroDivisionError), kv.watch_all():
        assert len(consumers(js, name)) == 1
        1 / 0  # noqa: B018
    wait_no_consumers(js, name)


def test_watch_all_equals_watch_gt(kv):
    kv.put("a.b", b"1")
    with kv.watch_all(include_history=True) as w1, kv.watch(">", include_history=True) as w2:
        assert [e.revision for e in until_none(w1)] == [e.revision for e in until_none(w2)]


def test_ignore_deletes_with_meta_only(kv):
    kv.put("a", b"1")
    kv.put("b", b"1")
    kv.delete("a")
    with kv.watch_all(ignore_deletes=True, meta_only=True) as w:
        assert [(e.key, e.value) for e in until_none(w)] == [("b", b"")]
        kv.purge("b")
        kv.put("c", b"value")
        assert [(e.key, e.value) for e in take(w, 1)] == [("c", b"")]


def test_overlapping_filters_in_keys(kv):
    kv.put("a.b", b"1")
    kv.put("a.c", b"1")
    assert sorted(kv.keys("a.*", "a.b")) == ["a.b", "a.c"]


def test_overlapping_filters_in_watch(kv):
    kv.put("a.b", b"1")
    kv.put("a.c.d", b"1")
    with kv.watch(["a.>", "a.b", "a.*.d"]) as w:
        assert sorted(e.key for e in until_none(w)) == ["a.b", "a.c.d"]


def test_a_deleted_bucket_ends_the_watch_with_bucket_not_found(kv, js, name):
    kv.put("a", b"1")
    with kv.watch_all() as w:
        assert [e.key for e in until_none(w)] == ["a"]
        js.delete_key_value(name)
        started = time.monotonic()
        with pytest.raises(errors.BucketNotFoundError):
            # nothing more can come; the watcher must say why instead of waiting on (bounded: 15 s)
            while time.monotonic() - started < 15:
                with contextlib.suppress(errors.TimeoutError):
                    w.next(1)
        with pytest.raises(errors.BucketNotFoundError):
            w.next(1)
