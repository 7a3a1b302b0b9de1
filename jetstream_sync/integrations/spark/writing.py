"""Publishing Arrow record batches to JetStream from a Spark task (no PySpark in here).

Rows are published with ``publish_async`` (many in flight, bounded) and every acknowledgement is awaited
before the task reports success, so a task that returns has had each row stored. Every row carries a
``Nats-Msg-Id`` (unless ``idempotent=false``): from ``msgIdColumn``, else a default id made by
`MessageIds` from what the row *is*, never from where it sits in the task:

- rows with the source columns ``stream`` (string) and ``seq`` (bigint), as ``format("jetstream")`` reads
  them: ``{stream}:{seq}:{digest}:{k}``;
- other rows: ``{scope}:{partition}:{digest}:{k}``, the scope being the streaming query id and batch id, or
  the batch write's id;

where ``digest`` is a BLAKE2b-128 of the published bytes (subject, headers, payload; and the source stream
and sequence when present) and ``k`` counts the earlier rows of the task with the same digest, so identical
rows get ``:0``, ``:1``, ... whatever their order. The stream drops a repeated id inside its duplicate window
(``StreamConfig.duplicate_window``, 2 minutes by default). Why this never loses a row: two rows that differ
in any published byte never share an id, and the ids of identical rows within one attempt are distinct, so a
replay's rows are each stored unless an identical row with the same id already is. Row-numbered ids (before
issue 36) gave a replay whose rows came in another order the ids of other rows, and those rows were dropped.
"""

from __future__ import annotations

import base64
import concurrent.futures
import hashlib
import logging
import time
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

__all__ = ["ColumnPlan", "MessageIds", "PublishStats", "plan_columns", "publish_batches", "row_digest"]

log = logging.getLogger("jetstream_sync.spark")

_RETRIES = 3
_RETRYABLE = (errors.TimeoutError, errors.NotConnectedError, errors.NoRespondersError)
_MSG_ID = "nats-msg-id"

# Simple type names as Spark's DataType.simpleString() spells them.
_STRING = "string"
_BINARY = "binary"
_HEADER_TYPES = ("map<string,array<string>>", "map<string,string>")
_ID_TYPES = ("string", "bigint", "int", "smallint", "tinyint", "decimal", "binary")
# The source columns of format("jetstream"): the stream a row was read from and its sequence there.
_SOURCE_TYPES = {"stream": (_STRING,), "seq": ("bigint", "int")}


@attrs.frozen
class ColumnPlan:
    """Which input columns feed the subject, payload, headers and message id."""

    subject: str | None
    data: str
    headers: str | None
    msg_id: str | None
    #: the source columns ``stream`` and ``seq`` when both are there and default ids are made (else None)
    stream: str | None = None
    seq: str | None = None


@attrs.define
class PublishStats:
    """What one task published: acks, how many of them were duplicates, and the stored sequence range."""

    published: int = 0
    duplicates: int = 0
    first_seq: int = 0
    last_seq: int = 0
    #: the streams that stored the rows (from the acks), to check their duplicate windows on the driver
    streams: set[str] = attrs.field(factory=set)
    #: wall-clock time (time.time()) of the task's first publish; 0.0 when it published nothing
    started: float = 0.0

    def add(self, ack: PubAck) -> None:
        self.published += 1
        self.streams.add(ack.stream)
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
    stream, seq = _source_columns(lowered) if msg_id is None and options.idempotent else (None, None)
    return ColumnPlan(
        subject=None if subject is None else subject[0],
        data=data[0],
        headers=None if headers is None else headers[0],
        msg_id=msg_id,
        stream=stream,
        seq=seq,
    )


def _source_columns(lowered: Mapping[str, tuple[str, str]]) -> tuple[str | None, str | None]:
    """On the driver: the ``stream``/``seq`` columns that key the default ids, when both have source types."""
    found = {name: lowered.get(name) for name in _SOURCE_TYPES}
    if all(column is not None and column[1] in _SOURCE_TYPES[name] for name, column in found.items()):
        stream, seq = found["stream"], found["seq"]
        assert stream is not None and seq is not None
        _once(
            logging.INFO,
            "default message ids from the source columns %r and %r and each row's digest",
            stream[0],
            seq[0],
        )
        return stream[0], seq[0]
    if any(column is not None for column in found.values()):
        _once(
            logging.INFO,
            "columns stream/seq are not (string, bigint) (%s): default message ids are scoped to the batch "
            "and partition, so a replay in another partitioning stores its rows again",
            ", ".join(f"{c[0]} {c[1]}" for c in found.values() if c is not None),
        )
    return None, None


_logged: set[tuple[object, ...]] = set()


def _once(level: int, message: str, *args: object) -> None:
    """Log a planning message once per process: Spark plans the write again for every streaming commit."""
    key = (message, *args)
    if key not in _logged:
        _logged.add(key)
        log.log(level, message, *args)


def _frame(text: str) -> bytes:
    raw = text.encode("utf-8", "surrogatepass")
    return b"%d:%b" % (len(raw), raw)


def row_digest(
    subject: str, data: bytes, headers: Mapping[str, list[str]] | None, source: tuple[str, int] | None = None
) -> bytes:
    """16-byte BLAKE2b of an unambiguous encoding of what a row publishes (and its source message).

    Every text is length-prefixed and the payload comes last, so no two different rows encode alike; header
    names are sorted (a map column's order is not data), the values of one header keep their order (it is
    what is published). Runs on the executor, per row: one hash call over one buffer.
    """
    parts = [b"s" + _frame(source[0]) + b"%d;" % source[1]] if source is not None else []
    parts.append(_frame(subject))
    if headers:
        parts.append(b"h%d;" % len(headers))
        for key in sorted(headers):
            values = headers[key]
            parts.append(_frame(key) + b"%d;" % len(values))
            parts.extend(_frame(value) for value in values)
    parts.append(b"d")
    parts.append(data)
    return hashlib.blake2b(b"".join(parts), digest_size=16).digest()


class MessageIds:
    """The default message ids of one write task (see the module docstring), on the executor.

    ``scope`` is what the ids of rows without a source message start with (``{query}:{batch}:{partition}``
    or ``{write_id}:{partition}``). ``k`` is counted per digest over the whole task, so the task remembers
    one 16-byte digest per row it has published: about 100 bytes of memory per row of the partition.
    """

    def __init__(self, scope: str) -> None:
        self.scope = scope
        self._seen: dict[bytes, int] = {}

    def __call__(
        self,
        subject: str,
        data: bytes,
        headers: Mapping[str, list[str]] | None,
        stream: str | None = None,
        seq: int | None = None,
    ) -> str:
        """The id of the next row; rows with a null stream or seq get a scoped id."""
        source = (stream, seq) if stream is not None and seq is not None else None
        digest = row_digest(subject, data, headers, source)
        k = self._seen.get(digest, 0)
        self._seen[digest] = k + 1
        text = base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")
        if source is None:
            return f"{self.scope}:{text}:{k}"
        return f"{stream}:{seq}:{text}:{k}"


def publish_batches(
    options: WriteOptions, columns: ColumnPlan, batches: Iterable[pa.RecordBatch], id_prefix: str | None
) -> PublishStats:
    """Publish every row and wait for every ack; raises (failing the task) when a row cannot be stored.

    ``id_prefix`` is the scope of the default message ids (`MessageIds`) of rows without an id
    column; None (with ``idempotent=false``) publishes without ids. Runs on the executor.
    """
    client = process_client(options.connection)
    js = client.jetstream(timeout=options.publish_timeout)
    stats = PublishStats()
    ids = MessageIds(id_prefix) if id_prefix is not None and columns.msg_id is None else None
    in_flight: deque[tuple[concurrent.futures.Future[PubAck], tuple[Any, ...]]] = deque()
    for rows in _rows(batches, columns, options.subject):
        for subject, data, headers, row_id, source_stream, source_seq in rows:
            if headers and any(k.lower() == _MSG_ID for k in headers):
                msg_id = None  # the row carries its own Nats-Msg-Id header
            elif row_id is not None or ids is None:
                msg_id = row_id
            else:
                msg_id = ids(subject, data, headers, source_stream, source_seq)
            if not stats.started:
                stats.started = time.time()
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


_Row = tuple[str, bytes, dict[str, list[str]] | None, str | None, str | None, int | None]


def _rows(
    batches: Iterable[pa.RecordBatch], columns: ColumnPlan, default_subject: str | None
) -> Iterator[Iterator[_Row]]:
    """Per record batch, the rows as (subject, payload, headers, msg id, source stream, source seq)."""
    for batch in batches:
        count = batch.num_rows
        if count == 0:
            continue
        subjects = batch.column(columns.subject).to_pylist() if columns.subject else [default_subject] * count
        datas = batch.column(columns.data).to_pylist()
        headers = batch.column(columns.headers).to_pylist() if columns.headers else [None] * count
        ids = batch.column(columns.msg_id).to_pylist() if columns.msg_id else [None] * count
        streams = batch.column(columns.stream).to_pylist() if columns.stream else [None] * count
        seqs = batch.column(columns.seq).to_pylist() if columns.seq else [None] * count
        yield _convert(subjects, datas, headers, ids, streams, seqs, columns)


def _convert(
    subjects: list[Any],
    datas: list[Any],
    headers: list[Any],
    ids: list[Any],
    streams: list[Any],
    seqs: list[Any],
    columns: ColumnPlan,
) -> Iterator[_Row]:
    for subject, data, header, msg_id, stream, seq in zip(subjects, datas, headers, ids, streams, seqs, strict=True):
        if subject is None:
            raise errors.InvalidArgumentError("subject", "a row has a null subject")
        if data is None:
            payload = b""
        elif isinstance(data, str):
            payload = data.encode()
        else:
            payload = bytes(data)
        yield subject, payload, _headers(header), _msg_id(msg_id, columns), stream, seq


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
