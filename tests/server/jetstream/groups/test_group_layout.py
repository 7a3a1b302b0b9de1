"""Groups built by our code, read back from the server and compared with orbit.go's layout (the values in
tests/orbit_pcgroups.py, worked out from the Go sources with file and line): the buckets, keys and stored JSON,
the elastic group's work-queue stream and its source transform, the members' consumers (names, filters, priority
group, pin timeout, inactivity threshold), and a group written as orbit writes it, joined by our member."""

from __future__ import annotations

import threading

from jetstream_sync import MemberMapping, PartitionedGroups, PartitioningFilter, StreamConfig
from tests import orbit_pcgroups as orbit
from tests.helpers import create_partitioned_stream, wait_until

_NS = 1_000_000_000


def _wire(js, stream, consumer):
    """The consumer's config as the server holds it, in JSON field names (durations in nanoseconds)."""
    return js.consumer_info(stream, consumer).config.to_json()


def test_static_group_layout(js, name):
    # the stream numbers partitions itself, as orbit's scripts/static_stream_setup.sh sets it up
    create_partitioned_stream(js, name, 4)
    groups = PartitionedGroups(js)
    groups.create_static(name, "cg", 4, members=["a", "b"], filters=[f"{name}.*"])
    groups.create_static(name, "mapped", 4, member_mappings=[MemberMapping(member="x", partitions=[0, 1, 2, 3])])

    kv = js.key_value(orbit.STATIC_BUCKET)
    status = kv.status()
    assert status.stream_info.config.storage.value == orbit.BUCKET_STORAGE
    assert status.history == 1
    assert sorted(kv.keys()) == [orbit.config_key(name, "cg"), orbit.config_key(name, "mapped")]
    expected = orbit.STATIC_JSON[0][4].replace(b"foo.*", f"{name}.*".encode())
    assert kv.get(orbit.config_key(name, "cg")).value == expected

    member = groups.join_static(name, "cg", "b", lambda msg: msg.ack(), ack_wait=2)
    try:
        wait_until(lambda: member.consuming, timeout=10)
        consumer = orbit.static_consumer("cg", "b")
        wire = _wire(js, name, consumer)
        assert wire["durable_name"] == consumer
        assert wire["filter_subjects"] == [f"2.{name}.*", f"3.{name}.*"]
        assert wire["priority_groups"] == [orbit.PRIORITY_GROUP]
        assert wire["priority_policy"] == "pinned_client"
        assert wire["priority_timeout"] == 2 * _NS
        assert wire["ack_wait"] == 2 * _NS
    finally:
        member.stop(timeout=10)
    assert consumer in set(js.consumer_names(name))  # a static member's durable outlives its instances
    groups.delete_static(name, "cg")
    assert consumer not in set(js.consumer_names(name))
    assert groups.static_groups(name) == ["mapped"]


def test_elastic_group_layout(js, name):
    js.create_stream(StreamConfig(name=name, subjects=[f"{name}.*.*"]))
    groups = PartitionedGroups(js)
    groups.create_elastic(
        name,
        "cg",
        12,
        partitioning_filters=[PartitioningFilter(filter=f"{name}.*.*", partitioning_wildcards=[2])],
        max_buffered_msgs=1000,
        max_buffered_bytes=1048576,
    )
    kv = js.key_value(orbit.ELASTIC_BUCKET)
    assert (
        kv.get(orbit.config_key(name, "cg")).value
        == (
            f'{{"max_members":12,"partitioning_filters":[{{"filter":"{name}.*.*","partitioning_wildcards":[2]}}],'
            '"max_buffered_msg":1000,"max_buffered_bytes":1048576}'
        ).encode()
    )

    work = js.stream_info(orbit.work_stream(name, "cg")).config.to_json()
    for field, value in orbit.WORK_STREAM.items():
        assert work[field] == value, field
    assert (work["max_msgs"], work["max_bytes"]) == (1000, 1048576)
    (source,) = work["sources"]
    assert source["name"] == name
    dest = orbit.TRANSFORMS[1][3].replace("foo", name)
    assert source["subject_transforms"] == [{"src": f"{name}.*.*", "dest": dest}]

    # a message lands in the work-queue stream under its partition, as the transform says
    js.publish(f"{name}.eu.k1", b"x")
    wait_until(lambda: js.stream_info(orbit.work_stream(name, "cg")).state.messages == 1, timeout=10)
    stored = js.stream(orbit.work_stream(name, "cg")).get_msg(1)
    partition, _dot, rest = stored.subject.partition(".")
    assert rest == f"{name}.eu.k1" and 0 <= int(partition) < 12

    groups.add_members(name, "cg", ["m2", "m1"])
    assert kv.get(orbit.config_key(name, "cg")).value.endswith(b',"members":["m2","m1"]}')
    got = threading.Event()
    member = groups.join_elastic(name, "cg", "m1", lambda msg: (msg.ack(), got.set()), ack_wait=2)
    try:
        wait_until(lambda: member.consuming, timeout=10)
        wire = _wire(js, orbit.work_stream(name, "cg"), "m1")
        assert wire["name"] == "m1" and "durable_name" not in wire
        assert wire["filter_subjects"] == [f"{p}.{name}.*.*" for p in range(6)]
        assert wire["priority_groups"] == [orbit.PRIORITY_GROUP]
        assert wire["priority_policy"] == "pinned_client"
        assert wire["priority_timeout"] == 2 * _NS
        assert wire["inactive_threshold"] == 2 * _NS
        assert wire["ack_policy"] == "explicit"
    finally:
        member.stop(timeout=10)
    groups.delete_elastic(name, "cg")
    assert orbit.work_stream(name, "cg") not in set(js.stream_names())
    assert groups.elastic_groups(name) == []


def test_a_group_orbit_wrote_is_joined_and_edited_without_changing_what_orbit_reads(js, name):
    """The config as Go's json.Marshal writes it (a null filter list, members in map order), put in the bucket
    directly: our member joins it, and our edits keep the fields orbit compares exactly as they were."""
    js.create_stream(StreamConfig(name=name, subjects=[f"{name}.>"]))
    groups = PartitionedGroups(js)
    groups.create_elastic(name, "go", 3)  # the work-queue stream and the bucket
    kv = js.key_value(orbit.ELASTIC_BUCKET)
    kv.put(orbit.config_key(name, "go"), orbit.ELASTIC_JSON[1][5])  # members m1, m2 as a Go admin wrote them
    handled = []
    member = groups.join_elastic(name, "go", "m2", lambda msg: (handled.append(msg.subject), msg.ack()), ack_wait=2)
    try:
        wait_until(lambda: member.consuming, timeout=10)
        assert member.partitions == orbit.BALANCED[4][2]["b"]  # two members over 3 partitions: the second gets [1]
        for i in range(30):
            js.publish(f"{name}.k{i}", b"x")
        # the handler sees the subject as published; m2 reads partition 1 only (m1 does not run: its share waits)
        work = orbit.work_stream(name, "go")

        def partition_1_done() -> bool:
            info = js.consumer_info(work, "m2")
            left = js.stream_info(work).state.messages
            return bool(handled) and info.num_pending == 0 and info.num_ack_pending == 0 and left + len(handled) == 30

        wait_until(partition_1_done, timeout=10)
        assert handled and all(subject.startswith(f"{name}.k") for subject in handled)
        groups.remove_members(name, "go", ["m1"])  # now m2 reads all three
        wait_until(lambda: len(handled) == 30, timeout=15)
        assert sorted(handled) == sorted(f"{name}.k{i}" for i in range(30))
        assert (
            kv.get(orbit.config_key(name, "go")).value
            == b'{"max_members":3,"partitioning_filters":null,"members":["m2"]}'
        )
    finally:
        member.stop(timeout=10)
