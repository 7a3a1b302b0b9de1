"""Retry policies: how a publish or a JetStream API request rides through a restart or a cluster election.

Both policies are ``tenacity.Retrying`` objects a user can replace (``nc.jetstream(publish_retry=...,
api_retry=...)``), and both are bounded by the call's one timeout: `within_deadline` stops a policy
before an attempt or a pause would end past it, so no retry ever makes a call outlast its timeout.

What a retry may repeat is decided here too. An election shows as "JetStream system temporarily unavailable"
(err_code 10008), as no answer at all (the request reached a leader that has just gone), as "peer offline" when
a placement needs a node that is restarting (10005), or as "no responders". Only a request whose repetition
cannot change anything is repeated after a timeout: reads, and creates and updates that name what they make
(the server answers a repeated identical create with what exists). A delete, a purge, a step-down, or a
consumer create that lets the server pick the name is sent once, whatever happens.

A create repeated after a timeout may reach the server while the first attempt is still being made there (it got
through, but its answer was late: a slow disk on a loaded machine). It does not race that attempt: nats-server
(2.10+, the oldest this client supports) makes the creates of one stream name one at a time (per account, a wait
on the create in flight; a cluster's meta leader compares with its inflight proposals) and answers a later
identical one with the stream the first made, a different one with 10058 (StreamNameInUseError). So a repeated
create needs no look-up first, and a 500 "error creating store for stream" (10049) is the store failing, whose
cause the server logs ("Stream create failed for ..."); tests/server/jetstream/test_api_retry.py sends identical
creates together.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any, TypeVar

import tenacity

from .. import errors

T = TypeVar("T")

__all__ = [
    "API_ATTEMPTS",
    "default_api_retry",
    "default_publish_retry",
    "is_idempotent_api",
    "is_transient_cluster_error",
    "retry_within",
    "split_timeout",
    "within_deadline",
]

#: an idempotent API request gets at most this share of its timeout per attempt, so a request lost with a
#: leader leaves time for another try (but never less than _MIN_ATTEMPT_TIMEOUT)
API_ATTEMPTS = 3
_MIN_ATTEMPT_TIMEOUT = 1.0
# The timeout of an attempt made at its deadline: the request still goes out and ends in its own TimeoutError.
_LAST_ATTEMPT_TIMEOUT = 0.001

# The API suffixes (after "$JS.API.") whose repetition is harmless. CONSUMER.CREATE needs the consumer's name
# in the subject: without it the server names the consumer, and a repeat would make a second one.
_IDEMPOTENT = re.compile(
    r"INFO"
    r"|STREAM\.(?:NAMES|LIST)"
    r"|STREAM\.(?:INFO|CREATE|UPDATE|MSG\.GET)\.[^.]+"
    r"|CONSUMER\.(?:NAMES|LIST)\.[^.]+"
    r"|CONSUMER\.INFO\.[^.]+\.[^.]+"
    r"|CONSUMER\.(?:CREATE|DURABLE\.CREATE)\.[^.]+\.[^.]+(?:\..+)?"
)


def is_idempotent_api(suffix: str) -> bool:
    """Whether the API request ``suffix`` (e.g. ``STREAM.INFO.orders``) may be sent again after no answer."""
    return _IDEMPOTENT.fullmatch(suffix) is not None


def default_publish_retry() -> tenacity.Retrying:
    """Retry "no responders" a few times: right after a server restart JetStream answers a moment late."""
    return tenacity.Retrying(
        retry=tenacity.retry_if_exception_type(errors.NoRespondersError),
        stop=tenacity.stop_after_attempt(4),
        wait=tenacity.wait_exponential(multiplier=0.05, max=1.0),
        reraise=True,
    )


def is_transient_cluster_error(exc: BaseException) -> bool:
    """What a cluster says while a leader is elected or a node is back but not yet seen: no leader
    (ClusterUnavailableError), no answer (TimeoutError), or "no suitable peers for placement, peer offline"
    (err_code 10005 naming an offline peer; 10005 for any other reason, such as more replicas than nodes or
    tags no node has, will not pass by waiting and is not retried)."""
    if isinstance(exc, (errors.ClusterUnavailableError, errors.TimeoutError)):
        return True
    return isinstance(exc, errors.APIError) and exc.err_code == 10005 and "offline" in exc.description


def default_api_retry() -> tenacity.Retrying:
    """Retry what an election looks like (`is_transient_cluster_error`) 50 ms, 100 ms, ... 1 s apart, for
    as long as the request's timeout lasts (the stop is the deadline `within_deadline` adds).

    Applied only to idempotent requests (`is_idempotent_api`); "no responders", which means JetStream is
    not there at all, is not retried.
    """
    return tenacity.Retrying(
        retry=tenacity.retry_if_exception(is_transient_cluster_error),
        stop=tenacity.stop_never,
        wait=tenacity.wait_exponential(multiplier=0.05, max=1.0),
        reraise=True,
    )


class _StopAtDeadline(tenacity.stop.stop_base):
    """Stops when the policy's own stop does, or when the pause before the next attempt would end past the
    deadline: one timeout bounds a call with all its retries."""

    def __init__(self, stop: Any, wait: Any, deadline: float) -> None:
        self._stop = stop
        self._wait = wait
        self._deadline = deadline

    def __call__(self, retry_state: tenacity.RetryCallState) -> bool:
        return bool(self._stop(retry_state)) or time.monotonic() + self._wait(retry_state) >= self._deadline


def within_deadline(retry: tenacity.Retrying, deadline: float) -> tenacity.Retrying:
    """A copy of ``retry`` that makes no attempt, and sleeps no pause, past ``deadline`` (time.monotonic())."""
    return retry.copy(stop=_StopAtDeadline(retry.stop, retry.wait, deadline))


def retry_within(retry: tenacity.Retrying, deadline: float, seconds: float, what: str, attempt: Callable[[], T]) -> T:
    """Run ``attempt`` as ``retry`` says within ``deadline`` (`within_deadline`). When the last attempt
    times out after others, the TimeoutError names the time the caller gave the call (``seconds``) and how many
    attempts were made, not the share of the timeout the last attempt had: "within 1.51s" after a 5 s wait
    sent people looking for a 1.5 s setting that does not exist."""
    retrying = within_deadline(retry, deadline)
    try:
        return retrying(attempt)
    except errors.TimeoutError as exc:
        attempts = int(retrying.statistics.get("attempt_number", 1))
        if attempts <= 1:
            raise
        raise errors.TimeoutError(
            f"{what} got no reply within {seconds:g}s ({attempts} attempts, each timed out)"
        ) from exc


def split_timeout(total: float, deadline: float) -> float:
    """The timeout of one attempt of a call that may be retried: a share of ``total`` (so a request lost with
    a leader leaves time to ask again), never past ``deadline``; a millisecond for an attempt made when the
    deadline is reached, so it ends in the request's own TimeoutError rather than an invalid timeout."""
    share = max(_MIN_ATTEMPT_TIMEOUT, total / API_ATTEMPTS)
    return max(_LAST_ATTEMPT_TIMEOUT, min(share, deadline - time.monotonic()))
