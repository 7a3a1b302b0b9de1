"""list and watch: the metadata subjects walked by an ordered consumer."""

from __future__ import annotations

import time

import pytest

from jetstream_sync import DeliverPolicy, ObjectMeta, OrderedConsumerConfig, errors
from tests.helpers import wait_until


def _consumers(js, obs) -> list[str]:
    return list(js.consumer_names(obs.stream_name))


def test_list(obs):
    assert obs.list() == []  # an empty bucket is an empty list, not an error
    obs.put("a", b"1", meta=ObjectMeta(description="first"))
    obs.put("b", b"22")
    obs.put("b", b"333")
    obs.put("c", b"4")
    obs.delete("c")
    obs.add_link("l", obs.info("a"))
    listed = obs.list()
    assert isinstance(listed, list)
    by_name = {i.name: i for i in listed}
    assert sorted(by_name) == ["a", "b", "l"]
    assert by_name["b"].size == 3 and by_name["l"].is_link and by_name["a"].description == "first"
    assert all(i.mtime is not None for i in listed)
    assert sorted(i.name for i in obs.list(show_deleted=True)) == ["a", "b", "c", "l"]
    with pytest.raises(errors.InvalidTypeError):
        obs.list(show_deleted=1)


def test_list_of_only_deleted_objects_is_empty(obs):
    obs.put("a", b"1")
    obs.delete("a")
    assert obs.list() == []
    assert [i.name for i in obs.list(show_deleted=True)] == ["a"]


def test_list_and_reads_leave_no_consumer(js, obs):
    obs.put("a", b"x" * 400_000)
    assert [i.name for i in obs.list()] == ["a"]
    with obs.get("a") as r:
        r.read(10)
    assert obs.get_bytes("a")
    wait_until(lambda: _consumers(js, obs) == [])


def test_watch_initial_values_none_then_changes(obs):
    obs.put("a", b"1")
    obs.put("a", b"11")
    obs.put("b", b"2")
    with obs.watch() as w:
        first = [w.next(5), w.next(5)]
        assert [i.name for i in first] == ["a", "b"] and first[0].size == 2
        assert w.next(5) is None and w.initial_done
        obs.put("c", b"3")
        assert w.next(5).name == "c"
        obs.update_meta("c", ObjectMeta(description="described"))
        assert w.next(5).description == "described"
        obs.delete("a")
        gone = w.next(5)
        assert gone.name == "a" and gone.deleted
        obs.add_link("l", obs.info("b"))
        assert w.next(5).is_link
        with pytest.raises(errors.TimeoutError):
            w.next(0.2)


def test_watch_options(obs):
    obs.put("a", b"1")
    obs.delete("a")
    obs.put("b", b"2")
    with obs.watch(include_history=True, ignore_deletes=True) as w:
        seen = []
        while (info := w.next(5)) is not None:
            seen.append(info.name)
        assert seen == ["b"]  # "a"'s versions were rolled up into its delete, which is ignored
        obs.delete("b")
        obs.put("c", b"3")
        assert w.next(5).name == "c"  # the delete of "b" is skipped
    with obs.watch(updates_only=True) as w:
        obs.put("d", b"4")
        assert w.next(5).name == "d"  # no initial values, no None
    with pytest.raises(errors.InvalidArgumentError):
        obs.watch(include_history=True, updates_only=True)
    with pytest.raises(errors.InvalidTypeError):
        obs.watch(ignore_deletes="no")


def test_watch_empty_bucket_sends_none_first(obs):
    with obs.watch() as w:
        assert w.next(5) is None
        obs.put("x", b"1")
        assert w.next(5).name == "x"


def test_watch_with_only_ignored_deletes_still_sends_none(obs):
    obs.put("a", b"1")
    obs.delete("a")
    with obs.watch(ignore_deletes=True) as w:
        assert w.next(5) is None


def test_watch_iteration_and_stop(js, obs):
    obs.put("a", b"1")
    w = obs.watch()
    got = []
    for info in w:
        got.append(info)
        if info is None:
            w.stop()
    assert [i.name if i else None for i in got] == ["a", None]
    with pytest.raises(errors.IteratorClosedError):
        w.next(1)
    wait_until(lambda: _consumers(js, obs) == [])


def test_a_walk_whose_pending_messages_vanish_ends(js, obs):
    """What list() and a watcher's initial values rely on when the message saying "nothing pending" never
    comes: after a second of silence the ordered consumer asks the server, by consumer sequence (the server
    moves the stream sequence past purged messages without delivering anything), and the walk ends."""
    obs.put("a", b"1")
    obs.put("b", b"2")
    consumer = js.ordered_consumer(
        obs.stream_name,
        OrderedConsumerConfig(filter_subjects=[f"$O.{obs.bucket}.M.>"], deliver_policy=DeliverPolicy.LAST_PER_SUBJECT),
    )
    try:
        assert consumer.cached_info.num_pending == 2
        js.stream(obs.stream_name).purge(subject=f"$O.{obs.bucket}.M.>")  # gone before delivery
        started = time.monotonic()
        with consumer.messages(until_drained=True) as it:
            assert list(it) == []
        assert time.monotonic() - started < 4
        assert consumer.caught_up
    finally:
        consumer.close()
