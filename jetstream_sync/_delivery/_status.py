"""ADR-37's table of the statuses a pull inbox receives, and what each one means for the pull."""

from __future__ import annotations

from enum import Enum

from .. import errors
from ._limits import request_limit

__all__ = ["StatusKind", "classify", "oversized"]


class StatusKind(Enum):
    HEARTBEAT = "heartbeat"
    QUIET = "quiet"  # 404, 408, 409 Batch Completed: the pull simply ended
    OVERSIZED = "oversized"  # 409 Message Size Exceeds MaxBytes: the next message is over the pull's byte budget
    WARNING = "warning"  # another 409: reported, not terminal
    # Refusals: the server answered the pull at once and registered nothing, so nothing of it is pending
    # (these 409s carry no Nats-Pending-* headers). See _limits.py.
    LIMIT = "limit"  # 409 Exceeded MaxRequestBatch / MaxRequestExpires / MaxRequestMaxBytes: the consumer's limit
    FULL = "full"  # 409 Exceeded MaxWaiting: the consumer holds max_waiting pulls already (transient)
    RESET = "reset"  # 409 Leadership Change: the pull's state is gone, start over
    TERMINAL = "terminal"  # 400, 409 Consumer Deleted / Consumer is push based
    NO_RESPONDERS = "no_responders"  # 503: the consumer (or JetStream) is not there right now
    UNPINNED = "unpinned"  # 423: a priority group's pin moved to another client (ADR-42)


def classify(status: int, description: str) -> tuple[StatusKind, errors.JetStreamError | None]:
    """ADR-37's status table, with the error each status raises or reports."""
    lowered = description.lower()
    if status == 100:
        return StatusKind.HEARTBEAT, None
    if status in (404, 408):
        return StatusKind.QUIET, None
    if status == 400:
        return StatusKind.TERMINAL, errors.BadRequestError(status, description, "check the pull options")
    if status == 423:
        return StatusKind.UNPINNED, errors.PinIdMismatchError(
            status, description, "the pin moved to another client; pulling again for it"
        )
    if status == 503:
        return StatusKind.NO_RESPONDERS, errors.NoRespondersError(
            "no responders for the pull request: the consumer or JetStream is not available"
        )
    if status == 409:
        if "consumer deleted" in lowered:
            return StatusKind.TERMINAL, errors.ConsumerDeletedError(status, description)
        if "push based" in lowered:
            return StatusKind.TERMINAL, errors.PushConsumerError(status, description)
        if "message size exceeds maxbytes" in lowered:
            return StatusKind.OVERSIZED, None  # whether that is an error depends on the pull: see oversized()
        if "batch completed" in lowered:
            return StatusKind.QUIET, None
        if "leadership change" in lowered or "server shutdown" in lowered:
            return StatusKind.RESET, None
        if request_limit(description) is not None:
            return StatusKind.LIMIT, errors.PullWarning(status, description)  # each engine names both values
        if lowered.startswith("exceeded maxwaiting"):
            return StatusKind.FULL, errors.PullWarning(
                status, description, "the consumer holds max_waiting pulls already; a pull is refused until one ends"
            )
        return StatusKind.WARNING, errors.PullWarning(status, description)
    return StatusKind.WARNING, errors.PullWarning(status, description or "unexpected status")


def oversized(status: int, description: str, label: str, max_bytes: int) -> errors.MessageExceedsMaxBytesError:
    """The error of a 409 Message Size Exceeds MaxBytes to a pull that had delivered nothing of ``max_bytes``.

    The server sends that 409 whenever the next message does not fit in what is left of a pull's byte budget,
    and its size is not in the status. After some messages, that is how a pull sized by bytes normally ends
    (ADR-37 lists it as not telegraphed). With the whole budget left, the message is larger than any pull of
    that size: a consumer delivers in order, so it can never get past it, and that is this error.
    """
    return errors.MessageExceedsMaxBytesError(status, description, label, max_bytes)
