"""The streaming reader of ``format("jetstream")``: micro-batches of stream sequences, offsets in the checkpoint.

Spark calls the offset methods (``initialOffset``, ``latestOffset``, ``partitions``, ``commit``,
``reportLatestOffset``) in one long-lived planning worker on the driver, on one reader object, for as long as the
query runs; ``read`` runs in executor workers on a pickled copy. Three rules keep a query from skipping data:

* the initial offset is decided once per run, and every end offset carries the start its batch was planned
  from (``StreamOffset.planned_from``), so Spark asking for the initial offset again (it does, to run batch 0,
  and after a restart) cannot move batch 0;
* offsets name the stream's incarnation (its creation time): a stream deleted and created again under the
  checkpoint is data loss ([`StreamRecreatedError`][jetstream_sync.spark.StreamRecreatedError]), never a position in the
  new stream;
* retention that removed sequences the query still needs is data loss too
  ([`DataLossError`][jetstream_sync.spark.DataLossError]).

And one keeps an idle query cheap: Spark asks for the latest offset every 10 ms while nothing arrives; the
stream's end is asked of the server at most once per ``pollInterval`` (0.25 s), and ``reportLatestOffset``
answers from what was last asked.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow
from pyspark.sql.types import StructType

from ... import errors
from ...jetstream.direct import direct_get_batch_raw
from .offsets import StreamOffset, StreamRecreatedError, incarnation
from .options import ReadOptions
from .partitions import plan_partitions, read_partition
from .progress import ProgressConsumer
from .reading import Mode, check_data_loss, choose_mode, open_stream, starting_sequence

if TYPE_CHECKING:
    from ...jetstream import Stream
    from ...models import StreamState

__all__ = ["JetStreamStreamReader", "StreamEnd"]

log = logging.getLogger("jetstream_sync.spark")


class StreamEnd:
    """Planning worker: the stream's info, asked of the server at most once per ``poll_interval`` seconds.

    ``asks`` counts the STREAM.INFO requests made, so a test (or a person) can see the polling rate."""

    def __init__(self, options: ReadOptions) -> None:
        self.options = options
        self.asks = 0
        self._stream: Stream | None = None
        self._asked_at = float("-inf")

    def stream(self, *, fresh: bool = False) -> Stream:
        """The stream with its info, asked now when ``fresh`` or when the last answer is older than the
        poll interval."""
        now = time.monotonic()
        if fresh or self._stream is None or now - self._asked_at >= self.options.poll_interval:
            self._stream = open_stream(self.options)
            self._asked_at = now
            self.asks += 1
        return self._stream

    @property
    def last_known(self) -> Stream | None:
        """The stream as last asked, without asking (None before the first ask)."""
        return self._stream


class JetStreamStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batches of stream sequences; the offset is a [`StreamOffset`][jetstream_sync.spark.StreamOffset] (the next
    sequence to read, in one incarnation of the stream), kept in Spark's checkpoint, so a batch replays exactly after a
    failure and nothing is kept on the server. ``maxMessagesPerTrigger`` bounds the sequences of a batch and
    ``minMessagesPerTrigger`` holds a batch back until that many are there or ``maxTriggerDelay`` passed (with
    subject filters or deleted messages a batch holds fewer messages than sequences)."""

    def __init__(self, options: ReadOptions, schema: StructType) -> None:
        self.options = options
        self.schema = schema
        self.end = StreamEnd(options)
        self._initial: StreamOffset | None = None
        self._target: int | None = None  # Trigger.AvailableNow: the end fixed when the query started
        self._mode: Mode | None = None
        self._warned_ahead = False
        self._warned_recreated: set[tuple[str, str]] = set()
        self._last_batch_at = time.monotonic()  # minMessagesPerTrigger waits at most maxTriggerDelay from here
        name = options.progress_consumer
        self.progress = None if name is None else ProgressConsumer(options, name)

    # -- offsets ---------------------------------------------------------------------------------------------

    def _offset(self, offset: dict[str, Any], which: str) -> StreamOffset:
        return StreamOffset.from_json(offset, which, self.options.stream)

    def initialOffset(self) -> dict[str, Any]:
        """PySpark: where a new query starts (``startingSequence``/``startingTime``), decided at the first call
        of this run; Spark asks again to run batch 0 and must get the same answer."""
        if self.progress is not None:
            self.progress.check()
        if self._initial is None:
            stream = self.end.stream(fresh=True)
            start = starting_sequence(self.options, stream)
            self._initial = StreamOffset(self.options.stream, start, incarnation(stream.cached_info))
            log.info("query on %s starts at sequence %d", self.options.stream, start)
        return self._initial.to_json()

    def getDefaultReadLimit(self) -> ReadLimit:
        """PySpark: ``maxMessagesPerTrigger`` as a read limit, or all available."""
        limit = self.options.max_messages_per_trigger
        return ReadAllAvailable() if limit is None else ReadMaxRows(limit)

    def prepareForTriggerAvailableNow(self) -> None:
        """PySpark: fix the end of an AvailableNow query at the stream's last sequence now."""
        self._target = self.end.stream(fresh=True).cached_info.state.last_seq + 1

    def _recreated(self, planned: str, now: str) -> None:
        """The checkpoint's incarnation is gone: raise, or (failOnDataLoss=false) warn once and go on."""
        if self.options.fail_on_data_loss:
            raise StreamRecreatedError(self.options.stream, planned, now)
        if (planned, now) not in self._warned_recreated:
            self._warned_recreated.add((planned, now))
            log.warning(
                "%s was deleted and created again (the checkpoint's stream was created at %s, this one at %s); "
                "the old stream's unread messages are lost, and the query goes on from the new stream's first "
                "sequence because failOnDataLoss=false",
                self.options.stream,
                planned,
                now,
            )

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        """PySpark: the end of the next micro-batch, within the read limit; ``start`` when there is nothing new."""
        begin = self._offset(start, "start")
        if self.progress is not None:
            self.progress.check()  # a query restarted from its checkpoint starts here, not at initialOffset
        info = self.end.stream().cached_info
        created = incarnation(info)
        first_seq, last_seq = info.state.first_seq, info.state.last_seq
        position = begin.seq
        moved = False
        if begin.created is not None and begin.created != created:
            self._recreated(begin.created, created)
            position, moved = max(1, first_seq), True
        end = last_seq + 1
        if end < position and not self._warned_ahead:
            self._warned_ahead = True  # a startingSequence in the future
            log.warning(
                "%s: the query waits for sequence %d, but the stream ends at %d",
                self.options.stream,
                position,
                last_seq,
            )
        if self._target is not None and not moved:
            end = min(end, self._target)
        if end <= position:
            if moved:  # an empty batch that carries the query over to the new stream
                return StreamOffset(self.options.stream, position, created, position).to_json()
            return start
        first = check_data_loss(self.options, position, end - 1, first_seq)
        if isinstance(limit, ReadMaxRows):
            end = min(end, first + limit.max_rows)
        if self.options.max_bytes_per_trigger is not None and self._target is None:
            end = min(end, first + self._sequences_in(self.options.max_bytes_per_trigger, info.state))
        if self._holds_back(end - first) and not moved:
            return start
        self._last_batch_at = time.monotonic()
        return StreamOffset(self.options.stream, max(end, first), created, first).to_json()

    @staticmethod
    def _sequences_in(max_bytes: int, state: StreamState) -> int:
        """maxBytesPerTrigger as sequences, at the stream's average stored size per message: a soft limit (as
        Delta's), since the server tells a range's size only by reading it; at least one sequence."""
        average = state.bytes / state.messages if state.messages else 1.0
        return max(1, int(max_bytes // max(average, 1.0)))

    def _holds_back(self, available: int) -> bool:
        """minMessagesPerTrigger: wait for more, unless maxTriggerDelay passed since the last batch (or the query
        runs AvailableNow, which must end)."""
        least = self.options.min_messages_per_trigger
        if least is None or self._target is not None or available >= least:
            return False
        return time.monotonic() - self._last_batch_at < self.options.max_trigger_delay

    def reportLatestOffset(self) -> dict[str, Any] | None:
        """PySpark: the stream's end for progress reporting, as last asked (this never asks the server)."""
        stream = self.end.last_known
        if stream is None:
            return None
        info = stream.cached_info
        return StreamOffset(self.options.stream, info.state.last_seq + 1, incarnation(info)).to_json()

    # -- batches ---------------------------------------------------------------------------------------------

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        """PySpark: the partitions of a micro-batch: from the start it was planned from to ``end``."""
        first_offset, last_offset = self._offset(start, "start"), self._offset(end, "end")
        if last_offset == first_offset:  # nothing new (a stream of a several-stream query that did not move)
            return []
        first = last_offset.planned_from if last_offset.planned_from is not None else first_offset.seq
        stop = last_offset.seq
        if stop <= first:
            return []
        stream = self.end.stream()
        now = incarnation(stream.cached_info)
        if last_offset.created is not None and last_offset.created != now:
            self._recreated(last_offset.created, now)
            return []  # failOnDataLoss=false: the old stream's batch has nothing left to read
        if self._mode is None:
            self._mode = choose_mode(self.options, stream)
        first = check_data_loss(self.options, first, stop - 1, stream.cached_info.state.first_seq)
        return plan_partitions(self.options, self._mode, first, stop - 1, stream.cached_info)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """PySpark: the rows of one partition, on an executor."""
        return read_partition(self.options, partition, self.schema)

    def commit(self, end: dict[str, Any]) -> None:
        """PySpark: a micro-batch up to ``end`` is done. Moves the progress consumer (``progressConsumer``), and
        logs the query's lag: sequences behind the stream's end (as last asked) and, when behind, how long ago
        the oldest unread message was stored."""
        offset = self._offset(end, "end")
        if self.progress is not None:
            self.progress.advance(offset.seq)
        stream = self.end.last_known
        if stream is None:
            return
        behind = max(0, stream.cached_info.state.last_seq + 1 - offset.seq)
        if behind == 0:
            log.info("%s: committed up to sequence %d; caught up", self.options.stream, offset.seq - 1)
            return
        age = self._age_of(stream, offset.seq)
        log.info(
            "%s: committed up to sequence %d; %d sequences behind the stream's end%s",
            self.options.stream,
            offset.seq - 1,
            behind,
            "" if age is None else f", the oldest unread message stored {age:.1f}s ago",
        )

    def _age_of(self, stream: Stream, seq: int) -> float | None:
        """Seconds since the first message at or after ``seq`` was stored (one direct get; None when the
        stream does not allow direct get or the message is gone)."""
        if not stream.cached_info.config.allow_direct:
            return None
        try:
            found = direct_get_batch_raw(stream, seq, 1, subjects=list(self.options.subjects) or None)
        except errors.JetStreamError as exc:
            log.debug("%s: no age for sequence %d (%s)", self.options.stream, seq, exc)
            return None
        if not found.messages:
            return None
        return max(0.0, time.time() - found.messages[0].time_ns / 1e9)
