"""OrderedConsumerConfig validation and the server-side configuration of each link of an ordered consumer."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from types import SimpleNamespace

import pytest

from jetstream_sync import AckPolicy, DeliverPolicy, OrderedConsumerConfig, ReplayPolicy, errors
from jetstream_sync.jetstream.consumers._chain import ConsumerChain
from jetstream_sync.models.reads import DEFAULT_INACTIVE_THRESHOLD

START = datetime(2024, 1, 2, 3, 4, 5, tzinfo=timezone.utc)


class FakeAPI:
    """The two things a ConsumerChain asks of its API before any request: a fresh token and a subject."""

    def __init__(self) -> None:
        self.runtime = SimpleNamespace(new_token=lambda: "TOKEN")

    def subject(self, suffix: str) -> str:
        return f"$JS.API.{suffix}"


def chain(**kwargs) -> ConsumerChain:
    return ConsumerChain(FakeAPI(), "S", OrderedConsumerConfig(**kwargs))  # type: ignore[arg-type]


def test_defaults():
    cfg = OrderedConsumerConfig()
    assert cfg.filter_subjects is None
    assert cfg.deliver_policy is DeliverPolicy.ALL
    assert cfg.replay_policy is ReplayPolicy.INSTANT
    assert cfg.inactive_threshold == DEFAULT_INACTIVE_THRESHOLD == 300.0
    assert (cfg.headers_only, cfg.max_reset_attempts, cfg.name_prefix, cfg.metadata) == (False, None, None, None)


@pytest.mark.parametrize(
    ("kwargs", "error", "field"),
    [
        ({"filter_subjects": "S.a"}, errors.InvalidTypeError, "filter_subjects"),
        ({"filter_subjects": 5}, errors.InvalidTypeError, "filter_subjects"),
        ({"filter_subjects": [1]}, errors.InvalidTypeError, "filter_subjects"),
        ({"filter_subjects": ["S a"]}, errors.InvalidArgumentError, "filter_subjects"),
        ({"filter_subjects": [""]}, errors.InvalidArgumentError, "filter_subjects"),
        ({"filter_subjects": ["S.a", "S..b"]}, errors.InvalidArgumentError, "filter_subjects"),
        ({"opt_start_seq": 5}, errors.InvalidArgumentError, "opt_start_seq"),
        ({"deliver_policy": DeliverPolicy.BY_START_SEQUENCE}, errors.InvalidArgumentError, "opt_start_seq"),
        ({"deliver_policy": DeliverPolicy.BY_START_TIME}, errors.InvalidArgumentError, "opt_start_time"),
        ({"opt_start_time": START}, errors.InvalidArgumentError, "opt_start_time"),
        ({"deliver_policy": "bogus"}, errors.InvalidArgumentError, "deliver_policy"),
        ({"max_reset_attempts": 0}, errors.InvalidArgumentError, "max_reset_attempts"),
        ({"max_reset_attempts": -1}, errors.InvalidArgumentError, "max_reset_attempts"),
        ({"max_reset_attempts": True}, errors.InvalidTypeError, "max_reset_attempts"),
        ({"name_prefix": "a.b"}, errors.InvalidArgumentError, "name_prefix"),
        ({"name_prefix": "a*"}, errors.InvalidArgumentError, "name_prefix"),
        ({"name_prefix": ""}, errors.InvalidArgumentError, "name_prefix"),
        ({"inactive_threshold": -1}, errors.InvalidArgumentError, "inactive_threshold"),
        ({"headers_only": 1}, errors.InvalidTypeError, "headers_only"),
        ({"metadata": {"a": 1}}, errors.InvalidTypeError, "metadata"),
    ],
)
def test_invalid_config_raises_typed_error_naming_the_field(kwargs, error, field):
    with pytest.raises(error) as info:
        OrderedConsumerConfig(**kwargs)
    assert info.value.field == field


def test_valid_start_options_and_conversions():
    assert OrderedConsumerConfig(inactive_threshold=timedelta(minutes=2)).inactive_threshold == 120.0
    assert OrderedConsumerConfig(inactive_threshold=timedelta(milliseconds=1500)).inactive_threshold == 1.5
    assert OrderedConsumerConfig(filter_subjects=("S.a", "S.b.>")).filter_subjects == ["S.a", "S.b.>"]
    assert OrderedConsumerConfig(filter_subjects=[]).filter_subjects is None
    lps = OrderedConsumerConfig(deliver_policy="last_per_subject", filter_subjects=[">"])
    assert lps.deliver_policy is DeliverPolicy.LAST_PER_SUBJECT
    by_seq = OrderedConsumerConfig(deliver_policy=DeliverPolicy.BY_START_SEQUENCE, opt_start_seq=7)
    assert by_seq.opt_start_seq == 7
    by_time = OrderedConsumerConfig(deliver_policy=DeliverPolicy.BY_START_TIME, opt_start_time=START)
    assert by_time.opt_start_time == START
    assert OrderedConsumerConfig(max_reset_attempts=1, name_prefix="ok-prefix_1").name_prefix == "ok-prefix_1"


def test_every_link_is_ephemeral_ack_none_r1_memory_with_one_delivery():
    cfg = chain(inactive_threshold=42).server_config("p_1", 0)
    assert cfg.name == "p_1"
    assert cfg.durable_name is None
    assert cfg.ack_policy is AckPolicy.NONE
    assert cfg.max_deliver == 1
    assert cfg.mem_storage is True
    assert cfg.num_replicas == 1
    assert cfg.inactive_threshold == 42
    assert cfg.deliver_policy is DeliverPolicy.ALL
    assert (cfg.deliver_subject, cfg.flow_control, cfg.idle_heartbeat, cfg.headers_only) == (None, None, None, None)
    wire = cfg.to_json()
    assert wire["ack_policy"] == "none"
    assert wire["max_deliver"] == 1
    assert wire["mem_storage"] is True
    assert wire["num_replicas"] == 1
    assert wire["inactive_threshold"] == 42 * 10**9


def test_the_first_link_follows_the_deliver_policy():
    by_seq = chain(deliver_policy=DeliverPolicy.BY_START_SEQUENCE, opt_start_seq=7).server_config("p_1", 0)
    assert (by_seq.deliver_policy, by_seq.opt_start_seq) == (DeliverPolicy.BY_START_SEQUENCE, 7)
    by_time = chain(deliver_policy=DeliverPolicy.BY_START_TIME, opt_start_time=START).server_config("p_1", 0)
    assert (by_time.deliver_policy, by_time.opt_start_time) == (DeliverPolicy.BY_START_TIME, START)
    assert chain(deliver_policy="new").server_config("p_1", 0).deliver_policy is DeliverPolicy.NEW
    assert chain(deliver_policy="last").server_config("p_1", 0).deliver_policy is DeliverPolicy.LAST


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"deliver_policy": DeliverPolicy.NEW},
        {"deliver_policy": DeliverPolicy.BY_START_TIME, "opt_start_time": START},
        {"deliver_policy": DeliverPolicy.BY_START_SEQUENCE, "opt_start_seq": 3},
    ],
)
def test_a_later_link_starts_after_the_cursor_by_start_sequence(kwargs):
    cfg = chain(**kwargs).server_config("p_2", 101)
    assert cfg.deliver_policy is DeliverPolicy.BY_START_SEQUENCE
    assert cfg.opt_start_seq == 101
    assert cfg.opt_start_time is None
    assert cfg.to_json()["opt_start_seq"] == 101


def test_one_filter_goes_in_filter_subject_several_in_filter_subjects():
    one = chain(filter_subjects=["S.a"]).server_config("p_1", 0)
    assert (one.filter_subject, one.filter_subjects) == ("S.a", None)
    several = chain(filter_subjects=["S.a", "S.b.>"]).server_config("p_1", 0)
    assert (several.filter_subject, several.filter_subjects) == (None, ["S.a", "S.b.>"])
    none = chain().server_config("p_1", 0)
    assert (none.filter_subject, none.filter_subjects) == (None, None)


def test_options_passed_through_to_each_link():
    c = chain(headers_only=True, metadata={"k": "v"}, replay_policy=ReplayPolicy.ORIGINAL)
    for start in (0, 5):
        cfg = c.server_config("p_1", start)
        assert cfg.headers_only is True
        assert cfg.metadata == {"k": "v"}
        assert cfg.replay_policy is ReplayPolicy.ORIGINAL


def test_link_names_are_prefix_and_serial_never_reused():
    named = chain(name_prefix="mine")
    assert named.prefix == "mine"
    subjects = [named._request(0, None, None)[0] for _ in range(3)]
    assert subjects == ["CONSUMER.CREATE.S.mine_1", "CONSUMER.CREATE.S.mine_2", "CONSUMER.CREATE.S.mine_3"]
    assert chain().prefix == "TOKEN"  # no prefix given: a fresh token from the runtime
    target = named.pull_target(SimpleNamespace(name="mine_3"))  # type: ignore[arg-type]
    assert target.next_subject == b"$JS.API.CONSUMER.MSG.NEXT.S.mine_3"
    assert target.ack_none is True


def test_last_per_subject_needs_a_filter():
    with pytest.raises(errors.InvalidArgumentError, match="filter_subjects"):
        OrderedConsumerConfig(deliver_policy=DeliverPolicy.LAST_PER_SUBJECT)
    config = OrderedConsumerConfig(deliver_policy=DeliverPolicy.LAST_PER_SUBJECT, filter_subjects=[">"])
    assert config.filter_subjects == [">"]
