"""ADR-37's table of the statuses a pull inbox receives, and what each one means for the pull."""

from __future__ import annotations

from enum import Enum

from ... import errors

__all__ = ["StatusKind", "classify"]


class StatusKind(Enum):
    HEARTBEAT = "heartbeat"
    QUIET = "quiet"  # 404, 408, 409 Message Size Exceeds MaxBytes / Batch Completed: the pull simply ended
    WARNING = "warning"  # 409 Exceeded ...: reported, not terminal
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
        if "message size exceeds maxbytes" in lowered or "batch completed" in lowered:
            return StatusKind.QUIET, None
        if "leadership change" in lowered or "server shutdown" in lowered:
            return StatusKind.RESET, None
        return StatusKind.WARNING, errors.PullWarning(status, description)
    return StatusKind.WARNING, errors.PullWarning(status, description or "unexpected status")
