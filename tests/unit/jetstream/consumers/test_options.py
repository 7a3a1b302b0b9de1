"""FetchOptions and ConsumeOptions: ADR-37's defaults and constraints, checked on construction."""

from __future__ import annotations

import pytest

from jetstream_sync import ConsumeOptions, FetchOptions, errors
from jetstream_sync._validate import options_from


def test_consume_defaults_follow_adr_37():
    plan = ConsumeOptions().plan()
    assert (plan.max_messages, plan.max_bytes, plan.expires, plan.idle_heartbeat) == (500, 0, 30.0, 15.0)
    assert (plan.threshold_messages, plan.threshold_bytes) == (250, 0)
    assert ConsumeOptions(expires=1).plan().idle_heartbeat == 0.5  # clamped to the minimum
    assert ConsumeOptions(expires=120).plan().idle_heartbeat == 30.0  # clamped to the maximum
    by_bytes = ConsumeOptions(max_bytes=1000).plan()
    assert (by_bytes.max_messages, by_bytes.threshold_bytes, by_bytes.by_bytes) == (1_000_000, 500, True)


@pytest.mark.parametrize(
    ("kwargs", "error", "field"),
    [
        ({"max_messages": 0}, errors.InvalidArgumentError, "max_messages"),
        ({"max_messages": "5"}, errors.InvalidTypeError, "max_messages"),
        ({"max_messages": 5, "max_bytes": 10}, errors.InvalidArgumentError, "max_bytes"),
        ({"expires": 0.5}, errors.InvalidArgumentError, "expires"),
        ({"idle_heartbeat": 0.1}, errors.InvalidArgumentError, "idle_heartbeat"),
        ({"expires": 4, "idle_heartbeat": 3}, errors.InvalidArgumentError, "idle_heartbeat"),
        ({"max_messages": 10, "threshold_messages": 11}, errors.InvalidArgumentError, "threshold_messages"),
        ({"threshold_bytes": 1}, errors.InvalidArgumentError, "threshold_bytes"),
        ({"max_bytes": 10, "threshold_bytes": 11}, errors.InvalidArgumentError, "threshold_bytes"),
    ],
)
def test_consume_options_raise_typed_errors(kwargs, error, field):
    with pytest.raises(error) as info:
        ConsumeOptions(**kwargs)
    assert info.value.field == field


def test_fetch_heartbeat_defaults_to_5s_from_10s_expiry():
    assert FetchOptions(max_messages=1, expires=10).heartbeat == 5.0
    assert FetchOptions(max_messages=1, expires=9.9).heartbeat == 0.0
    assert FetchOptions(max_messages=1, expires=9, idle_heartbeat=2).heartbeat == 2.0
    no_wait = FetchOptions(max_messages=1, no_wait=True)
    assert (no_wait.heartbeat, no_wait.pull_expires) == (0.0, 0.0)


def test_fetch_by_bytes_asks_for_many_messages():
    assert FetchOptions(max_bytes=100).batch == 1_000_000
    assert FetchOptions(max_messages=3, max_bytes=100).batch == 3


@pytest.mark.parametrize(
    ("kwargs", "error", "field"),
    [
        ({}, errors.InvalidArgumentError, "max_messages"),
        ({"max_messages": 0}, errors.InvalidArgumentError, "max_messages"),
        ({"max_messages": 1, "max_bytes": 0}, errors.InvalidArgumentError, "max_bytes"),
        ({"max_messages": 1, "expires": 0}, errors.InvalidArgumentError, "expires"),
        ({"max_messages": 1, "expires": 4, "idle_heartbeat": 3}, errors.InvalidArgumentError, "idle_heartbeat"),
        ({"max_messages": 1, "no_wait": 1}, errors.InvalidTypeError, "no_wait"),
    ],
)
def test_fetch_options_raise_typed_errors(kwargs, error, field):
    with pytest.raises(error) as info:
        FetchOptions(**kwargs)
    assert info.value.field == field


def test_options_from_takes_keywords_or_an_object_not_both():
    opts = FetchOptions(max_messages=2)
    assert options_from(FetchOptions, opts, {}, "fetch") is opts
    assert options_from(FetchOptions, None, {"max_messages": 2}, "fetch") == opts
    with pytest.raises(errors.InvalidArgumentError) as both:
        options_from(FetchOptions, opts, {"expires": 3}, "fetch")
    assert both.value.field == "expires"
    with pytest.raises(errors.InvalidTypeError) as wrong:
        options_from(FetchOptions, ConsumeOptions(), {}, "fetch")
    assert wrong.value.field == "options"
    with pytest.raises(errors.InvalidArgumentError, match="is not a fetch option; the options are expires") as unknown:
        options_from(FetchOptions, None, {"max_msgs": 2}, "fetch")
    assert unknown.value.field == "max_msgs"
