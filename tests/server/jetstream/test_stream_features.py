"""StreamConfig's nats-server 2.12+ fields reach the server and come back, and are left out unless set (the
server refuses a field it does not know, so an older one still takes a config that does not use them)."""

from __future__ import annotations

import pytest

from jetstream_sync import PersistMode, StorageType, StreamConfig, errors


def test_the_new_fields_are_left_out_unless_set():
    wire = StreamConfig(name="A").to_json()
    assert not wire.keys() & {
        "allow_msg_counter",
        "allow_atomic",
        "allow_msg_schedules",
        "allow_batched",
        "persist_mode",
    }
    assert StreamConfig(name="A", allow_atomic_publish=True).to_json()["allow_atomic"] is True


@pytest.mark.parametrize(
    "fields",
    [
        {"allow_msg_counter": True},
        {"allow_atomic_publish": True},
        {"allow_msg_schedules": True},
        {"allow_batched": True},
        {"persist_mode": PersistMode.ASYNC},
    ],
    ids=lambda fields: next(iter(fields)),
)
def test_each_field_round_trips_through_the_server(js, name, fields):
    stream = js.create_stream(StreamConfig(name=name, subjects=[f"{name}.>"], storage=StorageType.FILE, **fields))
    config = stream.info().config
    for field, value in fields.items():
        assert getattr(config, field) == value


def test_a_combination_the_server_refuses_is_a_typed_error(js, name):
    with pytest.raises(errors.StreamConfigError, match="schedules"):
        js.create_stream(
            StreamConfig(name=name, subjects=[f"{name}.>"], allow_msg_counter=True, allow_msg_schedules=True)
        )


def test_an_unknown_persist_mode_is_refused():
    with pytest.raises(errors.InvalidArgumentError, match="persist_mode"):
        StreamConfig(name="A", persist_mode="sometimes")


def test_the_last_subject_sequence_check_can_look_at_other_subjects(js, name):
    """nats-server 2.12+: expected_last_subject_sequence against the last message on a wildcard of subjects."""
    js.create_stream(StreamConfig(name=name, subjects=[f"{name}.>"]))
    js.publish(f"{name}.orders.1", b"a")
    js.publish(f"{name}.orders.2", b"b")
    ack = js.publish(
        f"{name}.orders.3",
        b"c",
        expected_last_subject_sequence=2,
        expected_last_subject_sequence_subject=f"{name}.orders.*",
    )
    assert ack.seq == 3
    with pytest.raises(errors.WrongLastSequenceError):
        js.publish(
            f"{name}.orders.4",
            b"d",
            expected_last_subject_sequence=2,
            expected_last_subject_sequence_subject=f"{name}.orders.*",
        )
    with pytest.raises(errors.InvalidArgumentError, match="expected_last_subject_sequence"):
        js.publish(f"{name}.orders.5", b"e", expected_last_subject_sequence_subject=f"{name}.orders.*")


def test_many_messages_in_one_round_trip_through_the_stream(js, name):
    """ADR-31 through Stream: a batch from a sequence (filtered, bounded) and the last message per subject."""
    stream = js.create_stream(StreamConfig(name=name, subjects=[f"{name}.>"], allow_direct=True))
    for i in range(1, 7):
        js.publish(f"{name}.{'eu' if i % 2 else 'us'}.{i}", b"%d" % i)
    assert [m.seq for m in stream.get_msgs(2, 3)] == [2, 3, 4]
    assert [m.data for m in stream.get_msgs(1, 10, subjects=[f"{name}.eu.*"])] == [b"1", b"3", b"5"]
    assert [m.seq for m in stream.get_msgs(1, 10, up_to_seq=4)] == [1, 2, 3, 4]
    js.publish(f"{name}.eu.1", b"again")
    last = stream.get_last_msgs_for([f"{name}.eu.1", f"{name}.us.6", f"{name}.none"])
    assert [(m.subject, m.data) for m in last] == [(f"{name}.us.6", b"6"), (f"{name}.eu.1", b"again")]
    with pytest.raises(errors.InvalidArgumentError, match="subjects"):
        stream.get_last_msgs_for([])
