"""check_watches: did every key-value watcher see each key's revisions in order, and none of them go missing?

A watcher (``kv.watch``) is an ordered consumer of the bucket's stream: it delivers each key's entries in revision
order, every one of them, across reconnects and node failures. The history's ``watch`` operations (one per entry a
watcher got, ``reader`` naming the watcher) are checked against each other and against the revisions the rest of
the history knows (the writes and compare-and-sets the server acknowledged, the reads that reported a revision).
What the checker reports, by kind:

- ``watch-out-of-order``: a watcher got a revision of a key lower than one of that key it had got before.
- ``watch-duplicate``: a watcher got the same revision of a key twice.
- ``watch-lost-update``: a watcher skipped a revision of a key that was stored: after the first revision of
  that key it got, and before the highest revision it got (of any key, since it reads the stream in order), a
  revision it never got; with ``to_end``, after that too, up to the last revision reported of the keys it
  watched (for a history whose watchers ran until they had everything). The bucket's own history limit
  excuses a skip: a watcher that fell behind by more than
  ``kept`` writes to one key cannot get the older ones (the stream dropped them), so a skipped revision counts
  only when fewer than ``kept`` newer writes of that key can have been stored before the watcher went past it.
- ``watch-divergent``: one revision held two different entries (a watcher and an acknowledged write, or two
  watchers, disagree on its key or value).

Only revisions somebody reported count as stored (a write whose outcome was unknown and that nobody saw may not
have happened), so a history whose writers record their revisions makes the check complete.
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Iterable
from typing import Any

import attrs

from ._anomalies import WATCH_ANOMALY_KINDS, Anomaly, WatchAnomalyKind, anomaly
from ._history import History, Operation, operations_and_events

__all__ = ["WatchCheck", "check_watches"]

_EXAMPLES = 3
_NEVER = 1 << 62  # the time of an operation that may still take effect: after everything


@attrs.frozen(kw_only=True)
class WatchCheck:
    """The verdict on every watcher of a history: ``valid`` when none has an anomaly. ``deliveries`` counts the
    entries each watcher got; ``excused`` how many revisions each skipped that the bucket's history limit
    explains (the check could not hold those against it); ``counts`` holds every kind of
    [`WATCH_ANOMALY_KINDS`][jetstream_sync.testing.WATCH_ANOMALY_KINDS] (zeros included)."""

    deliveries: dict[str, int]
    counts: dict[WatchAnomalyKind, int]
    anomalies: tuple[Anomaly, ...]
    origin_ns: int
    excused: dict[str, int] = attrs.field(factory=dict)

    @property
    def valid(self) -> bool:
        """True when no watcher has an anomaly."""
        return not self.anomalies

    def examples(self, kind: WatchAnomalyKind, limit: int = _EXAMPLES) -> list[Anomaly]:
        """The first ``limit`` anomalies of ``kind``, by time."""
        return [found for found in self.anomalies if found.kind == kind][:limit]

    def summary(self, examples: int = _EXAMPLES) -> str:
        """A report in a few lines: the verdict, counts, deliveries per watcher, and up to ``examples``
        anomalies per kind."""
        watchers = ", ".join(f"{reader} {n}" for reader, n in self.deliveries.items()) or "none"
        excused = ", ".join(f"{reader} {n}" for reader, n in self.excused.items() if n) or "none"
        lines = [
            f"watchers: {'valid' if self.valid else 'INVALID'} (entries: {watchers}; skips the bucket's history "
            f"limit explains: {excused})",
            "anomalies: " + ", ".join(f"{kind} {self.counts[kind]}" for kind in WATCH_ANOMALY_KINDS),
        ]
        for kind in WATCH_ANOMALY_KINDS:
            lines += [found.describe(self.origin_ns) for found in self.examples(kind, examples)]
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        """The verdict, counts and deliveries as JSON-ready values (for a results file)."""
        return {
            "valid": self.valid,
            "counts": dict(self.counts),
            "deliveries": dict(self.deliveries),
            "excused": dict(self.excused),
        }


def check_watches(
    history: History | Iterable[Operation], *, kept: int | None = None, to_end: bool = False
) -> WatchCheck:
    """Check the ``watch`` operations of a history (see the module docstring). ``kept``: how many revisions per
    key the bucket keeps (its ``history``; None when it drops none), which excuses a watcher that fell that far
    behind for the revisions it could not get. ``to_end``: the watchers ran until they had every write, so what
    they lack at the end is lost too."""
    operations, _events = operations_and_events(history)
    known = _Revisions(operations)
    found: list[Anomaly] = []
    known.divergent(found)
    watches: dict[str, list[Operation]] = {}
    for op in operations:
        if op.kind == "watch":
            watches.setdefault(op.reader or "", []).append(op)
    excused: dict[str, int] = {}
    for reader, ops in sorted(watches.items()):
        ops.sort(key=lambda op: (op.invoke_ns, op.index))
        _order(reader, ops, found)
        excused[reader] = _skips(reader, ops, known, kept, to_end, found)
    tally = Counter(found_one.kind for found_one in found)
    return WatchCheck(
        deliveries={reader: len(ops) for reader, ops in sorted(watches.items())},
        counts={kind: tally[kind] for kind in WATCH_ANOMALY_KINDS},
        anomalies=tuple(sorted(found, key=lambda a: a.time_ns)),
        origin_ns=min((op.invoke_ns for op in operations), default=0),
        excused=excused,
    )


class _Revisions:
    """Every revision the history reports, with what it holds (key and value) and the first evidence of it;
    and each key's writes that may have taken effect, by invocation (for the history-limit excuse)."""

    def __init__(self, operations: list[Operation]) -> None:
        self.entries: dict[int, dict[tuple[str, str | None], Operation]] = {}
        for op in operations:
            if op.outcome != "ok" or op.revision is None:
                continue
            if op.kind in ("write", "cas"):
                held = op.value
            elif op.kind in ("read", "watch"):
                held = op.result
            else:
                continue
            self.entries.setdefault(op.revision, {}).setdefault((op.key, held), op)
        # A write of unknown outcome that somebody saw stored has the revision it was seen at (when its value
        # was written only once, so the sighting can only be its own).
        seen_at = {(key, value): revision for revision, held in self.entries.items() for key, value in held}
        once = Counter((op.key, op.value) for op in operations if op.kind in ("write", "cas") and op.outcome != "fail")
        # key -> (invocation, revision if known) of each of its writes that may have taken effect
        self.writes: dict[str, list[tuple[int, int | None]]] = {}
        written: set[int] = set()
        for op in operations:
            if op.kind not in ("write", "cas") or op.outcome == "fail":
                continue
            revision = op.revision if op.outcome == "ok" else None
            if revision is None and once[(op.key, op.value)] == 1:
                revision = seen_at.get((op.key, op.value))
            self.writes.setdefault(op.key, []).append((op.invoke_ns, revision))
            if revision is not None:
                written.add(revision)
        self.of_key: dict[str, list[int]] = {}
        for revision, entries in self.entries.items():
            for key, _value in entries:
                self.of_key.setdefault(key, []).append(revision)
        for revisions in self.of_key.values():
            revisions.sort()
        self.unwritten = {  # key -> revisions only readers or watchers reported (no recorded write is theirs)
            key: [r for r in revisions if r not in written] for key, revisions in self.of_key.items()
        }

    def divergent(self, found: list[Anomaly]) -> None:
        """Revisions reported with two different entries."""
        for revision, held in sorted(self.entries.items()):
            if len(held) > 1:
                shown = ", ".join(f"{key}={value!r}" for key, value in held)
                description = f"revision {revision} was reported as {len(held)} different entries: {shown}"
                found.append(anomaly("watch-divergent", next(iter(held))[0], description, *held.values()))

    def newer_before(self, key: str, revision: int, time_ns: int) -> int:
        """How many revisions of ``key`` above ``revision`` may have been stored before ``time_ns``, counted
        generously: the writes invoked before it whose revision (its own, or the one its value was seen at) is
        higher or unknown (an unknown outcome nobody saw may have landed anywhere), and every higher revision that
        only readers reported (its write is not in the history, so when it was stored is not known)."""
        writes = sum(1 for t, r in self.writes.get(key, ()) if t < time_ns and (r is None or r > revision))
        others = self.unwritten.get(key, [])
        return writes + len(others) - bisect.bisect_right(others, revision)


def _order(reader: str, ops: list[Operation], found: list[Anomaly]) -> None:
    """Each key's revisions must grow from one delivery to the next."""
    latest: dict[str, Operation] = {}
    seen: dict[tuple[str, int], Operation] = {}
    for op in ops:
        revision = op.revision or 0
        earlier = seen.get((op.key, revision))
        if earlier is not None:
            description = f"{reader} got revision {revision} of {op.key!r} twice"
            found.append(anomaly("watch-duplicate", op.key, description, op, earlier))
            continue
        seen[(op.key, revision)] = op
        last = latest.get(op.key)
        if last is not None and (last.revision or 0) > revision:
            description = f"{reader} got revision {revision} of {op.key!r} after revision {last.revision}"
            found.append(anomaly("watch-out-of-order", op.key, description, op, last))
            continue
        latest[op.key] = op


def _skips(
    reader: str, ops: list[Operation], known: _Revisions, kept: int | None, to_end: bool, found: list[Anomaly]
) -> int:
    """Revisions of a key the watcher went past without getting them (see the module docstring); returns how
    many skips the history limit excused."""
    first: dict[str, int] = {}
    got: dict[str, set[int]] = {}
    for op in ops:
        revision = op.revision or 0
        first[op.key] = min(first.get(op.key, revision), revision)
        got.setdefault(op.key, set()).add(revision)
    excused = 0
    if not ops:
        return excused
    delivered = sorted((op.revision or 0, op.invoke_ns) for op in ops)
    end = delivered[-1][0]
    if to_end:
        end = max(end, *(known.of_key[key][-1] for key in first if known.of_key.get(key)))
    for key, start in sorted(first.items()):
        for revision in known.of_key.get(key, []):
            if not start < revision <= end or revision in got[key]:
                continue
            # When the watcher went past it: the first delivery of a higher revision (never: the end).
            after = bisect.bisect_right(delivered, (revision, _NEVER))
            past = delivered[after][1] if after < len(delivered) else _NEVER
            if kept is not None and known.newer_before(key, revision, past) >= kept:
                excused += 1  # the bucket may have dropped it before the watcher got there
                continue
            evidence = next(iter(known.entries[revision].values()))
            description = (
                f"{reader} went past revision {revision} of {key!r} without getting it"
                if past != _NEVER
                else f"{reader} never got revision {revision} of {key!r} (the last it got was {delivered[-1][0]})"
            )
            found.append(anomaly("watch-lost-update", key, description, evidence))
    return excused
