"""Unit tests for jetstream_sync.models: JSON mapping, conversions and client-side validation (no server)."""

from __future__ import annotations

import base64
import copy
import logging
from datetime import datetime, timedelta, timezone
from typing import Any

import attrs
import pytest

from jetstream_sync.errors import InvalidArgumentError, InvalidTypeError, JetStreamError
from jetstream_sync.headers import Headers, parse_header_block
from jetstream_sync.models import (
    AccountInfo,
    AccountLimits,
    AckPolicy,
    APIStats,
    ConsumerConfig,
    ConsumerInfo,
    DeliverPolicy,
    DiscardPolicy,
    PersistMode,
    PriorityPolicy,
    PubAck,
    ReplayPolicy,
    RetentionPolicy,
    SequenceInfo,
    StorageType,
    StoreCompression,
    StoredMsg,
    StreamConfig,
    StreamInfo,
    StreamState,
    _meta,
    _Model,
    from_wire,
    nanos,
    seconds,
    to_wire,
)

UTC = timezone.utc

# Responses shaped the way nats-server 2.10/2.11 sends them, including keys we do not model.
STREAM_INFO: dict[str, Any] = {
    "type": "io.nats.jetstream.api.v1.stream_info_response",
    "total": 0,
    "offset": 0,
    "limit": 0,
    "config": {
        "name": "ORDERS",
        "subjects": ["orders.>"],
        "retention": "limits",
        "max_consumers": -1,
        "max_msgs": -1,
        "max_bytes": -1,
        "max_age": 86_400_000_000_000,
        "max_msgs_per_subject": -1,
        "max_msg_size": -1,
        "discard": "old",
        "storage": "file",
        "num_replicas": 1,
        "duplicate_window": 120_000_000_000,
        "compression": "none",
        "allow_direct": True,
        "mirror_direct": False,
        "sealed": False,
        "deny_delete": False,
        "deny_purge": False,
        "allow_rollup_hdrs": False,
        "consumer_limits": {},
        "metadata": {"_nats.req.level": "0", "owner": "billing"},
        "allow_msg_ttl": True,
        "subject_delete_marker_ttl": 900_000_000_000,
        "persist_mode": "default",
    },
    "created": "2024-05-01T10:00:00.123456789Z",
    "state": {
        "messages": 3,
        "bytes": 159,
        "first_seq": 1,
        "first_ts": "2024-05-01T10:00:01.5Z",
        "last_seq": 3,
        "last_ts": "2024-05-01T10:00:03.000000001Z",
        "num_subjects": 2,
        "consumer_count": 1,
    },
    "cluster": {"leader": "NDXQ7M4RUP6ZQMZJ3VZP2WWT6ZBCTWMYG5Y2BHJ2P5WSWHPI3ORQ5FUF"},
    "ts": "2024-05-01T10:05:00.999999999Z",
}

CONSUMER_INFO: dict[str, Any] = {
    "type": "io.nats.jetstream.api.v1.consumer_info_response",
    "stream_name": "ORDERS",
    "name": "worker",
    "created": "2024-05-01T10:00:02.987654321Z",
    "config": {
        "durable_name": "worker",
        "name": "worker",
        "deliver_policy": "all",
        "ack_policy": "explicit",
        "ack_wait": 30_000_000_000,
        "max_deliver": 5,
        "backoff": [1_000_000_000, 5_000_000_000, 30_000_000_000],
        "filter_subject": "orders.new",
        "replay_policy": "instant",
        "max_waiting": 512,
        "max_ack_pending": 1000,
        "inactive_threshold": 300_000_000_000,
        "num_replicas": 0,
        "priority_policy": "none",
    },
    "delivered": {"consumer_seq": 10, "stream_seq": 12, "last_active": "2024-05-01T10:04:59.123456789Z"},
    "ack_floor": {"consumer_seq": 8, "stream_seq": 10, "last_active": "2024-05-01T10:04:58.5Z"},
    "num_ack_pending": 2,
    "num_redelivered": 1,
    "num_waiting": 1,
    "num_pending": 5,
    "cluster": {"leader": "NDXQ7M4RUP6ZQMZJ3VZP2WWT6ZBCTWMYG5Y2BHJ2P5WSWHPI3ORQ5FUF"},
    "ts": "2024-05-01T10:05:00.000000001Z",
}

ACCOUNT_INFO: dict[str, Any] = {
    "type": "io.nats.jetstream.api.v1.account_info_response",
    "memory": 0,
    "storage": 4096,
    "reserved_memory": 0,
    "reserved_storage": 0,
    "streams": 2,
    "consumers": 3,
    "limits": {
        "max_memory": -1,
        "max_storage": -1,
        "max_streams": -1,
        "max_consumers": -1,
        "max_ack_pending": -1,
        "memory_max_stream_bytes": -1,
        "storage_max_stream_bytes": -1,
        "max_bytes_required": False,
    },
    "domain": "hub",
    "api": {"level": 1, "total": 42, "errors": 1},
}


def b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


# --- durations and times ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("secs", "ns"),
    [
        (0, 0),
        (1, 1_000_000_000),
        (0.5, 500_000_000),
        (1.25, 1_250_000_000),
        (120.0, 120_000_000_000),
        (0.000000001, 1),
        (86_400 * 365 * 100, 86_400 * 365 * 100 * 1_000_000_000),
    ],
)
def test_nanos_and_seconds(secs: float, ns: int) -> None:
    assert nanos(secs) == ns
    assert isinstance(nanos(secs), int)
    assert seconds(ns) == pytest.approx(secs)
    assert nanos(seconds(ns)) == ns


@pytest.mark.parametrize(
    ("wire", "expected"),
    [
        ("2024-05-01T10:00:00.123456789Z", datetime(2024, 5, 1, 10, 0, 0, 123456, tzinfo=UTC)),
        ("2024-05-01T10:00:00Z", datetime(2024, 5, 1, 10, 0, 0, tzinfo=UTC)),
        ("2024-05-01T10:00:00.5Z", datetime(2024, 5, 1, 10, 0, 0, 500000, tzinfo=UTC)),
        ("2024-05-01T12:00:00.000000999+02:00", datetime(2024, 5, 1, 10, 0, 0, tzinfo=UTC)),
        ("0001-01-01T00:00:00Z", None),
        ("not a time", None),
    ],
)
def test_times_are_parsed_robustly(wire: str, expected: datetime | None) -> None:
    seq = SequenceInfo.from_json({"consumer_seq": 1, "stream_seq": 1, "last_active": wire})
    assert seq.last_active == expected
    if expected is not None:
        assert seq.last_active is not None and seq.last_active.tzinfo is not None


def test_times_encode_as_utc_rfc3339() -> None:
    local = timezone(timedelta(hours=-5))
    seq = SequenceInfo(consumer_seq=1, stream_seq=2, last_active=datetime(2024, 5, 1, 5, 0, 0, 250, tzinfo=local))
    assert seq.to_json()["last_active"] == "2024-05-01T10:00:00.000250Z"
    assert SequenceInfo(last_active=datetime(2024, 5, 1, tzinfo=UTC)).to_json()["last_active"] == "2024-05-01T00:00:00Z"


@pytest.mark.parametrize("value", [90, 90.0, timedelta(seconds=90)])
def test_durations_accept_numbers_and_timedelta(value: float | timedelta) -> None:
    config = StreamConfig(name="S", max_age=value, duplicate_window=timedelta(milliseconds=1500))
    assert config.max_age == 90.0
    assert isinstance(config.max_age, float)
    assert config.duplicate_window == 1.5
    wire = config.to_json()
    assert wire["max_age"] == 90_000_000_000
    assert wire["duplicate_window"] == 1_500_000_000


def test_backoff_is_a_list_of_nanoseconds_on_the_wire() -> None:
    config = ConsumerConfig(durable_name="d", backoff=[1, timedelta(seconds=2.5)], max_deliver=5)
    assert config.backoff == [1.0, 2.5]
    assert config.to_json()["backoff"] == [1_000_000_000, 2_500_000_000]


# --- enums --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("retention", "workqueue", RetentionPolicy.WORK_QUEUE),
        ("retention", RetentionPolicy.INTEREST, RetentionPolicy.INTEREST),
        ("discard", "new", DiscardPolicy.NEW),
        ("storage", "memory", StorageType.MEMORY),
        ("compression", "s2", StoreCompression.S2),
    ],
)
def test_stream_enums_accept_strings(field: str, value: Any, expected: Any) -> None:
    config = StreamConfig(name="S", **{field: value})
    assert getattr(config, field) is expected
    assert config.to_json()[field] == expected.value


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("deliver_policy", "last_per_subject", DeliverPolicy.LAST_PER_SUBJECT),
        ("ack_policy", "none", AckPolicy.NONE),
        ("replay_policy", "original", ReplayPolicy.ORIGINAL),
    ],
)
def test_consumer_enums_accept_strings(field: str, value: str, expected: Any) -> None:
    kwargs: dict[str, Any] = {field: value}
    config = ConsumerConfig(**kwargs)
    assert getattr(config, field) is expected
    assert config.to_json()[field] == value


@pytest.mark.parametrize(
    ("cls", "field", "value"),
    [
        (StreamConfig, "retention", "forever"),
        (StreamConfig, "storage", "disk"),
        (StreamConfig, "compression", "gzip"),
        (ConsumerConfig, "ack_policy", "explicitly"),
        (ConsumerConfig, "deliver_policy", "ALL"),
    ],
)
def test_unknown_enum_string_in_a_config_is_rejected(cls: Any, field: str, value: str) -> None:
    kwargs: dict[str, Any] = {"name": "S"} if cls is StreamConfig else {}
    with pytest.raises(InvalidArgumentError) as info:
        cls(**kwargs, **{field: value})
    assert info.value.field == field
    assert value in str(info.value)
    assert "use one of" in str(info.value)


def test_enum_of_the_wrong_type_is_a_type_error() -> None:
    with pytest.raises(InvalidTypeError) as info:
        StreamConfig(name="S", storage=1)  # type: ignore[arg-type]
    assert info.value.field == "storage"


def test_unknown_enum_from_the_server_is_kept_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    data = copy.deepcopy(STREAM_INFO)
    data["config"]["retention"] = "ledger"
    data["config"]["compression"] = "zstd"
    with caplog.at_level(logging.DEBUG, logger="jetstream_sync"):
        info = StreamInfo.from_json(data)
    assert info.config.retention == "ledger"
    assert info.config.compression == "zstd"
    assert any("ledger" in record.getMessage() for record in caplog.records)
    assert info.config.to_json()["retention"] == "ledger"


# --- StreamConfig -------------------------------------------------------------------------------------------


def test_stream_config_defaults_on_the_wire() -> None:
    # Limits are sent as -1 (as nats.go does); empty lists and omitempty booleans are not.
    assert StreamConfig(name="ORDERS").to_json() == {
        "name": "ORDERS",
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
        "allow_direct": False,
        "mirror_direct": False,
        "allow_msg_ttl": False,
    }


def test_stream_config_full_round_trip() -> None:
    config = StreamConfig(
        name="ORDERS",
        description="all orders",
        subjects=["orders.*", "returns.>"],
        retention="interest",
        max_age=timedelta(days=7),
        max_msgs_per_subject=10,
        discard="new",
        discard_new_per_subject=True,
        duplicate_window=60,
        sealed=False,
        deny_delete=True,
        placement={"cluster": "east", "tags": ["ssd"]},
        sources=[{"name": "A"}, {"name": "B", "filter_subject": "b.>"}],
        compression="s2",
        first_seq=100,
        republish={"src": ">", "dest": "copy.>"},
        metadata={"team": "billing"},
    )
    wire = config.to_json()
    assert wire["deny_delete"] is True
    assert "sealed" not in wire
    assert wire["discard_new_per_subject"] is True
    assert wire["sources"] == [{"name": "A"}, {"name": "B", "filter_subject": "b.>"}]
    assert StreamConfig.from_json(wire) == config


def test_stream_config_copies_the_subject_list() -> None:
    subjects = ["a.>"]
    config = StreamConfig(name="S", subjects=subjects)
    subjects.append("b.>")
    assert config.subjects == ["a.>"]


def test_stream_info_round_trip() -> None:
    info = StreamInfo.from_json(STREAM_INFO)
    assert info.created == datetime(2024, 5, 1, 10, 0, 0, 123456, tzinfo=UTC)
    assert info.ts == datetime(2024, 5, 1, 10, 5, 0, 999999, tzinfo=UTC)
    assert info.config.name == "ORDERS"
    assert info.config.max_age == 86_400.0
    assert info.config.duplicate_window == 120.0
    assert info.config.compression is StoreCompression.NONE
    assert info.config.allow_direct is True
    assert info.config.consumer_limits is None  # the server's {} means unset, and is not sent back
    assert info.state == StreamState(
        messages=3,
        bytes=159,
        first_seq=1,
        first_ts=datetime(2024, 5, 1, 10, 0, 1, 500000, tzinfo=UTC),
        last_seq=3,
        last_ts=datetime(2024, 5, 1, 10, 0, 3, tzinfo=UTC),
        num_subjects=2,
        consumer_count=1,
    )
    assert info.cluster is not None and info.cluster.leader is not None and info.cluster.leader.startswith("NDX")
    assert info.extra == {"type": "io.nats.jetstream.api.v1.stream_info_response", "total": 0, "offset": 0, "limit": 0}
    assert info.config.extra == {}
    assert info.config.persist_mode is PersistMode.DEFAULT
    assert info.config.subject_delete_marker_ttl == 900.0 and info.config.allow_msg_ttl
    assert StreamInfo.from_json(info.to_json()) == info


def test_empty_stream_state_has_no_timestamps() -> None:
    state = StreamState.from_json(
        {
            "messages": 0,
            "bytes": 0,
            "first_seq": 0,
            "first_ts": "0001-01-01T00:00:00Z",
            "last_seq": 0,
            "last_ts": "0001-01-01T00:00:00Z",
            "consumer_count": 0,
        }
    )
    assert state.first_ts is None and state.last_ts is None
    assert state.num_deleted == 0 and state.deleted is None
    assert "first_ts" not in state.to_json()


def test_stream_state_with_deleted_and_subjects() -> None:
    data = {"messages": 2, "deleted": [2, 3], "num_deleted": 2, "subjects": {"a": 1, "b": 1}, "lost": {"msgs": [4]}}
    state = StreamState.from_json(data)
    assert state.deleted == [2, 3]
    assert state.subjects == {"a": 1, "b": 1}
    assert StreamState.from_json(state.to_json()) == state


def test_extra_keys_survive_an_update() -> None:
    # What update_stream sends after a fetch: the new setting plus the fields we do not model.
    config = StreamInfo.from_json(STREAM_INFO).config
    updated = attrs.evolve(config, max_msgs=1000)
    assert updated.extra == config.extra
    wire = updated.to_json()
    assert wire["max_msgs"] == 1000
    assert wire["subject_delete_marker_ttl"] == 900_000_000_000
    assert wire["persist_mode"] == "default"
    assert "consumer_limits" not in wire  # an empty dict is not sent


def test_modeled_fields_win_over_extra() -> None:
    config = StreamConfig(name="S", max_msgs=5, extra={"max_msgs": 9, "no_such_field": True})
    wire = config.to_json()
    assert wire["max_msgs"] == 5
    assert wire["no_such_field"] is True


def test_extra_is_not_part_of_equality_or_repr() -> None:
    a = StreamConfig(name="S", extra={"x": 1})
    assert a == StreamConfig(name="S")
    assert "extra" not in repr(a)


def test_decoding_skips_client_side_validation() -> None:
    # The server is the authority on what it stored; decoding must never reject its answer.
    data = dict(STREAM_INFO["config"], num_replicas=7, max_msgs=-5, name="legacy.name")
    config = StreamConfig.from_json(data)
    assert config.num_replicas == 7
    assert config.name == "legacy.name"
    assert not attrs.validators.get_disabled()  # nothing global was switched off
    with pytest.raises(InvalidArgumentError):
        attrs.evolve(config)  # user-side construction still validates


def test_decoded_config_is_valid_client_side() -> None:
    config = StreamInfo.from_json(STREAM_INFO).config
    assert attrs.evolve(config) == config
    consumer = ConsumerInfo.from_json(CONSUMER_INFO).config
    assert attrs.evolve(consumer) == consumer


def test_missing_required_field_is_reported() -> None:
    with pytest.raises(JetStreamError, match="name"):
        StreamConfig.from_json({"subjects": ["a"]})


def test_from_json_needs_a_mapping() -> None:
    with pytest.raises(InvalidTypeError):
        StreamConfig.from_json(["name"])  # type: ignore[arg-type]


def test_null_from_the_server_takes_the_default() -> None:
    config = StreamConfig.from_json({"name": "S", "subjects": None, "max_msgs": None})
    assert config.subjects == []
    assert config.max_msgs == -1


@pytest.mark.parametrize(
    ("kwargs", "error", "field"),
    [
        ({"name": ""}, InvalidArgumentError, "name"),
        ({"name": "a.b"}, InvalidArgumentError, "name"),
        ({"name": "a b"}, InvalidArgumentError, "name"),
        ({"name": 5}, InvalidTypeError, "name"),
        ({"name": "S", "description": 5}, InvalidTypeError, "description"),
        ({"name": "S", "subjects": "orders.>"}, InvalidTypeError, "subjects"),
        ({"name": "S", "subjects": ["orders..new"]}, InvalidArgumentError, "subjects"),
        ({"name": "S", "subjects": ["a.>.b"]}, InvalidArgumentError, "subjects"),
        ({"name": "S", "subjects": [5]}, InvalidTypeError, "subjects"),
        ({"name": "S", "num_replicas": 0}, InvalidArgumentError, "num_replicas"),
        ({"name": "S", "num_replicas": 6}, InvalidArgumentError, "num_replicas"),
        ({"name": "S", "num_replicas": 1.0}, InvalidTypeError, "num_replicas"),
        ({"name": "S", "max_msgs": -2}, InvalidArgumentError, "max_msgs"),
        ({"name": "S", "max_bytes": -2}, InvalidArgumentError, "max_bytes"),
        ({"name": "S", "max_msgs_per_subject": -2}, InvalidArgumentError, "max_msgs_per_subject"),
        ({"name": "S", "max_msg_size": -2}, InvalidArgumentError, "max_msg_size"),
        ({"name": "S", "max_consumers": -2}, InvalidArgumentError, "max_consumers"),
        ({"name": "S", "max_consumers": True}, InvalidTypeError, "max_consumers"),
        ({"name": "S", "max_age": -1}, InvalidArgumentError, "max_age"),
        ({"name": "S", "max_age": "1h"}, InvalidTypeError, "max_age"),
        ({"name": "S", "max_age": float("inf")}, InvalidArgumentError, "max_age"),
        ({"name": "S", "max_age": 60, "duplicate_window": 120}, InvalidArgumentError, "duplicate_window"),
        ({"name": "S", "discard_new_per_subject": True, "max_msgs_per_subject": 1}, InvalidArgumentError,
         "discard_new_per_subject"),
        ({"name": "S", "discard_new_per_subject": True, "discard": "new"}, InvalidArgumentError,
         "discard_new_per_subject"),
        ({"name": "S", "deny_delete": 1}, InvalidTypeError, "deny_delete"),
        ({"name": "S", "sealed": "yes"}, InvalidTypeError, "sealed"),
        ({"name": "S", "allow_direct": None}, InvalidTypeError, "allow_direct"),
        ({"name": "S", "placement": ["east"]}, InvalidTypeError, "placement"),
        ({"name": "S", "sources": [{"name": "A"}, "B"]}, InvalidTypeError, "sources"),
        ({"name": "S", "metadata": {"k": 1}}, InvalidTypeError, "metadata"),
        ({"name": "S", "first_seq": -1}, InvalidArgumentError, "first_seq"),
    ],
)  # fmt: skip
def test_stream_config_validation(kwargs: dict[str, Any], error: type[Exception], field: str) -> None:
    with pytest.raises(error) as info:
        StreamConfig(**kwargs)
    assert info.value.field == field  # type: ignore[attr-defined]


def test_stream_config_valid_edge_cases() -> None:
    StreamConfig(name="S", max_age=0, duplicate_window=600)  # unlimited age: any window
    StreamConfig(name="S", max_age=60, duplicate_window=60)
    StreamConfig(name="S", discard="new", discard_new_per_subject=True, max_msgs_per_subject=1)
    StreamConfig(name="S", num_replicas=5, subjects=["a.*", "b.>", ">"])


# --- consumers ----------------------------------------------------------------------------------------------


def test_consumer_config_sends_only_what_was_set() -> None:
    assert ConsumerConfig().to_json() == {"deliver_policy": "all", "ack_policy": "explicit", "replay_policy": "instant"}
    assert ConsumerConfig(durable_name="d", headers_only=False, filter_subjects=[]).to_json() == {
        "durable_name": "d",
        "deliver_policy": "all",
        "ack_policy": "explicit",
        "replay_policy": "instant",
    }


def test_consumer_config_full_round_trip() -> None:
    start = datetime(2024, 5, 1, 9, 30, tzinfo=UTC)
    config = ConsumerConfig(
        name="pusher",
        durable_name="pusher",
        description="push it",
        deliver_policy=DeliverPolicy.BY_START_TIME,
        opt_start_time=start,
        ack_policy="all",
        ack_wait=timedelta(seconds=45),
        max_deliver=-1,
        filter_subjects=["orders.new", "orders.*.paid"],
        replay_policy="original",
        rate_limit_bps=1024,
        sample_freq="30%",
        max_ack_pending=-1,
        flow_control=True,
        idle_heartbeat=5,
        headers_only=True,
        inactive_threshold=timedelta(minutes=5),
        num_replicas=3,
        mem_storage=True,
        metadata={"team": "billing"},
        deliver_subject="deliver.pusher",
        deliver_group="workers",
        pause_until=datetime(2030, 1, 1, tzinfo=UTC),
    )
    wire = config.to_json()
    assert wire["opt_start_time"] == "2024-05-01T09:30:00Z"
    assert wire["ack_wait"] == 45_000_000_000
    assert wire["idle_heartbeat"] == 5_000_000_000
    assert wire["inactive_threshold"] == 300_000_000_000
    assert wire["pause_until"] == "2030-01-01T00:00:00Z"
    assert ConsumerConfig.from_json(wire) == config
    assert config.is_durable


def test_pull_limits_use_the_server_names() -> None:
    wire = ConsumerConfig(max_batch=100, max_bytes=1 << 20, max_expires=30, max_waiting=8).to_json()
    assert wire["max_batch"] == 100
    assert wire["max_bytes"] == 1 << 20
    assert wire["max_expires"] == 30_000_000_000
    assert wire["max_waiting"] == 8


def test_consumer_by_start_sequence() -> None:
    config = ConsumerConfig(deliver_policy="by_start_sequence", opt_start_seq=42)
    assert config.to_json()["opt_start_seq"] == 42


@pytest.mark.parametrize(
    ("kwargs", "durable"),
    [({"durable_name": "d"}, True), ({"name": "n"}, False), ({}, False), ({"name": "x", "durable_name": "x"}, True)],
)
def test_is_durable(kwargs: dict[str, Any], durable: bool) -> None:
    assert ConsumerConfig(**kwargs).is_durable is durable


NOW = datetime(2024, 5, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("kwargs", "error", "field"),
    [
        ({"name": "a.b"}, InvalidArgumentError, "name"),
        ({"durable_name": "a*"}, InvalidArgumentError, "durable_name"),
        ({"durable_name": ""}, InvalidArgumentError, "durable_name"),
        ({"name": "a", "durable_name": "b"}, InvalidArgumentError, "durable_name"),
        ({"deliver_policy": "by_start_sequence"}, InvalidArgumentError, "opt_start_seq"),
        ({"opt_start_seq": 5}, InvalidArgumentError, "opt_start_seq"),
        ({"deliver_policy": "by_start_sequence", "opt_start_seq": 0}, InvalidArgumentError, "opt_start_seq"),
        ({"deliver_policy": "by_start_time"}, InvalidArgumentError, "opt_start_time"),
        ({"opt_start_time": NOW}, InvalidArgumentError, "opt_start_time"),
        ({"deliver_policy": "by_start_time", "opt_start_time": datetime(2024, 5, 1)}, InvalidArgumentError,
         "opt_start_time"),
        ({"deliver_policy": "by_start_time", "opt_start_time": "2024-05-01"}, InvalidTypeError, "opt_start_time"),
        ({"filter_subject": "a", "filter_subjects": ["b"]}, InvalidArgumentError, "filter_subjects"),
        ({"filter_subject": "a..b"}, InvalidArgumentError, "filter_subject"),
        ({"filter_subjects": ["a", "b c"]}, InvalidArgumentError, "filter_subjects"),
        ({"filter_subjects": "a.>"}, InvalidTypeError, "filter_subjects"),
        ({"max_deliver": 0}, InvalidArgumentError, "max_deliver"),
        ({"max_deliver": -2}, InvalidArgumentError, "max_deliver"),
        ({"max_deliver": 2, "backoff": [1, 2]}, InvalidArgumentError, "max_deliver"),
        ({"backoff": [1, -1]}, InvalidArgumentError, "backoff"),
        ({"backoff": [0]}, InvalidArgumentError, "backoff"),
        ({"backoff": 5}, InvalidTypeError, "backoff"),
        ({"max_ack_pending": -2}, InvalidArgumentError, "max_ack_pending"),
        ({"ack_wait": 0}, InvalidArgumentError, "ack_wait"),
        ({"ack_wait": -1}, InvalidArgumentError, "ack_wait"),
        ({"ack_wait": "30s"}, InvalidTypeError, "ack_wait"),
        ({"idle_heartbeat": -5}, InvalidArgumentError, "idle_heartbeat"),
        ({"sample_freq": "150%"}, InvalidArgumentError, "sample_freq"),
        ({"sample_freq": "often"}, InvalidArgumentError, "sample_freq"),
        ({"sample_freq": 30}, InvalidTypeError, "sample_freq"),
        ({"num_replicas": 6}, InvalidArgumentError, "num_replicas"),
        ({"deliver_subject": "deliver.*"}, InvalidArgumentError, "deliver_subject"),
        ({"deliver_group": "a b"}, InvalidArgumentError, "deliver_group"),
        ({"headers_only": "no"}, InvalidTypeError, "headers_only"),
        ({"pause_until": datetime(2030, 1, 1)}, InvalidArgumentError, "pause_until"),
        ({"metadata": {1: "a"}}, InvalidTypeError, "metadata"),
    ],
)  # fmt: skip
def test_consumer_config_validation(kwargs: dict[str, Any], error: type[Exception], field: str) -> None:
    with pytest.raises(error) as info:
        ConsumerConfig(**kwargs)
    assert info.value.field == field  # type: ignore[attr-defined]


def test_max_deliver_unlimited_with_backoff_is_fine() -> None:
    ConsumerConfig(max_deliver=-1, backoff=[1, 2, 3])
    ConsumerConfig(max_deliver=4, backoff=[1, 2, 3])
    ConsumerConfig(backoff=[1, 2, 3])


def test_consumer_info_round_trip() -> None:
    info = ConsumerInfo.from_json(CONSUMER_INFO)
    assert info.stream_name == "ORDERS"
    assert info.created == datetime(2024, 5, 1, 10, 0, 2, 987654, tzinfo=UTC)
    assert info.config.ack_wait == 30.0
    assert info.config.backoff == [1.0, 5.0, 30.0]
    assert info.config.inactive_threshold == 300.0
    assert info.config.num_replicas == 0
    assert info.config.priority_policy is PriorityPolicy.NONE and info.config.extra == {}
    assert info.delivered == SequenceInfo(
        consumer_seq=10, stream_seq=12, last_active=datetime(2024, 5, 1, 10, 4, 59, 123456, tzinfo=UTC)
    )
    assert info.ack_floor.stream_seq == 10
    assert (info.num_ack_pending, info.num_redelivered, info.num_waiting, info.num_pending) == (2, 1, 1, 5)
    assert info.push_bound is False and info.paused is False
    assert info.ts == datetime(2024, 5, 1, 10, 5, 0, tzinfo=UTC)
    wire = info.to_json()
    assert wire["config"]["backoff"] == [1_000_000_000, 5_000_000_000, 30_000_000_000]
    assert wire["config"]["priority_policy"] == "none"
    assert ConsumerInfo.from_json(wire) == info


def test_consumer_info_paused_push_consumer() -> None:
    data = copy.deepcopy(CONSUMER_INFO)
    data.update(push_bound=True, paused=True, pause_remaining=59_000_000_000)
    data["config"].update(deliver_subject="deliver.x", pause_until="2024-05-01T10:06:00Z", flow_control=True)
    info = ConsumerInfo.from_json(data)
    assert info.push_bound and info.paused
    assert info.pause_remaining == 59.0
    assert info.config.pause_until == datetime(2024, 5, 1, 10, 6, tzinfo=UTC)
    assert info.config.flow_control is True


# --- account, pub ack ---------------------------------------------------------------------------------------


def test_account_info_round_trip() -> None:
    info = AccountInfo.from_json(ACCOUNT_INFO)
    assert info.storage == 4096
    assert info.streams == 2 and info.consumers == 3
    assert info.limits == AccountLimits(
        max_memory=-1,
        max_storage=-1,
        max_streams=-1,
        max_consumers=-1,
        max_ack_pending=-1,
        memory_max_stream_bytes=-1,
        storage_max_stream_bytes=-1,
    )
    assert info.api == APIStats(level=1, total=42, errors=1)  # the JetStream API level (ADR-44)
    assert info.api.extra == {}
    assert info.domain == "hub"
    assert info.tiers is None
    assert AccountInfo.from_json(info.to_json()) == info
    assert info.to_json()["api"]["level"] == 1


def test_account_info_with_tiers() -> None:
    data = dict(ACCOUNT_INFO, tiers={"R1": {"memory": 0, "storage": 10, "streams": 1}})
    assert AccountInfo.from_json(data).tiers == {"R1": {"memory": 0, "storage": 10, "streams": 1}}


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"stream": "ORDERS", "seq": 42}, PubAck(stream="ORDERS", seq=42)),
        ({"stream": "ORDERS", "seq": 42, "duplicate": True}, PubAck(stream="ORDERS", seq=42, duplicate=True)),
        ({"stream": "ORDERS", "seq": 7, "domain": "hub"}, PubAck(stream="ORDERS", seq=7, domain="hub")),
    ],
)
def test_pub_ack(data: dict[str, Any], expected: PubAck) -> None:
    ack = PubAck.from_json(data)
    assert ack == expected
    assert ack.to_json() == data


def test_pub_ack_keeps_newer_keys_and_is_frozen() -> None:
    ack = PubAck.from_json({"stream": "S", "seq": 1, "batch": "b1", "count": 3})
    assert ack.extra == {"batch": "b1", "count": 3}
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        ack.seq = 2  # type: ignore[misc]


def test_pub_ack_without_seq_is_an_error() -> None:
    with pytest.raises(JetStreamError, match="seq"):
        PubAck.from_json({"stream": "S"})


# --- stored messages and headers ----------------------------------------------------------------------------


def test_stored_msg_from_api_with_multi_value_headers() -> None:
    block = b"NATS/1.0\r\nNats-Msg-Id: abc\r\nX-Tag: one\r\nX-Tag: two\r\nX-Empty:\r\n\r\n"
    message = {
        "subject": "orders.new",
        "seq": 5,
        "hdrs": b64(block),
        "data": b64(b"\x00hello"),
        "time": "2024-05-01T10:00:01.123456789Z",
    }
    msg = StoredMsg.from_api(message)
    assert msg.subject == "orders.new"
    assert msg.seq == 5
    assert msg.data == b"\x00hello"
    assert msg.headers == {"Nats-Msg-Id": ["abc"], "X-Tag": ["one", "two"], "X-Empty": [""]}
    assert msg.time == datetime(2024, 5, 1, 10, 0, 1, 123456, tzinfo=UTC)
    assert StoredMsg.from_api(msg.to_json()) == msg
    assert parse_header_block(base64.b64decode(msg.to_json()["hdrs"]))[2] == msg.headers


def test_stored_msg_encodes_single_values_and_multi_maps() -> None:
    when = datetime(2024, 5, 1, tzinfo=UTC)
    for headers, expected in [({"A": "1"}, {"A": ["1"]}), (Headers({"A": ["1", "2"]}), {"A": ["1", "2"]})]:
        msg = StoredMsg(subject="a", seq=1, headers=headers, time=when)  # type: ignore[arg-type]
        assert StoredMsg.from_api(msg.to_json()).headers == expected


def test_stored_msg_accepts_the_whole_response() -> None:
    response = {
        "type": "io.nats.jetstream.api.v1.stream_msg_get_response",
        "message": {"subject": "a", "seq": 1, "data": b64(b"x"), "time": "2024-05-01T10:00:00Z"},
    }
    msg = StoredMsg.from_api(response)
    assert msg.data == b"x"
    assert msg.headers == {}


def test_stored_msg_without_data() -> None:
    msg = StoredMsg.from_api({"subject": "a", "seq": 1, "time": "2024-05-01T10:00:00Z"})
    assert msg.data == b""
    assert "data" not in msg.to_json()


def test_stored_msg_with_bad_base64() -> None:
    with pytest.raises(JetStreamError, match="base64"):
        StoredMsg.from_api({"subject": "a", "seq": 1, "data": "***", "time": "2024-05-01T10:00:00Z"})


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (b"NATS/1.0\r\nA: 1\r\n\r\n", {"A": ["1"]}),
        (b"NATS/1.0\r\nA: 1\r\nB: x: y\r\nA: 2\r\n\r\n", {"A": ["1", "2"], "B": ["x: y"]}),
        (b"NATS/1.0 404 Not Found\r\n\r\n", {}),  # the status line is not a header
        (b"NATS/1.0 408 Request Timeout\r\nNats-Pending-Messages: 3\r\n\r\n", {"Nats-Pending-Messages": ["3"]}),
        (b"NATS/1.0\nLower-Case: kept\n\n", {"Lower-Case": ["kept"]}),
        (b"NATS/1.0\r\nno colon here\r\n  Spaced  :  value  \r\n\r\n", {"Spaced": ["value"]}),
        (b"", {}),
        ("NATS/1.0\r\nName: caf\u00e9\r\n\r\n".encode(), {"Name": ["caf\u00e9"]}),
    ],
)
def test_parse_header_block(raw: bytes, expected: dict[str, list[str]]) -> None:
    status, _, headers = parse_header_block(raw)
    assert headers == expected
    assert status == (int(raw[9:12]) if raw[8:9] == b" " else None)


# --- the generic layer --------------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class _Batch(_Model):
    """A model using the list-of-models and renamed-field kinds that the public models do not need."""

    acks: list[PubAck] = attrs.field(factory=list, metadata=_meta("models", model=PubAck))
    window: float | None = attrs.field(default=None, metadata=_meta("duration", wire="win_ns"))


def test_list_of_models_and_renamed_fields() -> None:
    data = {"acks": [{"stream": "S", "seq": 1}, {"stream": "S", "seq": 2, "duplicate": True}], "win_ns": 2_000_000}
    batch = from_wire(_Batch, data)
    assert batch.acks == [PubAck(stream="S", seq=1), PubAck(stream="S", seq=2, duplicate=True)]
    assert batch.window == 0.002
    assert to_wire(batch) == data
    assert to_wire(_Batch()) == {}
