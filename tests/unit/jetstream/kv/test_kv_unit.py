"""Key-value pieces that need no server: key and filter rules, operations from headers, bucket configuration
and watch options, all refused before anything is sent."""

from __future__ import annotations

from datetime import timedelta

import pytest

from jetstream_sync import KeyValueConfig, KeyValueOp, StorageType, SubjectTransform, WatchOptions, errors
from jetstream_sync.jetstream.kv._keys import check_filter, check_key, operation_of, operation_of_raw
from jetstream_sync.models import DeliverPolicy


# -- keys -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("key", ["a", "a.b.c", "A-Z_0=9/x", "dots.in.the.middle", "x" * 300, "=", "-", "/"])
def test_valid_keys(key):
    assert check_key(key) == key
    assert check_filter(key) == key


@pytest.mark.parametrize(
    "key",
    ["", ".a", "a.", ".", "a..b", "a b", " a", "a ", "a*", "*", ">", "a.>", "a.*.b", "é", "a\tb", "a\nb", "a$b", "k:1"],
)
def test_invalid_keys(key):
    with pytest.raises(errors.InvalidKeyError) as info:
        check_key(key)
    assert info.value.field == "key"


@pytest.mark.parametrize("pattern", ["*", ">", "a.*", "a.>", "*.b.>", "a.*.c", "*.*"])
def test_filters_allow_whole_token_wildcards(pattern):
    assert check_filter(pattern) == pattern


@pytest.mark.parametrize("pattern", ["", "a*", "a.>.b", ">.a", "a.b>", "a..*", ".*", "*.", "a *"])
def test_bad_filters(pattern):
    with pytest.raises(errors.InvalidKeyError):
        check_filter(pattern)


@pytest.mark.parametrize("key", [None, 1, b"a", ["a"]])
def test_key_must_be_a_str(key):
    with pytest.raises(errors.InvalidTypeError):
        check_key(key)


def test_invalid_key_error_is_a_key_value_error_and_a_value_error():
    with pytest.raises(errors.InvalidKeyError) as info:
        check_key("a..b")
    assert isinstance(info.value, errors.KeyValueError)
    assert isinstance(info.value, ValueError)


# -- operations -------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("headers", "op"),
    [
        (None, KeyValueOp.PUT),
        ({}, KeyValueOp.PUT),
        ({"X": "y"}, KeyValueOp.PUT),
        ({"KV-Operation": "DEL"}, KeyValueOp.DELETE),
        ({"KV-Operation": "PURGE"}, KeyValueOp.PURGE),
        ({"KV-Operation": "SOMETHING"}, KeyValueOp.PUT),
        ({"Nats-Marker-Reason": "MaxAge"}, KeyValueOp.PURGE),
        ({"Nats-Marker-Reason": "Purge"}, KeyValueOp.PURGE),
        ({"Nats-Marker-Reason": "Remove"}, KeyValueOp.DELETE),
    ],
)
def test_operation_of(headers, op):
    assert operation_of(headers) is op


def test_operation_of_raw():
    assert operation_of_raw(None) is KeyValueOp.PUT
    assert operation_of_raw(b"NATS/1.0\r\nX: y\r\n\r\n") is KeyValueOp.PUT
    assert operation_of_raw(b"NATS/1.0\r\nKV-Operation: DEL\r\n\r\n") is KeyValueOp.DELETE
    assert operation_of_raw(b"NATS/1.0\r\nKV-Operation: PURGE\r\nNats-Rollup: sub\r\n\r\n") is KeyValueOp.PURGE
    assert operation_of_raw(b"NATS/1.0\r\nNats-Marker-Reason: MaxAge\r\n\r\n") is KeyValueOp.PURGE


# -- configuration ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("bucket", ["", "a.b", "a b", "a*", "a>", "é", "a/b", "a=b"])
def test_bad_bucket_names(bucket):
    with pytest.raises(errors.InvalidBucketNameError):
        KeyValueConfig(bucket=bucket)


def test_bucket_name_must_be_a_str():
    with pytest.raises(errors.InvalidTypeError):
        KeyValueConfig(bucket=5)


@pytest.mark.parametrize("history", [65, 100])
def test_history_over_64(history):
    with pytest.raises(errors.KeyHistoryTooLargeError) as info:
        KeyValueConfig(bucket="b", history=history)
    assert isinstance(info.value, errors.KeyValueError)


@pytest.mark.parametrize("history", [0, -1])
def test_history_under_1(history):
    with pytest.raises(errors.InvalidArgumentError):
        KeyValueConfig(bucket="b", history=history)


def test_history_64_is_the_limit():
    assert KeyValueConfig(bucket="b", history=64).stream_config().max_msgs_per_subject == 64


def test_limit_marker_ttl_under_a_second():
    with pytest.raises(errors.InvalidArgumentError):
        KeyValueConfig(bucket="b", limit_marker_ttl=0.5)


def test_mirror_and_sources_together():
    with pytest.raises(errors.InvalidArgumentError):
        KeyValueConfig(bucket="b", mirror={"name": "a"}, sources=[{"name": "c"}])


def test_stream_config_is_the_adr8_mapping():
    sc = KeyValueConfig(
        bucket="flags", history=5, ttl=timedelta(seconds=60), max_value_size=1024, storage="memory"
    ).stream_config()
    assert sc.name == "KV_flags"
    assert sc.subjects == ["$KV.flags.>"]
    assert sc.max_msgs_per_subject == 5
    assert sc.max_age == 60
    assert sc.duplicate_window == 60  # shorter than the default 2 minutes: the TTL
    assert sc.max_msg_size == 1024
    assert sc.storage is StorageType.MEMORY
    assert sc.allow_rollup_hdrs and sc.deny_delete and sc.allow_direct
    assert not sc.allow_msg_ttl


def test_stream_config_defaults_and_limit_marker():
    sc = KeyValueConfig(bucket="b").stream_config()
    assert sc.duplicate_window == 120
    assert sc.max_age == 0
    assert sc.max_msgs_per_subject == 1
    marked = KeyValueConfig(bucket="b", limit_marker_ttl=5).stream_config()
    assert marked.allow_msg_ttl
    assert marked.subject_delete_marker_ttl == 5


def test_source_keys_are_mapped_under_this_bucket():
    sc = KeyValueConfig(bucket="agg", sources=[{"name": "a"}, {"name": "KV_agg"}]).stream_config()
    assert sc.sources is not None and sc.sources[0].name == "KV_a"
    assert sc.sources[0].subject_transforms == [SubjectTransform(src="$KV.a.>", dest="$KV.agg.>")]
    assert sc.sources[1].subject_transforms is None


# -- watch options ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "kwargs",
    [
        {"include_history": True, "updates_only": True},
        {"include_history": True, "resume_from_revision": 3},
        {"updates_only": True, "resume_from_revision": 3},
    ],
)
def test_conflicting_watch_starts(kwargs):
    with pytest.raises(errors.InvalidArgumentError):
        WatchOptions(**kwargs)


@pytest.mark.parametrize(
    ("kwargs", "policy"),
    [
        ({}, DeliverPolicy.LAST_PER_SUBJECT),
        ({"include_history": True}, DeliverPolicy.ALL),
        ({"updates_only": True}, DeliverPolicy.NEW),
        ({"resume_from_revision": 7}, DeliverPolicy.BY_START_SEQUENCE),
        ({"meta_only": True, "ignore_deletes": True}, DeliverPolicy.LAST_PER_SUBJECT),
    ],
)
def test_watch_deliver_policy(kwargs, policy):
    assert WatchOptions(**kwargs).deliver_policy() is policy


def test_watch_option_types():
    with pytest.raises(errors.InvalidTypeError):
        WatchOptions(meta_only=1)
    with pytest.raises(errors.InvalidTypeError):
        WatchOptions(resume_from_revision="3")
    with pytest.raises(errors.InvalidArgumentError):
        WatchOptions(resume_from_revision=0)
