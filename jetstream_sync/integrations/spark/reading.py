"""Planning the sequence ranges of a read on the driver (no PySpark in here).

A read is a range of stream sequences. The planner (on the driver side) turns options into a first and last
sequence, checks that retention has not removed sequences the query needs, and cuts the range into contiguous
pieces, one per Spark partition. Each executor task then reads its piece (`range_reader`).
"""

from __future__ import annotations

import contextlib
import logging
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any, Literal

from ... import errors
from ...models import AckPolicy, ConsumerConfig, DeliverPolicy
from .._clients import process_client
from .options import ReadOptions, redacted

if TYPE_CHECKING:
    from ...client import Client
    from ...jetstream import Stream

__all__ = [
    "DataLossError",
    "Mode",
    "check_data_loss",
    "choose_mode",
    "ending_sequence",
    "open_stream",
    "plan_ranges",
    "sequence_at_time",
    "starting_sequence",
]

log = logging.getLogger("jetstream_sync.spark")

Mode = Literal["direct", "consumer"]

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_MICRO = timedelta(microseconds=1)
_CONSUMER_INACTIVE = 15.0  # an ephemeral read consumer left behind by a killed task goes away after this
_FETCH_EXPIRES = 5.0
_EMPTY_FETCHES = 3


class DataLossError(errors.JetStreamError):
    """Sequences the query needs were removed (retention limits or a purge) before it read them."""

    def __init__(self, stream: str, first_lost: int, last_lost: int, first_seq: int) -> None:
        self.stream = stream
        self.first_lost = first_lost
        self.last_lost = last_lost
        self.first_seq = first_seq
        super().__init__(
            f"stream {stream!r}: sequences {first_lost}-{last_lost} were removed (retention limits or a purge) "
            f"before this query read them; the stream now starts at sequence {first_seq}. Set the option "
            "failOnDataLoss=false to skip lost sequences and go on"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.stream, self.first_lost, self.last_lost, self.first_seq))


def open_stream(options: ReadOptions) -> Stream:
    """A handle on the stream with fresh info, through this process's cached client."""
    client = process_client(options.connection)
    try:
        return client.jetstream().stream(options.stream)
    except errors.StreamNotFoundError as exc:
        raise errors.StreamNotFoundError(
            exc.code,
            exc.err_code,
            f"stream {options.stream!r} (option 'stream') does not exist on {redacted(options.connection.servers)}",
        ) from None


def _server_version(client: Client) -> tuple[int, ...]:
    parts = []
    for token in str(client.server_info.get("version", "0")).split("-")[0].split("."):
        parts.append(int(token) if token.isdigit() else 0)
    return tuple(parts)


def choose_mode(options: ReadOptions, stream: Stream) -> Mode:
    """Batched direct get needs ``allow_direct`` and nats-server 2.11+; otherwise read through a consumer."""
    allowed = bool(stream.cached_info.config.allow_direct)
    if options.read_mode == "consumer":
        return "consumer"
    if options.read_mode == "direct":
        if not allowed:
            raise errors.InvalidArgumentError(
                "readMode", f"direct needs a stream with allow_direct, and {options.stream!r} does not allow it"
            )
        return "direct"
    if allowed and _server_version(stream.jetstream.client) >= (2, 11):
        return "direct"
    return "consumer"


def sequence_at_time(stream: Stream, when: datetime) -> int:
    """The first sequence stored at or after ``when``; last sequence + 1 when nothing is that recent.

    An ephemeral consumer with ``opt_start_time`` makes the server find it; its info says where it starts.
    """
    consumer = stream.create_consumer(
        ConsumerConfig(
            deliver_policy=DeliverPolicy.BY_START_TIME,
            opt_start_time=when,
            ack_policy=AckPolicy.NONE,
            inactive_threshold=_CONSUMER_INACTIVE,
            mem_storage=True,
            num_replicas=1,
        )
    )
    try:
        return consumer.cached_info.delivered.stream_seq + 1
    finally:
        with contextlib.suppress(errors.JetStreamError):
            consumer.delete()


def starting_sequence(options: ReadOptions, stream: Stream) -> int:
    """Where a read starts (inclusive), from startingTime or startingSequence.

    A ``startingTime`` after the last message starts at the end (the next message stored), or fails with
    ``startingTimeStrategy=error`` (Kafka's ``startingOffsetsByTimestampStrategy``)."""
    state = stream.cached_info.state
    if options.starting_time is not None:
        seq = sequence_at_time(stream, options.starting_time)
        if seq > state.last_seq and options.starting_time_strategy == "error":
            raise errors.InvalidArgumentError(
                "startingTime",
                f"no message of stream {options.stream!r} was stored at or after {options.starting_time.isoformat()} "
                "(startingTimeStrategy=error); pick an earlier time, or set startingTimeStrategy=latest to start "
                "at the next message",
            )
        return seq
    start = options.starting_sequence
    if start == "earliest":
        return max(1, state.first_seq)
    if start == "latest":
        return state.last_seq + 1
    return start


def ending_sequence(options: ReadOptions, stream: Stream) -> int:
    """Where a batch read ends (inclusive): endingSequence, or the last message stored before endingTime
    (Kafka's endingTimestamp is exclusive too), never past what the stream holds now."""
    last = stream.cached_info.state.last_seq
    if options.ending_time is not None:
        return min(last, sequence_at_time(stream, options.ending_time) - 1)
    end = options.ending_sequence
    if end is None or end == "latest":
        return last
    return min(end, last)


def check_data_loss(options: ReadOptions, first_needed: int, last_needed: int, first_seq: int) -> int:
    """Where reading can start: ``first_needed``, or past a lost prefix when failOnDataLoss is false."""
    if first_needed >= first_seq or last_needed < first_needed:
        return first_needed
    loss = DataLossError(options.stream, first_needed, min(last_needed, first_seq - 1), first_seq)
    if options.fail_on_data_loss:
        raise loss
    log.warning("%s; skipping them because failOnDataLoss=false", str(loss).split(". Set the option")[0])
    return first_seq


def plan_ranges(first: int, last: int, num_partitions: int, min_size: int) -> list[tuple[int, int]]:
    """Cut ``first..last`` (inclusive) into contiguous ranges of about equal length, none shorter than
    ``min_size`` unless there is only one, and at most ``num_partitions`` of them."""
    if last < first:
        return []
    span = last - first + 1
    count = max(1, min(num_partitions, span // max(1, min_size)))
    base, extra = divmod(span, count)
    ranges = []
    lo = first
    for i in range(count):
        hi = lo + base + (1 if i < extra else 0) - 1
        ranges.append((lo, hi))
        lo = hi + 1
    return ranges
