"""The queue and watcher checkers and the combined report, on hand-made histories: a clean one passes, and each
anomaly (a lost write, a duplicate, a reordering, an ordered consumer's gap, a sequence holding two messages, a
message nobody published, a watcher that skips, repeats or reorders a revision) is caught; the expected duplicates
(redeliveries, retries without a msg_id) are told apart from the others; a non-linearizable compare-and-set in a
mixed history still fails the register check; and the recorder's queue operations (received, watched, processes
by thread) save and load."""

from __future__ import annotations

from datetime import datetime, timezone

import attrs
import pytest

from jetstream_sync.errors import InvalidArgumentError
from jetstream_sync.message import Msg
from jetstream_sync.models.kv import KeyValueEntry, KeyValueOp
from jetstream_sync.testing import (
    EXPECTED_QUEUE_KINDS,
    QUEUE_ANOMALY_KINDS,
    WATCH_ANOMALY_KINDS,
    History,
    Operation,
    check_all,
    check_history,
    check_queue,
    check_watches,
)

MS = 1_000_000


class Ops:
    """Operations by hand, one millisecond apart unless told: publishes, receives, watches, register ops."""

    def __init__(self) -> None:
        self.ops: list[Operation] = []
        self.clock = 0

    def _add(self, **fields) -> Operation:
        self.clock += 1
        call = fields.pop("call", self.clock)
        ret = fields.pop("ret", call)
        op = Operation(
            index=len(self.ops), invoke_ns=call * MS, complete_ns=None if ret is None else ret * MS, **fields
        )
        self.ops.append(op)
        return op

    def publish(self, value, seq=None, *, outcome="ok", msg_id=None, stream="S", p=0, ret=-1):
        self.clock += 1
        call = self.clock
        end = call + 1 if ret == -1 else ret
        return self._add(
            process=p,
            kind="publish",
            key=stream,
            value=value,
            msg_id=msg_id,
            outcome=outcome if end is not None else "info",
            revision=seq if outcome == "ok" else None,
            call=call,
            ret=end,
        )

    def receive(self, value, seq, *, reader="consume", via="consume", delivered=1, stream="S", p=10):
        return self._add(
            process=p,
            kind="receive",
            key=stream,
            result=value,
            revision=seq,
            reader=reader,
            via=via,
            delivered=delivered,
            outcome="ok",
        )

    def watch(self, key, value, rev, *, reader="w1", p=20):
        return self._add(
            process=p, kind="watch", key=key, result=value, revision=rev, reader=reader, via="watch", outcome="ok"
        )

    def write(self, key, value, rev, *, outcome="ok", p=30):
        return self._add(
            process=p,
            kind="write",
            key=key,
            value=value,
            revision=rev if outcome == "ok" else None,
            outcome=outcome,
            ret=self.clock + 2 if outcome != "info" else None,
        )


def clean_queue() -> Ops:
    """Six messages (three with a msg_id), read by a consume, a fetch shared by two threads and an ordered
    consumer; the consume gets one message again (its ack was lost), the retried publish without msg_id is
    stored twice."""
    h = Ops()
    for i in range(1, 4):
        h.publish(f"m{i}", i, msg_id=f"m{i}")
    h.publish("m4", None, outcome="info")  # unknown outcome, published again without a msg_id: stored twice
    h.publish("m4", 5)
    h.publish("m5", 6)
    for seq, value in [(1, "m1"), (2, "m2"), (3, "m3"), (4, "m4"), (5, "m4"), (6, "m5")]:
        h.receive(value, seq)
        h.receive(value, seq, reader="ordered", via="ordered", p=11)
        h.receive(value, seq, reader="fetch", via="fetch", p=12 + seq % 2)  # two threads of one durable
    h.receive("m2", 2, delivered=2)  # redelivered: the ack of the first delivery was lost
    return h


def test_a_clean_queue_history_passes_with_its_expected_duplicates_counted():
    result = check_queue(clean_queue().ops)
    assert result.valid, result.summary()
    stream = result.streams["S"]
    assert stream.publishes == {"ok": 5, "fail": 0, "info": 1}
    assert stream.messages == 5
    assert stream.deliveries == {"consume": 7, "fetch": 6, "ordered": 6}
    assert {kind for kind in QUEUE_ANOMALY_KINDS if result.counts[kind]} == {"redelivered", "republished"}
    assert result.counts["redelivered"] == 1 and result.counts["republished"] == 1
    assert stream.recovered == 0  # m4's second publish was ok: it was not only recovered


def test_an_acknowledged_message_no_reader_got_is_lost():
    h = clean_queue()
    h.publish("m6", 7)
    result = check_queue(h.ops)
    assert not result.valid
    [lost] = result.examples("lost")
    assert "'m6' was acknowledged at sequence 7, but no reader received it" in lost.description
    assert lost.operations[0].value == "m6"


def test_a_message_one_reader_missed_is_lost_by_that_reader():
    h = clean_queue()
    h.publish("m6", 7)
    h.receive("m6", 7)
    h.receive("m6", 7, reader="ordered", via="ordered", p=11)
    [lost] = check_queue(h.ops).examples("lost")
    assert "fetch never received it (others did)" in lost.description


def test_a_message_stored_twice_despite_its_msg_id_is_an_unexpected_duplicate():
    h = clean_queue()
    h.publish("m6", None, msg_id="m6", outcome="info")
    h.publish("m6", 7, msg_id="m6")
    for seq in (7, 8):  # the stream did not deduplicate the retry
        h.receive("m6", seq)
        h.receive("m6", seq, reader="ordered", via="ordered", p=11)
        h.receive("m6", seq, reader="fetch", via="fetch", p=12)
    result = check_queue(h.ops)
    assert not result.valid
    [duplicate] = result.examples("duplicate")
    assert "stored at sequences 7, 8" in duplicate.description and "msg_id" in duplicate.description
    assert result.counts["republished"] == 1  # m4's is still the expected kind


def test_an_ordered_consumer_that_gets_a_sequence_twice_has_a_duplicate_and_an_acking_reader_a_redelivery():
    h = clean_queue()
    h.receive("m5", 6, reader="ordered", via="ordered", p=11)
    h.receive("m5", 6, delivered=2)
    result = check_queue(h.ops)
    assert result.counts["duplicate"] == 1 and result.counts["redelivered"] == 2
    assert "ordered got sequence 6" in result.examples("duplicate")[0].description


def test_a_first_delivery_below_an_earlier_one_is_out_of_order_but_a_redelivery_is_not():
    h = Ops()
    for i in range(1, 6):
        h.publish(f"m{i}", i)
    for seq in (1, 2, 4, 5):
        h.receive(f"m{seq}", seq)
    h.receive("m3", 3)  # a first delivery, after 5
    result = check_queue(h.ops)
    [late] = result.examples("out-of-order")
    assert "consume got sequence 3 after 5" in late.description
    # The same, delivered for the second time (the first delivery never reached the reader): allowed.
    again = Ops()
    for i in range(1, 6):
        again.publish(f"m{i}", i)
    for seq in (1, 2, 4, 5):
        again.receive(f"m{seq}", seq)
    again.receive("m3", 3, delivered=2)
    assert check_queue(again.ops).valid


def test_two_threads_of_one_reader_are_ordered_each_on_its_own():
    h = Ops()
    for i in range(1, 5):
        h.publish(f"m{i}", i)
    for seq, p in [(3, 1), (4, 1), (1, 2), (2, 2)]:  # thread 2's pull was answered later
        h.receive(f"m{seq}", seq, reader="fetch", via="fetch", p=p)
    assert check_queue(h.ops).valid


def test_an_ordered_consumer_gap_over_a_stored_message_is_caught_and_over_a_deletion_is_not():
    h = Ops()
    for i in range(1, 5):
        h.publish(f"m{i}", i)
    for seq in (1, 2, 4):
        h.receive(f"m{seq}", seq, reader="ordered", via="ordered")
    result = check_queue(h.ops)
    [gap] = result.examples("ordered-gap")
    assert "from sequence 2 to 4" in gap.description and "'m3'" in gap.description
    assert result.counts["lost"] == 1  # and m3 never arrived
    assert check_queue(h.ops, deleted={"S": [3]}).valid  # deleted on purpose: neither a gap nor lost


def test_an_ordered_consumer_gap_over_sequences_nobody_knows_of_is_not_a_gap():
    """Sequences no PubAck named and no reader saw (a publish that failed to reach us, a deleted message) may
    not exist: only the lost check can speak for acknowledged messages."""
    h = Ops()
    h.publish("m1", 1)
    h.publish("m2", 5)
    h.receive("m1", 1, reader="ordered", via="ordered")
    h.receive("m2", 5, reader="ordered", via="ordered")
    assert check_queue(h.ops).valid


def test_a_sequence_holding_two_messages_is_divergent():
    h = Ops()
    h.publish("m1", 1)
    h.publish("m2", 2)
    h.receive("m1", 1)
    h.receive("m2", 2)
    h.receive("m1", 1, reader="ordered", via="ordered")
    h.receive("m3", 2, reader="ordered", via="ordered")  # another message at sequence 2, never published
    result = check_queue(h.ops)
    assert result.counts["divergent"] == 1 and result.counts["unexpected"] == 1
    assert "stream sequence 2 holds 2 different messages" in result.examples("divergent")[0].description


def test_a_message_whose_every_publish_failed_yet_was_read_is_refused_but_stored_and_info_ones_recovered():
    h = Ops()
    h.publish("m1", outcome="fail")
    h.publish("m2", outcome="info")
    h.receive("m1", 1)
    h.receive("m2", 2)
    result = check_queue(h.ops)
    assert result.counts["refused-but-stored"] == 1 and result.counts["unexpected"] == 0
    assert result.streams["S"].recovered == 1  # m2: unknown, then read (allowed)


def test_the_expected_kinds_are_the_redeliveries_and_the_retries():
    assert {"redelivered", "republished"} == EXPECTED_QUEUE_KINDS
    assert set(QUEUE_ANOMALY_KINDS) > EXPECTED_QUEUE_KINDS


# -- watchers -----------------------------------------------------------------------------------------------------


def watched_writes() -> Ops:
    """Writes to two keys at revisions 1-6, and a watcher that got every one of them in order."""
    h = Ops()
    for rev, key in enumerate(["a", "b", "a", "a", "b", "a"], 1):
        h.write(key, f"v{rev}", rev)
    for rev, key in enumerate(["a", "b", "a", "a", "b", "a"], 1):
        h.watch(key, f"v{rev}", rev)
    return h


def test_a_watcher_that_saw_every_revision_in_order_passes():
    result = check_watches(watched_writes().ops)
    assert result.valid, result.summary()
    assert result.deliveries == {"w1": 6}
    assert set(result.counts) == set(WATCH_ANOMALY_KINDS)


def test_a_watcher_that_skips_a_revision_loses_an_update():
    h = watched_writes()
    del h.ops[6 + 2]  # the watcher never got revision 3 (of a)
    result = check_watches(h.ops)
    [lost] = result.examples("watch-lost-update")
    assert "w1 went past revision 3 of 'a'" in lost.description
    assert lost.operations[0].kind == "write"


def test_a_skip_the_buckets_history_limit_explains_is_not_a_lost_update():
    """With a history of 1 per key, revision 2 of a is dropped once revision 3 is stored; the watcher got
    revision 3 after that write was invoked, so it could not have got revision 2. With a history of 2 it
    could have: one newer write is not enough to drop it."""
    h = Ops()
    h.write("a", "v1", 1)
    h.watch("a", "v1", 1)
    h.write("a", "v2", 2)
    h.write("a", "v3", 3)
    h.watch("a", "v3", 3)
    h.write("a", "v4", 4)
    h.watch("a", "v4", 4)
    assert check_watches(h.ops, kept=1).valid
    assert check_watches(h.ops, kept=1).excused == {"w1": 1}
    assert check_watches(h.ops, kept=2).counts["watch-lost-update"] == 1
    assert check_watches(h.ops).counts["watch-lost-update"] == 1


def test_a_write_of_unknown_outcome_seen_below_the_skipped_revision_does_not_excuse_the_skip():
    """The write of "x" never completed (info), but a watcher saw it stored at revision 1: it cannot be one of
    the newer writes that made the bucket drop revision 2, so one newer write (revision 3) is all there is, and
    a history of 2 per key would have kept revision 2."""
    h = Ops()
    h.write("a", "x", None, outcome="info")
    h.watch("a", "x", 1)
    h.write("a", "v2", 2)
    h.write("a", "v3", 3)
    h.watch("a", "v3", 3)
    assert check_watches(h.ops, kept=2).counts["watch-lost-update"] == 1
    assert check_watches(h.ops, kept=1).valid


def test_a_watcher_that_stopped_before_the_last_writes_lost_them_when_it_was_to_run_to_the_end():
    """Without ``to_end`` a watcher is held to what lies below the highest revision it got; with it (the
    workload waited until the watchers had everything), the writes after that count too. The last revision of
    a key is never dropped by the history limit, so ``kept`` excuses none of it."""
    h = watched_writes()
    del h.ops[-2:]  # the watcher stopped after revision 4
    assert check_watches(h.ops).valid
    result = check_watches(h.ops, to_end=True, kept=1)
    assert [a.description for a in result.examples("watch-lost-update")] == [
        "w1 never got revision 5 of 'b' (the last it got was 4)",
        "w1 never got revision 6 of 'a' (the last it got was 4)",
    ]


def test_a_watcher_that_reorders_or_repeats_a_revision_is_caught():
    h = watched_writes()
    h.watch("a", "v3", 3)  # revision 3 of a again, after 6
    h.watch("b", "v2", 2)
    result = check_watches(h.ops)
    assert result.counts["watch-duplicate"] == 2

    h = Ops()
    for rev in (1, 2, 3):
        h.write("a", f"v{rev}", rev)
    h.watch("a", "v1", 1)
    h.watch("a", "v3", 3)
    h.watch("a", "v2", 2)
    result = check_watches(h.ops)
    assert result.counts["watch-out-of-order"] == 1
    assert "got revision 2 of 'a' after revision 3" in result.examples("watch-out-of-order")[0].description


def test_a_watcher_that_sees_another_value_at_a_revision_is_divergent():
    h = watched_writes()
    h.ops[6 + 1] = attrs.evolve(h.ops[6 + 1], result="x")
    result = check_watches(h.ops)
    assert result.counts["watch-divergent"] == 1
    assert "revision 2 was reported as 2 different entries" in result.examples("watch-divergent")[0].description


# -- the combined report ------------------------------------------------------------------------------------------


def test_check_all_on_a_mixed_history_and_its_table_in_jepsens_terms():
    h = clean_queue()
    h.ops += watched_writes().ops
    h.ops = [attrs.evolve(op, index=i) for i, op in enumerate(h.ops)]
    checks = check_all(h.ops)
    assert checks.valid is True, checks.summary()
    table = checks.table().splitlines()
    assert table[0].startswith("| what | ok | fail | info | lost | duplicated (unexpected) | out of order |")
    assert table[2] == "| stream S | 5 | 0 | 1 | 0 | 2 (0) | 0 | 0 | 0 | valid |"
    assert table[3] == "| kv registers (2 keys) | 6 | 0 | 0 | 0 | - | - | 0 | 0 | linearizable |"
    assert table[4] == "| kv watchers (1) | 6 | 0 | 0 | 0 | 0 (0) | 0 | 0 | 0 | valid |"


def test_a_non_linearizable_compare_and_set_in_a_mixed_history_fails_the_registers():
    h = clean_queue()
    base = h.clock
    h._add(process=40, kind="write", key="k", value="x", revision=100, outcome="ok", call=base + 1, ret=base + 2)
    # Two compare-and-sets from "x", both acknowledged, one after the other: the second found "y", not "x".
    for p, value, rev in [(41, "y", 101), (42, "z", 102)]:
        step = 2 * (rev - 100)
        h._add(
            process=p,
            kind="cas",
            key="k",
            expected="x",
            value=value,
            revision=rev,
            outcome="ok",
            call=base + 1 + step,
            ret=base + 2 + step,
        )
    checks = check_all(h.ops)
    assert checks.valid is False and checks.queue.valid
    assert checks.kv.verdict == "fail" and checks.kv.counts["lost-update"] == 1
    assert "NOT linearizable" in checks.table()
    assert check_history(h.ops).verdict == "fail"  # the queue operations do not disturb the register check


# -- the recorder -------------------------------------------------------------------------------------------------


def test_the_recorder_takes_messages_and_entries_as_received_and_keeps_them_through_save_and_load(tmp_path):
    history = History()
    p = history.new_process()
    publish = history.invoke(p, "publish", "ORDERS", value="o-1", msg_id="o-1")
    publish.ok(revision=7)
    msg = Msg("orders.new", "$JS.ACK.ORDERS.work.2.7.9.1700000000000000000.0", b"o-1", None, None)
    got = history.received(p + 1, msg, reader="work", via="consume")
    assert (got.kind, got.key, got.result, got.revision, got.delivered, got.via) == (
        "receive",
        "ORDERS",
        "o-1",
        7,
        2,
        "consume",
    )
    assert got.outcome == "ok" and got.invoke_ns == got.complete_ns and got.thread
    when = datetime.now(timezone.utc)
    put = KeyValueEntry(bucket="B", key="k", value=b"v", revision=3, created=when)
    gone = KeyValueEntry(bucket="B", key="k", value=b"", revision=4, created=when, operation=KeyValueOp.DELETE)
    history.watched(p + 2, put, reader="w")
    history.watched(p + 2, gone, reader="w")
    assert [(op.result, op.revision, op.via) for op in history.operations[-2:]] == [
        ("v", 3, "watch"),
        (None, 4, "watch"),
    ]
    again = History.load(history.save(tmp_path / "h.jsonl"))
    assert again.operations == history.operations
    assert "receive ORDERS -> 'o-1' by work (consume) ok seq=7 delivered=2" in got.describe()
    assert "publish ORDERS 'o-1' msg_id=o-1 ok seq=7" in history.operations[0].describe()


def test_observations_are_recorded_with_observe_not_invoke_and_only_a_publish_has_a_msg_id():
    history = History()
    with pytest.raises(InvalidArgumentError, match="observation"):
        history.invoke(0, "receive", "S", value="m")
    with pytest.raises(InvalidArgumentError, match="msg_id"):
        history.invoke(0, "write", "k", value="v", msg_id="x")
    with pytest.raises(InvalidArgumentError, match="kind"):
        history.observe(0, "read", "k", reader="r", result=None, revision=1)  # type: ignore[arg-type]


def test_new_process_numbers_keep_a_threads_remainder_and_never_repeat():
    history = History()
    assert [history.new_process(modulo=4, remainder=t) for t in range(4)] == [0, 1, 2, 3]
    assert history.new_process() == 4
    assert history.new_process(modulo=4, remainder=1) == 5
    assert history.new_process(modulo=4, remainder=0) == 8
    history.invoke(20, "read", "k")
    assert history.new_process(modulo=4, remainder=3) == 23
    with pytest.raises(InvalidArgumentError):
        history.new_process(modulo=4, remainder=4)
