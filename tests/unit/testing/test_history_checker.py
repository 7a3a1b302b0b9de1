"""The history recorder and the linearizability checker, on hand-made histories: valid ones, each named anomaly,
open (info) and failed operations, concurrency, the time budget, and the search against a brute-force checker on
random small histories whose values repeat (so the general search is tested, not only the unique-value fast path).
"""

from __future__ import annotations

import itertools
import random
import threading

import attrs
import pytest

from jetstream_sync.errors import InvalidArgumentError
from jetstream_sync.testing import ANOMALY_KINDS, History, Operation, check_history
from jetstream_sync.testing._linearizable import prepare, search

MS = 1_000_000  # the hand-made histories count in milliseconds


class Builder:
    """Operations by hand: times in milliseconds, ``ret=None`` for an operation that never completed."""

    def __init__(self) -> None:
        self.ops: list[Operation] = []

    def add(self, kind, call, ret, *, outcome="ok", value=None, expected=None, result=None, key="k", p=0, rev=None):
        op = Operation(
            index=len(self.ops),
            process=p,
            kind=kind,
            key=key,
            value=value,
            expected=expected,
            invoke_ns=call * MS,
            complete_ns=None if ret is None else ret * MS,
            outcome=outcome if ret is not None else "info",
            result=result,
            revision=rev,
        )
        self.ops.append(op)
        return op

    def write(self, value, call, ret, **kw):
        return self.add("write", call, ret, value=value, **kw)

    def read(self, result, call, ret, **kw):
        return self.add("read", call, ret, result=result, **kw)

    def cas(self, expected, value, call, ret, **kw):
        return self.add("cas", call, ret, value=value, expected=expected, **kw)

    def check(self, **kw):
        return check_history(self.ops, **kw)


# -- the recorder ---------------------------------------------------------------------------------------------


def test_the_recorder_keeps_invocation_order_outcomes_and_times():
    history = History()
    read = history.invoke(1, "read", "k")
    write = history.invoke(2, "write", "k", value="a")
    cas = history.invoke(3, "cas", "k", value="b", expected="a")
    lost = history.invoke(4, "write", "k", value="c")
    assert history.pending == 4
    write.ok(revision=7)
    read.ok("a", revision=7)
    cas.fail("wrong last sequence")
    ops = history.operations
    assert [op.kind for op in ops] == ["read", "write", "cas", "write"]
    assert [op.outcome for op in ops] == ["ok", "ok", "fail", "info"]  # the pending one counts as open
    assert ops[3].complete_ns is None and ops[3].error == "pending" and lost.operation.value == "c"
    assert ops[0].result == "a" and ops[0].revision == 7 and ops[1].revision == 7
    assert all(op.complete_ns is None or op.complete_ns >= op.invoke_ns for op in ops)
    assert history.counts() == {"cas fail": 1, "read ok": 1, "write info": 1, "write ok": 1}
    assert history.new_process() == 5


def test_an_operation_completes_once_and_bad_invocations_are_refused():
    history = History()
    pending = history.invoke(0, "write", "k", value="a")
    pending.info(TimeoutError("no answer"))
    with pytest.raises(InvalidArgumentError, match="completed already"):
        pending.ok()
    assert history.operations[0].error == "TimeoutError: no answer"
    with pytest.raises(InvalidArgumentError, match="needs the value"):
        history.invoke(0, "write", "k")
    with pytest.raises(InvalidArgumentError, match="only a cas"):
        history.invoke(0, "write", "k", value="a", expected="b")
    with pytest.raises(InvalidArgumentError, match="only a read"):
        history.invoke(0, "write", "k", value="b").ok("x")


def test_the_recorder_is_thread_safe():
    history = History()

    def run(process: int) -> None:
        for i in range(500):
            history.invoke(process, "write", f"k{i % 3}", value=f"{process}-{i}").ok(revision=i + 1)

    threads = [threading.Thread(target=run, args=(p,)) for p in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    ops = history.operations
    assert len(ops) == 4000 and [op.index for op in ops] == list(range(4000))
    assert all(op.outcome == "ok" for op in ops) and history.pending == 0
    assert len({op.value for op in ops}) == 4000


def test_a_history_saves_and_loads_as_json_lines(tmp_path):
    history = History()
    history.invoke(0, "write", "k", value="a").ok(revision=1)
    history.invoke(1, "cas", "k", value="b", expected="a").info("timeout")
    history.invoke(2, "read", "k").ok("a", revision=1)
    history.note("partition", "n2")
    path = history.save(tmp_path / "history.jsonl")
    assert len(path.read_text().splitlines()) == 4
    loaded = History.load(path)
    assert loaded.operations == history.operations
    assert [(e.what, e.detail) for e in loaded.events] == [("partition", "n2")]
    assert check_history(loaded).verdict == "ok"
    (tmp_path / "bad.jsonl").write_text(path.read_text() + '{"type": "op", "kind": "read"}\n')
    with pytest.raises(InvalidArgumentError, match="line 5"):
        History.load(tmp_path / "bad.jsonl")


# -- valid histories ------------------------------------------------------------------------------------------


def test_sequential_and_concurrent_histories_that_are_linearizable():
    b = Builder()
    b.read(None, 0, 1)  # nothing written yet
    b.write("a", 2, 3)
    b.read("a", 4, 5)
    b.cas("a", "b", 6, 7)
    b.read("b", 8, 9)
    # a write concurrent with two reads: the first may see it, the second, starting after the first, too
    b.write("c", 10, 20, p=1)
    b.read("b", 11, 12, p=2)
    b.read("c", 13, 14, p=3)
    b.read("c", 15, 16, p=2)
    # a read that returns before the write of what it read returns: the write took effect before it
    b.write("d", 21, 40, p=1)
    b.read("d", 22, 23, p=2)
    result = b.check()
    assert result.verdict == "ok" and result.valid is True
    assert result.counts == dict.fromkeys(ANOMALY_KINDS, 0)
    assert result.keys["k"].operations == 11


def test_open_and_failed_operations():
    b = Builder()
    b.write("a", 0, 1)
    b.write("b", 2, None)  # timed out, then read: it happened
    b.read("b", 5, 6)
    b.write("x", 7, None)  # timed out, never seen: may not have happened
    b.read("b", 8, 9)
    b.cas("b", "c", 10, 11, outcome="fail")  # refused, and indeed never seen
    b.read("b", 12, 13)
    b.read("zzz", 14, None)  # a read that never completed says nothing
    b.read("qqq", 15, 16, outcome="fail")
    b.cas("b", "d", 17, None)  # an open cas, seen later
    b.read("d", 30, 31)
    assert b.check().verdict == "ok"


def test_an_open_write_may_take_effect_long_after_its_call():
    b = Builder()
    b.write("a", 0, None)
    b.write("b", 1, 2)
    b.read("b", 3, 4)
    b.read("a", 100, 101)  # the open write landed late
    assert b.check().verdict == "ok"


def test_keys_are_checked_on_their_own():
    b = Builder()
    b.write("a", 0, 1, key="x")
    b.write("b", 2, 3, key="x")
    b.read("a", 4, 5, key="x")
    b.read("b", 6, 7, key="x")
    b.write("a", 0, 1, key="y")  # the same value on another key is another register
    b.read("a", 4, 5, key="y")
    result = b.check()
    assert result.verdict == "fail"
    assert result.keys["x"].verdict == "fail" and result.keys["y"].verdict == "ok"


# -- anomalies ------------------------------------------------------------------------------------------------


def test_a_stale_read_is_found_with_its_window_and_times():
    b = Builder()
    b.write("a", 0, 1)
    b.read("a", 2, 3, p=1)
    b.read("a", 2, 3, p=2)  # nothing to do with the violation: not in the window
    newer = b.write("b", 4, 5)
    stale = b.read("a", 6, 7, p=1)
    b.read("b", 8, 9, p=2)  # b was not lost: the read at 6 was stale
    result = b.check()
    assert result.verdict == "fail" and result.valid is False
    assert result.counts["stale-read"] == 1 and sum(result.counts.values()) == 1
    key = result.keys["k"]
    assert key.culprit == stale
    assert [op.index for op in key.window] == [0, 3, 4]  # write a, write b, the stale read
    (anomaly,) = result.examples("stale-read")
    assert anomaly.operations[:2] == (stale, newer) and anomaly.time_ns == 7 * MS
    assert "'b' had completed before the read began" in anomaly.description
    assert "stale-read 1" in result.summary() and "smallest window" in result.summary()


def test_a_read_older_than_an_earlier_read_is_stale():
    b = Builder()
    b.write("a", 0, 1)
    b.write("b", 2, 20)  # still going on while both reads run
    b.read("b", 3, 4, p=1)
    b.read("a", 5, 6, p=2)  # began after a read had returned b
    b.read("b", 21, 22)
    result = b.check()
    assert result.counts["stale-read"] == 1
    assert "earlier read" in result.examples("stale-read")[0].description


def test_a_lost_write():
    b = Builder()
    b.write("a", 0, 1)
    lost = b.write("b", 2, 3)
    b.read("a", 10, 11, p=1)  # the final reads do not have it
    b.read("a", 10, 12, p=2)
    result = b.check()
    assert result.counts["lost-write"] == 1 and result.counts["stale-read"] == 0
    assert result.examples("lost-write")[0].operations[1] == lost


def test_a_write_whose_revision_went_to_another_value_was_lost():
    b = Builder()
    b.write("a", 0, 1, rev=1)
    b.write("b", 2, 3, rev=2, p=1)  # acknowledged at revision 2 ...
    b.write("c", 2, 4, rev=2, p=2)  # ... which the server also gave c
    b.read("c", 5, 6, rev=2)
    result = b.check()
    assert result.verdict == "fail" and result.counts["lost-write"] == 1
    assert "revision 2 was also reported for 'c'" in result.examples("lost-write")[0].description


def test_a_refused_cas_whose_value_was_read():
    b = Builder()
    b.write("a", 0, 1)
    refused = b.cas("a", "b", 2, 3, outcome="fail")
    seen = b.read("b", 4, 5)
    result = b.check()
    assert result.verdict == "fail" and result.counts["refused-but-applied"] == 1
    assert result.examples("refused-but-applied")[0].operations == (seen, refused)
    assert result.keys["k"].window == (seen,)  # alone it cannot be linearized: nothing that happened wrote b


def test_two_cas_from_one_value_both_succeeding_is_a_lost_update():
    b = Builder()
    b.write("a", 0, 1)
    b.cas("a", "b", 2, 5, p=1)
    b.cas("a", "c", 2, 5, p=2)
    result = b.check()
    assert result.verdict == "fail" and result.counts["lost-update"] == 1


def test_a_cas_from_a_replaced_value_is_a_lost_update():
    b = Builder()
    b.write("a", 0, 1)
    b.write("b", 2, 3)
    b.cas("a", "c", 4, 5)
    result = b.check()
    assert result.counts["lost-update"] == 1


def test_a_read_of_a_value_nobody_wrote():
    b = Builder()
    b.write("a", 0, 1)
    b.read("nobody", 2, 3)
    result = b.check()
    assert result.counts["garbage-read"] == 1


def test_a_violation_no_rule_names_is_unclassified():
    b = Builder()  # values written twice: the named rules do not apply, the search still decides
    b.write("a", 0, 1)
    b.write("b", 2, 3)
    b.write("a", 4, 5)
    b.write("b", 6, 7)
    b.read("a", 8, 9)
    result = b.check()
    assert result.verdict == "fail" and result.counts["unclassified"] == 1
    assert result.keys["k"].window


def test_the_time_budget_ends_in_unknown():
    b = Builder()  # 40 concurrent writes before an impossible read: every subset of them is a configuration
    for i in range(40):
        b.write("x", 0, 100, p=i)
    b.read("y", 101, 102)  # y is written twice (no named rule applies), and only later
    b.write("y", 103, 104)
    b.write("y", 103, 104)
    result = b.check(time_limit=0.2)
    assert result.verdict == "unknown" and result.valid is None
    assert "time limit" in result.keys["k"].reason and result.keys["k"].seconds < 5


def test_check_history_refuses_a_bad_time_limit():
    with pytest.raises(InvalidArgumentError, match="time_limit"):
        check_history([], time_limit=0)
    assert check_history([]).verdict == "ok"


# -- the search against brute force ---------------------------------------------------------------------------


def _brute_force(ops: list[Operation]) -> bool:
    """Linearizable by enumeration: every subset of the open operations, every order that respects real time."""
    done = [op for op in ops if op.outcome == "ok"]
    open_ = [op for op in ops if op.outcome == "info" and op.kind != "read"]
    for n in range(len(open_) + 1):
        for chosen in itertools.combinations(open_, n):
            group = done + list(chosen)
            for order in itertools.permutations(group):
                if _respects_real_time(order) and _legal(order):
                    return True
    return False


def _respects_real_time(order) -> bool:
    for i, a in enumerate(order):
        for b in order[i + 1 :]:
            if b.outcome == "ok" and b.complete_ns < a.invoke_ns:
                return False
    return True


def _legal(order) -> bool:
    state = None
    for op in order:
        if op.kind == "read":
            if op.result != state:
                return False
        elif op.kind == "write":
            state = op.value
        else:
            if state != op.expected:
                return False
            state = op.value
    return True


def _random_history(rng: random.Random) -> list[Operation]:
    b = Builder()
    values = ["a", "b", "c"]  # few values: they repeat, so the unique-value shortcuts rarely apply
    for p in range(rng.randint(2, 6)):
        call = rng.randint(0, 20)
        ret = call + rng.randint(0, 10)
        kind = rng.choice(["read", "write", "cas"])
        outcome = rng.choices(["ok", "info", "fail"], weights=[6, 2, 1])[0]
        end = None if outcome == "info" else ret
        if kind == "read":
            b.read(rng.choice([None, *values]), call, end, p=p, outcome=outcome)
        elif kind == "write":
            b.write(rng.choice(values), call, end, p=p, outcome=outcome)
        else:
            b.cas(rng.choice([None, *values]), rng.choice(values), call, end, p=p, outcome=outcome)
    return b.ops


def test_the_search_agrees_with_brute_force_on_random_histories():
    rng = random.Random(37)
    verdicts = {True: 0, False: 0}
    for _ in range(1500):
        ops = _random_history(rng)
        expected = _brute_force(ops)
        got = search(prepare(ops), deadline=float("inf"))
        assert got is expected, "\n".join(op.describe() for op in ops)
        verdicts[expected] += 1
    assert min(verdicts.values()) > 200  # both answers were exercised


def test_unique_values_take_the_fast_path_on_a_long_history():
    rng = random.Random(3)
    history = History()
    value = None
    ops = []
    now = 0
    for i in range(6000):  # sequential, with a timed-out write every so often that a later read shows
        kind = rng.choice(["read", "write", "cas"])
        if kind == "read":
            ops.append(
                Operation(
                    index=i,
                    process=0,
                    kind="read",
                    key="k",
                    invoke_ns=now,
                    complete_ns=now + 1,
                    outcome="ok",
                    result=value,
                )
            )
        else:
            new = f"v{i}"
            outcome = "info" if i % 50 == 0 else "ok"
            ops.append(
                Operation(
                    index=i,
                    process=i if outcome == "info" else 0,
                    kind=kind,
                    key="k",
                    value=new,
                    expected=value if kind == "cas" else None,
                    invoke_ns=now,
                    complete_ns=None if outcome == "info" else now + 1,
                    outcome=outcome,
                )
            )
            value = new
        now += 2
    history = History(ops)
    result = check_history(history, time_limit=20)
    assert result.verdict == "ok" and result.keys["k"].seconds < 10


def _simulated(rng: random.Random, processes: int, per_process: int) -> list[Operation]:
    """A history of a true atomic register with revisions: each operation takes effect at a random instant
    between its call and its return; a timed-out write takes effect or not. Linearizable by construction."""
    planned = []  # (effect time, process, call, ret, kind, value, expected, timed out, applies)
    for p in range(processes):
        now = rng.randint(0, 50)
        for i in range(per_process):
            call = now
            effect = call + rng.randint(0, 40)
            ret = effect + rng.randint(0, 40)
            kind = rng.choice(["read", "read", "write", "cas"])
            timed_out = kind != "read" and rng.random() < 0.05
            planned.append((effect, p, call, ret, kind, f"p{p}-{i}", timed_out, rng.random() < 0.5))
            now = ret + rng.randint(1, 10)
    state: tuple[str | None, int] = (None, 0)
    revision = 0
    written: list[str | None] = [None]
    b = Builder()
    for _effect, p, call, ret, kind, value, timed_out, applies in sorted(planned):
        end = None if timed_out else ret
        if kind == "read":
            b.read(state[0], call, end, p=p, rev=state[1] or None)
        elif kind == "write":
            if not timed_out or applies:
                revision += 1
                state = (value, revision)
                written.append(value)
            b.write(value, call, end, p=p, rev=None if timed_out else revision)
        else:
            expected = state[0] if rng.random() < 0.7 else rng.choice(written)
            if expected == state[0] and (not timed_out or applies):
                revision += 1
                state = (value, revision)
                written.append(value)
                b.cas(expected, value, call, end, p=p, rev=None if timed_out else revision)
            else:
                b.cas(expected, value, call, end, p=p, outcome="info" if timed_out else "fail")
    b.ops.sort(key=lambda op: op.invoke_ns)
    return [attrs.evolve(op, index=i) for i, op in enumerate(b.ops)]


def test_a_simulated_atomic_register_is_linearizable_and_a_stale_read_injected_is_found():
    rng = random.Random(11)
    for _ in range(3):
        ops = _simulated(rng, processes=6, per_process=300)
        result = check_history(ops, time_limit=20)
        assert result.verdict == "ok", result.summary()
        # Make one late read return the value of a write long finished and overwritten: a stale read.
        reads = [op for op in ops if op.kind == "read" and op.outcome == "ok" and op.invoke_ns > ops[-1].invoke_ns // 2]
        victim = rng.choice(reads)
        first_write = next(op for op in ops if op.kind == "write" and op.outcome == "ok")
        ops[victim.index] = attrs.evolve(victim, result=first_write.value, revision=first_write.revision)
        broken = check_history(ops, time_limit=20)
        assert broken.verdict == "fail" and broken.counts["stale-read"] >= 1, broken.summary()
        assert broken.keys["k"].culprit == ops[victim.index]
