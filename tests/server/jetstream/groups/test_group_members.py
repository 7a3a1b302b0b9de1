"""Group members on a real server, in one process: bad input refused before anything is sent, static members,
instances of one member taking over from each other, rebalancing, a deleted or changed group, per-member lag."""

from __future__ import annotations

import collections
import json
import threading
import time

import pytest

import jetstream_sync
from jetstream_sync import (
    AckPolicy,
    ConsumerConfig,
    MemberMapping,
    PartitionedGroups,
    PartitioningFilter,
    StreamConfig,
    errors,
)
from jetstream_sync.codecs import JsonCodec
from tests.helpers import create_partitioned_stream, wait_until


def _keyed_stream(js, name):
    js.create_stream(StreamConfig(name=name, subjects=[f"{name}.*"]))
    return [PartitioningFilter(filter=f"{name}.*", partitioning_wildcards=[1])]


def test_bad_input_is_refused_before_anything_is_sent(js, name):
    js.create_stream(StreamConfig(name=name, subjects=[f"{name}.*"]))
    groups = PartitionedGroups(js)
    refused = [
        (errors.InvalidArgumentError, lambda: groups.create_elastic(name, "g", 0)),
        (errors.InvalidArgumentError, lambda: groups.create_static(name, "g", 2, members=["a.b"])),
        (
            errors.InvalidArgumentError,
            lambda: groups.create_static(name, "g", 3, member_mappings=[MemberMapping(member="a", partitions=[0, 1])]),
        ),
        (
            errors.InvalidArgumentError,
            lambda: groups.create_elastic(name, "g", 3, partitioning_filters=[PartitioningFilter(filter=f"{name}.x")]),
        ),
        (errors.InvalidArgumentError, lambda: groups.create_elastic(name, "g.x", 3)),
        (errors.InvalidArgumentError, lambda: groups.create_elastic("a b", "g", 3)),
        (errors.InvalidArgumentError, lambda: groups.join_elastic(name, "g", "m.1", print)),
        (errors.InvalidArgumentError, lambda: groups.join_elastic(name, "g", "m1", print, priority_group="x")),
        (errors.InvalidArgumentError, lambda: groups.join_elastic(name, "g", "m1", print, ack_wait=-1)),
        (errors.InvalidArgumentError, lambda: groups.join_static(name, "g", "m1", print, auto_membership=True)),
        (
            errors.InvalidArgumentError,
            lambda: groups.join_elastic(
                name, "g", "m1", print, consumer_config=ConsumerConfig(ack_policy=AckPolicy.NONE)
            ),
        ),
        (errors.InvalidTypeError, lambda: groups.join_elastic(name, "g", "m1", "not callable")),
        (errors.InvalidTypeError, lambda: groups.add_members(name, "g", "m1")),
        (errors.InvalidArgumentError, lambda: groups.join_elastic(name, "g", "m1", print, workers=0)),
        (errors.InvalidArgumentError, lambda: groups.join_elastic(name, "g", "m1", print, max_messages=0)),
        (errors.InvalidArgumentError, lambda: groups.join_elastic(name, "g", "m1", print, no_such_option=1)),
    ]
    for error, call in refused:
        with pytest.raises(error):
            call()
    assert list(js.key_value_store_names()) == []  # no bucket: nothing was written
    assert sorted(js.stream_names()) == [name]
    assert list(js.consumer_names(name)) == []


def test_joining_what_does_not_exist_or_does_not_include_you(js, name):
    js.create_stream(StreamConfig(name=name, subjects=[f"{name}.*"]))
    groups = PartitionedGroups(js)
    with pytest.raises(errors.ConsumerGroupNotFoundError, match="there is no elastic consumer group yet"):
        groups.join_elastic(name, "g", "m1", print)
    groups.create_static(name, "s", 2, members=["a", "b"])
    with pytest.raises(errors.ConsumerGroupNotFoundError, match=f"no static consumer group 'nope' on stream '{name}'"):
        groups.join_static(name, "nope", "a", print)
    with pytest.raises(errors.ConsumerGroupError, match="'c' is not a member of static consumer group"):
        groups.join_static(name, "s", "c", print)
    with pytest.raises(errors.ConsumerGroupExistsError, match="exists with another config"):
        groups.create_static(name, "s", 2, members=["a", "c"])
    assert groups.create_static(name, "s", 2, members=["a", "b"]).members == ["a", "b"]  # the same again: fine
    groups.create_elastic(name, "e", 2)
    groups.set_member_mappings(name, "e", [MemberMapping(member="x", partitions=[0, 1])])
    with pytest.raises(errors.ConsumerGroupError, match="maps partitions by hand"):
        groups.add_members(name, "e", ["y"])
    with pytest.raises(errors.ConsumerGroupError, match="auto_membership needs a group with a members list"):
        groups.join_elastic(name, "e", "y", print, auto_membership=True)


def test_static_members_read_their_partitions_with_the_published_subject(js, name):
    create_partitioned_stream(js, name, 4)
    groups = PartitionedGroups(js)
    groups.create_static(name, "g", 4, members=["a", "b"])
    seen: dict[str, list[str]] = collections.defaultdict(list)

    def handler(member):
        return lambda msg: (seen[member].append(msg.subject), msg.ack())

    with (
        groups.join_static(name, "g", "a", handler("a"), ack_wait=2),
        groups.join_static(name, "g", "b", handler("b"), ack_wait=2),
    ):
        for i in range(40):
            js.publish(f"{name}.k{i % 8}", b"x")
        wait_until(lambda: len(seen["a"]) + len(seen["b"]) == 40, timeout=10)
    assert seen["a"] and seen["b"]
    assert not set(seen["a"]) & set(seen["b"])  # a key belongs to one member
    assert all(subject.startswith(f"{name}.k") for subject in seen["a"] + seen["b"])


def test_one_instance_of_a_member_reads_and_another_takes_over_when_it_leaves(js, name):
    filters = _keyed_stream(js, name)
    groups = PartitionedGroups(js)
    groups.create_elastic(name, "g", 3, partitioning_filters=filters)
    groups.add_members(name, "g", ["m"])
    counts = collections.Counter()
    first = groups.join_elastic(name, "g", "m", lambda msg: (counts.update(["first"]), msg.ack()), ack_wait=1)
    second = groups.join_elastic(name, "g", "m", lambda msg: (counts.update(["second"]), msg.ack()), ack_wait=1)
    try:
        for i in range(20):
            js.publish(f"{name}.k{i}", b"x")
        wait_until(lambda: sum(counts.values()) == 20, timeout=10)
        assert len(counts) == 1  # pinned: one instance reads
        reading, _waiting = (first, second) if counts["first"] else (second, first)
        reading.stop(timeout=10)
        for i in range(20):
            js.publish(f"{name}.k{i}", b"x")
        wait_until(lambda: sum(counts.values()) == 40, timeout=15)
        assert counts["first"] == 20 and counts["second"] == 20
    finally:
        first.stop(timeout=10)
        second.stop(timeout=10)


def test_partitions_move_when_members_are_added_and_removed_and_never_overlap(js, name):
    filters = _keyed_stream(js, name)
    groups = PartitionedGroups(js)
    groups.create_elastic(name, "g", 6, partitioning_filters=filters)
    groups.add_members(name, "g", ["a", "b"])
    lock = threading.Lock()
    busy: dict[str, str] = {}
    overlaps: list[str] = []
    order: dict[str, list[int]] = collections.defaultdict(list)

    def handler(member):
        def handle(msg):
            with lock:
                if msg.subject in busy:
                    overlaps.append(f"{msg.subject}: {member} while {busy[msg.subject]}")
                busy[msg.subject] = member
            time.sleep(0.001)  # a handling that lasts, so two members' handlings of one key could overlap
            with lock:
                del busy[msg.subject]
                order[msg.subject].append(int(msg.data))
            msg.ack()

        return handle

    members = {m: groups.join_elastic(name, "g", m, handler(m), ack_wait=2, workers=2, ordered_by=lambda x: x.subject)
               for m in ("a", "b", "c")}  # fmt: skip
    try:
        wait_until(lambda: members["a"].consuming and members["b"].consuming, timeout=10)
        assert not members["c"].consuming  # not in the membership yet
        for i in range(600):
            js.publish_async(f"{name}.k{i % 12}", str(i).encode())
            if i == 200:
                groups.add_members(name, "g", ["c"])
            elif i == 400:
                groups.remove_members(name, "g", ["a"])
        js.publish_async_complete(timeout=10)
        wait_until(lambda: sum(len(set(v)) for v in order.values()) == 600, timeout=30)
        wait_until(lambda: members["c"].consuming and not members["a"].consuming, timeout=10)
        assert sorted(members["b"].partitions + members["c"].partitions) == list(range(6))
    finally:
        for member in members.values():
            member.stop(timeout=10)
    assert overlaps == []
    for key, seqs in order.items():
        firsts = list(dict.fromkeys(seqs))
        assert firsts == sorted(firsts), key


def test_a_deleted_group_ends_its_members_and_a_changed_layout_stops_them_with_an_error(js, name):
    filters = _keyed_stream(js, name)
    groups = PartitionedGroups(js)
    groups.create_elastic(name, "g", 2, partitioning_filters=filters)
    member = groups.join_elastic(name, "g", "m", lambda msg: msg.ack(), auto_membership=True, ack_wait=1)
    wait_until(lambda: member.consuming, timeout=10)
    kv = js.key_value("elastic-consumer-groups")
    kv.put(f"{name}.g", groups.elastic_config(name, "g").to_json().replace(b'"max_members":2', b'"max_members":3'))
    member.wait(timeout=10)
    assert isinstance(member.error, errors.ConsumerGroupError)
    assert "changed in a way its members cannot follow" in str(member.error)

    groups.delete_elastic(name, "g")
    groups.create_elastic(name, "g", 2, partitioning_filters=filters)
    member = groups.join_elastic(name, "g", "m", lambda msg: msg.ack(), auto_membership=True, ack_wait=1)
    wait_until(lambda: member.consuming, timeout=10)
    groups.delete_elastic(name, "g")
    member.wait(timeout=10)
    assert member.error is None


def test_a_handler_that_raises_system_exit_ends_its_member(js, name):
    filters = _keyed_stream(js, name)
    groups = PartitionedGroups(js)
    groups.create_elastic(name, "g", 2, partitioning_filters=filters)

    def handler(msg):
        raise SystemExit(3)

    member = groups.join_elastic(name, "g", "m", handler, auto_membership=True, ack_wait=1)
    js.publish(f"{name}.k", b"x")
    member.wait(timeout=10)
    assert isinstance(member.error, SystemExit)
    assert groups.elastic_config(name, "g").members is None  # it left the membership


def test_member_status_reports_each_members_lag(js, name):
    filters = _keyed_stream(js, name)
    groups = PartitionedGroups(js)
    groups.create_elastic(name, "g", 2, partitioning_filters=filters)
    groups.add_members(name, "g", ["busy", "absent"])
    release = threading.Event()
    member = groups.join_elastic(
        name, "g", "busy", lambda msg: (release.wait(10), msg.ack()), ack_wait=5, max_messages=5
    )
    try:
        for i in range(200):
            js.publish(f"{name}.k{i % 20}", b"x")
        work = f"{name}-g"
        wait_until(lambda: js.stream_info(work).state.messages == 200, timeout=10)
        wait_until(lambda: js.consumer_info(work, "busy").num_ack_pending == 5, timeout=10)
        # the known backlog: every message of busy's partition (1) is still there, none acknowledged
        mine = sum(js.stream_info(work, subjects_filter="1.>").state.subjects.values())
        statuses = {s.member: s for s in groups.member_status(name, "g", elastic=True)}
        info = js.consumer_info(work, "busy")
        busy = statuses["busy"]
        assert busy.active and busy.pinned and busy.partitions == [1]  # sorted: absent 0, busy 1
        assert busy.lag is not None
        assert (busy.lag.ack_pending, busy.lag.pending, busy.lag.redelivered) == (5, mine - 5, 0)
        assert (busy.lag.pending, busy.lag.ack_pending) == (info.num_pending, info.num_ack_pending)
        assert busy.lag.waiting == info.num_waiting and busy.lag.consumer == "busy"
        absent = statuses["absent"]
        assert (absent.active, absent.lag, absent.partitions) == (False, None, [0])
    finally:
        release.set()
        member.stop(timeout=10)


def test_members_keep_reading_across_a_stalled_link(fault_proxy, caplog):
    """The link stalls for longer than a request's timeout (0.5 s here): the members' control steps fail (said
    once at WARNING), are retried, and the members read on when it flows again."""
    with jetstream_sync.connect(fault_proxy.url, name="group-stall") as nc:
        js = nc.jetstream(timeout=0.5)
        filters = _keyed_stream(js, "RS")
        groups = PartitionedGroups(js)
        groups.create_elastic("RS", "g", 4, partitioning_filters=filters)
        lock = threading.Lock()
        seen: set[bytes] = set()

        def handle(msg):
            with lock:
                seen.add(msg.data)
            msg.ack()

        a = groups.join_elastic("RS", "g", "a", handle, auto_membership=True, ack_wait=1)
        b = groups.join_elastic("RS", "g", "b", handle, auto_membership=True, ack_wait=1)
        try:
            for i in range(50):
                js.publish(f"RS.k{i}", b"before-%d" % i)
            wait_until(lambda: len(seen) == 50, timeout=10)
            fault_proxy.stall()
            # a member says so when a control step fails (the link is stalled: its requests time out)
            wait_until(lambda: any("group member" in r.getMessage() for r in caplog.records), timeout=15)
            fault_proxy.resume()

            def published_after() -> bool:
                try:
                    js.publish("RS.k0", b"probe")
                except errors.JetStreamError:
                    return False
                return True

            wait_until(published_after, timeout=15, interval=0.2)
            for i in range(50):
                js.publish(f"RS.k{i}", b"after-%d" % i)
            wait_until(lambda: len(seen) == 101, timeout=30, interval=0.1)
            assert not a.closed.is_set() and not b.closed.is_set()
            assert (a.error, b.error) == (None, None)
            assert sorted(groups.elastic_config("RS", "g").members or []) == ["a", "b"]
            assert any("trying again" in r.getMessage() for r in caplog.records)
        finally:
            a.stop(timeout=10)
            b.stop(timeout=10)


def test_a_static_member_never_replaces_its_durable_with_other_settings(js, name):
    js.create_stream(StreamConfig(name=name, subjects=[f"{name}.*"]))
    groups = PartitionedGroups(js)
    groups.create_static(name, "g", 2, members=["a"])
    first = groups.join_static(name, "g", "a", lambda msg: msg.ack(), ack_wait=2)
    wait_until(lambda: first.consuming, timeout=10)
    first.stop(timeout=10)
    created = js.consumer_info(name, "g-a").created
    other = groups.join_static(name, "g", "a", lambda msg: msg.ack(), ack_wait=3)
    other.wait(timeout=10)
    assert isinstance(other.error, errors.ConsumerGroupError)
    assert "exists with another config" in str(other.error)
    assert js.consumer_info(name, "g-a").created == created  # the member's position is kept


def test_a_member_reads_typed_payloads_and_keys_on_them(js, name):
    """``codec=`` as in consume(): the handler's and the key function's ``msg.value`` is the decoded payload."""
    filters = _keyed_stream(js, name)
    groups = PartitionedGroups(js)
    groups.create_elastic(name, "g", 2, partitioning_filters=filters)
    lock = threading.Lock()
    got: dict[int, list[int]] = collections.defaultdict(list)

    def handle(msg):
        with lock:
            got[msg.value["order"]].append(msg.value["step"])
        msg.ack()

    member = groups.join_elastic(
        name,
        "g",
        "m",
        handle,
        auto_membership=True,
        codec=JsonCodec(),
        workers=3,
        ordered_by=lambda msg: msg.value["order"],
    )
    try:
        for step in range(10):
            for order in range(6):
                js.publish(f"{name}.o{order}", json.dumps({"order": order, "step": step}).encode())
        wait_until(lambda: sum(len(v) for v in got.values()) == 60, timeout=10)
    finally:
        member.stop(timeout=10)
    assert got == {order: list(range(10)) for order in range(6)}
    with pytest.raises(errors.InvalidTypeError):
        groups.join_elastic(name, "g", "x", handle, codec=JsonCodec)  # the class, not a codec


def test_the_control_loop_retries_a_transient_failure_but_not_refused_input(js, name):
    # A step of a member's control loop that times out is tried again on the next tick; one that raises
    # InvalidArgumentError would fail the same way for ever, so it ends the member (logged with its traceback)
    # instead of spinning unseen behind a DEBUG line.
    create_partitioned_stream(js, name, 2)
    groups = PartitionedGroups(js)
    groups.create_static(name, "g", 2, members=["a"])

    def timing_out() -> None:
        raise errors.TimeoutError("the server did not answer in time")

    def refused() -> None:
        raise errors.InvalidArgumentError("max_messages", "must be >= 1")

    with groups.join_static(name, "g", "a", lambda msg: msg.ack(), ack_wait=2) as member:
        assert member._guarded(timing_out) is True
        with pytest.raises(errors.InvalidArgumentError, match="max_messages"):
            member._guarded(refused)
