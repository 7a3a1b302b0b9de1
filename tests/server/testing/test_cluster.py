"""EmbeddedCluster: real nodes routed together, their leaders, partitions and restarts."""

from __future__ import annotations

import pytest

import jetstream_sync
from jetstream_sync import StreamConfig, errors
from jetstream_sync.testing import EmbeddedCluster
from tests.helpers import wait_until

pytestmark = pytest.mark.cluster


def test_bad_arguments_are_refused_before_anything_starts():
    with pytest.raises(errors.InvalidArgumentError, match="size"):
        EmbeddedCluster(size=1)
    with pytest.raises(errors.InvalidTypeError, match="size"):
        EmbeddedCluster(size="3")
    with pytest.raises(errors.InvalidArgumentError, match="name"):
        EmbeddedCluster(name="a b")


def test_a_partitioned_node_loses_its_leadership_and_rejoins_when_healed(nats_cluster):
    assert all(url.startswith("nats://127.0.0.1:") for url in nats_cluster.urls)
    with jetstream_sync.connect(nats_cluster.urls) as nc:
        js = nc.jetstream()
        js.create_stream(StreamConfig(name="P", subjects=["p.>"], num_replicas=3))
        leader = nats_cluster.leader_of("P")
        nats_cluster.partition(leader)
        wait_until(lambda: _leader_or_none(nats_cluster, "P") not in (None, leader), timeout=60)
        nats_cluster.heal(leader)
        nats_cluster.wait_formed()
        # the healed node may lead on stale news for a moment: a publish with a msg_id is safe to repeat
        wait_until(lambda: _published(js, "p.x", b"after the heal", "heal-1"), timeout=30)
        wait_until(lambda: _messages(js, "P") == 1, timeout=30)  # a stale node may answer info for a moment


def test_nodes_restart_and_rejoin_one_after_another(nats_cluster):
    with jetstream_sync.connect(nats_cluster.urls, max_reconnect_attempts=-1) as nc:
        js = nc.jetstream()
        js.create_stream(StreamConfig(name="R", subjects=["r.>"], num_replicas=3))
        js.publish("r.x", b"kept", msg_id="one")
        nats_cluster.rolling_restart()
        assert all(server.is_running for server in nats_cluster.servers)
        wait_until(lambda: _messages(js, "R") == 1, timeout=30)  # every node kept the replicated stream
        assert 0 <= nats_cluster.meta_leader() < 3


def _leader_or_none(cluster: EmbeddedCluster, stream: str) -> int | None:
    try:
        return cluster.leader_of(stream)
    except errors.JetStreamError:
        return None


def _published(js, subject: str, data: bytes, msg_id: str) -> bool:
    try:
        js.publish(subject, data, msg_id=msg_id, timeout=5)
    except (errors.TimeoutError, errors.NoRespondersError):
        return False
    return True


def _messages(js, stream: str) -> int:
    try:
        return js.stream_info(stream).state.messages
    except errors.JetStreamError:
        return -1
