"""ConsumerLag: the figures it takes from a consumer's info, and what it makes of them (no server)."""

from __future__ import annotations

import copy
from datetime import datetime, timezone

import jetstream_sync
from jetstream_sync.models import ConsumerInfo, ConsumerLag

from .test_models import CONSUMER_INFO

UTC = timezone.utc


def test_lag_takes_the_servers_counts_and_sequences() -> None:
    lag = ConsumerLag.from_info(ConsumerInfo.from_json(CONSUMER_INFO))
    assert lag == ConsumerLag(
        stream="ORDERS",
        consumer="worker",
        pending=5,
        ack_pending=2,
        redelivered=1,
        waiting=1,
        last_active=datetime(2024, 5, 1, 10, 4, 59, 123456, tzinfo=UTC),
        delivered_stream_seq=12,
        ack_floor_stream_seq=10,
        ts=datetime(2024, 5, 1, 10, 5, 0, tzinfo=UTC),
    )
    assert lag.lag == 7


def test_last_active_is_the_later_of_the_last_delivery_and_the_last_ack() -> None:
    data = copy.deepcopy(CONSUMER_INFO)
    data["ack_floor"]["last_active"] = "2024-05-01T10:06:00Z"  # an ack after the last delivery
    assert ConsumerLag.from_info(ConsumerInfo.from_json(data)).last_active == datetime(2024, 5, 1, 10, 6, tzinfo=UTC)


def test_a_consumer_that_never_delivered_has_no_last_active() -> None:
    data = copy.deepcopy(CONSUMER_INFO)
    data["delivered"] = {"consumer_seq": 0, "stream_seq": 0}
    data["ack_floor"] = {"consumer_seq": 0, "stream_seq": 0}
    del data["ts"]
    lag = ConsumerLag.from_info(ConsumerInfo.from_json(data))
    assert (lag.last_active, lag.ts, lag.delivered_stream_seq, lag.ack_floor_stream_seq) == (None, None, 0, 0)


def test_consumer_lag_is_exported_from_the_package() -> None:
    assert jetstream_sync.ConsumerLag is ConsumerLag
