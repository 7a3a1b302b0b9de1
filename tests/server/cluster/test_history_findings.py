"""What the history-checked runs (test_history_workloads.py) found in the client, each as a test of its own.

A fetch whose consumer is electing a leader: the runs' fetch readers counted a ConsumerNotFoundError for most
faults that moved a consumer's leader (14-32 a run), on durable consumers that existed throughout. The pull met
"no responders" (nobody serves the consumer's pull subject between two leaders), and a fetch ends at once on that
with ConsumerNotFoundError (``pull_unanswered`` in jetstream/consumers/_target.py, called by _fetch.py), although
its ``expires`` had seconds left in which the new leader would have answered. The readers recovered (they pull
again), so nothing was lost; but the error says something false, and a loop that takes it at its word (recreate
the consumer, or stop) breaks on an election. Marked xfail (strict) until the client waits for a leader within
the fetch's time, as its direct gets do (reliability guide, "A direct get that no server of the stream could
answer").
"""

from __future__ import annotations

import pytest

import jetstream_sync
from jetstream_sync import ConsumerConfig, StreamConfig, errors

pytestmark = pytest.mark.cluster

MESSAGES = 10


@pytest.mark.xfail(
    strict=True,
    raises=errors.ConsumerNotFoundError,
    reason="client: a fetch that meets no responders while its consumer elects a leader ends at once with "
    "ConsumerNotFoundError (jetstream/consumers/_fetch.py, _target.pull_unanswered)",
)
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
