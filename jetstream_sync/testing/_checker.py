"""check_history: is a recorded key-value history linearizable, and if not, what went wrong.

It judges the register operations (``read``, ``write``, ``cas``) of a history and leaves the rest to the other
checkers (``check_queue``, ``check_watches``), so one history can hold a whole run.

Each key is checked on its own (linearizability is local), as a register with read, write and compare-and-set,
by the search in ``_linearizable.py`` within a time budget per key: a key the search cannot
decide in time is reported ``unknown``, never waited for. The named rules of ``_anomalies.py`` run on every key
too: they also read the revisions the server reported, which the register does not model (a revision names one
write, and revisions grow in the order writes take effect), so a key whose values alone can be ordered still
fails when its revisions cannot (a write acknowledged at a revision the server gave another value: a lost
write), or when the search ran out of time on a key a rule already convicts. A key that cannot be linearized is
explained by ``_anomalies.py``: the first operation nothing can explain, a minimal window of operations that
shows the violation, and the named anomalies with their operations and times. The result counts anomalies per
kind, which is what a run under faults reports (and what the guide's figures come from).
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any, Literal

import attrs

from ..errors import InvalidArgumentError
from ._anomalies import ANOMALY_KINDS, Anomaly, AnomalyKind, classify, explain
from ._history import REGISTER_KINDS, History, HistoryEvent, Operation, operations_and_events
from ._linearizable import prepare, search

__all__ = ["CheckResult", "KeyResult", "Verdict", "check_history"]

logger = logging.getLogger("jetstream_sync.testing")

Verdict = Literal["ok", "fail", "unknown"]

#: seconds of search per key, for the verdict and again for the explanation of a key that fails
DEFAULT_TIME_LIMIT = 30.0
_EXAMPLES = 3


@attrs.frozen(kw_only=True)
class KeyResult:
    """The verdict on one key: ``ok`` (linearizable), ``fail`` (not: ``culprit`` is the first operation nothing
    can explain, ``window`` a minimal set of operations that cannot be linearized together) or ``unknown``
    (``reason`` says why, e.g. the time budget ran out). ``anomalies`` are the named ones found on a key that is
    not ``ok``; ``seconds`` is how long the check of this key took."""

    key: str
    verdict: Verdict
    operations: int
    culprit: Operation | None = None
    window: tuple[Operation, ...] = ()
    anomalies: tuple[Anomaly, ...] = ()
    seconds: float = 0.0
    reason: str = ""


@attrs.frozen(kw_only=True)
class CheckResult:
    """The verdict on a whole history: ``fail`` when a key cannot be linearized, ``unknown`` when none fails but
    some could not be decided in time, ``ok`` otherwise. ``counts`` holds every anomaly kind (zeros included);
    ``origin_ns`` is the history's first invocation, from which reports measure time."""

    verdict: Verdict
    keys: Mapping[str, KeyResult]
    counts: Mapping[AnomalyKind, int]
    operations: int
    origin_ns: int
    events: tuple[HistoryEvent, ...] = ()

    @property
    def valid(self) -> bool | None:
        """True when linearizable, False when not, None when unknown (Jepsen's ``:valid?``)."""
        return {"ok": True, "fail": False}.get(self.verdict)

    @property
    def anomalies(self) -> list[Anomaly]:
        """Every anomaly found, by the time it showed."""
        found = [anomaly for result in self.keys.values() for anomaly in result.anomalies]
        return sorted(found, key=lambda anomaly: anomaly.time_ns)

    def examples(self, kind: AnomalyKind, limit: int = _EXAMPLES) -> list[Anomaly]:
        """The first ``limit`` anomalies of ``kind``, by time."""
        return [anomaly for anomaly in self.anomalies if anomaly.kind == kind][:limit]

    def summary(self, examples: int = _EXAMPLES) -> str:
        """A report in a few lines: the verdict, counts per anomaly kind, each key that is not ``ok`` with its
        culprit and window, and up to ``examples`` anomalies per kind with the faults noted around them."""
        verdicts = [result.verdict for result in self.keys.values()]
        lines = [
            f"linearizability: {self.verdict} ({len(self.keys)} keys: {verdicts.count('ok')} ok, "
            f"{verdicts.count('fail')} fail, {verdicts.count('unknown')} unknown; {self.operations} operations)",
            "anomalies: " + ", ".join(f"{kind} {self.counts[kind]}" for kind in ANOMALY_KINDS),
        ]
        for result in self.keys.values():
            if result.verdict == "ok":
                continue
            lines.append(f"key {result.key}: {result.verdict} after {result.seconds:.2f}s {result.reason}".rstrip())
            if result.culprit is not None:
                lines.append(f"  first operation nothing explains: {result.culprit.describe(self.origin_ns)}")
            if result.window:
                lines.append(f"  smallest window that cannot be linearized ({len(result.window)} operations):")
                lines += [f"    {op.describe(self.origin_ns)}" for op in result.window]
        for kind in ANOMALY_KINDS:
            for anomaly in self.examples(kind, examples):
                lines.append(anomaly.describe(self.origin_ns))
                lines += [f"    around it: {event}" for event in self._events_near(anomaly.time_ns)]
        return "\n".join(lines)

    def _events_near(self, time_ns: int, seconds: float = 10.0) -> list[str]:
        """The events noted in the ``seconds`` before ``time_ns``, as report lines."""
        window = int(seconds * 1e9)
        return [
            f"{(e.time_ns - self.origin_ns) / 1e9:.3f}s {e.what} {e.detail}".rstrip()
            for e in self.events
            if time_ns - window <= e.time_ns <= time_ns
        ]

    def to_json(self) -> dict[str, Any]:
        """The verdict, counts and per-key verdicts as JSON-ready values (for a results file)."""
        return {
            "verdict": self.verdict,
            "operations": self.operations,
            "counts": dict(self.counts),
            "keys": {key: {"verdict": r.verdict, "operations": r.operations} for key, r in self.keys.items()},
        }


def check_history(
    history: History | Iterable[Operation], *, time_limit: float = DEFAULT_TIME_LIMIT, explain_failures: bool = True
) -> CheckResult:
    """Check the register operations of a history for linearizability, key by key (see the module docstring).

    ``time_limit``: seconds of search per key; a key not decided in that time is ``unknown``, and a failing
    key's explanation (culprit and window) gets as long again. ``explain_failures=False`` skips the window
    search (the named anomalies are still classified).
    """
    if isinstance(time_limit, bool) or not isinstance(time_limit, (int, float)) or time_limit <= 0:
        raise InvalidArgumentError("time_limit", f"must be a positive number of seconds, got {time_limit!r}")
    everything, events = operations_and_events(history)
    operations = [op for op in everything if op.kind in REGISTER_KINDS]
    by_key: dict[str, list[Operation]] = {}
    for op in operations:
        by_key.setdefault(op.key, []).append(op)
    results = {key: _check_key(key, ops, time_limit, explain_failures) for key, ops in sorted(by_key.items())}
    found = Counter(anomaly.kind for result in results.values() for anomaly in result.anomalies)
    counts = {kind: found[kind] for kind in ANOMALY_KINDS}
    verdicts = {result.verdict for result in results.values()}
    verdict: Verdict = "fail" if "fail" in verdicts else "unknown" if "unknown" in verdicts else "ok"
    return CheckResult(
        verdict=verdict,
        keys=results,
        counts=counts,
        operations=len(operations),
        origin_ns=min((op.invoke_ns for op in operations), default=0),
        events=events,
    )


def _check_key(key: str, ops: list[Operation], time_limit: float, explain_failures: bool) -> KeyResult:
    started = time.monotonic()
    ops.sort(key=lambda op: op.invoke_ns)
    linearizable = search(prepare(ops), started + time_limit)
    anomalies = classify(key, ops)
    if linearizable and not anomalies:
        return KeyResult(key=key, verdict="ok", operations=len(ops), seconds=time.monotonic() - started)
    if linearizable is None:
        logger.warning("history check: key %r not decided within %gs (%d operations)", key, time_limit, len(ops))
        return KeyResult(
            key=key,
            verdict="fail" if anomalies else "unknown",
            operations=len(ops),
            anomalies=tuple(anomalies),
            seconds=time.monotonic() - started,
            reason=f"(the search did not end within the time limit of {time_limit:g}s)",
        )
    if linearizable:  # the values can be ordered, but not as the revisions the server reported say
        return KeyResult(
            key=key,
            verdict="fail",
            operations=len(ops),
            anomalies=tuple(anomalies),
            seconds=time.monotonic() - started,
            reason="(the values alone can be linearized; the revisions reported cannot)",
        )
    culprit, window = explain(ops, time.monotonic() + time_limit) if explain_failures else (None, ())
    if not anomalies:
        shown = culprit or max(ops, key=lambda op: op.complete_ns or op.invoke_ns)
        anomalies = [
            Anomaly(
                kind="unclassified",
                key=key,
                description="no named anomaly explains it; see the window",
                operations=window or (shown,),
                time_ns=shown.complete_ns or shown.invoke_ns,
            )
        ]
    return KeyResult(
        key=key,
        verdict="fail",
        operations=len(ops),
        culprit=culprit,
        window=window,
        anomalies=tuple(anomalies),
        seconds=time.monotonic() - started,
    )
