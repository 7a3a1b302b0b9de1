"""What the history-checked runs (test_history_workloads.py) found in the client, each as a test of its own.

Both are marked xfail (strict): they fail on the client as it is, and the team lead owns the code they point at
(jetstream/consumers). When a fix makes one pass, strict xfail fails it, so the mark must go with the fix.

A fetch whose consumer is electing a leader: the runs' fetch readers counted a ConsumerNotFoundError for most
faults that moved a consumer's leader (14-32 a run), on durable consumers that existed throughout. The pull met
"no responders" (nobody serves the consumer's pull subject between two leaders), and a fetch ends at once on that
with ConsumerNotFoundError (``pull_unanswered`` in jetstream/consumers/_target.py, called by _fetch.py), although
its ``expires`` had seconds left in which the new leader would have answered. The readers recovered (they pull
again), so nothing was lost; but the error says something false, and a loop that takes it at its word (recreate
the consumer, or stop) breaks on an election. When the pull reached the old leader just before it died, the fetch
ends instead with MissedHeartbeatError after twice its heartbeat (1 run in 20 of the test below). Either way it
gives up while its ``expires`` has seconds left in which the new leader would answer (4-5 s after the kill, here):
it should pull again within its time, as ``consume()`` does and as the client's direct gets wait for a server
(reliability guide, "A direct get that no server of the stream could answer").

A watcher silent for its context's whole timeout: in the runs' rolling restarts both key-value watchers went
silent for 30 s and more (54 s once) while the writers went on, so they fell more than the bucket's 64 revisions
per key behind and missed hundreds of entries the stream had dropped meanwhile. After a reconnect the ordered
consumer under a watch resets, and the reset first asks ``STREAM.INFO`` (was the stream replaced?). When that
request goes unanswered (its responder was restarting), the reset waits the JetStream context's whole timeout
(30 s in the runs: the timeout that rides out elections) before it tries again, and the watch delivers nothing
meanwhile; the missed-heartbeat alarm does not cut it short. The same holds for any ordered consumer. It should
give up on one unanswered request far sooner and ask again, as the client's API retries do within a call.
"""

from __future__ import annotations

import time

import pytest

import jetstream_sync
from jetstream_sync import ConsumerConfig, KeyValueConfig, StreamConfig, errors

MESSAGES = 10


@pytest.mark.xfail(
    strict=True,
    raises=(errors.ConsumerNotFoundError, errors.MissedHeartbeatError),
    reason="client: a fetch does not ride through its consumer's leader change: ConsumerNotFoundError at once on "
    "no responders (jetstream/consumers/_fetch.py, _target.pull_unanswered), or MissedHeartbeatError when the "
    "pull reached the leader that died",
)
@pytest.mark.cluster
@pytest.mark.timeout(120)
def test_a_fetch_while_its_consumer_elects_a_leader_waits_for_the_new_leader(nats_cluster):
    urls = nats_cluster.urls
    with jetstream_sync.connect(urls, name="setup") as nc:
        js = nc.jetstream(timeout=30)
        js.create_stream(StreamConfig(name="ELECT", subjects=["elect.>"], num_replicas=3))
        js.create_consumer("ELECT", ConsumerConfig(durable_name="work", num_replicas=3))
        for i in range(MESSAGES):
            js.publish("elect.x", b"%d" % i)
        leader = nats_cluster.consumer_leader_of("ELECT", "work")
    others = [url for i, url in enumerate(urls) if i != leader]
    with jetstream_sync.connect(others, name="fetcher", max_reconnect_attempts=-1) as nc:
        consumer = nc.jetstream(timeout=30).consumer("ELECT", "work")
        nats_cluster.servers[leader].kill()  # the consumer has no leader until the others elect one (seconds)
        try:
            got = [bytes(msg.data) for msg in consumer.fetch(MESSAGES, expires=20)]
        finally:
            nats_cluster.servers[leader].start()
    assert got == [b"%d" % i for i in range(MESSAGES)]


#: the JetStream context's timeout, long as code that rides out elections sets it (the runs used 30 s)
CONTEXT_TIMEOUT = 12.0
#: how soon a watcher should deliver again after a reconnect whose first reset request was lost
RESUMES_WITHIN = 6.0


@pytest.mark.xfail(
    strict=True,
    reason="client: an ordered consumer's reset waits the context's whole timeout for one unanswered STREAM.INFO "
    "(jetstream/consumers/_ordered.py, _chain.py), and a watch on it stays silent meanwhile",
)
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
