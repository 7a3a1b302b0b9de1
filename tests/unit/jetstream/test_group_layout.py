"""Our partitioned groups' layout against orbit.go's, as tests/orbit_pcgroups.py works it out from the Go sources:
config keys and JSON, partition filters, transforms, names and timers. (The server-side half, with the real
buckets, streams and consumers, is tests/server/jetstream/groups/test_group_layout.py.)"""

from __future__ import annotations

import json

import pytest

from jetstream_sync import ElasticGroupConfig, MemberMapping, PartitioningFilter, StaticGroupConfig
from jetstream_sync.jetstream.groups import _layout
from tests import orbit_pcgroups as orbit


def test_names_buckets_and_priority_group():
    assert (_layout.STATIC_BUCKET, _layout.ELASTIC_BUCKET) == (orbit.STATIC_BUCKET, orbit.ELASTIC_BUCKET)
    assert _layout.PRIORITY_GROUP == orbit.PRIORITY_GROUP
    assert _layout.DEFAULT_ACK_WAIT == orbit.DEFAULT_ACK_WAIT
    assert _layout.config_key("ORDERS", "cg") == orbit.config_key("ORDERS", "cg")
    assert _layout.work_stream_name("ORDERS", "cg") == orbit.work_stream("ORDERS", "cg")
    assert _layout.static_consumer_name("cg", "m1") == orbit.static_consumer("cg", "m1")


@pytest.mark.parametrize(("ack_wait", "pin", "expiry"), orbit.PIN_AND_EXPIRY)
def test_pin_timeout_and_pull_expiry_derive_from_ack_wait(ack_wait, pin, expiry):
    assert (_layout.pinned_ttl(ack_wait), _layout.pull_expiry(ack_wait)) == (pin, expiry)


@pytest.mark.parametrize(("members", "max_members", "expected"), orbit.BALANCED)
def test_balanced_partitions(members, max_members, expected):
    for member, partitions in expected.items():
        assert _layout.partitions_of(members, max_members, None, member) == partitions
        config = ElasticGroupConfig(max_members=max_members, members=members)
        assert _layout.elastic_filters(config, member) == [f"{p}.>" for p in partitions]


@pytest.mark.parametrize(("filters", "members", "max_members", "member", "expected"), orbit.STATIC_FILTERS)
def test_static_member_filters(filters, members, max_members, member, expected):
    config = StaticGroupConfig(max_members=max_members, filters=filters, members=members)
    assert _layout.static_filters(config, member) == expected


@pytest.mark.parametrize(("mappings", "member", "expected"), orbit.MAPPED_FILTERS)
def test_mapped_member_filters(mappings, member, expected):
    mapped = [MemberMapping(member=m, partitions=p) for m, p in mappings]
    assert _layout.static_filters(StaticGroupConfig(max_members=4, member_mappings=mapped), member) == expected
    assert _layout.elastic_filters(ElasticGroupConfig(max_members=4, member_mappings=mapped), member) == expected


@pytest.mark.parametrize(("subject_filter", "wildcards", "max_members", "dest"), orbit.TRANSFORMS)
def test_partitioning_transform(subject_filter, wildcards, max_members, dest):
    config = ElasticGroupConfig(
        max_members=max_members,
        partitioning_filters=[PartitioningFilter(filter=subject_filter, partitioning_wildcards=wildcards)],
    )
    assert _layout.elastic_transforms(config) == [(subject_filter, dest)]


def test_no_partitioning_filter_partitions_the_whole_subject():
    assert _layout.elastic_transforms(ElasticGroupConfig(max_members=7)) == [orbit.NO_FILTER_TRANSFORM]


@pytest.mark.parametrize(("max_members", "filters", "members", "mappings", "stored"), orbit.STATIC_JSON)
def test_static_config_json_is_orbits_byte_for_byte(max_members, filters, members, mappings, stored):
    mapped = None if mappings is None else [MemberMapping(member=m, partitions=p) for m, p in mappings]
    config = StaticGroupConfig(max_members=max_members, filters=filters, members=members, member_mappings=mapped)
    assert config.to_json() == stored
    assert StaticGroupConfig.from_json(stored) == config


@pytest.mark.parametrize(("max_members", "filters", "msgs", "size", "members", "stored"), orbit.ELASTIC_JSON)
def test_elastic_config_json_is_orbits_byte_for_byte(max_members, filters, msgs, size, members, stored):
    partitioning = (
        None if filters is None else [PartitioningFilter(filter=f, partitioning_wildcards=w) for f, w in filters]
    )
    config = ElasticGroupConfig(
        max_members=max_members,
        partitioning_filters=partitioning,
        max_buffered_msgs=msgs,
        max_buffered_bytes=size,
        members=members,
    )
    assert config.to_json() == stored
    assert ElasticGroupConfig.from_json(stored) == config


def test_a_stored_null_or_empty_list_is_written_back_as_it_was():
    """orbit compares configs with reflect.DeepEqual, where a nil slice and an empty one differ: a membership edit
    must not turn one into the other (a Go member would take it for a layout change and stop)."""
    for raw in (
        b'{"max_members":2,"partitioning_filters":null}',
        b'{"max_members":2,"partitioning_filters":[]}',
        b'{"max_members":2,"partitioning_filters":[{"filter":"a.*","partitioning_wildcards":null}]}',
        b'{"max_members":2,"partitioning_filters":[{"filter":"a.*","partitioning_wildcards":[]}]}',
    ):
        config = ElasticGroupConfig.from_json(raw)
        assert config.to_json() == raw
        with_members = json.loads(ElasticGroupConfig.from_json(raw).to_json())
        assert with_members["partitioning_filters"] == json.loads(raw)["partitioning_filters"]
