"""Explaining a key that cannot be linearized: the smallest window of operations that shows it, and the
well-known anomalies, each with the operations and times that prove it.

The verdict comes from the search in ``_linearizable.py``; this module only explains it, for a key the search
rejected (or could not decide in time). Two explanations:

- **The window.** The earliest cut of the history that cannot be linearized ends at one operation's return:
  that operation (the *culprit*) is the first that nothing can explain. Then as many of the other completed
  operations as possible are *relaxed* (treated as "may or may not have happened, at any time after their
  call"); relaxing only allows more orders, so what is left still cannot be linearized and is a witness of
  the violation on its own: typically the culprit, the writes it contradicts and the reads around them.
- **Anomalies** by name, found by rules that each prove a violation (given that every value is written once,
  which the checks look up rather than assume; a value written twice is left out of them): a *stale read*
  returned a value older than one already written (or read) before the read began; a *lost write* was
  acknowledged, then a later read saw something older and no read ever saw it; a *refused-but-applied*
  write or CAS was reported as failed, yet its value was read; a *lost update* is a CAS that succeeded from a
  value already replaced (two CAS from the same value, or from one overwritten before the CAS began); a
  *garbage read* returned a value nobody wrote. "Older" is by real time (its write completed before the newer
  one began) or by the revisions the server reported. A rejected key none of these rules explains gets one
  ``unclassified`` anomaly carrying the window.

[`Anomaly`][jetstream_sync.testing.Anomaly] is also what the queue and watcher checkers (``_queue_checker.py``,
``_watch_checker.py``) report; their kinds are listed here with the register's, so that every report names them the same
way.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Sequence
from typing import Literal, get_args

import attrs

from ._history import Operation
from ._linearizable import prepare, search

__all__ = [
    "ANOMALY_KINDS",
    "EXPECTED_QUEUE_KINDS",
    "QUEUE_ANOMALY_KINDS",
    "WATCH_ANOMALY_KINDS",
    "Anomaly",
    "AnomalyKind",
    "QueueAnomalyKind",
    "WatchAnomalyKind",
    "anomaly",
    "classify",
    "explain",
]

AnomalyKind = Literal["stale-read", "lost-write", "refused-but-applied", "lost-update", "garbage-read", "unclassified"]
#: every anomaly kind of a key-value register (``check_history``), in the order reports list them
ANOMALY_KINDS: tuple[AnomalyKind, ...] = (
    "stale-read",
    "lost-write",
    "refused-but-applied",
    "lost-update",
    "garbage-read",
    "unclassified",
)

QueueAnomalyKind = Literal[
    "lost",
    "duplicate",
    "redelivered",
    "republished",
    "out-of-order",
    "ordered-gap",
    "divergent",
    "unexpected",
    "refused-but-stored",
]
#: every finding of ``check_queue``, in the order reports list them (see ``_queue_checker.py``)
QUEUE_ANOMALY_KINDS: tuple[QueueAnomalyKind, ...] = get_args(QueueAnomalyKind)
#: the duplicates at-least-once delivery allows: a redelivery to a reader that acks, and a message stored twice
#: because it was published again without a msg_id after an unknown outcome
EXPECTED_QUEUE_KINDS: frozenset[QueueAnomalyKind] = frozenset({"redelivered", "republished"})

WatchAnomalyKind = Literal["watch-out-of-order", "watch-duplicate", "watch-lost-update", "watch-divergent"]
#: every anomaly kind of ``check_watches``, in the order reports list them (see ``_watch_checker.py``)
WATCH_ANOMALY_KINDS: tuple[WatchAnomalyKind, ...] = get_args(WatchAnomalyKind)


@attrs.frozen(kw_only=True)
class Anomaly:
    """One anomaly on one key (or stream): its kind, a sentence saying what happened, the operations that prove
    it (the first is the one that shows it) and when it showed (``time_ns``, ``time.monotonic_ns()`` as the
    history)."""

    kind: AnomalyKind | QueueAnomalyKind | WatchAnomalyKind
    key: str
    description: str
    operations: tuple[Operation, ...]
    time_ns: int

    def describe(self, origin_ns: int = 0) -> str:
        """Several lines for a report: the kind, the key, the time (from ``origin_ns``), the sentence and the
        operations."""
        head = f"{self.kind} on {self.key} at {(self.time_ns - origin_ns) / 1e9:.3f}s: {self.description}"
        return "\n".join([head, *(f"    {op.describe(origin_ns)}" for op in self.operations)])


# -- the window -----------------------------------------------------------------------------------------------


def _linearizable(ops: Sequence[Operation], deadline: float, relaxed: set[int], cut_ns: int) -> bool | None:
    return search(prepare(ops, relaxed=relaxed, cut_ns=cut_ns), deadline)


def explain(ops: Sequence[Operation], deadline: float) -> tuple[Operation | None, tuple[Operation, ...]]:
    """For one key's operations that cannot be linearized: the culprit and a minimal window (see the module
    docstring). What the deadline leaves unfinished is still a valid witness, only a larger one; (None, ())
    when not even the culprit was found in time."""
    returns = sorted({op.complete_ns for op in ops if op.outcome == "ok" and op.complete_ns is not None})
    if not returns:
        return None, ()
    # The earliest cut that cannot be linearized (the whole history cannot: it is the upper bound).
    low, high = 0, len(returns) - 1
    while low < high:
        middle = (low + high) // 2
        verdict = _linearizable(ops, deadline, set(), returns[middle])
        if verdict is None:
            return None, ()
        if verdict:
            low = middle + 1
        else:
            high = middle
    cut = returns[high]
    tied = [op for op in ops if op.outcome == "ok" and op.complete_ns == cut]
    culprit = tied[0]
    for op in tied if len(tied) > 1 else ():  # several returned at that instant: the one that fails alone
        if _linearizable(ops, deadline, {other.index for other in tied if other is not op}, cut) is False:
            culprit = op
            break
    others = sorted(
        (op for op in ops if op.outcome == "ok" and op.index != culprit.index and (op.complete_ns or 0) <= cut),
        key=lambda op: (op.complete_ns or 0, op.index),
    )
    # Relax the longest run of the earliest ones that keeps the violation (relaxing more allows more orders, so
    # this is monotone and a binary search finds it).
    low, high = 0, len(others)
    while low < high:
        middle = (low + high + 1) // 2
        verdict = _linearizable(ops, deadline, {op.index for op in others[:middle]}, cut)
        if verdict is False:
            low = middle
        else:
            high = middle - 1
            if verdict is None:
                break
    relaxed = {op.index for op in others[:low]}
    # A relaxed write that a read still pins stays in the window: constrain it again (that keeps the violation)
    # and rather try to relax its readers, reads first (a relaxed read leaves the window, a write may not), the
    # latest first.
    relaxed -= {p.source.index for p in prepare(ops, relaxed=relaxed, cut_ns=cut)}
    rest = [op.index for op in others if op.index not in relaxed]
    order = {op.index: (op.kind != "read", -(op.complete_ns or 0)) for op in others}
    rest.sort(key=order.__getitem__)
    _relax_what_can_go(ops, deadline, relaxed, cut, rest)
    window = sorted((p.source for p in prepare(ops, relaxed=relaxed, cut_ns=cut)), key=lambda op: op.invoke_ns)
    return culprit, tuple(window)


def _relax_what_can_go(ops: Sequence[Operation], deadline: float, relaxed: set[int], cut: int, rest: list[int]) -> None:
    """Add to ``relaxed`` every operation of ``rest`` whose relaxation keeps the violation, trying blocks first
    and halving them (as delta debugging does): a window of k operations in a history of n then costs about
    2k log n searches instead of n."""
    size = len(rest)
    while rest and size >= 1:
        kept: list[int] = []
        for start in range(0, len(rest), size):
            block = rest[start : start + size]
            if time.monotonic() > deadline:
                return
            if _linearizable(ops, deadline, relaxed.union(block), cut) is False:
                relaxed.update(block)
            else:
                kept.extend(block)
        if size == 1:
            return
        rest, size = kept, max(1, size // 2)


# -- named anomalies ------------------------------------------------------------------------------------------


class _Facts:
    """What the history of one key says about its values: who wrote each, its revision, who first saw it."""

    def __init__(self, ops: Sequence[Operation]) -> None:
        self.ops = ops
        self.writers: dict[str, list[Operation]] = {}
        for op in ops:
            if op.kind != "read" and op.value is not None:
                self.writers.setdefault(op.value, []).append(op)
        # A value written once, by an operation that may have taken effect: the rules reason about these only.
        self.unique = {v: ws[0] for v, ws in self.writers.items() if len(ws) == 1 and ws[0].outcome != "fail"}
        self.reads = [op for op in ops if op.kind == "read" and op.outcome == "ok"]
        self.acked = [op for op in ops if op.kind != "read" and op.outcome == "ok"]
        self.reported: list[tuple[str, int]] = []  # (value, revision) as the server reported them
        self.observed: dict[str, Operation] = {}  # value -> the completed operation that saw it first
        for op in sorted(self.reads + self.acked, key=lambda op: op.complete_ns or 0):
            written = op.value if op.kind != "read" else None
            seen = op.result if op.kind == "read" else op.expected if op.kind == "cas" else None
            shown = seen if op.kind == "read" else written  # the value the reported revision belongs to
            if op.revision is not None and shown is not None:
                self.reported.append((shown, op.revision))
            if seen is not None:
                self.observed.setdefault(seen, op)
        self.revision: dict[str, int] = {}
        for value, revision in self.reported:
            self.revision.setdefault(value, revision)

    def writer(self, value: str) -> Operation | None:
        """The one operation that writes ``value`` and may have taken effect, or None (none, or several)."""
        return self.unique.get(value)

    def newer(self, old: str | None, new: str | None) -> bool:
        """Whether value ``new`` certainly came after value ``old``: anything comes after no value; otherwise
        the write of ``old`` completed before the write of ``new`` began, or the server gave ``new`` the higher
        revision (both values written once)."""
        if new is None or old == new:
            return False
        if old is None:
            return True
        old_writer, new_writer = self.writer(old), self.writer(new)
        if old_writer is None or new_writer is None:
            return False
        old_rev, new_rev = self.revision.get(old), self.revision.get(new)
        later = old_rev is not None and new_rev is not None and new_rev > old_rev
        return later or _before(old_writer, new_writer)


class _Timeline:
    """Observations of values (acknowledged writes, or completed reads) by the time they were certainly done, to
    ask in O(log n): did anything done before time t show a value newer than v? (so the rules stay fast on
    histories of many thousands of operations)."""

    def __init__(self, facts: _Facts, items: Sequence[tuple[Operation, str]]) -> None:
        self.facts = facts
        rows = sorted(((op.complete_ns or 0, op, value) for op, value in items), key=lambda row: row[0])
        self.times = [row[0] for row in rows]
        # Running maxima over the rows so far: the latest invocation of a value's writer, the highest revision.
        self.by_invoke: list[tuple[int, Operation | None]] = []
        self.by_revision: list[tuple[int, Operation | None]] = []
        best_invoke: tuple[int, Operation | None] = (-1, None)
        best_revision: tuple[int, Operation | None] = (-1, None)
        for _t, op, value in rows:
            writer = facts.writer(value)
            if writer is not None and writer.invoke_ns > best_invoke[0]:
                best_invoke = (writer.invoke_ns, op)
            revision = facts.revision.get(value) if writer is not None else None
            if revision is not None and revision > best_revision[0]:
                best_revision = (revision, op)
            self.by_invoke.append(best_invoke)
            self.by_revision.append(best_revision)
        self.rows = rows

    def newer_before(self, time_ns: int, value: str | None) -> Operation | None:
        """An observation done before ``time_ns`` of a value certainly newer than ``value``, or None."""
        count = bisect.bisect_left(self.times, time_ns)
        if count == 0:
            return None
        if value is None:
            return self.rows[count - 1][1]  # anything is newer than no value
        writer = self.facts.writer(value)
        if writer is None:
            return None
        invoke, op = self.by_invoke[count - 1]
        if writer.outcome == "ok" and writer.complete_ns is not None and invoke > writer.complete_ns:
            return op
        revision = self.facts.revision.get(value)
        best, op = self.by_revision[count - 1]
        return op if revision is not None and best > revision else None


def _before(first: Operation, second: Operation) -> bool:
    """``first`` completed (for certain) before ``second`` was invoked."""
    return first.outcome == "ok" and first.complete_ns is not None and first.complete_ns < second.invoke_ns


def classify(key: str, ops: Sequence[Operation]) -> list[Anomaly]:
    """The named anomalies of one key's operations (see the module docstring)."""
    facts = _Facts(ops)
    found: list[Anomaly] = []
    lost = _lost_writes(key, facts, found)
    writes = _Timeline(facts, [(w, w.value) for w in facts.acked if w.index not in lost and w.value is not None])
    _stale_reads(key, facts, writes, found)
    _refused_but_applied(key, facts, found)
    _lost_updates(key, facts, writes, found)
    return found


def anomaly(
    kind: AnomalyKind | QueueAnomalyKind | WatchAnomalyKind, key: str, description: str, *ops: Operation
) -> Anomaly:
    """An anomaly shown by ``ops[0]`` (at its completion, or its invocation if it never completed)."""
    shown = ops[0]
    return Anomaly(
        kind=kind,
        key=key,
        description=description,
        operations=tuple(ops),
        time_ns=shown.complete_ns if shown.complete_ns is not None else shown.invoke_ns,
    )


def _lost_writes(key: str, facts: _Facts, found: list[Anomaly]) -> set[int]:
    """Acknowledged writes no read ever saw, which the end of the history does not have either: every final
    read (begun after every acknowledged write had completed; without one, the last read) returned an older
    value, or the server reported the write's revision for another value too (its sequence was reused)."""
    lost: set[int] = set()
    if not facts.reads:
        return lost
    last_ack = max((w.complete_ns or 0 for w in facts.acked), default=0)
    final = [r for r in facts.reads if r.invoke_ns > last_ack] or [max(facts.reads, key=lambda r: r.invoke_ns)]
    by_revision: dict[int, set[str]] = {}
    for seen, revision in facts.reported:
        by_revision.setdefault(revision, set()).add(seen)
    for write in facts.acked:
        value = write.value
        if value is None or facts.writer(value) is not write or value in facts.observed:
            continue
        others = by_revision.get(write.revision, set()) - {value} if write.revision is not None else set()
        if others:
            why = f"revision {write.revision} was also reported for {sorted(others)[0]!r}"
            evidence = [write]
        elif all(_before(write, r) and facts.newer(r.result, value) for r in final):
            first = min(final, key=lambda r: r.invoke_ns)
            why = f"the final reads returned older values, such as {first.result!r}"
            evidence = [first, write]
        else:
            continue
        lost.add(write.index)
        description = f"{write.kind} of {value!r} was acknowledged, no read ever saw it, and {why}"
        found.append(anomaly("lost-write", key, description, *evidence))
    return lost


def _stale_reads(key: str, facts: _Facts, writes: _Timeline, found: list[Anomaly]) -> None:
    """Reads that returned a value older than one written (and not lost) or read before the read began."""
    reads = _Timeline(facts, [(r, r.result) for r in facts.reads if r.result is not None])
    for read in facts.reads:
        value = read.result
        if value is not None and facts.writer(value) is None:
            if value not in facts.writers:
                found.append(anomaly("garbage-read", key, f"read returned {value!r}, which nobody wrote", read))
            continue  # written only by a failed operation (refused-but-applied), or by several: no rule applies
        witness = writes.newer_before(read.invoke_ns, value)
        if witness is not None:
            why = f"{witness.kind} of {witness.value!r} had completed before the read began"
        else:
            witness = reads.newer_before(read.invoke_ns, value)
            if witness is None:
                continue
            why = f"an earlier read, completed before this one began, had returned the newer {witness.result!r}"
        evidence = [read, witness]
        old_writer = facts.writer(value) if value is not None else None
        if old_writer is not None:
            evidence.append(old_writer)
        found.append(anomaly("stale-read", key, f"read returned {value!r}, but {why}", *evidence))


def _refused_but_applied(key: str, facts: _Facts, found: list[Anomaly]) -> None:
    """Writes and CAS reported as failed (definitely not applied) whose value was later read."""
    for op in facts.ops:
        if op.kind == "read" or op.outcome != "fail" or op.value is None:
            continue
        seen = facts.observed.get(op.value)
        if seen is None or len(facts.writers[op.value]) != 1:
            continue
        what = "read" if seen.kind == "read" else "the expected value of a successful cas"
        description = f"{op.kind} of {op.value!r} failed ({op.error}), yet its value was {what}"
        found.append(anomaly("refused-but-applied", key, description, seen, op))


def _lost_updates(key: str, facts: _Facts, writes: _Timeline, found: list[Anomaly]) -> None:
    """Successful CAS from a value that a newer write had replaced before the CAS began, or that another
    successful CAS replaced too."""
    by_expected: dict[str | None, list[Operation]] = {}
    flagged: set[int] = set()
    for cas in facts.acked:
        if cas.kind != "cas" or (cas.expected is not None and facts.writer(cas.expected) is None):
            continue
        by_expected.setdefault(cas.expected, []).append(cas)
        witness = writes.newer_before(cas.invoke_ns, cas.expected)
        if witness is not None:
            flagged.add(cas.index)
            description = (
                f"cas from {cas.expected!r} succeeded, but {witness.kind} of {witness.value!r} had replaced that "
                "value before the cas began"
            )
            found.append(anomaly("lost-update", key, description, cas, witness))
    for expected, group in by_expected.items():
        if len(group) > 1 and not flagged.intersection(op.index for op in group):
            group.sort(key=lambda op: op.complete_ns or 0)
            description = f"{len(group)} cas from {expected!r} all succeeded; a value written once is replaced once"
            found.append(anomaly("lost-update", key, description, *group))
