"""RePublish, StreamConsumerLimits, durable sourcing (StreamSource.consumer, AckPolicy.FLOW_CONTROL) and the API
level in the account info, without a server: decoding what nats-server 2.15.1 sends (the JSON below was captured
from it), the way back to the wire, dicts accepted where the models are, and the rules checked before sending."""

from __future__ import annotations

import copy
from datetime import timedelta
from typing import Any

import pytest

from jetstream_sync import KeyValueConfig, errors
from jetstream_sync.models import (
    AccountInfo,
    AckPolicy,
    ConsumerConfig,
    ConsumerInfo,
    ExternalStream,
    RePublish,
    StreamConfig,
    StreamConsumerLimits,
    StreamConsumerSource,
    StreamInfo,
    StreamSource,
    SubjectTransform,
)
from jetstream_sync.models.stream import subjects_collide

#: ``STREAM.INFO`` of a stream sourcing a work queue through a durable consumer, republishing headers only and
#: limiting its consumers (nats-server 2.15.1)
STREAM_INFO: dict[str, Any] = {
    "type": "io.nats.jetstream.api.v1.stream_info_response",
    "total": 0,
    "offset": 0,
    "limit": 0,
    "config": {
        "name": "AGG",
        "subjects": ["agg.>"],
        "retention": "limits",
        "max_consumers": -1,
        "max_msgs": -1,
        "max_bytes": -1,
        "max_age": 0,
        "max_msgs_per_subject": -1,
        "max_msg_size": -1,
        "discard": "old",
        "storage": "file",
        "num_replicas": 1,
        "sources": [{"name": "WQ", "consumer": {"name": "src", "deliver_subject": "deliver.src"}}],
        "compression": "none",
        "republish": {"src": ">", "dest": "out.>", "headers_only": True},
        "allow_direct": False,
        "mirror_direct": False,
        "sealed": False,
        "deny_delete": False,
        "deny_purge": False,
        "allow_rollup_hdrs": False,
        "consumer_limits": {"inactive_threshold": 30000000000, "max_ack_pending": 50},
        "allow_msg_ttl": False,
        "metadata": {"_nats.level": "5", "_nats.req.level": "0", "_nats.ver": "2.15.1"},
    },
    "created": "2026-11-27T01:01:43.090838944Z",
    "state": {"messages": 0, "bytes": 0, "first_seq": 0, "last_seq": 0, "consumer_count": 0},
    "sources": [{"name": "WQ", "lag": 0, "active": 204805108}],
    "ts": "2026-11-27T01:01:44.294055893Z",
}

#: ``CONSUMER.INFO`` of the consumer it sources through: the server filled in flow control, the 1 s heartbeat,
#: max_ack_pending and max_deliver (nats-server 2.15.1)
CONSUMER_INFO: dict[str, Any] = {
    "type": "io.nats.jetstream.api.v1.consumer_info_response",
    "stream_name": "WQ",
    "name": "src",
    "created": "2026-11-27T01:01:43.087417282Z",
    "config": {
        "durable_name": "src",
        "name": "src",
        "deliver_policy": "all",
        "ack_policy": "flow_control",
        "max_deliver": -1,
        "replay_policy": "instant",
        "max_ack_pending": 1000,
        "flow_control": True,
        "deliver_subject": "deliver.src",
        "idle_heartbeat": 1000000000,
        "num_replicas": 0,
        "metadata": {"_nats.level": "5", "_nats.req.level": "4", "_nats.ver": "2.15.1"},
    },
    "delivered": {"consumer_seq": 0, "stream_seq": 0},
    "ack_floor": {"consumer_seq": 0, "stream_seq": 0},
    "num_ack_pending": 0,
    "num_redelivered": 0,
    "num_waiting": 0,
    "num_pending": 0,
    "ts": "2026-11-27T01:01:43.089410022Z",
}

SOURCE = StreamConsumerSource(name="src", deliver_subject="deliver.src")


# --- decoding and the way back ---------------------------------------------------------------------------------


def test_the_stream_info_is_typed() -> None:
    config = StreamInfo.from_json(STREAM_INFO).config
    assert config.republish == RePublish(src=">", dest="out.>", headers_only=True)
    assert config.consumer_limits == StreamConsumerLimits(inactive_threshold=30.0, max_ack_pending=50)
    assert config.sources == [StreamSource(name="WQ", consumer=SOURCE)]
    assert config.sources is not None and config.sources[0].extra == {}  # nothing left unmodeled
    assert config.republish is not None and config.republish.extra == {}


def test_the_config_goes_back_as_it_came() -> None:
    info = StreamInfo.from_json(STREAM_INFO)
    wire = info.config.to_json()
    for field in ("republish", "consumer_limits", "sources"):
        assert wire[field] == STREAM_INFO["config"][field]
    assert StreamInfo.from_json(info.to_json()) == info


def test_dicts_in_the_wire_shape_make_the_same_config() -> None:
    typed = StreamConfig(
        name="AGG",
        subjects=["agg.>"],
        republish=RePublish(dest="out.>", headers_only=True),
        consumer_limits=StreamConsumerLimits(inactive_threshold=timedelta(seconds=30), max_ack_pending=50),
        sources=[StreamSource(name="WQ", consumer=SOURCE)],
    )
    given = copy.deepcopy(STREAM_INFO["config"])
    as_dicts = StreamConfig(
        name="AGG",
        subjects=["agg.>"],
        republish=given["republish"],
        consumer_limits=given["consumer_limits"],  # nanoseconds, as on the wire
        sources=given["sources"],
    )
    assert as_dicts == typed
    assert given == STREAM_INFO["config"]  # the caller's dicts are read, not changed


def test_no_consumer_limits_is_none_as_the_server_reports_it() -> None:
    assert (
        StreamInfo.from_json(
            {**STREAM_INFO, "config": {**STREAM_INFO["config"], "consumer_limits": {}}}
        ).config.consumer_limits
        is None
    )
    assert StreamConfig(name="S", consumer_limits=StreamConsumerLimits()).consumer_limits is None
    assert StreamConfig(name="S", consumer_limits={}).consumer_limits is None
    assert "consumer_limits" not in StreamConfig(name="S", consumer_limits=StreamConsumerLimits()).to_json()
    assert StreamConsumerLimits(max_ack_pending=5).to_json() == {"max_ack_pending": 5}


def test_republish_takes_every_subject_by_default() -> None:
    assert RePublish(dest="copy.>").to_json() == {"src": ">", "dest": "copy.>"}
    assert RePublish(src="orders.*", dest="copy.$1").src == "orders.*"


def test_the_flow_control_consumer_is_typed() -> None:
    info = ConsumerInfo.from_json(CONSUMER_INFO)
    config = info.config
    assert config.ack_policy is AckPolicy.FLOW_CONTROL
    assert (config.flow_control, config.idle_heartbeat, config.max_ack_pending) == (True, 1.0, 1000)
    # what a caller writes for that consumer, which the server completes
    ours = ConsumerConfig(durable_name="src", deliver_subject="deliver.src", ack_policy=AckPolicy.FLOW_CONTROL)
    assert ours.to_json()["ack_policy"] == "flow_control"
    assert ConsumerInfo.from_json(info.to_json()) == info


def test_the_account_info_reports_the_api_level() -> None:
    info = AccountInfo.from_json({"memory": 0, "api": {"level": 5, "total": 3, "errors": 0}})
    assert info.api.level == 5 and info.api.extra == {}
    assert AccountInfo.from_json({"memory": 0, "api": {"total": 3, "errors": 0}}).api.level == 0  # before 2.11


# --- what is refused before sending ---------------------------------------------------------------------------


def test_a_republish_needs_a_destination() -> None:
    with pytest.raises(TypeError, match="dest"):
        RePublish()  # type: ignore[call-arg]
    with pytest.raises(errors.InvalidArgumentError, match=r"dest.*required") as info:
        StreamConfig(name="S", republish={"src": ">"})  # the dict form says where
    assert info.value.field == "republish"


@pytest.mark.parametrize(
    ("kwargs", "error", "field"),
    [
        ({"dest": ""}, errors.InvalidArgumentError, "dest"),
        ({"dest": 5}, errors.InvalidTypeError, "dest"),
        ({"dest": "x.>", "src": "a..b"}, errors.InvalidArgumentError, "src"),
        ({"dest": "x.>", "headers_only": "yes"}, errors.InvalidTypeError, "headers_only"),
    ],
)
def test_a_bad_republish_is_refused(kwargs: dict[str, Any], error: type[Exception], field: str) -> None:
    with pytest.raises(error) as info:
        RePublish(**kwargs)
    assert info.value.field == field  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("subjects", "dest"),
    [(["orders.>"], "orders.copy.>"), (["orders.*"], "orders.new"), (["a.b", "c.>"], ">"), (["a.*.c"], "a.b.*")],
)
def test_a_republish_into_the_streams_own_subjects_is_refused(subjects: list[str], dest: str) -> None:
    with pytest.raises(errors.InvalidArgumentError, match="overlaps the stream's subject") as info:
        StreamConfig(name="S", subjects=subjects, republish=RePublish(dest=dest))
    assert info.value.field == "republish"


def test_a_republish_outside_the_streams_subjects_is_taken() -> None:
    StreamConfig(name="S", subjects=["orders.>"], republish=RePublish(src="orders.>", dest="copy.orders.>"))
    StreamConfig(name="S", subjects=["orders.*"], republish=RePublish(dest="orders.a.b"))  # one token more
    # the server's exception: '>' to '>' on one subject that the stream's transform renames
    StreamConfig(
        name="S",
        subjects=["in.>"],
        subject_transform=SubjectTransform(src="in.>", dest="out.>"),
        republish=RePublish(src=">", dest=">"),
    )


@pytest.mark.parametrize(
    ("first", "second", "collide"),
    [
        ("a.b", "a.b", True),
        ("a.*", "a.b", True),
        ("a.>", "a.b.c", True),
        ("a.>", "a", False),
        (">", "x", True),
        ("*", "a.b", False),
        ("a.*.c", "a.b.*", True),
        ("a.b", "a.c", False),
        ("a.{{wildcard(1)}}", "a.*", True),
        ("x.>", "y.>", False),
    ],
)
def test_subjects_collide(first: str, second: str, collide: bool) -> None:
    assert subjects_collide(first, second) is collide
    assert subjects_collide(second, first) is collide


@pytest.mark.parametrize(
    ("kwargs", "error", "field"),
    [
        ({"inactive_threshold": 0}, errors.InvalidArgumentError, "inactive_threshold"),
        ({"inactive_threshold": -1}, errors.InvalidArgumentError, "inactive_threshold"),
        ({"inactive_threshold": "5s"}, errors.InvalidTypeError, "inactive_threshold"),
        ({"max_ack_pending": 0}, errors.InvalidArgumentError, "max_ack_pending"),
        ({"max_ack_pending": 2.5}, errors.InvalidTypeError, "max_ack_pending"),
    ],
)
def test_bad_consumer_limits_are_refused(kwargs: dict[str, Any], error: type[Exception], field: str) -> None:
    with pytest.raises(error) as info:
        StreamConsumerLimits(**kwargs)
    assert info.value.field == field  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"opt_start_seq": 5}, "opt_start_seq"),
        ({"opt_start_time": "2026-01-01T00:00:00Z"}, "opt_start_time"),
        ({"filter_subject": "orders.>"}, "filter_subject"),
    ],
)
def test_a_source_through_a_consumer_leaves_start_and_filter_to_it(kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(errors.InvalidArgumentError, match="set it on that consumer") as info:
        StreamConfig(name="AGG", sources=[{"name": "WQ", "consumer": SOURCE.to_json(), **kwargs}])
    assert info.value.field == "sources"
    assert field in str(info.value)
    # transforms are the source's still
    StreamSource(name="WQ", consumer=SOURCE, subject_transforms=[SubjectTransform(src="wq.>", dest="agg.>")])


@pytest.mark.parametrize(
    ("consumer", "error"),
    [
        ({"name": "a.b", "deliver_subject": "d"}, errors.InvalidArgumentError),
        ({"name": "src", "deliver_subject": "d.*"}, errors.InvalidArgumentError),
        ({"name": "src"}, errors.InvalidArgumentError),
        ({"name": "src", "deliver_subject": 5}, errors.InvalidTypeError),
    ],
)
def test_a_bad_consumer_source_is_refused(consumer: dict[str, Any], error: type[Exception]) -> None:
    with pytest.raises(error) as info:
        StreamSource(name="WQ", consumer=consumer)  # type: ignore[arg-type]
    assert info.value.field == "consumer"  # type: ignore[attr-defined]


def test_two_sources_cannot_share_a_consumer() -> None:
    other = StreamConsumerSource(name="src", deliver_subject="deliver.other")
    with pytest.raises(errors.InvalidArgumentError, match="give each its own"):
        StreamConfig(
            name="AGG", sources=[StreamSource(name="WQ", consumer=SOURCE), StreamSource(name="WQ", consumer=other)]
        )
    # the same consumer name on two streams, or on the same stream in two domains, is two consumers
    StreamConfig(
        name="AGG", sources=[StreamSource(name="WQ", consumer=SOURCE), StreamSource(name="WQ2", consumer=other)]
    )
    remote = StreamSource(name="WQ", consumer=other, external=ExternalStream.for_domain("hub"))
    StreamConfig(name="AGG", sources=[StreamSource(name="WQ", consumer=SOURCE), remote])


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({}, "deliver_subject"),  # a pull consumer
        ({"deliver_subject": "d", "ack_wait": 30}, "ack_wait"),
        ({"deliver_subject": "d", "backoff": [1, 2]}, "backoff"),
        ({"deliver_subject": "d", "max_deliver": 5}, "max_deliver"),
        ({"deliver_subject": "d", "max_ack_pending": -1}, "max_ack_pending"),
        ({"deliver_subject": "d", "idle_heartbeat": 5}, "idle_heartbeat"),
        ({"deliver_subject": "d", "flow_control": False}, "flow_control"),
    ],
)
def test_the_flow_control_ack_policy_rules(kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(errors.InvalidArgumentError) as info:
        ConsumerConfig(durable_name="src", ack_policy=AckPolicy.FLOW_CONTROL, **kwargs)
    assert info.value.field == field


def test_a_flow_control_consumer_may_spell_out_what_the_server_sets() -> None:
    ConsumerConfig(
        durable_name="src",
        deliver_subject="d",
        ack_policy="flow_control",
        flow_control=True,
        idle_heartbeat=1,
        max_deliver=-1,
        max_ack_pending=100,
    )


# --- key-value buckets: typed republish, sources that are not buckets ---------------------------------------


def test_a_bucket_republishes_typed() -> None:
    config = KeyValueConfig(bucket="b", republish={"dest": "changes.>", "headers_only": True})
    assert config.republish == RePublish(dest="changes.>", headers_only=True)
    assert config.stream_config().republish == config.republish
    with pytest.raises(errors.InvalidArgumentError, match="overlaps"):
        KeyValueConfig(bucket="b", republish=RePublish(dest="$KV.b.copy.>")).stream_config()


def test_a_stream_that_is_not_a_bucket_is_sourced_by_its_name() -> None:
    orders = StreamSource(
        name="ORDERS", subject_transforms=[SubjectTransform(src="orders.*", dest="$KV.agg.{{wildcard(1)}}")]
    )
    sc = KeyValueConfig(bucket="agg", sources=[orders]).stream_config()
    assert sc.sources == [orders]  # as nats.go takes a source with transforms: by its name, as it is
    assert sc.subjects == ["$KV.agg.>"]
    back = KeyValueConfig.from_stream("agg", sc)
    assert back.stream_config() == sc


def test_transforms_that_read_a_bucket_still_name_the_bucket() -> None:
    own = [SubjectTransform(src="$KV.a.x.>", dest="$KV.agg.x.>")]
    sc = KeyValueConfig(bucket="agg", sources=[StreamSource(name="a", subject_transforms=own)]).stream_config()
    assert sc.sources == [StreamSource(name="KV_a", subject_transforms=own)]


def test_a_source_transform_must_land_among_the_buckets_keys() -> None:
    elsewhere = StreamSource(name="ORDERS", subject_transforms=[SubjectTransform(src="orders.>", dest="agg.>")])
    with pytest.raises(errors.InvalidArgumentError, match=r"\[0\]\.subject_transforms.*no key of bucket 'agg'") as info:
        KeyValueConfig(bucket="agg", sources=[elsewhere])
    assert info.value.field == "sources"
    with pytest.raises(errors.InvalidArgumentError, match="no key"):  # another bucket's keys are not this one's
        KeyValueConfig(
            bucket="agg", sources=[{"name": "a", "subject_transforms": [{"src": "$KV.a.>", "dest": "$KV.aggx.>"}]}]
        )


def test_a_bucket_sources_through_a_consumer() -> None:
    sc = KeyValueConfig(bucket="agg", sources=[StreamSource(name="a", consumer=SOURCE)]).stream_config()
    assert sc.sources == [
        StreamSource(
            name="KV_a", consumer=SOURCE, subject_transforms=[SubjectTransform(src="$KV.a.>", dest="$KV.agg.>")]
        )
    ]
