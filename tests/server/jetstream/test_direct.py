"""Batched direct get against a real nats-server: order, gaps, filters, limits, and the end-of-batch position."""

from __future__ import annotations

import datetime as dt

import pytest

from jetstream_sync import StreamConfig, errors
from jetstream_sync.direct import direct_get_batch, direct_get_batch_raw


@pytest.fixture
def dstream(js, name):
    return js.create_stream(StreamConfig(name=name, subjects=[f"{name}.>"], allow_direct=True))


def _fill(js, name: str, count: int, *, size: int = 1) -> list[tuple[int, str]]:
    """Publish ``count`` messages alternating over three subjects; returns (seq, subject) of each."""
    out = []
    for i in range(count):
        subject = f"{name}.{('a', 'b', 'c.x')[i % 3]}"
        js.publish_async(subject, b"%d" % i + b"." * max(0, size - 1))
        out.append((i + 1, subject))
    js.publish_async_complete(timeout=30)
    return out


def test_batch_returns_messages_in_order_with_their_own_headers(js, dstream, name):
    before = dt.datetime.now(dt.timezone.utc) - dt.timedelta(seconds=1)
    js.publish(f"{name}.a", b"one")
    js.publish(f"{name}.b", b"two", headers={"X-Key": ["1", "2"], "Other": "v"})
    js.publish(f"{name}.a", b"")
    got = direct_get_batch(dstream, 1, 10)
    assert [(m.seq, m.subject, m.data) for m in got] == [
        (1, f"{name}.a", b"one"),
        (2, f"{name}.b", b"two"),
        (3, f"{name}.a", b""),
    ]
    assert got[0].headers == {}
    assert got[1].headers.get_list("X-Key") == ["1", "2"]
    assert got[1].headers == {"X-Key": ["1", "2"], "Other": "v"}  # no Nats-Sequence, Nats-Num-Pending...
    for stored in got:
        assert stored.time.tzinfo is not None
        assert before <= stored.time <= dt.datetime.now(dt.timezone.utc)
        assert stored.time == dstream.get_msg(stored.seq, direct=False).time  # the same microsecond as MSG.GET


def test_batch_size_start_and_end_of_batch_position(js, dstream, name):
    _fill(js, name, 10)
    result = direct_get_batch_raw(dstream, 3, 4)
    assert [m.seq for m in result.messages] == [3, 4, 5, 6]
    assert result.last_seq == 6
    assert result.num_pending == 4
    tail = direct_get_batch_raw(dstream, 7, 100)
    assert [m.seq for m in tail.messages] == [7, 8, 9, 10]
    assert (tail.num_pending, tail.last_seq) == (0, 10)


def test_nothing_at_or_after_start_is_an_empty_batch(js, dstream, name):
    _fill(js, name, 3)
    assert direct_get_batch(dstream, 4, 10) == []
    assert direct_get_batch_raw(dstream, 100, 10) == ([], 0, 0, 0)  # messages, num_pending, last_seq, up_to_seq


def test_deleted_sequences_are_skipped(js, dstream, name):
    _fill(js, name, 10)
    dstream.delete_msg(5)
    dstream.delete_msg(6)
    assert [m.seq for m in direct_get_batch(dstream, 4, 3)] == [4, 7, 8]


def test_up_to_seq_is_enforced_client_side_even_across_gaps(js, dstream, name):
    _fill(js, name, 10)
    dstream.delete_msg(2)
    result = direct_get_batch_raw(dstream, 1, 5, up_to_seq=4)
    assert [m.seq for m in result.messages] == [1, 3, 4]
    assert result.last_seq >= 4 and result.num_pending > 0
    assert direct_get_batch(dstream, 5, 5, up_to_seq=4) == []


def test_subject_filters_single_wildcard_and_several(js, dstream, name):
    published = _fill(js, name, 30)
    on = lambda *subjects: [s for s, subj in published if subj in {f"{name}.{x}" for x in subjects}]  # noqa: E731
    assert [m.seq for m in direct_get_batch(dstream, 1, 100, subjects=[f"{name}.a"])] == on("a")
    assert [m.seq for m in direct_get_batch(dstream, 1, 100, subjects=[f"{name}.c.>"])] == on("c.x")
    several = direct_get_batch(dstream, 1, 100, subjects=[f"{name}.a", f"{name}.c.x"])
    assert [m.seq for m in several] == on("a", "c.x")
    overlapping = direct_get_batch(dstream, 1, 100, subjects=[f"{name}.>", f"{name}.a"])
    assert [m.seq for m in overlapping] == [s for s, _ in published]
    first_five = direct_get_batch(dstream, 2, 5, subjects=[f"{name}.a", f"{name}.b"])
    assert [m.seq for m in first_five] == [s for s in on("a", "b") if s >= 2][:5]


@pytest.mark.parametrize("subjects", [None, ["a"], ["a", "b"], ["b", "c.x", "a"]])
@pytest.mark.parametrize(("batch", "max_bytes"), [(7, None), (50, 900), (3, 250)])
def test_reading_a_range_by_continuing_from_last_seq_sees_every_match_once(
    js, dstream, name, subjects, batch, max_bytes
):
    published = _fill(js, name, 60, size=100)
    for seq in (10, 11, 12, 40):
        dstream.delete_msg(seq)
    filters = None if subjects is None else [f"{name}.{s}" for s in subjects]
    expected = [s for s, subj in published if s not in {10, 11, 12, 40} and (filters is None or subj in filters)]
    expected = [s for s in expected if 5 <= s <= 55]
    seen: list[int] = []
    start = 5
    requests = 0
    while start <= 55:
        result = direct_get_batch_raw(dstream, start, batch, subjects=filters, up_to_seq=55, max_bytes=max_bytes)
        requests += 1
        assert requests < 200
        seen.extend(m.seq for m in result.messages)
        if not result.messages or result.num_pending == 0:
            break
        start = result.last_seq + 1
    assert seen == expected


def test_max_bytes_counts_payload_and_sends_at_least_one(js, dstream, name):
    _fill(js, name, 10, size=1000)
    assert len(direct_get_batch(dstream, 1, 100, max_bytes=2500)) == 3
    assert len(direct_get_batch(dstream, 1, 100, max_bytes=1)) == 1


def test_a_large_batch_arrives_whole(js, dstream, name):
    _fill(js, name, 20_000)
    got = direct_get_batch_raw(dstream, 1, 20_000)
    assert [m.seq for m in got.messages] == list(range(1, 20_001))
    assert got.num_pending == 0


def test_stream_without_allow_direct_has_no_responders(js, name):
    plain = js.create_stream(StreamConfig(name=name, subjects=[f"{name}.>"]))
    js.publish(f"{name}.a", b"x")
    with pytest.raises(errors.NoRespondersError, match="allow_direct"):
        direct_get_batch(plain, 1, 10)


@pytest.mark.parametrize(
    ("kwargs", "field", "error"),
    [
        ({"start_seq": 0}, "start_seq", errors.InvalidArgumentError),
        ({"batch": 0}, "batch", errors.InvalidArgumentError),
        ({"batch": 1.5}, "batch", errors.InvalidTypeError),
        ({"up_to_seq": 0}, "up_to_seq", errors.InvalidArgumentError),
        ({"max_bytes": 0}, "max_bytes", errors.InvalidArgumentError),
        ({"subjects": "a.b"}, "subjects", errors.InvalidTypeError),
        ({"subjects": ["a..b"]}, "subjects", errors.InvalidArgumentError),
        ({"timeout": -1}, "timeout", errors.InvalidArgumentError),
    ],
)
def test_bad_arguments_fail_before_anything_is_sent(dstream, kwargs, field, error):
    args = {"start_seq": 1, "batch": 10, **kwargs}
    sent = dstream.jetstream.client.stats["out_msgs"]
    with pytest.raises(error) as info:
        direct_get_batch(dstream, args.pop("start_seq"), args.pop("batch"), **args)
    assert info.value.field == field
    assert dstream.jetstream.client.stats["out_msgs"] == sent
