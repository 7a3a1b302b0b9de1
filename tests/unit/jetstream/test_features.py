"""The server version and JetStream API level checks behind calls and configs that need a newer nats-server."""

from __future__ import annotations

import pytest

from jetstream_sync import errors
from jetstream_sync.jetstream._features import (
    consumer_features,
    require_api_level,
    require_features,
    require_server,
    server_api_level,
    server_version,
    stream_features,
)
from jetstream_sync.models import (
    AckPolicy,
    ConsumerConfig,
    PersistMode,
    PriorityPolicy,
    StreamConfig,
    StreamConsumerSource,
    StreamSource,
)


@pytest.mark.parametrize(
    ("text", "version"),
    [("2.15.1", (2, 15, 1)), ("2.11.0-RC.2", (2, 11, 0)), ("v2.10.22", (2, 10, 22)), ("", None), ("dev", None)],
)
def test_the_server_version_is_read_from_info(text, version):
    assert server_version({"version": text}) == version


def test_an_older_server_is_refused_naming_both_versions():
    with pytest.raises(errors.FeatureNotSupportedError) as info:
        require_server({"version": "2.10.22"}, "pausing a consumer", (2, 11, 0))
    assert str(info.value) == "pausing a consumer needs nats-server 2.11.0 or later; this server is 2.10.22"
    assert (info.value.needed, info.value.server) == ("2.11.0", "2.10.22")


@pytest.mark.parametrize("text", ["2.11.0", "2.15.1", "3.0.0", "unknown"])
def test_a_new_enough_or_unknown_server_is_left_to_answer(text):
    require_server({"version": text}, "pausing a consumer", (2, 11, 0))


# --- the JetStream API level (ADR-44) -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("info", "level"),
    [
        ({"api_lvl": 5}, 5),
        ({"version": "2.11.4"}, 0),
        ({"api_lvl": "5"}, 0),
        ({"api_lvl": True}, 0),
        ({"api_lvl": -1}, 0),
    ],
)
def test_the_api_level_is_read_from_info(info, level):
    assert server_api_level(info) == level


def test_a_lower_api_level_is_refused_naming_the_release_that_has_it():
    with pytest.raises(errors.FeatureNotSupportedError) as info:
        require_api_level({"version": "2.12.3", "api_lvl": 2}, 4, "durable sourcing")
    assert str(info.value) == (
        "durable sourcing needs nats-server 2.14.0 or later; this server is 2.12.3 (JetStream API level 2)"
    )
    with pytest.raises(errors.FeatureNotSupportedError, match="a release of JetStream API level 9"):
        require_api_level({"version": "2.15.1", "api_lvl": 5}, 9, "the future")


def test_a_server_without_an_api_level_is_judged_by_its_version():
    with pytest.raises(errors.FeatureNotSupportedError, match=r"2\.12\.0.*2\.11\.4"):
        require_api_level({"version": "2.11.4"}, 2, "counters")
    require_api_level({"version": "2.11.4"}, 1, "TTLs")
    require_api_level({"version": "unknown"}, 4, "anything")  # left to answer for itself
    require_api_level({"version": "2.15.1", "api_lvl": 5}, 5, "anything")


def test_the_features_of_a_stream_config_and_their_levels():
    assert stream_features(StreamConfig(name="S")) == []
    config = StreamConfig(name="S", allow_msg_ttl=True, allow_msg_counter=True, persist_mode=PersistMode.ASYNC)
    assert [(f.what, f.level) for f in stream_features(config)] == [
        ("per-message TTLs", 1),
        ("counters", 2),
        ("asynchronous persistence", 2),
    ]
    durable = StreamSource(name="WQ", consumer=StreamConsumerSource(name="c", deliver_subject="d"))
    assert [f.level for f in stream_features(StreamConfig(name="S", sources=[durable]))] == [4]
    assert [f.level for f in stream_features(StreamConfig(name="S", mirror=durable))] == [4]
    assert [f.version for f in stream_features(StreamConfig(name="S", allow_batched=True))] == [(2, 14, 0)]


def test_the_features_of_a_consumer_config_and_their_levels():
    assert consumer_features(ConsumerConfig(durable_name="c")) == []
    flow = ConsumerConfig(durable_name="c", deliver_subject="d", ack_policy=AckPolicy.FLOW_CONTROL)
    assert [(f.version, f.level) for f in consumer_features(flow)] == [((2, 14, 0), 4)]
    prioritized = ConsumerConfig(durable_name="c", priority_groups=["g"], priority_policy=PriorityPolicy.PRIORITIZED)
    assert [(f.what, f.level) for f in consumer_features(prioritized)] == [("the PRIORITIZED priority policy", 2)]
    pinned = ConsumerConfig(durable_name="c", priority_groups=["g"], priority_policy=PriorityPolicy.PINNED_CLIENT)
    assert [(f.what, f.level) for f in consumer_features(pinned)] == [("priority groups", 1)]


def test_require_features_names_the_first_missing_and_returns_the_level_to_assert():
    config = StreamConfig(name="S", allow_msg_ttl=True, allow_batched=True)
    assert require_features({"version": "2.15.1"}, stream_features(config)) == 4
    assert require_features({"version": "2.15.1"}, []) is None
    with pytest.raises(errors.FeatureNotSupportedError, match=r"^fast-ingest batches \(allow_batched\) needs"):
        require_features({"version": "2.12.0"}, stream_features(config))
