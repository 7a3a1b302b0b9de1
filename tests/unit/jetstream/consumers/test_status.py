"""ADR-37's status table: what each status a pull inbox receives means for the pull."""

from __future__ import annotations

from jetstream_sync import errors
from jetstream_sync._delivery._status import StatusKind, classify, oversized


def test_status_table():
    assert classify(100, "Idle Heartbeat")[0] is StatusKind.HEARTBEAT
    assert classify(404, "No Messages")[0] is StatusKind.QUIET
    assert classify(408, "Request Timeout")[0] is StatusKind.QUIET
    assert classify(409, "Message Size Exceeds MaxBytes") == (StatusKind.OVERSIZED, None)  # the pull decides
    assert classify(409, "Batch Completed")[0] is StatusKind.QUIET
    for limit in [
        "Exceeded MaxRequestBatch of 2",
        "Exceeded MaxRequestExpires of 2s",
        "Exceeded MaxRequestMaxBytes of 50",
    ]:
        kind, exc = classify(409, limit)  # refused outright: the engine names the consumer's limit and its value
        assert kind is StatusKind.LIMIT and isinstance(exc, errors.PullWarning)
    kind, exc = classify(409, "Exceeded MaxWaiting")  # refused outright, and transient
    assert kind is StatusKind.FULL and isinstance(exc, errors.PullWarning)
    kind, exc = classify(409, "Something New")
    assert kind is StatusKind.WARNING and isinstance(exc, errors.PullWarning)
    assert isinstance(classify(400, "Bad Request")[1], errors.BadRequestError)
    assert isinstance(classify(409, "Consumer Deleted")[1], errors.ConsumerDeletedError)
    assert isinstance(classify(409, "Consumer is push based")[1], errors.PushConsumerError)


def test_oversized_names_the_consumer_and_max_bytes():
    exc = oversized(409, "Message Size Exceeds MaxBytes", "S/C", 1024)
    assert isinstance(exc, errors.MessageExceedsMaxBytesError) and isinstance(exc, errors.PullError)
    assert (exc.status, exc.max_bytes) == (409, 1024)
    assert str(exc).startswith("409 Message Size Exceeds MaxBytes: S/C: a stored message is larger than max_bytes=1024")
