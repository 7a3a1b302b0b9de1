"""What the history-checked runs (test_history_workloads.py) found in the client, each as a test of its own.

Both failed on the client as the runs found it (the fetch one with ConsumerNotFoundError; the watch one silent for
its whole context timeout, 12.3 s against 6 s allowed) and pass since the fix in _delivery/ (_fetch.py
asks a pull again within the fetch's time; _chain.py bounds each request of an ordered reset); the reliability
guide's failure-modes table has both. The fetch test pulls once the other nodes have dropped their routes to the
dead leader, so its pull meets no responders: a pull that reaches the leader as it dies takes the missed-heartbeat
path instead, which these tests do not pin down. The third test is what was left of the fetch finding after the
first fix, for a fetch of 1 s (it ended with ConsumerNotFoundError when the consumer's info could not be asked in
its time): a fetch now says ConsumerNotFoundError only when the consumer's info says so.

A fetch whose consumer is electing a leader: the runs' fetch readers counted a ConsumerNotFoundError for most
faults that moved a consumer's leader (14-32 a run), on durable consumers that existed throughout. The pull met
"no responders" (nobody serves the consumer's pull subject between two leaders), and a fetch ended at once on that
with ConsumerNotFoundError (``pull_unanswered`` in _delivery/_target.py, called by _fetch.py), although
its ``expires`` had seconds left in which the new leader would have answered. The readers recovered (they pull
again), so nothing was lost; but the error said something false, and a loop that takes it at its word (recreate
the consumer, or stop) breaks on an election. When the pull reached the old leader just before it died, the fetch
ended instead with MissedHeartbeatError after twice its heartbeat (1 run in 20 of the test below). Either way it
gave up while its ``expires`` had seconds left in which the new leader would answer (4-5 s after the kill, here).

A watcher silent for its context's whole timeout: in the runs' rolling restarts both key-value watchers went
silent for 30 s and more (54 s once) while the writers went on, so they fell more than the bucket's 64 revisions
per key behind and missed hundreds of entries the stream had dropped meanwhile. After a reconnect the ordered
consumer under a watch resets, and the reset first asks ``STREAM.INFO`` (was the stream replaced?). When that
request went unanswered (its responder was restarting), the reset waited the JetStream context's whole timeout
(30 s in the runs: the timeout that rides out elections) before it tried again, and the watch delivered nothing
meanwhile; the missed-heartbeat alarm did not cut it short. The same held for any ordered consumer.
"""

from __future__ import annotations

import time

import pytest

import jetstream_sync
from jetstream_sync import ConsumerConfig, KeyValueConfig, StreamConfig, errors
from jetstream_sync.testing._server import _get_json
from tests.helpers import wait_until

MESSAGES = 10


def routes_of(cluster, i: int) -> set[str]:
    """The nodes node ``i`` has a route to now (its /routez)."""
    routez = _get_json(f"{cluster.servers[i].monitor_url}/routez", 2.0) or {}
    return {route.get("remote_name") for route in routez.get("routes") or []}


def elect_stream(nats_cluster, messages: int):
    """An R3 stream ELECT with an R3 durable consumer "work", ``messages`` messages in it; its leader's index."""
    with jetstream_sync.connect(nats_cluster.urls, name="setup") as nc:
        js = nc.jetstream(timeout=30)
        js.create_stream(StreamConfig(name="ELECT", subjects=["elect.>"], num_replicas=3))
        js.create_consumer("ELECT", ConsumerConfig(durable_name="work", num_replicas=3))
        for i in range(messages):
            js.publish("elect.x", b"%d" % i)
        return nats_cluster.consumer_leader_of("ELECT", "work")


@pytest.mark.cluster
@pytest.mark.timeout(120)
def test_a_fetch_while_its_consumer_elects_a_leader_waits_for_the_new_leader(nats_cluster):
    """The consumer's leader is killed and the others have dropped their routes to it: a pull meets no
    responders until a new leader is elected, and the fetch waits for it within its time."""
    leader = elect_stream(nats_cluster, MESSAGES)
    others = [i for i in range(nats_cluster.size) if i != leader]
    dead = nats_cluster.names[leader]
    with jetstream_sync.connect(
        [nats_cluster.urls[i] for i in others], name="fetcher", max_reconnect_attempts=-1
    ) as nc:
        consumer = nc.jetstream(timeout=30).consumer("ELECT", "work")
        nats_cluster.servers[leader].kill()  # the consumer has no leader until the others elect one (seconds)
        try:
            wait_until(lambda: all(dead not in routes_of(nats_cluster, i) for i in others), timeout=10)
            got = [bytes(msg.data) for msg in consumer.fetch(MESSAGES, expires=20)]
        finally:
            nats_cluster.servers[leader].start()
    assert got == [b"%d" % i for i in range(MESSAGES)]


@pytest.mark.cluster
@pytest.mark.timeout(120)
def test_a_short_fetch_while_its_consumer_elects_a_leader_never_says_the_consumer_is_gone(nats_cluster):
    """What is left of the first finding after the fix: a fetch with ``expires=1`` (the history runs' fetch
    readers; 189 such errors in 20 runs after the fix, 557 before) during the election ends after about 0.7 s
    with "no responders for a pull ... the consumer does not exist", 4-5 times in a row, on a consumer that
    exists. By the fix's own rule it may end with ClusterUnavailableError (there, but leaderless for the
    call's whole time) or with messages, never with ConsumerNotFoundError."""
    leader = elect_stream(nats_cluster, MESSAGES)
    others = [i for i in range(nats_cluster.size) if i != leader]
    dead = nats_cluster.names[leader]
    got: list[bytes] = []
    with jetstream_sync.connect(
        [nats_cluster.urls[i] for i in others], name="fetcher", max_reconnect_attempts=-1
    ) as nc:
        consumer = nc.jetstream(timeout=30).consumer("ELECT", "work")
        nats_cluster.servers[leader].kill()
        try:
            wait_until(lambda: all(dead not in routes_of(nats_cluster, i) for i in others), timeout=10)
            deadline = time.monotonic() + 20
            while not got and time.monotonic() < deadline:
                try:
                    got = [bytes(msg.data) for msg in consumer.fetch(MESSAGES, expires=1)]
                except errors.ClusterUnavailableError:
                    continue  # allowed: the consumer exists and has no leader yet; pull again
        finally:
            nats_cluster.servers[leader].start()
    assert got == [b"%d" % i for i in range(MESSAGES)]


#: the JetStream context's timeout, long as code that rides out elections sets it (the runs used 30 s)
CONTEXT_TIMEOUT = 12.0
#: how soon a watcher should deliver again after a reconnect whose first reset request was lost
RESUMES_WITHIN = 6.0


@pytest.mark.timeout(120)
def test_a_watch_whose_reset_request_is_lost_resumes_long_before_the_context_timeout(fault_proxy, nats_server_function):
    with (
        jetstream_sync.connect(fault_proxy.url, name="watcher", max_reconnect_attempts=-1, reconnect_wait=0.1) as nc,
        jetstream_sync.connect(nats_server_function.url, name="writer") as writer,
    ):
        kv = nc.jetstream(timeout=CONTEXT_TIMEOUT).create_key_value(KeyValueConfig(bucket="W"))
        put = writer.jetstream().key_value("W")
        with kv.watch(">") as watcher:
            assert watcher.next(timeout=5) is None  # no initial values
            put.put("k", b"v1")
            assert watcher.next(timeout=5).value == b"v1"
            lost = fault_proxy.drop_next("upstream", "$JS.API.STREAM.INFO.KV_W")
            fault_proxy.cut()  # the client reconnects; the watch's consumer resets, asking STREAM.INFO first
            assert lost.wait(timeout=10), "the reset sent no STREAM.INFO"
            put.put("k", b"v2")
            started = time.monotonic()
            entry = watcher.next(timeout=CONTEXT_TIMEOUT + 10)
            waited = time.monotonic() - started
    assert entry is not None and entry.value == b"v2"
    assert waited < RESUMES_WITHIN, f"the watch was silent for {waited:.1f}s after the reconnect"
