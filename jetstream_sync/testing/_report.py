"""check_all: every checker on one history, and a table of the results in Jepsen's terms.

A run records its queue (publishes, receives), its key-value registers (reads, writes, compare-and-sets) and its
watchers in one [`History`][jetstream_sync.testing.History]; [`check_all`][jetstream_sync.testing.check_all] runs
``check_queue``, ``check_history`` and ``check_watches`` on it and
[`HistoryChecks.table`][jetstream_sync.testing.HistoryChecks.table] puts the answers side by side, one row per stream,
one for the registers and one for the watchers, in the columns Jepsen's queue checker reports: how many operations were
ok, failed or unknown (``info``), and how many messages were lost, duplicated (with how many of those were not
expected), out of order and unexpected (read but never written). Kinds outside those columns (an ordered reader's gap, a
sequence holding two messages, a stale read...) are named in the last-but-one column when they occur.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Any

import attrs

from ._anomalies import EXPECTED_QUEUE_KINDS, AnomalyKind, QueueAnomalyKind
from ._checker import DEFAULT_TIME_LIMIT, CheckResult, check_history
from ._history import REGISTER_KINDS, History, Operation
from ._queue_checker import QueueCheck, StreamCheck, check_queue
from ._watch_checker import WatchCheck, check_watches

__all__ = ["HistoryChecks", "check_all"]

_COLUMNS = (
    "what",
    "ok",
    "fail",
    "info",
    "lost",
    "duplicated (unexpected)",
    "out of order",
    "unexpected",
    "other",
    "verdict",
)
_OTHER_QUEUE: tuple[QueueAnomalyKind, ...] = ("ordered-gap", "divergent", "refused-but-stored")
_OTHER_KV: tuple[AnomalyKind, ...] = ("stale-read", "refused-but-applied", "lost-update", "unclassified")


@attrs.frozen(kw_only=True)
class HistoryChecks:
    """The three verdicts on one history: ``queue`` ([`check_queue`][jetstream_sync.testing.check_queue]), ``kv``
    ([`check_history`][jetstream_sync.testing.check_history], the registers' linearizability) and ``watches``
    ([`check_watches`][jetstream_sync.testing.check_watches]). ``register_counts`` counts the register operations by
    outcome. ``valid`` is True when all three hold, False when one fails, None when the linearizability search could not
    decide in its time."""

    queue: QueueCheck
    kv: CheckResult
    watches: WatchCheck
    register_counts: Mapping[str, int]

    @property
    def valid(self) -> bool | None:
        """True when the queue and the watchers are valid and the registers linearizable; None when the
        registers could not be decided (and nothing else failed)."""
        if not (self.queue.valid and self.watches.valid) or self.kv.valid is False:
            return False
        return self.kv.valid

    def table(self) -> str:
        """The results as a Markdown table, one row per stream, then the registers and the watchers (rows with
        no operations are left out)."""
        rows = [_stream_row(stream) for stream in self.queue.streams.values()]
        if self.kv.operations:
            rows.append(self._register_row())
        if self.watches.deliveries:
            rows.append(self._watch_row())
        lines = ["| " + " | ".join(_COLUMNS) + " |", "|---|" + "---:|" * (len(_COLUMNS) - 3) + "---|---|"]
        lines += ["| " + " | ".join(row) + " |" for row in rows]
        return "\n".join(lines)

    def _register_row(self) -> list[str]:
        counts = self.kv.counts
        other = _named({kind: counts[kind] for kind in _OTHER_KV})
        verdict = {"ok": "linearizable", "fail": "NOT linearizable"}.get(self.kv.verdict, "unknown")
        outcomes = [self.register_counts.get(outcome, 0) for outcome in ("ok", "fail", "info")]
        lost, garbage = counts["lost-write"], counts["garbage-read"]
        return [
            f"kv registers ({len(self.kv.keys)} keys)",
            *map(_n, outcomes),
            _n(lost),
            "-",
            "-",
            _n(garbage),
            other,
            verdict,
        ]

    def _watch_row(self) -> list[str]:
        counts = self.watches.counts
        entries = sum(self.watches.deliveries.values())
        duplicated = counts["watch-duplicate"]
        return [
            f"kv watchers ({len(self.watches.deliveries)})",
            _n(entries),
            "0",
            "0",
            _n(counts["watch-lost-update"]),
            f"{_n(duplicated)} ({_n(duplicated)})",
            _n(counts["watch-out-of-order"]),
            "0",
            _named({"watch-divergent": counts["watch-divergent"]}),
            "valid" if self.watches.valid else "INVALID",
        ]

    def summary(self) -> str:
        """The table, then each checker's own summary (its anomalies with their operations)."""
        return "\n".join([self.table(), self.queue.summary(), self.kv.summary(), self.watches.summary()])

    def to_json(self) -> dict[str, Any]:
        """Every verdict and count as JSON-ready values (for a results file)."""
        return {
            "valid": self.valid,
            "queue": self.queue.to_json(),
            "kv": self.kv.to_json(),
            "watches": self.watches.to_json(),
            "register_counts": dict(self.register_counts),
        }


def _stream_row(stream: StreamCheck) -> list[str]:
    duplicated = stream.count("duplicate") + sum(stream.count(kind) for kind in EXPECTED_QUEUE_KINDS)
    return [
        f"stream {stream.stream}",
        *(_n(stream.publishes.get(outcome, 0)) for outcome in ("ok", "fail", "info")),
        _n(stream.count("lost")),
        f"{_n(duplicated)} ({_n(stream.count('duplicate'))})",
        _n(stream.count("out-of-order")),
        _n(stream.count("unexpected")),
        _named({kind: stream.count(kind) for kind in _OTHER_QUEUE}),
        "valid" if stream.valid else "INVALID",
    ]


def _n(number: int) -> str:
    return f"{number:,}"


def _named(counts: Mapping[str, int]) -> str:
    """``ordered-gap 2, divergent 1`` for the kinds that occurred; ``0`` when none did."""
    return ", ".join(f"{kind} {_n(n)}" for kind, n in counts.items() if n) or "0"


def check_all(
    history: History | Iterable[Operation],
    *,
    time_limit: float = DEFAULT_TIME_LIMIT,
    kept: int | None = None,
    watchers_to_end: bool = False,
    deleted: Mapping[str, Collection[int]] | None = None,
) -> HistoryChecks:
    """Run every checker on ``history``: ``time_limit`` goes to [`check_history`][jetstream_sync.testing.check_history]
    (seconds of search per key), ``kept`` and ``watchers_to_end`` to
    [`check_watches`][jetstream_sync.testing.check_watches] (the bucket's history per key; whether the watchers ran
    until they had everything), ``deleted`` to [`check_queue`][jetstream_sync.testing.check_queue] (sequences deleted on
    purpose, per stream)."""
    if not isinstance(history, History):
        history = History(list(history))
    counts: dict[str, int] = {}
    for op in history.operations:
        if op.kind in REGISTER_KINDS:
            counts[op.outcome] = counts.get(op.outcome, 0) + 1
    return HistoryChecks(
        queue=check_queue(history, deleted=deleted),
        kv=check_history(history, time_limit=time_limit),
        watches=check_watches(history, kept=kept, to_end=watchers_to_end),
        register_counts=counts,
    )
