"""Pulls the server refuses outright for the consumer's per-request limits, and what each reader does then.

nats-server checks a pull against its consumer's limits before it registers the pull, and refuses it at once
with a 409 that carries no ``Nats-Pending-*`` headers (nothing of it was ever pending):

- ``Exceeded MaxRequestBatch of N`` (the consumer's ``max_batch``), ``Exceeded MaxRequestExpires of D``
  (``max_expires``, a Go duration such as ``5s`` or ``1m30s``) and ``Exceeded MaxRequestMaxBytes of N``
  (``max_bytes``): a configuration mismatch, so every pull of that size meets the same answer. Here.
- ``Exceeded MaxWaiting``: the consumer holds ``max_waiting`` pulls already, which passes. The consume engine
  handles it (``ContinuousPull._on_full``).

What to do about a mismatch differs by reader. ``fetch()`` and ``next()`` asked for a size and a wait the user
chose for that one call: the call raises [`PullLimitError`][jetstream_sync.errors.PullLimitError] naming the consumer's
limit and the call's value (`read_limit_error`), since no retry of that call can succeed. A consume's
``max_messages``, ``max_bytes`` and ``expires`` size its buffer and its re-pull cadence rather than promise
anything about one pull, while the consumer's limits are how an operator bounds every client's pulls: ending the
consume would stop a service that can run within them, so it fits its pulls to the limit (`fit_plan`) and
reports that once. nats.go reports each refusal and keeps counting the refused pull as pending, so its consume
waits for the missed-heartbeat alarm and meets the same refusal again. Only what no consume can fit (a
``max_expires`` below the 1 s a consume's pull needs, or a limit the 409 does not state readably) ends it.

Everything here is a pure function of its arguments, called on whichever thread the engine handles the status
(the IO thread).
"""

from __future__ import annotations

import attrs

from .. import errors
from .._durations import parse_go_duration
from ..models.reads import MIN_EXPIRES, FetchOptions, PullPlan

__all__ = ["RequestLimit", "fit_plan", "plan_fits", "read_limit_error", "request_limit"]

# the 409's description (lower case) -> the consumer's field and the read option it bounds
_LIMITS = {
    "exceeded maxrequestbatch of ": ("max_batch", "max_messages"),
    "exceeded maxrequestexpires of ": ("max_expires", "expires"),
    "exceeded maxrequestmaxbytes of ": ("max_bytes", "max_bytes"),
}


@attrs.frozen
class RequestLimit:
    """The consumer's limit a refused pull crossed, as its 409 states it."""

    setting: str  # the ConsumerConfig field: max_batch, max_expires or max_bytes
    option: str  # the read option it bounds: max_messages, expires or max_bytes
    value: float | None  # messages, seconds or bytes; None when the 409's text could not be read

    def show(self) -> str:
        if self.value is None:
            return "?"
        return f"{self.value:g}s" if self.setting == "max_expires" else str(int(self.value))


def request_limit(description: str) -> RequestLimit | None:
    """The limit a 409 "Exceeded MaxRequest..." names; None for any other status description."""
    lowered = description.lower()
    for prefix, (setting, option) in _LIMITS.items():
        if lowered.startswith(prefix):
            text = description[len(prefix) :].strip()
            value = parse_go_duration(text) if setting == "max_expires" else (int(text) if text.isdigit() else None)
            return RequestLimit(setting, option, value)
    return None


def _requested(plan: PullPlan, setting: str) -> float:
    if setting == "max_batch":
        return plan.max_messages
    return plan.expires if setting == "max_expires" else plan.max_bytes


def plan_fits(plan: PullPlan, limit: RequestLimit) -> bool:
    """The consume's pulls are within ``limit`` already: the 409 refused a pull sent before the plan was fitted
    (it was in flight when the first refusal came), and there is nothing more to do about it."""
    if limit.value is None:
        return False
    requested = _requested(plan, limit.setting)
    return (limit.setting == "max_bytes" and not plan.by_bytes) or requested <= limit.value


def fit_plan(
    plan: PullPlan, limit: RequestLimit, label: str, status: int, description: str
) -> tuple[PullPlan | None, errors.PullLimitError]:
    """A consume's plan with its pulls within ``limit``, and the error to report once about it; the plan is None
    when no consume can pull within the limit (the consume ends with the error then).

    The thresholds scale with the limit, so a consume keeps re-pulling at the same fraction of its buffer; the
    idle heartbeat stays at most half of a shortened ``expires`` (the server refuses more).
    """
    setting, value = limit.setting, limit.value
    requested = _requested(plan, setting)
    shown = limit.show()
    asked = f"{requested:g}s" if setting == "max_expires" else str(int(requested))

    def error(hint: str) -> errors.PullLimitError:
        return errors.PullLimitError(
            status, description, setting=setting, limit=value, option=limit.option, requested=requested, hint=hint
        )

    if value is None or value >= requested:  # unreadable, or refused although within it: nothing to fit to
        return None, error(f"{label} refused this consume's {limit.option}={asked} for its {setting}; check it")
    if setting == "max_expires":
        if value < MIN_EXPIRES:
            return None, error(
                f"{label} lets a pull wait at most {shown} (its max_expires), below the {MIN_EXPIRES:g}s a "
                f"consume's pull needs; raise the consumer's max_expires to at least {MIN_EXPIRES:g}s, or read "
                "with fetch()"
            )
        fitted = attrs.evolve(plan, expires=value, idle_heartbeat=min(plan.idle_heartbeat, value / 2))
        return fitted, error(
            f"{label} lets a pull wait at most {shown} (its max_expires) and this consume asked for "
            f"expires={asked}; pulling with expires={shown} (idle heartbeat {fitted.idle_heartbeat:g}s) from now "
            f"on. Pass expires={value:g} or less, or raise the consumer's max_expires, to pull as configured"
        )
    size = int(value)
    if setting == "max_batch":
        fitted = attrs.evolve(
            plan, max_messages=size, threshold_messages=plan.threshold_messages * size // plan.max_messages
        )
        if plan.by_bytes:
            return fitted, error(
                f"{label} takes at most {shown} messages per pull (its max_batch) and this consume, sized by "
                f"max_bytes, asks for as many as fit ({asked}); pulling at most {shown} messages at a time from "
                "now on. Raise the consumer's max_batch to pull by bytes alone"
            )
        return fitted, error(
            f"{label} takes at most {shown} messages per pull (its max_batch) and this consume asked for "
            f"max_messages={asked}; pulling {shown} at a time from now on. Pass max_messages={shown} or fewer, "
            "or raise the consumer's max_batch, to pull as configured"
        )
    fitted = attrs.evolve(plan, max_bytes=size, threshold_bytes=plan.threshold_bytes * size // plan.max_bytes)
    return fitted, error(
        f"{label} takes at most {shown} bytes per pull (its max_bytes) and this consume asked for "
        f"max_bytes={asked}; pulling {shown} bytes at a time from now on. Pass max_bytes={shown} or less, or "
        "raise the consumer's max_bytes, to pull as configured"
    )


def read_limit_error(
    status: int, description: str, limit: RequestLimit, label: str, options: FetchOptions, call: str
) -> errors.PullLimitError:
    """What a ``fetch()`` (``call="fetch"``) or ``next()`` raises when its one pull crossed ``limit``: the
    consumer's value and the call's, and what to change. ``next()`` names its ``timeout`` (its pull's expiry)."""
    setting, shown = limit.setting, limit.show()
    if setting == "max_batch":
        option, requested = "max_messages", float(options.batch)
        if options.max_messages is None:
            want = (
                f"{call} asked for as many messages as fit in max_bytes={options.max_bytes} (a batch of "
                f"{options.batch}), but {label} takes at most {shown} per pull (its max_batch); give "
                f"max_messages={shown} or fewer as well"
            )
        else:
            want = (
                f"{call} asked for max_messages={options.batch}, but {label} takes at most {shown} per pull (its "
                f"max_batch); ask for {shown} or fewer"
            )
    elif setting == "max_expires":
        option, requested = ("timeout" if call == "next" else "expires"), options.expires
        want = (
            f"{call} asked for {option}={options.expires:g}s, but {label} lets a pull wait at most {shown} (its "
            f"max_expires); ask for {shown} or less"
        )
    else:
        option, requested = "max_bytes", float(options.max_bytes or 0)
        want = (
            f"{call} asked for max_bytes={options.max_bytes}, but {label} takes at most {shown} bytes per pull (its "
            f"max_bytes); ask for {shown} or less"
        )
    return errors.PullLimitError(
        status,
        description,
        setting=setting,
        limit=limit.value,
        option=option,
        requested=requested,
        hint=f"{want}, or raise the consumer's {setting}",
    )
