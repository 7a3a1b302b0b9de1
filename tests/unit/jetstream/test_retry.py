"""Which API requests may be repeated after no answer, and what the default policies retry."""

from __future__ import annotations

import time

import pytest
import tenacity

from jetstream_sync import errors
from jetstream_sync.jetstream.retry import (
    default_api_retry,
    default_publish_retry,
    is_idempotent_api,
    split_timeout,
    within_deadline,
)


@pytest.mark.parametrize(
    "suffix",
    [
        "INFO",
        "STREAM.NAMES",
        "STREAM.LIST",
        "STREAM.INFO.orders",
        "STREAM.CREATE.orders",
        "STREAM.UPDATE.orders",
        "STREAM.MSG.GET.orders",
        "CONSUMER.NAMES.orders",
        "CONSUMER.LIST.orders",
        "CONSUMER.INFO.orders.work",
        "CONSUMER.CREATE.orders.work",
        "CONSUMER.CREATE.orders.work.orders.eu.>",
        "CONSUMER.DURABLE.CREATE.orders.work",
    ],
)
def test_reads_and_named_creates_may_be_repeated(suffix):
    assert is_idempotent_api(suffix)


@pytest.mark.parametrize(
    "suffix",
    [
        "STREAM.DELETE.orders",
        "STREAM.PURGE.orders",
        "STREAM.MSG.DELETE.orders",
        "STREAM.LEADER.STEPDOWN.orders",
        "CONSUMER.CREATE.orders",  # the server names the consumer: a repeat would make a second one
        "CONSUMER.DELETE.orders.work",
        "CONSUMER.PAUSE.orders.work",
        "CONSUMER.UNPIN.orders.work",
        "INFOS",
        "STREAM.INFO.orders.extra",
    ],
)
def test_changes_and_unnamed_creates_are_sent_once(suffix):
    assert not is_idempotent_api(suffix)


def _run(policy: tenacity.Retrying, failures: list[BaseException]) -> int:
    calls = []

    def attempt() -> int:
        calls.append(1)
        if len(calls) <= len(failures):
            raise failures[len(calls) - 1]
        return len(calls)

    return within_deadline(policy, time.monotonic() + 5)(attempt)


def test_the_api_policy_retries_what_an_election_looks_like():
    unavailable = errors.ClusterUnavailableError(503, 10008, "JetStream system temporarily unavailable")
    assert _run(default_api_retry(), [unavailable, errors.TimeoutError("lost")]) == 3


def test_the_api_policy_leaves_other_errors_alone():
    with pytest.raises(errors.StreamNotFoundError):
        _run(default_api_retry(), [errors.StreamNotFoundError(404, 10059, "stream not found")])


def test_the_publish_policy_retries_no_responders_four_times():
    with pytest.raises(errors.NoRespondersError):
        _run(default_publish_retry(), [errors.NoRespondersError("none")] * 4)
    assert _run(default_publish_retry(), [errors.NoRespondersError("none")] * 3) == 4


def test_the_deadline_bounds_a_policy_that_never_stops():
    start = time.monotonic()
    with pytest.raises(errors.TimeoutError):
        within_deadline(default_api_retry(), start + 0.3)(lambda: (_ for _ in ()).throw(errors.TimeoutError("x")))
    assert time.monotonic() - start < 1.0


def test_an_attempt_gets_a_share_of_the_timeout_never_past_the_deadline():
    now = time.monotonic()
    assert split_timeout(9.0, now + 9.0) == pytest.approx(3.0, abs=0.05)
    assert split_timeout(2.0, now + 2.0) == pytest.approx(1.0, abs=0.05)  # at least 1 s
    assert split_timeout(9.0, now + 0.5) <= 0.5
    assert split_timeout(9.0, now - 1) == 0.001  # past the deadline: one last attempt that times out at once


def test_an_election_error_has_its_class():
    assert isinstance(errors.api_error(503, 10008, "temporarily unavailable"), errors.ClusterUnavailableError)


def test_a_placement_waiting_for_an_offline_peer_is_retried_and_an_impossible_one_is_not():
    offline = errors.APIError(400, 10005, "no suitable peers for placement, peer offline")
    assert _run(default_api_retry(), [offline]) == 2
    impossible = errors.APIError(400, 10005, "insufficient resources")
    with pytest.raises(errors.APIError, match="insufficient resources"):
        _run(default_api_retry(), [impossible])
