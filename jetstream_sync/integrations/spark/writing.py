"""Publishing Arrow record batches to JetStream from a Spark task (no PySpark in here).

Rows are published with ``publish_async`` (many in flight, bounded) and every acknowledgement is awaited
before the task reports success, so a task that returns has had each row stored. Every row carries a
``Nats-Msg-Id``: from ``msgIdColumn``, else derived from where the row sits in the job (write id or streaming
query id and batch id, partition, row number). A task that Spark retries, or a micro-batch replayed after a
restart, publishes the same ids, and the stream drops them as duplicates inside its duplicate window
(``StreamConfig.duplicate_window``, 2 minutes by default); a retry later than that stores them again.
Row-numbered ids assume a retry sees its rows in the same order, which a shuffle does not promise.
"""

from __future__ import annotations

import concurrent.futures
import logging
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import attrs
import pyarrow as pa

from ... import errors
from ...jetstream import JetStream
from ...models import PubAck
from .._clients import process_client
from .options import WriteOptions

__all__ = ["ColumnPlan", "PublishStats", "plan_columns", "publish_batches"]

log = logging.getLogger("jetstream_sync.spark")

_RETRIES = 3
_RETRYABLE = (errors.TimeoutError, errors.NotConnectedError, errors.NoRespondersError)
_MSG_ID = "nats-msg-id"

# Simple type names as Spark's DataType.simpleString() spells them.
_STRING = "string"
_BINARY = "binary"
_HEADER_TYPES = ("map<string,array<string>>", "map<string,string>")
_ID_TYPES = ("string", "bigint", "int", "smallint", "tinyint", "decimal", "binary")


@attrs.frozen
class ColumnPlan:
    """Which input columns feed the subject, payload, headers and message id."""

    subject: str | None
    data: str
    headers: str | None
    msg_id: str | None


@attrs.define
class PublishStats:
    """What one task published: acks, how many of them were duplicates, and the stored sequence range."""

    published: int = 0
    duplicates: int = 0
    first_seq: int = 0
    last_seq: int = 0

    def add(self, ack: PubAck) -> None:
        self.published += 1
        if ack.duplicate:
            self.duplicates += 1
            return
        if self.first_seq == 0 or ack.seq < self.first_seq:
            self.first_seq = ack.seq
        self.last_seq = max(self.last_seq, ack.seq)


def plan_columns(fields: Mapping[str, str], options: WriteOptions) -> ColumnPlan:
    """Check the DataFrame's columns (name -> simple type string) against what a publish needs."""
    lowered = {name.lower(): (name, kind) for name, kind in fields.items()}
    subject = lowered.get("subject")
    if subject is None and options.subject is None:
        raise errors.InvalidArgumentError(
            "subject", "the DataFrame needs a string column 'subject', or set the option 'subject'"
        )
    if subject is not None and subject[1] != _STRING:
        raise errors.InvalidArgumentError("subject", f"the column must be a string, got {subject[1]}")
    data = lowered.get("data")
    if data is None:
        raise errors.InvalidArgumentError("data", "the DataFrame needs a column 'data' (binary or string)")
    if data[1] not in (_BINARY, _STRING):
        raise errors.InvalidArgumentError("data", f"the column must be binary or string, got {data[1]}")
    headers = lowered.get("headers")
    if headers is not None and headers[1].replace(" ", "") not in _HEADER_TYPES:
        raise errors.InvalidArgumentError(
            "headers", f"the column must be map<string,array<string>> or map<string,string>, got {headers[1]}"
        )
    msg_id: str | None = None
    if options.msg_id_column is not None:
        found = lowered.get(options.msg_id_column.lower())
        if found is None:
            raise errors.InvalidArgumentError(
                "msgIdColumn", f"no column {options.msg_id_column!r}; columns: {', '.join(fields)}"
            )
        if not found[1].startswith(_ID_TYPES):
            raise errors.InvalidArgumentError("msgIdColumn", f"column {found[0]!r} must be a string, got {found[1]}")
        if not options.idempotent:
            raise errors.InvalidArgumentError("msgIdColumn", "cannot be combined with idempotent=false")
        msg_id = found[0]
    return ColumnPlan(
        subject=None if subject is None else subject[0],
        data=data[0],
        headers=None if headers is None else headers[0],
        msg_id=msg_id,
    )


def publish_batches(
    options: WriteOptions, columns: ColumnPlan, batches: Iterable[pa.RecordBatch], id_prefix: str | None
) -> PublishStats:
    """Publish every row and wait for every ack; raises (failing the task) when a row cannot be stored.

    ``id_prefix`` makes the default message id ``{id_prefix}:{row}`` for rows without an id column; None (with
    ``idempotent=false``) publishes without ids.
    """
    client = process_client(options.connection)
    js = client.jetstream(timeout=options.publish_timeout)
    stats = PublishStats()
    in_flight: deque[tuple[concurrent.futures.Future[PubAck], tuple[Any, ...]]] = deque()
    row = 0
    for rows in _rows(batches, columns, options.subject):
        for subject, data, headers, row_id in rows:
            msg_id = row_id
            if msg_id is None and id_prefix is not None:
                msg_id = f"{id_prefix}:{row}"
            if headers and msg_id is not None and any(k.lower() == _MSG_ID for k in headers):
                msg_id = None  # the row carries its own Nats-Msg-Id header
            row += 1
            publish = (subject, data, headers, msg_id)
            in_flight.append((js.publish_async(subject, data, headers, msg_id=msg_id), publish))
            while len(in_flight) > options.max_in_flight:
                _settle(js, *in_flight.popleft(), stats)
    while in_flight:
        _settle(js, *in_flight.popleft(), stats)
    return stats


def _settle(
    js: JetStream, future: concurrent.futures.Future[PubAck], publish: tuple[Any, ...], stats: PublishStats
) -> None:
    """Take one ack; a lost one (timeout, disconnect, no responders) is published again with the same id."""
    try:
        stats.add(future.result())
        return
    except _RETRYABLE as exc:
        failure: BaseException = exc
    subject, data, headers, msg_id = publish
    for attempt in range(1, _RETRIES + 1):
        log.debug("publish to %r failed (%s); retry %d with the same msg id", subject, failure, attempt)
        try:
            stats.add(js.publish(subject, data, headers, msg_id=msg_id))
            return
        except _RETRYABLE as exc:
            failure = exc
    raise failure


def _rows(
    batches: Iterable[pa.RecordBatch], columns: ColumnPlan, default_subject: str | None
) -> Iterator[Iterator[tuple[str, bytes, dict[str, list[str]] | None, str | None]]]:
    """Per record batch, the rows as (subject, payload, headers, msg id), converted column by column."""
    for batch in batches:
        count = batch.num_rows
        if count == 0:
            continue
        subjects = batch.column(columns.subject).to_pylist() if columns.subject else [default_subject] * count
        datas = batch.column(columns.data).to_pylist()
        headers = batch.column(columns.headers).to_pylist() if columns.headers else [None] * count
        ids = batch.column(columns.msg_id).to_pylist() if columns.msg_id else [None] * count
        yield _convert(subjects, datas, headers, ids, columns)


def _convert(
    subjects: list[Any], datas: list[Any], headers: list[Any], ids: list[Any], columns: ColumnPlan
) -> Iterator[tuple[str, bytes, dict[str, list[str]] | None, str | None]]:
    for subject, data, header, msg_id in zip(subjects, datas, headers, ids, strict=True):
        if subject is None:
            raise errors.InvalidArgumentError("subject", "a row has a null subject")
        if data is None:
            payload = b""
        elif isinstance(data, str):
            payload = data.encode()
        else:
            payload = bytes(data)
        yield subject, payload, _headers(header), _msg_id(msg_id, columns)


def _headers(entries: Any) -> dict[str, list[str]] | None:
    """A map column as Arrow hands it over (a list of (key, value) pairs) to multi-valued headers."""
    if not entries:
        return None
    out: dict[str, list[str]] = {}
    for key, value in entries:
        if value is None:
            continue
        values = out.setdefault(key, [])
        if isinstance(value, list):
            values.extend(v for v in value if v is not None)
        else:
            values.append(value)
    return {k: v for k, v in out.items() if v} or None


def _msg_id(value: Any, columns: ColumnPlan) -> str | None:
    if columns.msg_id is None:
        return None
    if value is None:
        raise errors.InvalidArgumentError("msgIdColumn", f"a row has a null {columns.msg_id!r}")
    if isinstance(value, bytes):
        return value.decode()
    return str(value)
