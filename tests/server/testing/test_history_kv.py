"""KVWorkload on a real 3-node cluster: a short run under every fault is recorded and checked; the checker
catches anomalies injected into a real run; and (opt-in, ``-m soak``) a 90 s run per read mode whose output is
the count of each anomaly per mode.

    python -m pytest tests/server/testing/test_history_kv.py -m soak -s     # the per-mode runs, about 5 min

``JETSTREAM_SYNC_KV_WORKLOAD_SECONDS`` changes the soak's duration per mode, ``JETSTREAM_SYNC_KV_WORKLOAD_SEED`` its
seed (37), ``JETSTREAM_SYNC_HISTORY_DIR`` keeps its histories (JSON lines, one file per mode) and results there, for
``History.load`` and ``check_history``.
"""

from __future__ import annotations

import inspect
import json
import os
import random
import threading
from pathlib import Path

import pytest

from jetstream_sync import errors
from jetstream_sync.jetstream.kv import KeyValue
from jetstream_sync.testing import ANOMALY_KINDS, EmbeddedCluster, History, KVWorkload, check_history

pytestmark = pytest.mark.cluster

#: KeyValue.get takes read= (read modes); without it the workload leaves the argument out
HAS_READ_MODES = "read" in inspect.signature(KeyValue.get).parameters
READ_MODES = ["direct", "read_your_writes", "leader"]
needs_read_modes = pytest.mark.skipif(not HAS_READ_MODES, reason="KeyValue.get has no read= in this client yet")
SHORT = 12.0
SOAK_SECONDS = float(os.environ.get("JETSTREAM_SYNC_KV_WORKLOAD_SECONDS", "90"))
#: every mode's run makes the same choices (operations, faults, their targets and timing); only the machine differs
SOAK_SEED = int(os.environ.get("JETSTREAM_SYNC_KV_WORKLOAD_SEED", "37"))
#: anomalies that no read mode allows: a write lost, a refusal that was applied, a CAS on a replaced value
NEVER = ("lost-write", "refused-but-applied", "lost-update", "garbage-read")


def test_a_short_workload_under_faults_is_recorded_and_checked(nats_cluster, tmp_path):
    workload = KVWorkload(nats_cluster, duration=SHORT, seed=random.randrange(1 << 30), check_time_limit=30)
    result = workload.run()
    print(result.summary())
    counts = result.history.counts()
    for kind in ("read ok", "write ok", "cas ok", "cas fail"):  # a cas loses a race now and then
        assert counts.get(kind, 0) > 0, counts
    assert result.faults and all(f.split()[0] in workload.faults for f in result.faults)
    assert {e.what for e in result.history.events} & {"pause", "kill", "restart", "partition", "step_down"}
    assert result.check.verdict in ("ok", "fail"), result.summary()  # decided, within the time budget
    assert not any(result.check.counts[kind] for kind in NEVER), result.summary()
    assert sum(result.check.counts.values()) == len(result.check.anomalies)
    # The history reproduces: saved, loaded and checked again, the same verdict and counts.
    again = check_history(History.load(result.history.save(tmp_path / "history.jsonl")))
    assert again.verdict == result.check.verdict and again.counts == result.check.counts


@needs_read_modes
def test_leader_reads_are_linearizable_through_kills_restarts_and_step_downs(nats_cluster):
    """Without a partition or a pause (a deposed leader that does not know it yet may answer from what it had),
    reads from the leader see every acknowledged write."""
    workload = KVWorkload(nats_cluster, duration=SHORT, read="leader", faults=("kill", "restart", "step_down"))
    result = workload.run()
    assert result.faults
    assert result.check.verdict == "ok", result.summary()


def test_the_checker_catches_anomalies_injected_into_a_real_run(nats_cluster, monkeypatch):
    """A client that sometimes answers a read from its first answer (stale reads), and reports some successful
    compare-and-sets as refused (refused-but-applied): the real servers' history shows both."""
    real_get, real_update = KeyValue.get, KeyValue.update
    first: dict[str, object] = {}
    lock = threading.Lock()
    rng = random.Random(37)
    updates = [0]

    def stale_get(self, key, **options):
        with lock:
            if key in first and rng.random() < 0.3:
                return first[key]
        entry = real_get(self, key, **options)
        with lock:
            first.setdefault(key, entry)
        return entry

    def lying_update(self, key, value, last, **options):
        revision = real_update(self, key, value, last, **options)
        with lock:
            updates[0] += 1
            if updates[0] % 10 == 0:
                raise errors.KeyWrongLastSequenceError(400, 10071, "injected: wrong last sequence")
        return revision

    monkeypatch.setattr(KeyValue, "get", stale_get)
    monkeypatch.setattr(KeyValue, "update", lying_update)
    result = KVWorkload(nats_cluster, duration=4.0, faults=(), seed=5).run()
    assert result.check.verdict == "fail"
    assert result.check.counts["stale-read"] > 0, result.summary()
    assert result.check.counts["refused-but-applied"] > 0, result.summary()
    stale = result.check.examples("stale-read", 1)[0]
    assert stale.operations[0].kind == "read" and stale.time_ns >= stale.operations[0].invoke_ns
    failing = [key for key in result.check.keys.values() if key.verdict == "fail"]
    assert failing and all(key.window for key in failing)


def own_connection(workload: KVWorkload, anomaly) -> bool:
    """Whether a stale read's newer witness came from the reader's own connection (a write it made, or a read it
    returned): process % threads is the thread, thread % connections its connection (KVWorkload's numbering)."""
    read, witness = anomaly.operations[:2]

    def connection(op) -> int:
        return (op.process % workload.threads) % workload.connections

    return connection(read) == connection(witness)


@pytest.mark.soak
@pytest.mark.timeout(len(READ_MODES) * (SOAK_SECONDS + 240))
@needs_read_modes
def test_read_modes_under_faults(tmp_path):
    """One run of SOAK_SECONDS per read mode, each on a fresh cluster under every fault; prints the anomalies
    per mode (the figures of the testing guide), and how many stale reads missed the reader's own connection's
    writes or reads. No mode loses a write or applies a refused one; read_your_writes and leader never miss the
    reader's own."""
    out = Path(os.environ.get("JETSTREAM_SYNC_HISTORY_DIR") or tmp_path)
    out.mkdir(parents=True, exist_ok=True)
    rows = {}
    for mode in READ_MODES:
        with EmbeddedCluster(size=3) as cluster:
            workload = KVWorkload(cluster, duration=SOAK_SECONDS, read=mode, seed=SOAK_SEED, check_time_limit=120)
            result = workload.run()
        own = sum(own_connection(workload, a) for a in result.check.anomalies if a.kind == "stale-read")
        print(f"\n{result.summary()}\nstale reads behind the reader's own connection: {own}")
        result.history.save(out / f"kv-history-{mode}.jsonl")
        rows[mode] = (result, own)
    (out / "kv-read-modes.json").write_text(
        json.dumps(
            {
                mode: {**r.check.to_json(), "own_connection_stale": own, "faults": list(r.faults)}
                for mode, (r, own) in rows.items()
            },
            indent=1,
        )
    )
    print(f"\nanomalies per read mode ({SOAK_SECONDS:g}s each, 3 nodes, R3 bucket, every fault), histories in {out}")
    print(f"{'mode':<18}{'operations':>11}" + "".join(f"{kind:>21}" for kind in ANOMALY_KINDS) + "  own  verdict")
    for mode, (result, own) in rows.items():
        cells = "".join(f"{result.check.counts[kind]:>21}" for kind in ANOMALY_KINDS)
        print(f"{mode:<18}{result.check.operations:>11}{cells}{own:>5}  {result.check.verdict}")
    for mode, (result, own) in rows.items():
        assert result.check.verdict != "unknown", mode
        assert not any(result.check.counts[kind] for kind in NEVER), result.summary()
        if mode != "direct":
            assert own == 0, result.summary()
