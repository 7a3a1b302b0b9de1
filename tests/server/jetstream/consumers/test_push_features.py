"""The deep dive's consumer features end to end against a real server: rate_limit_bps and ReplayPolicy.ORIGINAL
on push (and ordered) consumers, measured; ephemeral consumers removed by inactive_threshold once nobody reads
them (and kept while someone does); every deliver policy on plain push, ordered push and ordered pull consumers.
"""

from __future__ import annotations

import itertools
import time
from datetime import datetime

import pytest

import jetstream_sync
from jetstream_sync import (
    AckPolicy,
    ConsumerConfig,
    DeliverPolicy,
    OrderedConsumerConfig,
    ReplayPolicy,
    StreamConfig,
    errors,
)
from tests.helpers import wait_until

KINDS = ["push", "ordered_push", "ordered"]


def exists(js, stream: str, consumer: str) -> bool:
    try:
        js.consumer_info(stream, consumer)
    except errors.ConsumerNotFoundError:
        return False
    return True


def reader(js, stream: jetstream_sync.Stream, kind: str, **cfg) -> jetstream_sync.MessagesIterator:
    """An iterator over ``stream`` from a consumer of ``kind`` configured with ``cfg`` (OrderedConsumerConfig
    keywords; ``filter_subjects`` becomes the plain push consumer's filter)."""
    if kind == "push":
        filters = cfg.pop("filter_subjects", None) or []
        pc = stream.create_or_update_push_consumer(
            ConsumerConfig(
                durable_name="p",
                deliver_subject=f"_deliver.{stream.name}.p",
                ack_policy=AckPolicy.NONE,
                filter_subject=filters[0] if len(filters) == 1 else None,
                filter_subjects=filters if len(filters) > 1 else None,
                **cfg,
            )
        )
        return pc.messages()
    if kind == "ordered_push":
        return js.ordered_push_consumer(stream.name, OrderedConsumerConfig(**cfg), idle_heartbeat=0.5).messages()
    return js.ordered_consumer(stream.name, OrderedConsumerConfig(**cfg)).messages()


# -- rate limit -------------------------------------------------------------------------------------------
def test_rate_limit_bps_paces_a_push_consumer(js, name):
    # The server's limiter is a token bucket whose burst is the stream's max_msg_size (else the max payload,
    # 1 MiB) and which starts full: with the defaults the whole 200 KB would go out at once. A 4 KiB
    # max_msg_size leaves a burst of ~4 messages, so the rate governs the rest. (A message bigger than the
    # burst would never be delivered, hence 4 KiB rather than exactly 1000 bytes.)
    stream = js.create_stream(StreamConfig(name=name, subjects=[f"{name}.>"], max_msg_size=4096))
    for _ in range(200):
        js.publish_async(f"{name}.a", b"x" * 1000)
    js.publish_async_complete(timeout=10)
    pc = stream.create_or_update_push_consumer(
        ConsumerConfig(
            durable_name="rl", deliver_subject=f"_deliver.{name}.rl", ack_policy=AckPolicy.NONE, rate_limit_bps=800_000
        )
    )
    assert pc.cached_info.config.rate_limit_bps == 800_000
    arrivals: list[float] = []
    seqs: list[int] = []
    with pc.messages() as it:
        while len(seqs) < 200:
            msg = it.next(5)
            arrivals.append(time.monotonic())
            seqs.append(msg.metadata.sequence.stream)
    assert seqs == list(range(1, 201))
    # 800 kbit/s = 100 KB/s: 200 x ~1 KB (payload plus subject and ack reply, as the server counts) ~ 2 s.
    took = arrivals[-1] - arrivals[0]
    assert 1.6 <= took <= 2.6, f"200 KB at 800 kbit/s took {took:.2f}s"


# -- replay original --------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", KINDS)
def test_replay_original_spaces_messages_as_published(js, stream, name, kind):
    for gap in [0.15, 0.25, 0.2, 0.15, 0.25, 0]:
        js.publish(f"{name}.a", b"m")
        time.sleep(gap)  # generates the workload's spacing; not synchronisation
    arrivals: list[float] = []
    stored: list[datetime] = []
    with reader(js, stream, kind, replay_policy=ReplayPolicy.ORIGINAL) as it:
        for _ in range(6):
            msg = it.next(5)
            arrivals.append(time.monotonic())
            stored.append(msg.metadata.timestamp)
    published = [(b - a).total_seconds() for a, b in itertools.pairwise(stored)]
    replayed = [b - a for a, b in itertools.pairwise(arrivals)]
    assert min(published) >= 0.14  # the workload is what we meant it to be
    for want, got in zip(published, replayed, strict=True):
        assert abs(got - want) <= 0.2 * want, f"published gaps {published}, replayed {replayed}"


# -- inactive_threshold -----------------------------------------------------------------------------------
def test_ephemeral_push_consumer_removed_after_inactive_threshold(js, stream, name):
    pc = stream.create_or_update_push_consumer(
        ConsumerConfig(deliver_subject=f"_deliver.{name}.eph", ack_policy=AckPolicy.NONE, inactive_threshold=1)
    )
    assert pc.cached_info.config.durable_name is None
    assert pc.cached_info.config.inactive_threshold == 1
    got: list[int] = []
    ctx = pc.consume(lambda m: got.append(m.metadata.sequence.stream))
    try:
        js.publish(f"{name}.a", b"1")
        wait_until(lambda: got == [1])
        # while read, it outlives its threshold: watched for 2.5 thresholds (an observation window)
        watched_until = time.monotonic() + 2.5
        while time.monotonic() < watched_until:
            assert pc.info().push_bound
            time.sleep(0.1)  # the poll interval of the observation
    finally:
        ctx.stop()
    ctx.wait(2)
    assert exists(js, name, pc.name), "stopping a consume must not delete the consumer: the threshold does"
    wait_until(lambda: not exists(js, name, pc.name), timeout=6)
    with pytest.raises(errors.ConsumerNotFoundError):
        pc.info()
    assert pc.name not in list(js.consumer_names(name))


@pytest.mark.parametrize("kind", ["ordered_push", "ordered"])
def test_ordered_link_removed_after_inactive_threshold(nats_server, js, stream, name, kind):
    # messages()/consume() delete their link when stopped; a reader whose process goes away (here: its client
    # is closed) cannot, and the server removes the link after inactive_threshold.
    js.publish(f"{name}.a", b"1")
    other = jetstream_sync.connect(nats_server.url)
    try:
        ojs = other.jetstream()
        if kind == "ordered_push":
            handle = ojs.ordered_push_consumer(name, OrderedConsumerConfig(inactive_threshold=1), idle_heartbeat=0.5)
        else:
            handle = ojs.ordered_consumer(name, OrderedConsumerConfig(inactive_threshold=1))
        it = handle.messages()
        assert it.next(5).metadata.sequence.stream == 1
        link = handle.name
        assert link is not None
        assert js.consumer_info(name, link).config.inactive_threshold == 1
        watched_until = time.monotonic() + 2.5
        while time.monotonic() < watched_until:
            assert exists(js, name, link)
            time.sleep(0.1)  # the poll interval of the observation
        assert handle.name == link  # the same link all along, not a replacement
    finally:
        other.close()
    assert exists(js, name, link)
    wait_until(lambda: not exists(js, name, link), timeout=6)
    with pytest.raises(errors.ConsumerNotFoundError):
        js.consumer_info(name, link)


# -- deliver policies -------------------------------------------------------------------------------------
# Six messages a b a b a b at stream sequences 1..6, then a marker on "a" (sequence 7) once reading started:
# each case lists every stream sequence read up to and including the marker.
POLICIES = {
    "all": ({"deliver_policy": DeliverPolicy.ALL}, [1, 2, 3, 4, 5, 6, 7]),
    "last": ({"deliver_policy": DeliverPolicy.LAST}, [6, 7]),
    "new": ({"deliver_policy": DeliverPolicy.NEW}, [7]),
    "by_start_sequence": ({"deliver_policy": DeliverPolicy.BY_START_SEQUENCE, "opt_start_seq": 4}, [4, 5, 6, 7]),
    "by_start_time": ({"deliver_policy": DeliverPolicy.BY_START_TIME}, [3, 4, 5, 6, 7]),
    # the server wants a filter with last_per_subject (err_code 10094 without one)
    "last_per_subject": (
        {"deliver_policy": DeliverPolicy.LAST_PER_SUBJECT, "filter_subjects": ["{name}.>"]},
        [5, 6, 7],
    ),
    "last_per_subject_of_a": (
        {"deliver_policy": DeliverPolicy.LAST_PER_SUBJECT, "filter_subjects": ["{name}.a"]},
        [5, 7],
    ),
}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("policy", list(POLICIES))
def test_deliver_policy(js, stream, name, kind, policy):
    for i in range(6):
        js.publish(f"{name}.{'ab'[i % 2]}", b"%d" % i)
    cfg, expected = POLICIES[policy]
    cfg = dict(cfg)
    if cfg["deliver_policy"] is DeliverPolicy.BY_START_TIME:
        cfg["opt_start_time"] = stream.get_msg(3).time
    if "filter_subjects" in cfg:
        cfg["filter_subjects"] = [s.format(name=name) for s in cfg["filter_subjects"]]
    seqs: list[int] = []
    with reader(js, stream, kind, **cfg) as it:
        js.publish(f"{name}.a", b"marker")  # after the consumer exists: "new" sees it
        while not seqs or seqs[-1] < 7:
            seqs.append(it.next(5).metadata.sequence.stream)
    assert seqs == expected
