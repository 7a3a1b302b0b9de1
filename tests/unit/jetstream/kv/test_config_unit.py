"""KeyValueConfig without a server: the stream each field maps to (mirror, sources, republish, compression, ...),
what is refused, the way back from a stream's configuration, and which key filters cover others."""

from __future__ import annotations

from datetime import timedelta

import attrs
import pytest

from jetstream_sync import (
    ExternalStream,
    KeyValueConfig,
    KeyValueEntry,
    KeyValueOp,
    Placement,
    RePublish,
    StorageType,
    StoreCompression,
    StreamSource,
    SubjectTransform,
    errors,
)
from jetstream_sync._protocol import filter_covers


def test_operation_wire_values():
    assert [op.value for op in KeyValueOp] == ["PUT", "DEL", "PURGE"]


def test_every_field_maps_to_the_stream():
    sc = KeyValueConfig(
        bucket="b",
        description="d",
        max_value_size=10,
        history=3,
        ttl=timedelta(minutes=10),
        max_bytes=1000,
        storage="memory",
        replicas=3,
        placement={"cluster": "c1"},
        republish={"src": ">", "dest": "out.>", "headers_only": True},
        compression=True,
        metadata={"k": "v"},
        limit_marker_ttl=timedelta(seconds=90),
    ).stream_config()
    assert (sc.name, sc.subjects, sc.description) == ("KV_b", ["$KV.b.>"], "d")
    assert (sc.max_msg_size, sc.max_msgs_per_subject, sc.max_age, sc.max_bytes) == (10, 3, 600, 1000)
    assert (sc.storage, sc.num_replicas, sc.placement) == (StorageType.MEMORY, 3, Placement(cluster="c1"))
    assert sc.republish == RePublish(src=">", dest="out.>", headers_only=True)  # the dict, typed
    assert (sc.compression, sc.metadata) == (StoreCompression.S2, {"k": "v"})
    assert (sc.allow_msg_ttl, sc.subject_delete_marker_ttl) == (True, 90)
    assert sc.duplicate_window == 120
    assert (sc.mirror, sc.sources, sc.mirror_direct) == (None, None, False)


def test_compression_off_is_no_compression():
    assert KeyValueConfig(bucket="b").stream_config().compression in (None, StoreCompression.NONE)


def test_a_mirror_has_no_subjects_and_mirror_direct():
    sc = KeyValueConfig(bucket="m", mirror={"name": "origin", "opt_start_seq": 5}).stream_config()
    assert sc.subjects == []
    assert sc.mirror == StreamSource(name="KV_origin", opt_start_seq=5)
    assert sc.mirror_direct and sc.allow_direct
    typed = KeyValueConfig(bucket="m", mirror=StreamSource(name="KV_origin")).stream_config()
    assert typed.mirror == StreamSource(name="KV_origin")


def test_a_dict_and_a_stream_source_make_the_same_bucket():
    as_dicts = KeyValueConfig(bucket="agg", sources=[{"name": "a"}], placement={"cluster": "c1", "tags": ["ssd"]})
    typed = KeyValueConfig(
        bucket="agg", sources=[StreamSource(name="a")], placement=Placement(cluster="c1", tags=["ssd"])
    )
    assert as_dicts == typed
    assert as_dicts.stream_config() == typed.stream_config()


def test_a_mirror_needs_a_name():
    with pytest.raises(errors.InvalidArgumentError, match="name") as info:
        KeyValueConfig(bucket="m", mirror={"opt_start_seq": 5})
    assert info.value.field == "mirror"


def test_sources_keep_given_transforms():
    own = [{"src": "$KV.a.x.>", "dest": "$KV.agg.x.>"}]
    sc = KeyValueConfig(bucket="agg", sources=[{"name": "a", "subject_transforms": own}]).stream_config()
    assert sc.subjects == ["$KV.agg.>"]
    assert sc.sources == [
        StreamSource(name="KV_a", subject_transforms=[SubjectTransform(src="$KV.a.x.>", dest="$KV.agg.x.>")])
    ]


def test_an_external_source_of_the_same_bucket_keeps_its_subjects():
    external = ExternalStream.for_domain("hub")
    sc = KeyValueConfig(bucket="agg", sources=[{"name": "agg", "external": {"api": "$JS.hub.API"}}]).stream_config()
    assert sc.sources == [StreamSource(name="KV_agg", external=external)]


def test_an_external_source_of_another_bucket_lands_under_this_buckets_prefix():
    external = ExternalStream(api="$JS.hub.API")
    sc = KeyValueConfig(bucket="agg", sources=[StreamSource(name="a", external=external)]).stream_config()
    assert sc.sources == [
        StreamSource(
            name="KV_a", external=external, subject_transforms=[SubjectTransform(src="$KV.a.>", dest="$KV.agg.>")]
        )
    ]


def test_a_source_needs_a_name():
    with pytest.raises(errors.InvalidArgumentError, match=r"\[0\]\.name") as info:
        KeyValueConfig(bucket="agg", sources=[{"opt_start_seq": 1}])
    assert info.value.field == "sources"


@pytest.mark.parametrize(
    ("field", "value", "error"),
    [
        ("replicas", 0, errors.InvalidArgumentError),
        ("replicas", 6, errors.InvalidArgumentError),
        ("max_value_size", -2, errors.InvalidArgumentError),
        ("max_bytes", -2, errors.InvalidArgumentError),
        ("ttl", -1, errors.InvalidArgumentError),
        ("storage", "tape", errors.InvalidArgumentError),
        ("compression", "s2", errors.InvalidTypeError),
        ("metadata", {"k": 1}, errors.InvalidTypeError),
        ("description", 5, errors.InvalidTypeError),
        ("history", "5", errors.InvalidTypeError),
        ("history", True, errors.InvalidTypeError),
    ],
)
def test_bad_fields_are_refused(field, value, error):
    with pytest.raises(error):
        KeyValueConfig(bucket="b", **{field: value})


def test_ttl_shorter_than_two_minutes_is_the_duplicate_window():
    assert KeyValueConfig(bucket="b", ttl=5).stream_config().duplicate_window == 5
    assert KeyValueConfig(bucket="b", ttl=500).stream_config().duplicate_window == 120


@pytest.mark.parametrize(
    "config",
    [
        KeyValueConfig(bucket="b"),
        KeyValueConfig(bucket="b", history=64, ttl=30, max_bytes=5, max_value_size=6, storage="memory"),
        KeyValueConfig(bucket="b", compression=True, metadata={"a": "b"}, description="x", limit_marker_ttl=2),
        KeyValueConfig(bucket="b", republish={"src": ">", "dest": "x.>"}, sources=[{"name": "KV_a"}]),
    ],
)
def test_from_stream_is_the_way_back(config):
    back = KeyValueConfig.from_stream("b", config.stream_config())
    assert back.stream_config() == config.stream_config()


def test_from_stream_keeps_the_mirror():
    config = KeyValueConfig(bucket="m", mirror={"name": "o"})
    back = KeyValueConfig.from_stream("m", config.stream_config())
    assert back.mirror == StreamSource(name="KV_o")
    assert back.stream_config() == config.stream_config()


def test_from_stream_clamps_history_into_range():
    sc = KeyValueConfig(bucket="b").stream_config()
    assert KeyValueConfig.from_stream("b", attrs.evolve(sc, max_msgs_per_subject=-1)).history == 1
    assert KeyValueConfig.from_stream("b", attrs.evolve(sc, max_msgs_per_subject=1000)).history == 64


def test_entry_defaults():
    entry = KeyValueEntry(bucket="b", key="k", value=b"v", revision=1, created=None)  # type: ignore[arg-type]
    assert (entry.delta, entry.operation) == (0, KeyValueOp.PUT)


@pytest.mark.parametrize(
    ("wide", "narrow", "covers"),
    [
        (">", "a", True),
        (">", "a.*.c", True),
        ("a.>", "a.b", True),
        ("a.>", "a.b.>", True),
        ("a.>", "a", False),
        ("a.*", "a.b", True),
        ("a.*", "a.>", False),
        ("a.*", "a.b.c", False),
        ("*.b", "a.b", True),
        ("a.*", "*.b", False),
        ("*.b", "a.*", False),
        ("a.b", "a.b", True),
        ("a.b", "a.*", False),
        ("*", ">", False),
        ("*.*", "a.*", True),
    ],
)
def test_which_filters_cover_others(wide, narrow, covers):
    assert filter_covers(wide, narrow) is covers
