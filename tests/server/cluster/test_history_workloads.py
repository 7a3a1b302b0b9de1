"""Jepsen-style runs on a 5-node cluster: producers with and without msg_id, consume(), messages(), fetch and an
ordered consumer on an R3 and an R5 stream, key-value writers and compare-and-sets with two watchers on an R3
bucket, while a nemesis kills (SIGKILL), pauses (SIGSTOP/SIGCONT) and partitions nodes, isolates a stream's leader
from the majority, makes leaders step down, restarts every node in turn and kills the node a client is connected
to. Every operation is recorded and the history checked: no acknowledged message lost, no unexpected duplicate,
nothing out of order, no ordered-consumer gap, the compare-and-set histories linearizable, the watchers complete
and in order, and every kind of fault applied at least once (the run goes on until each was).

    python -m pytest -m history -s                                   # the short run, about a minute
    JETSTREAM_SYNC_HISTORY_LONG=1 python -m pytest -m history -s     # and the long ones: 10 min per fsync setting

The short run is in the main run (CI's ``python -m pytest``); it uses the server's default fsync. The long runs
(opt-in by ``JETSTREAM_SYNC_HISTORY_LONG``, not by the soak marker, which CI runs too) use both settings:
``sync_interval: always`` and the default. ``JETSTREAM_SYNC_HISTORY_SECONDS`` changes their duration (600),
``JETSTREAM_SYNC_HISTORY_SEED`` fixes the seed of a run, and ``JETSTREAM_SYNC_HISTORY_DIR`` keeps each run's
history (JSON lines, for ``History.load`` and ``check_all``) and results (JSON) there.
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest

from jetstream_sync.testing import (
    EVERY_FAULT,
    ClusterWorkload,
    EmbeddedCluster,
    History,
    KVWorkload,
    QueueWorkload,
    WorkloadResult,
    check_all,
)

pytestmark = [pytest.mark.cluster, pytest.mark.history]

#: the single-node restart is left out: the rolling restart restarts every node already
FAULTS = tuple(fault for fault in EVERY_FAULT if fault != "restart")
SHORT_SECONDS = 20.0  # and on until every fault was applied once (about 40 s of faults on 2 cores)
LONG = bool(os.environ.get("JETSTREAM_SYNC_HISTORY_LONG"))
LONG_SECONDS = float(os.environ.get("JETSTREAM_SYNC_HISTORY_SECONDS", "600"))
OUT = os.environ.get("JETSTREAM_SYNC_HISTORY_DIR")


def run(
    cluster: EmbeddedCluster, seconds: float, *, quiet: tuple[float, float], hold: tuple[float, float]
) -> WorkloadResult:
    """One run of the queue and key-value parts under every fault; prints its summary (the table included)."""
    seed = int(os.environ.get("JETSTREAM_SYNC_HISTORY_SEED") or random.randrange(1 << 30))
    kv = KVWorkload(
        cluster,
        threads=6,
        watchers=2,
        history=64,  # the most a bucket keeps: a watcher that falls behind loses the least
        read="leader",
        read_share=0.0,
        cas_share=0.5,
        record_cas_reads=False,  # the compare-and-set history; reads under partitions: docs/upstream
        rate=5.0,  # slow enough that 64 revisions per key outlast a watcher stalled by a fault
    )
    workload = ClusterWorkload(
        cluster,
        [QueueWorkload(rate=50.0), kv],
        duration=seconds,
        faults=FAULTS,
        every_fault_once=True,
        quiet=quiet,
        hold=hold,
        seed=seed,
        check_time_limit=60.0,
    )
    result = workload.run()
    print(f"\n{result.summary()}")
    return result


def keep(result: WorkloadResult, name: str) -> None:
    if OUT:
        out = Path(OUT)
        out.mkdir(parents=True, exist_ok=True)
        result.history.save(out / f"{name}.jsonl")
        (out / f"{name}.json").write_text(json.dumps(result.to_json(), indent=1))


def assert_clean(result: WorkloadResult) -> None:
    """What the issue asks of every run, each named so a failure says which."""
    queue, kv, watches = result.checks.queue, result.checks.kv, result.checks.watches
    assert not result.missing_faults, f"faults never applied: {result.missing_faults} ({result.fault_counts})"
    assert queue.counts["lost"] == 0, queue.summary()
    assert queue.counts["out-of-order"] == 0 and queue.counts["ordered-gap"] == 0, queue.summary()
    assert queue.valid, queue.summary()  # no unexpected duplicate, no divergence, nothing unexpected
    assert kv.verdict == "ok", kv.summary()  # linearizable, decided in time
    assert watches.valid, watches.summary()
    assert result.clean
    # It did what it claims to: every kind of operation, on both streams, with every reader.
    counts = result.history.counts()
    for kind in ("publish ok", "receive ok", "watch ok", "write ok", "cas ok", "cas fail", "read ok"):
        assert counts.get(kind, 0) > 0, counts
    for stream in queue.streams.values():
        assert len(stream.deliveries) == 4 and all(n > 0 for n in stream.deliveries.values()), stream


@pytest.mark.timeout(900)
def test_a_short_run_under_every_fault_checks_clean():
    with EmbeddedCluster(size=5) as cluster:
        result = run(cluster, SHORT_SECONDS, quiet=(0.3, 1.0), hold=(1.0, 2.0))
    keep(result, "history-short")
    assert result.fsync == "every 120s"  # the server's default, which the run reports
    assert_clean(result)
    # The saved history checks the same without the cluster.
    again = check_all(History(result.history.operations), time_limit=60.0, kept=64)
    assert again.table() == result.checks.table()


@pytest.mark.skipif(not LONG, reason="the long runs are opt-in: JETSTREAM_SYNC_HISTORY_LONG=1")
@pytest.mark.timeout(LONG_SECONDS * 2 + 900)
@pytest.mark.parametrize("sync_interval", ["always", None], ids=["sync-always", "sync-default"])
def test_a_long_run_under_every_fault_checks_clean(sync_interval):
    with EmbeddedCluster(size=5, sync_interval=sync_interval) as cluster:
        result = run(cluster, LONG_SECONDS, quiet=(2.0, 6.0), hold=(2.0, 8.0))
    keep(result, f"history-long-{sync_interval or 'default'}")
    assert result.fsync == ("always" if sync_interval else "every 120s")
    assert_clean(result)
