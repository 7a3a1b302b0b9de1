"""The linearizability search for one key: a register with read, write and compare-and-set, checked with the
Wing-Gong-Lowe algorithm and its memoization (Lowe's "configuration cache", as in Knossos and Porcupine).

Why one key at a time: linearizability is local (Herlihy and Wing's P-compositionality), so a history of a
key-value store is linearizable exactly when each key's sub-history is; the search, exponential in the worst
case, then runs on histories a fraction of the size.

The search (``search``) walks the operations in time order as a doubly linked list of call and return entries:
it tries to linearize a pending call (apply it to the model, lift it out of the list, start again from the
front), and backtracks when it meets the return of an operation it has not linearized. The cache of
(linearized set, model state) pairs prunes every configuration reached twice, which is what makes realistic
histories with a handful of concurrent clients take linear time. It is bounded by a deadline: past it the
answer is "unknown", never a hang.

Before the search, ``prepare`` simplifies without changing the answer:

- ``fail`` operations did not happen and reads that did not complete say nothing: both are dropped.
- An ``info`` write or cas (it may or may not have happened) stays open to the end of the history. One whose
  value nothing reads or expects is dropped: linearized or not, nothing can tell.
- When exactly one operation writes a value, every operation that read (or compare-and-set from) that value
  must come after it; so the write must be linearized before the earliest return of those readers. An ``info``
  write whose value a completed operation read is therefore known to have happened, by that time: it becomes a
  write that must be linearized, with that return. This is the fast path that workloads writing unique values
  get: no open operation is left, and the search no longer branches on "happened or not".

The same preparation, given a cut time and a set of operations to *relax* (to treat as ``info``), gives the
checker its explanations: a history cut at time T (operations invoked later dropped, those completing later
open) is a prefix, linearizable whenever the whole is; relaxing an operation only allows more linearizations.
So a prefix or relaxation that still cannot be linearized is a smaller witness of the same violation
(``_anomalies.py`` searches for the smallest one).
"""

from __future__ import annotations

import time
from collections.abc import Collection, Sequence
from typing import NamedTuple

from ._history import Operation

__all__ = ["Prepared", "prepare", "search"]

#: the return time of an open operation: after everything
_OPEN = 1 << 62
#: how many search steps between two looks at the clock
_CLOCK_EVERY = 2048


class Prepared(NamedTuple):
    """An operation as the search sees it: ``must`` be linearized (by ``ret``) or may be (open, ``ret`` _OPEN)."""

    kind: str
    value: str | None
    expected: str | None
    result: str | None
    call: int
    ret: int
    must: bool
    source: Operation


def prepare(ops: Sequence[Operation], *, relaxed: Collection[int] = (), cut_ns: int | None = None) -> list[Prepared]:
    """The operations of one key ready for `search` (see the module docstring). ``relaxed`` holds the
    ``index`` of operations to treat as ``info``; ``cut_ns`` cuts the history at that time."""
    kept: list[Prepared] = []
    for op in ops:
        if op.outcome == "fail" or (cut_ns is not None and op.invoke_ns > cut_ns):
            continue
        done = (
            op.outcome == "ok"
            and op.index not in relaxed
            and op.complete_ns is not None
            and (cut_ns is None or op.complete_ns <= cut_ns)
        )
        if op.kind == "read" and not done:
            continue  # a read that may not have happened constrains nothing
        ret = op.complete_ns if done and op.complete_ns is not None else _OPEN
        kept.append(Prepared(op.kind, op.value, op.expected, op.result, op.invoke_ns, ret, done, op))
    return _simplify(kept)


def _simplify(ops: list[Prepared]) -> list[Prepared]:
    """Drop the open writes nothing observes, and pin the uniquely written values' writers before their first
    observer's return (module docstring); repeated until nothing changes, since each step can enable another."""
    while True:
        writers: dict[str, int] = {}
        for op in ops:
            if op.kind != "read" and op.value is not None:
                writers[op.value] = writers.get(op.value, 0) + 1
        referenced: set[str | None] = set()
        first_return: dict[str, int] = {}  # value -> the earliest return of a must-operation observing it
        for op in ops:
            seen = op.result if op.kind == "read" else op.expected if op.kind == "cas" else None
            if op.kind == "write" or seen is None:
                continue
            referenced.add(seen)
            if op.must and op.ret < first_return.get(seen, _OPEN):
                first_return[seen] = op.ret
        changed = False
        result: list[Prepared] = []
        for op in ops:
            value = op.value
            if op.kind == "read" or value is None:
                result.append(op)
                continue
            if not op.must and value not in referenced:
                changed = True  # open and unobserved: whether it happened cannot matter
                continue
            deadline = first_return.get(value, _OPEN)
            if writers.get(value) == 1 and deadline < op.ret:
                result.append(op._replace(must=True, ret=deadline))
                changed = True
            else:
                result.append(op)
        ops = result
        if not changed:
            return ops


def _step(state: str | None, op: Prepared) -> tuple[bool, str | None]:
    """The register: whether ``op`` may take effect in ``state``, and the state after it."""
    if op.kind == "read":
        return state == op.result, state
    if op.kind == "write":
        return True, op.value
    return state == op.expected, op.value  # cas: only when the register holds the expected value


def search(ops: Sequence[Prepared], deadline: float, initial: str | None = None) -> bool | None:
    """Wing-Gong-Lowe with memoization: True when ``ops`` (one key, prepared) can be linearized from ``initial``,
    False when they cannot, None when ``deadline`` (time.monotonic()) passed first."""
    must_left = sum(op.must for op in ops)
    if must_left == 0:
        return True
    # Entries 1..2n in time order; 0 is the head. A call sorts before a return at the same instant: concurrent
    # is the reading that accuses nobody wrongly.
    order = sorted(
        [(op.call, 0, i) for i, op in enumerate(ops)] + [(op.ret, 1, i) for i, op in enumerate(ops)],
    )
    size = len(order) + 1
    is_call = [False] * size
    op_of = [0] * size
    match = [0] * size  # call entry -> its return entry
    call_entry = [0] * len(ops)
    for position, (_t, kind, i) in enumerate(order, 1):
        op_of[position] = i
        if kind == 0:
            is_call[position] = True
            call_entry[i] = position
        else:
            match[call_entry[i]] = position
    nxt = [*range(1, size), -1]
    prv = [-1, *range(size - 1)]

    def lift(e: int) -> None:
        for x in (e, match[e]):
            nxt[prv[x]] = nxt[x]
            if nxt[x] != -1:
                prv[nxt[x]] = prv[x]

    def unlift(e: int) -> None:
        for x in (match[e], e):
            nxt[prv[x]] = x
            if nxt[x] != -1:
                prv[nxt[x]] = x

    cache: set[tuple[int, str | None]] = set()
    stack: list[tuple[int, str | None]] = []
    state = initial
    linearized = 0
    entry = nxt[0]
    steps = 0
    while must_left:
        steps += 1
        if steps % _CLOCK_EVERY == 0 and time.monotonic() > deadline:
            return None
        if entry == -1:  # cannot happen: a must-operation's return entry is always left; defensive
            return False
        i = op_of[entry]
        if is_call[entry]:
            allowed, after = _step(state, ops[i])
            if allowed:
                bits = linearized | (1 << i)
                if (bits, after) not in cache:
                    cache.add((bits, after))
                    stack.append((entry, state))
                    state, linearized = after, bits
                    must_left -= ops[i].must
                    lift(entry)
                    entry = nxt[0]
                    continue
            entry = nxt[entry]
            continue
        # The return of an operation not linearized yet: undo the latest choice and try the next call after it.
        if not ops[i].must:
            return True  # only open operations are left (their returns sort last)
        if not stack:
            return False
        entry, state = stack.pop()
        i = op_of[entry]
        linearized &= ~(1 << i)
        must_left += ops[i].must
        unlift(entry)
        entry = nxt[entry]
    return True
