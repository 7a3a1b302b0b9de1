"""Cluster soak: a 3-node cluster and R3 streams, producers and every kind of reader, while leaders step down,
a node is killed and restarted, a node is partitioned and the whole cluster is rolling-restarted.

Opt-in (``pytest -m soak -s``; CI runs it). Prints one figure line; nothing acknowledged may be lost, every
publish_async future must resolve, and the ordered consumer and the KV watcher must see no gap.

Two producers publish with a msg_id, one with ``publish`` and one with ``publish_async`` (a failed future is
published again, stored once thanks to the msg_id). Three readers take every message: ``consume()`` and
``messages()`` on their own R3 durables (acking), and an ordered consumer (checking that stream sequences
come one after another). A writer puts KV values into an R3 bucket and a watcher checks that revisions come
one after another.
"""

from __future__ import annotations

import concurrent.futures
import os
import threading
import time
from collections.abc import Callable

import pytest

import jetstream_sync
from jetstream_sync import ConsumerConfig, KeyValueConfig, StorageType, StreamConfig, errors
from jetstream_sync.testing import EmbeddedCluster
from tests.helpers import wait_until

SOAK_SECONDS = float(os.environ.get("JETSTREAM_SYNC_CLUSTER_SOAK_SECONDS", "120"))
#: a publish rides through an election (4-9 s in nats-server) within its timeout
ELECTION_PROOF = 30.0
ACK_TIMEOUT = 10.0
#: the soak, the faults that outlast it, and the drain at the end
SOAK_TIMEOUT = SOAK_SECONDS + 300

pytestmark = [pytest.mark.cluster, pytest.mark.soak, pytest.mark.timeout(SOAK_TIMEOUT)]


class Reader:
    """What one reader saw: the ids (payloads) and how many deliveries; for an ordered reader, gaps too."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.lock = threading.Lock()
        self.ids: set[bytes] = set()
        self.deliveries = 0
        self.last_seq = 0
        self.gaps: list[tuple[int, int]] = []

    def saw(self, msg: jetstream_sync.Msg, *, ordered: bool = False) -> None:
        with self.lock:
            self.deliveries += 1
            self.ids.add(bytes(msg.data))
            if ordered:
                seq = msg.metadata.sequence.stream
                if seq != self.last_seq + 1:
                    self.gaps.append((self.last_seq, seq))
                self.last_seq = seq

    def has_all(self, wanted: set[bytes]) -> bool:
        with self.lock:
            return wanted <= self.ids


class Producers:
    """The acknowledged ids, and the futures that did not resolve (must stay 0)."""

    def __init__(self, js: jetstream_sync.JetStream, stop: threading.Event) -> None:
        self.js = js
        self.stop = stop
        self.lock = threading.Lock()
        self.acked: set[bytes] = set()
        self.retries = 0
        self.unresolved = 0

    def done(self, ident: bytes) -> None:
        with self.lock:
            self.acked.add(ident)

    def republish(self, ident: bytes) -> None:
        """Publish again until acked: the msg_id makes the stream store it once."""
        deadline = time.monotonic() + 120
        while True:
            with self.lock:
                self.retries += 1
            try:
                self.js.publish("soak.retry", ident, msg_id=ident.decode(), timeout=ELECTION_PROOF)
                self.done(ident)
                return
            except errors.JetStreamError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)  # back-off before publishing again during a fault

    def sequential(self) -> None:
        n = 0
        while not self.stop.is_set():
            ident = b"s%d" % n
            try:
                self.js.publish("soak.seq", ident, msg_id=ident.decode(), timeout=ELECTION_PROOF)
                self.done(ident)
            except errors.JetStreamError:
                self.republish(ident)
            n += 1

    def pipelined(self) -> None:
        n = 0
        while not self.stop.is_set():
            batch: list[tuple[bytes, concurrent.futures.Future[jetstream_sync.PubAck] | None]] = []
            for _ in range(50):
                ident = b"a%d" % n
                n += 1
                try:
                    fut = self.js.publish_async("soak.async", ident, msg_id=ident.decode(), timeout=ACK_TIMEOUT)
                except errors.JetStreamError:
                    fut = None
                batch.append((ident, fut))
            for ident, fut in batch:
                if fut is not None:
                    try:
                        fut.result(timeout=ACK_TIMEOUT + 20)
                        self.done(ident)
                        continue
                    except errors.JetStreamError:
                        pass
                    except concurrent.futures.TimeoutError:
                        with self.lock:
                            self.unresolved += 1
                self.republish(ident)


class Elections:
    """Counts the leader-elected advisories of the soak's streams and consumers."""

    def __init__(self, nc: jetstream_sync.Client, stop: threading.Event) -> None:
        self.count = 0
        self._sub = nc.subscribe("$JS.EVENT.ADVISORY.*.LEADER_ELECTED.>")
        self._stop = stop

    def run(self) -> None:
        while not self._stop.is_set():
            try:
                self._sub.next_msg(timeout=0.5)
                self.count += 1
            except errors.TimeoutError:
                continue
            except errors.JetStreamError:
                return  # the client closed


def test_cluster_soak_rides_through_elections_kills_partitions_and_a_rolling_restart():
    stop = threading.Event()  # the producers and the KV writer stop
    finished = threading.Event()  # the readers stop, once they took everything (or the drain timed out)
    with EmbeddedCluster(size=3) as cluster:
        nc = jetstream_sync.connect(cluster.urls, name="cluster-soak", reconnect_wait=0.1, max_reconnect_attempts=-1)
        try:
            js = nc.jetstream(timeout=ELECTION_PROOF)
            js.create_stream(StreamConfig(name="SOAK", subjects=["soak.>"], num_replicas=3, storage=StorageType.FILE))
            for durable in ("work", "iter"):
                js.create_consumer(
                    "SOAK", ConsumerConfig(durable_name=durable, num_replicas=3, ack_wait=5, max_deliver=-1)
                )
            kv = js.create_key_value(KeyValueConfig(bucket="soak", replicas=3, history=64))

            work, it_reader, ordered = Reader("consume"), Reader("messages"), Reader("ordered")
            producers = Producers(js, stop)
            elections = Elections(nc, stop)
            kv_figures = {"puts": 0, "gaps": 0, "last": 0}

            def on_work(msg: jetstream_sync.Msg) -> None:
                work.saw(msg)
                msg.ack()

            def iterate() -> None:
                with js.consumer("SOAK", "iter").messages(expires=2, idle_heartbeat=1) as messages:
                    while not finished.is_set():
                        try:
                            msg = messages.next(timeout=0.5)
                        except errors.TimeoutError:
                            continue
                        it_reader.saw(msg)
                        msg.ack()

            def put_values() -> None:
                n = 0
                while not stop.is_set():
                    try:
                        kv.put(f"k{n % 50}", b"%d" % n)
                        kv_figures["puts"] += 1
                    except errors.JetStreamError:
                        time.sleep(0.2)  # back-off before writing again during a fault
                    n += 1
                    time.sleep(0.01)  # pacing: about 100 puts a second, well inside the bucket's history

            def watch_values() -> None:
                with kv.watch(">", include_history=True) as watcher:
                    while not finished.is_set():
                        try:
                            entry = watcher.next(timeout=0.5)
                        except errors.TimeoutError:
                            continue
                        if entry is None:
                            continue
                        if entry.revision != kv_figures["last"] + 1:
                            kv_figures["gaps"] += 1
                        kv_figures["last"] = entry.revision

            def kv_last_revision() -> int:
                return js.stream_info("KV_soak").state.last_seq

            consume_ctx = js.consumer("SOAK", "work").consume(
                on_work, expires=2, idle_heartbeat=1, error_handler=lambda exc: None
            )
            ordered_ctx = js.ordered_consumer("SOAK").consume(
                lambda msg: ordered.saw(msg, ordered=True), expires=2, idle_heartbeat=1, error_handler=lambda exc: None
            )
            failures: list[str] = []

            def guarded(target: Callable[[], None]) -> Callable[[], None]:
                def run() -> None:
                    try:
                        target()
                    except BaseException as exc:  # reported in the figures and failed on below
                        failures.append(f"{target.__name__}: {exc!r}")
                        raise

                return run

            threads = [
                threading.Thread(target=guarded(target), name=f"soak-{target.__name__}", daemon=True)
                for target in (producers.sequential, producers.pipelined, put_values, iterate, watch_values)
            ]
            threads.append(threading.Thread(target=elections.run, name="soak-elections", daemon=True))
            for thread in threads:
                thread.start()

            started = time.monotonic()
            faults = run_faults(cluster, nc, started)
            left = SOAK_SECONDS - (time.monotonic() - started)
            stop.wait(max(0.0, left))  # the rest of the soak: traffic on a healed cluster
            stop.set()
            for thread in threads[:3]:  # the writers: producers and the KV writer
                thread.join(180)
            acked = set(producers.acked)
            settled(lambda: all(r.has_all(acked) for r in (work, it_reader, ordered)), timeout=90)
            settled(lambda: kv_figures["last"] >= kv_last_revision(), timeout=60)
            finished.set()
            for thread in threads[3:]:
                thread.join(30)
            consume_ctx.stop()
            ordered_ctx.stop()

            stored = js.stream_info("SOAK").state.messages
            lost = {r.name: len(acked - r.ids) for r in (work, it_reader, ordered)}
            duplicates = sum(r.deliveries - len(r.ids) for r in (work, it_reader, ordered))
            print(
                f"\nSOAK cluster {SOAK_SECONDS:g}s: published={len(acked)} stored={stored} "
                f"processed={len(work.ids)} lost={sum(lost.values())} duplicates={duplicates} "
                f"reconnects={nc.reconnects} elections={elections.count} faults={len(faults)} "
                f"publish_retries={producers.retries} unresolved_futures={producers.unresolved} "
                f"ordered_gaps={len(ordered.gaps)} kv_puts={kv_figures['puts']} kv_gaps={kv_figures['gaps']} "
                f"kv_seen={kv_figures['last']}/{kv_last_revision()} lost_by_reader={lost} failures={failures}"
            )
            assert failures == []
            assert lost == {"consume": 0, "messages": 0, "ordered": 0}
            assert stored == len(acked)  # every retry stored once (msg_id)
            assert producers.unresolved == 0
            assert ordered.gaps == [] and kv_figures["gaps"] == 0
            assert kv_figures["last"] == kv_last_revision()  # the watcher saw every revision
            assert faults == ["stream step-down", "consumer step-down", "kill", "partition", "rolling restart"]
        finally:
            stop.set()  # also when an assertion failed: no thread may outlive the test
            finished.set()
            nc.close()


def settled(predicate: Callable[[], bool], timeout: float) -> bool:
    """Wait up to ``timeout`` for ``predicate``; whether it came true (the figures line says what did not)."""
    try:
        wait_until(predicate, timeout=timeout)
    except AssertionError:
        return False
    return True


def run_faults(cluster: EmbeddedCluster, nc: jetstream_sync.Client, started: float) -> list[str]:
    """The fault schedule, each step at its offset into the soak (scaled to SOAK_SECONDS); returns what ran."""
    done: list[str] = []

    def kill() -> None:
        victim = cluster.urls.index(nc.connected_url) if nc.connected_url in cluster.urls else 0
        cluster.servers[victim].kill()  # the node this client is connected to: it must move
        time.sleep(5)  # the fault's length: the node stays down for 5 s
        cluster.servers[victim].start()
        cluster.wait_formed()

    def partition() -> None:
        victim = cluster.leader_of("SOAK")
        cluster.partition(victim)
        time.sleep(8)  # the fault's length: the node stays cut off for 8 s
        cluster.heal(victim)
        cluster.wait_formed()

    schedule: list[tuple[float, str, Callable[[], object]]] = [
        (0.08, "stream step-down", lambda: cluster.step_down("SOAK")),
        (0.16, "consumer step-down", lambda: [cluster.step_down_consumer("SOAK", c) for c in ("work", "iter")]),
        (0.25, "kill", kill),
        (0.42, "partition", partition),
        (0.58, "rolling restart", cluster.rolling_restart),
    ]
    for offset, name, fault in schedule:
        pause = started + offset * SOAK_SECONDS - time.monotonic()
        if pause > 0:
            time.sleep(pause)  # the schedule: wait for this fault's turn
        fault()
        done.append(name)
    return done
