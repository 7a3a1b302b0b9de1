"""The consumer's per-request limits a refused pull names (409 Exceeded MaxRequest...), and how a consume's plan
is fitted within them (``_limits.py``)."""

from __future__ import annotations

import pytest

from jetstream_sync import errors
from jetstream_sync._delivery._limits import (
    RequestLimit,
    fit_plan,
    plan_fits,
    read_limit_error,
    request_limit,
)
from jetstream_sync.models.reads import ConsumeOptions, FetchOptions


@pytest.mark.parametrize(
    ("description", "setting", "value"),
    [
        ("Exceeded MaxRequestBatch of 5", "max_batch", 5),
        ("Exceeded MaxRequestMaxBytes of 1000", "max_bytes", 1000),
        ("Exceeded MaxRequestExpires of 5s", "max_expires", 5.0),
        ("Exceeded MaxRequestExpires of 1m30s", "max_expires", 90.0),
        ("Exceeded MaxRequestExpires of 1h0m0s", "max_expires", 3600.0),
        ("Exceeded MaxRequestExpires of 500ms", "max_expires", 0.5),
        ("Exceeded MaxRequestExpires of 1.5s", "max_expires", 1.5),
        ("Exceeded MaxRequestExpires of soon", "max_expires", None),
        ("Exceeded MaxRequestBatch of many", "max_batch", None),
    ],
)
def test_the_limit_is_read_from_the_409(description, setting, value):
    limit = request_limit(description)
    assert limit is not None
    assert (limit.setting, limit.value) == (setting, value)


def test_other_statuses_name_no_limit():
    assert request_limit("Exceeded MaxWaiting") is None
    assert request_limit("Message Size Exceeds MaxBytes") is None


def test_a_batch_is_fitted_with_its_threshold_scaled():
    plan = ConsumeOptions(max_messages=100, threshold_messages=40).plan()
    limit = RequestLimit("max_batch", "max_messages", 5)
    assert not plan_fits(plan, limit)
    fitted, exc = fit_plan(plan, limit, "S/c", 409, "Exceeded MaxRequestBatch of 5")
    assert fitted is not None and (fitted.max_messages, fitted.threshold_messages) == (5, 2)
    assert plan_fits(fitted, limit)  # a later refusal of a pull sent before the fit changes nothing
    assert isinstance(exc, errors.PullLimitError) and isinstance(exc, errors.PullWarning)
    assert (exc.setting, exc.limit, exc.option, exc.requested) == ("max_batch", 5, "max_messages", 100)
    assert "max_messages=100" in str(exc) and "at most 5 messages" in str(exc) and "S/c" in str(exc)


def test_expires_is_fitted_with_the_heartbeat_at_most_half_of_it():
    plan = ConsumeOptions(expires=30).plan()
    fitted, exc = fit_plan(plan, RequestLimit("max_expires", "expires", 4.0), "S/c", 409, "x")
    assert fitted is not None and (fitted.expires, fitted.idle_heartbeat) == (4.0, 2.0)
    assert "expires=30s" in str(exc) and "at most 4s" in str(exc)


def test_max_bytes_is_fitted_only_for_a_consume_sized_by_bytes():
    by_bytes = ConsumeOptions(max_bytes=4000).plan()
    limit = RequestLimit("max_bytes", "max_bytes", 1000)
    fitted, exc = fit_plan(by_bytes, limit, "S/c", 409, "x")
    assert fitted is not None and (fitted.max_bytes, fitted.threshold_bytes) == (1000, 500)
    assert exc.requested == 4000
    assert plan_fits(ConsumeOptions(max_messages=10).plan(), limit)  # its pulls carry no max_bytes


@pytest.mark.parametrize("value", [0.5, None])
def test_what_no_consume_can_fit_ends_it(value):
    """A max_expires below the 1 s a consume's pull needs, or a limit the 409 does not state readably."""
    fitted, exc = fit_plan(ConsumeOptions().plan(), RequestLimit("max_expires", "expires", value), "S/c", 409, "x")
    assert fitted is None and isinstance(exc, errors.PullLimitError)


def test_fetch_options_name_the_implicit_batch_of_fetch_bytes():
    limit = RequestLimit("max_batch", "max_messages", 5)
    exc = read_limit_error(409, "x", limit, "S/c", FetchOptions(max_bytes=4096), "fetch")
    assert "give max_messages=5 or fewer as well" in str(exc)
    exc = read_limit_error(
        409, "x", RequestLimit("max_expires", "expires", 2.0), "S/c", FetchOptions(max_messages=1, expires=5), "next"
    )
    assert exc.option == "timeout" and "timeout=5s" in str(exc)
