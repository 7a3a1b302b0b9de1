"""check_queue: did a stream keep every acknowledged message, once, in one order, and did each reader get them?

The history's ``publish`` and ``receive`` operations are judged stream by stream (``key`` is the stream), as
Jepsen judges a queue: every message whose publish was **ok** must be received by every reader of its stream by
the end, and the stream must be one total order. What the checker reports, by kind:

- ``lost``: a message whose publish was ok (the stream acknowledged it) that a reader never received. The
  description names the readers that missed it: all of them points at the stream, one of them at that reader.
- ``duplicate``: a message stored at two stream sequences that retries do not explain (it was published with a
  ``msg_id``, so the stream should have stored it once, or published once), or a stream sequence delivered twice
  to a reader that takes no acks (an ordered consumer). Not expected.
- ``redelivered`` (expected): a stream sequence delivered again to a reader that acks, which at-least-once
  delivery allows (its ack was lost, or came after the consumer's ack wait).
- ``republished`` (expected): a message stored twice because it was published again without a ``msg_id`` after
  an unknown outcome (the first attempt was stored after all).
- ``out-of-order``: a reader's thread got a stream sequence lower than one it had got before, on a first
  delivery (a redelivery, or a delivery count above 1, may come back to an earlier sequence).
- ``ordered-gap``: an ordered reader (``via`` ``ordered``) went from one stream sequence to a later one past
  sequences that held messages (an acknowledged publish, or another reader, puts a message there), and that
  were not deleted (``deleted=``).
- ``divergent``: one stream sequence holding two different messages (two readers, or a PubAck and a reader,
  disagree): the stream is not one order.
- ``unexpected``: a message received that no publish attempted (Jepsen's "unexpected").
- ``refused-but-stored``: a message whose every publish failed (definitely not stored), yet was received.

Besides these, each stream's counts say how many publishes were ok, failed and unknown (``info``), and how many
messages whose every publish was unknown were received anyway (Jepsen's "recovered"). A reader is named by
``reader`` (several threads may share one, as several fetchers of one durable consumer do; the order rule holds
per thread, the lost rule per reader); ``via`` says how it reads, and every ``via`` but ``ordered`` and ``watch``
is taken to ack.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Mapping
from typing import Any

import attrs

from ._anomalies import EXPECTED_QUEUE_KINDS, QUEUE_ANOMALY_KINDS, Anomaly, QueueAnomalyKind, anomaly
from ._history import History, HistoryEvent, Operation, operations_and_events

__all__ = ["NO_ACK_VIAS", "QueueCheck", "StreamCheck", "check_queue"]

#: the ways of reading that take no acks: a repeated delivery there is a duplicate, not a redelivery
NO_ACK_VIAS: frozenset[str] = frozenset({"ordered", "watch"})
_EXAMPLES = 3


@attrs.frozen(kw_only=True)
class StreamCheck:
    """The verdict on one stream: ``publishes`` counts the publish operations by outcome (``ok``, ``fail``,
    ``info``); ``messages`` how many distinct messages were published; ``deliveries`` how many receives each
    reader recorded; ``recovered`` how many messages whose publishes were all unknown were received;
    ``anomalies`` everything found (the expected duplicates included), by time."""

    stream: str
    publishes: Mapping[str, int]
    messages: int
    deliveries: Mapping[str, int]
    recovered: int
    anomalies: tuple[Anomaly, ...]

    def count(self, kind: QueueAnomalyKind) -> int:
        """How many anomalies of ``kind`` this stream has."""
        return sum(1 for found in self.anomalies if found.kind == kind)

    @property
    def valid(self) -> bool:
        """No anomaly but the expected duplicates."""
        return all(found.kind in EXPECTED_QUEUE_KINDS for found in self.anomalies)


@attrs.frozen(kw_only=True)
class QueueCheck:
    """The verdict on every stream of a history: ``valid`` when no stream has an anomaly other than the expected
    duplicates. ``counts`` holds every kind of [`QUEUE_ANOMALY_KINDS`][jetstream_sync.testing.QUEUE_ANOMALY_KINDS]
    (zeros included), ``origin_ns`` the history's first invocation, from which reports measure time."""

    streams: Mapping[str, StreamCheck]
    counts: Mapping[QueueAnomalyKind, int]
    origin_ns: int
    events: tuple[HistoryEvent, ...] = ()

    @property
    def valid(self) -> bool:
        """True when every stream is valid (Jepsen's ``:valid?``)."""
        return all(stream.valid for stream in self.streams.values())

    @property
    def anomalies(self) -> list[Anomaly]:
        """Every anomaly found, by the time it showed."""
        return sorted((a for s in self.streams.values() for a in s.anomalies), key=lambda a: a.time_ns)

    def examples(self, kind: QueueAnomalyKind, limit: int = _EXAMPLES) -> list[Anomaly]:
        """The first ``limit`` anomalies of ``kind``, by time."""
        return [found for found in self.anomalies if found.kind == kind][:limit]

    def summary(self, examples: int = _EXAMPLES) -> str:
        """A report in a few lines: the verdict and counts, each stream's publishes and readers, and up to
        ``examples`` anomalies per kind that is not expected."""
        lines = [
            f"queue: {'valid' if self.valid else 'INVALID'} ({len(self.streams)} streams)",
            "anomalies: " + ", ".join(f"{kind} {self.counts[kind]}" for kind in QUEUE_ANOMALY_KINDS),
        ]
        for stream in self.streams.values():
            publishes = ", ".join(f"{outcome} {n}" for outcome, n in stream.publishes.items())
            readers = ", ".join(f"{reader} {n}" for reader, n in stream.deliveries.items()) or "none"
            lines.append(
                f"stream {stream.stream}: {stream.messages} messages; publishes {publishes}; "
                f"recovered {stream.recovered}; deliveries: {readers}"
            )
        for kind in QUEUE_ANOMALY_KINDS:
            if kind in EXPECTED_QUEUE_KINDS:
                continue
            lines += [found.describe(self.origin_ns) for found in self.examples(kind, examples)]
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        """The verdict, counts and per-stream figures as JSON-ready values (for a results file)."""
        return {
            "valid": self.valid,
            "counts": dict(self.counts),
            "streams": {
                name: {
                    "valid": s.valid,
                    "publishes": dict(s.publishes),
                    "messages": s.messages,
                    "deliveries": dict(s.deliveries),
                    "recovered": s.recovered,
                    "counts": {kind: s.count(kind) for kind in QUEUE_ANOMALY_KINDS},
                }
                for name, s in self.streams.items()
            },
        }


def check_queue(
    history: History | Iterable[Operation], *, deleted: Mapping[str, Collection[int]] | None = None
) -> QueueCheck:
    """Check the ``publish`` and ``receive`` operations of a history, stream by stream (see the module
    docstring). ``deleted`` names, per stream, the sequences deleted on purpose (``Stream.delete_msg``, a purge):
    no reader is expected to get them and an ordered reader may skip them."""
    operations, events = operations_and_events(history)
    by_stream: dict[str, list[Operation]] = {}
    for op in operations:
        if op.kind in ("publish", "receive"):
            by_stream.setdefault(op.key, []).append(op)
    gone = {stream: frozenset(seqs) for stream, seqs in (deleted or {}).items()}
    streams = {name: _check_stream(name, ops, gone.get(name, frozenset())) for name, ops in sorted(by_stream.items())}
    found = Counter(anomaly.kind for stream in streams.values() for anomaly in stream.anomalies)
    counts = {kind: found[kind] for kind in QUEUE_ANOMALY_KINDS}
    return QueueCheck(
        streams=streams,
        counts=counts,
        origin_ns=min((op.invoke_ns for op in operations), default=0),
        events=events,
    )


class _Stream:
    """What the history says about one stream: the publish attempts of each message, and which message each
    stream sequence holds according to each piece of evidence (an ok PubAck, a receive)."""

    def __init__(self, name: str, ops: list[Operation]) -> None:
        self.name = name
        self.publishes = [op for op in ops if op.kind == "publish"]
        self.receives = sorted((op for op in ops if op.kind == "receive"), key=lambda op: (op.invoke_ns, op.index))
        self.attempts: dict[str, list[Operation]] = {}
        for op in self.publishes:
            if op.value is not None:
                self.attempts.setdefault(op.value, []).append(op)
        self.acked = {
            value: next(op for op in ops if op.outcome == "ok")
            for value, ops in self.attempts.items()
            if any(op.outcome == "ok" for op in ops)
        }
        self.at_seq: dict[int, dict[str | None, Operation]] = {}  # sequence -> message -> first evidence
        for op in [*(op for op in self.publishes if op.outcome == "ok"), *self.receives]:
            if op.revision is not None:
                message = op.value if op.kind == "publish" else op.result
                self.at_seq.setdefault(op.revision, {}).setdefault(message, op)
        self.readers: dict[str, list[Operation]] = {}
        for op in self.receives:
            self.readers.setdefault(op.reader or "", []).append(op)


def _check_stream(name: str, ops: list[Operation], deleted: frozenset[int]) -> StreamCheck:
    stream = _Stream(name, ops)
    found: list[Anomaly] = []
    _divergent(stream, found)
    _stored_twice(stream, found)
    _unknown_messages(stream, found)
    _lost(stream, deleted, found)
    for reader, receives in stream.readers.items():
        _deliveries(stream, reader, receives, deleted, found)
    recovered = (
        sum(
            1
            for value, attempts in stream.attempts.items()
            if value not in stream.acked
            and any(op.outcome == "info" for op in attempts)
            and any(op.result == value for op in stream.receives)
        )
        if stream.receives
        else 0
    )
    outcomes = {outcome: sum(op.outcome == outcome for op in stream.publishes) for outcome in ("ok", "fail", "info")}
    return StreamCheck(
        stream=name,
        publishes=outcomes,
        messages=len(stream.attempts),
        deliveries={reader: len(receives) for reader, receives in sorted(stream.readers.items())},
        recovered=recovered,
        anomalies=tuple(sorted(found, key=lambda a: a.time_ns)),
    )


def _divergent(stream: _Stream, found: list[Anomaly]) -> None:
    """Stream sequences that hold two messages, by the evidence of PubAcks and readers."""
    for seq, messages in sorted(stream.at_seq.items()):
        if len(messages) > 1:
            shown = ", ".join(repr(message) for message in messages)
            description = f"stream sequence {seq} holds {len(messages)} different messages: {shown}"
            found.append(anomaly("divergent", stream.name, description, *messages.values()))


def _stored_twice(stream: _Stream, found: list[Anomaly]) -> None:
    """Messages that readers found at more than one stream sequence."""
    seqs: dict[str | None, dict[int, Operation]] = {}
    for op in stream.receives:
        if op.revision is not None:
            seqs.setdefault(op.result, {}).setdefault(op.revision, op)
    for message, where in seqs.items():
        if len(where) < 2:
            continue
        attempts = stream.attempts.get(message, []) if message is not None else []
        retried = (
            len(attempts) > 1
            and all(op.msg_id is None for op in attempts)
            and any(op.outcome != "ok" for op in attempts)
        )
        at = ", ".join(str(seq) for seq in sorted(where))
        if retried:
            description = (
                f"{message!r} is stored at sequences {at}: published {len(attempts)} times without a "
                "msg_id after an unknown outcome"
            )
            found.append(anomaly("republished", stream.name, description, *where.values()))
        else:
            why = (
                "its publishes carried a msg_id, so the stream should have stored it once"
                if any(op.msg_id is not None for op in attempts)
                else f"it was published {len(attempts)} time(s)"
                + ("" if len(attempts) < 2 else ", each one acknowledged")
            )
            found.append(
                anomaly(
                    "duplicate",
                    stream.name,
                    f"{message!r} is stored at sequences {at}, but {why}",
                    *where.values(),
                    *attempts,
                )
            )


def _unknown_messages(stream: _Stream, found: list[Anomaly]) -> None:
    """Messages received that no publish attempted, or that every publish of failed."""
    reported: set[str | None] = set()
    for op in stream.receives:
        message = op.result
        if message in reported:
            continue
        attempts = stream.attempts.get(message or "") if message is not None else None
        if not attempts:
            reported.add(message)
            found.append(anomaly("unexpected", stream.name, f"received {message!r}, which nobody published", op))
        elif all(attempt.outcome == "fail" for attempt in attempts):
            reported.add(message)
            description = f"received {message!r}, whose every publish failed ({attempts[-1].error})"
            found.append(anomaly("refused-but-stored", stream.name, description, op, *attempts))


def _lost(stream: _Stream, deleted: frozenset[int], found: list[Anomaly]) -> None:
    """Acknowledged messages that a reader of the stream never received (all of its readers, if it has some)."""
    seen = {reader: {op.result for op in receives} for reader, receives in stream.readers.items()}
    for message, publish in stream.acked.items():
        if publish.revision is not None and publish.revision in deleted:
            continue
        missed = sorted(reader for reader, got in seen.items() if message not in got)
        if missed == sorted(seen):
            who = "no reader received it" if seen else "the stream has no reader"
        elif missed:
            who = f"{', '.join(missed)} never received it (others did)"
        else:
            continue
        description = f"{message!r} was acknowledged at sequence {publish.revision}, but {who}"
        found.append(anomaly("lost", stream.name, description, publish))


def _deliveries(
    stream: _Stream, reader: str, receives: list[Operation], deleted: frozenset[int], found: list[Anomaly]
) -> None:
    """One reader's repeated deliveries, and the order and gaps of each of its threads' first deliveries."""
    seen: dict[int, Operation] = {}
    highest: dict[int, Operation] = {}  # process -> its first delivery with the highest sequence so far
    previous: dict[int, Operation] = {}  # process -> its latest delivery (for an ordered reader's gaps)
    for op in receives:
        seq = op.revision
        if seq is None:
            continue
        acks = op.via not in NO_ACK_VIAS
        if seq in seen:
            kind: QueueAnomalyKind = "redelivered" if acks else "duplicate"
            description = f"{reader} got sequence {seq} ({op.result!r}) again" + (
                f", delivery {op.delivered}" if op.delivered is not None else ""
            )
            found.append(anomaly(kind, stream.name, description, op, seen[seq]))
            continue
        seen[seq] = op
        if op.via == "ordered":
            last = previous.get(op.process)
            if last is not None:
                _gap(stream, reader, last, op, deleted, found)
            previous[op.process] = op
        if acks and (op.delivered or 1) > 1:
            continue  # a redelivery of a delivery this reader never got: it may come back to an earlier sequence
        top = highest.get(op.process)
        if top is not None and top.revision is not None and seq < top.revision:
            description = f"{reader} got sequence {seq} after {top.revision}, both first deliveries"
            found.append(anomaly("out-of-order", stream.name, description, op, top))
        else:
            highest[op.process] = op


def _gap(
    stream: _Stream, reader: str, last: Operation, op: Operation, deleted: frozenset[int], found: list[Anomaly]
) -> None:
    """An ordered reader's step from ``last`` to ``op``: an anomaly when it passed sequences that held messages."""
    start, seq = last.revision or 0, op.revision or 0
    held = [s for s in range(start + 1, seq) if s in stream.at_seq and s not in deleted]
    if not held:
        return
    witness = next(iter(stream.at_seq[held[0]].values()))
    message = witness.value if witness.kind == "publish" else witness.result
    description = (
        f"{reader} went from sequence {start} to {seq}, past {len(held)} that held messages "
        f"(the first, {held[0]}, holds {message!r})"
    )
    found.append(anomaly("ordered-gap", stream.name, description, op, last, witness))
