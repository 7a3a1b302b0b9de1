"""Cluster info read typed from a 3-node cluster: an R3 stream's replicas, the leaders Stream.leader() and
Consumer.leader() name (the cluster helper's, before and after a step-down), and a stream placed by cluster name."""

from __future__ import annotations

import pytest

import jetstream_sync
from jetstream_sync import ClusterInfo, ConsumerConfig, PeerInfo, Placement, StreamConfig, errors
from tests.helpers import wait_until

pytestmark = pytest.mark.cluster

#: API calls ride through an election (nats-server elects a new leader within a few seconds)
ELECTION_PROOF = 30.0


@pytest.fixture
def cluster_js(nats_cluster):
    with jetstream_sync.connect(nats_cluster.urls, name="models-cluster-test", max_reconnect_attempts=-1) as nc:
        yield nc.jetstream(timeout=ELECTION_PROOF)


def test_an_r3_stream_and_consumer_name_their_leaders(nats_cluster, cluster_js):
    names = nats_cluster.names
    stream = cluster_js.create_stream(StreamConfig(name="ORDERS", subjects=["orders.>"], num_replicas=3))
    consumer = stream.create_consumer(ConsumerConfig(durable_name="work", num_replicas=3))

    leader = names[nats_cluster.leader_of("ORDERS")]
    assert stream.leader() == leader
    cluster = stream.cached_info.cluster
    assert isinstance(cluster, ClusterInfo)
    assert (cluster.name, cluster.leader) == (nats_cluster.name, leader)
    assert cluster.raft_group and cluster.leader_since is not None
    assert len(cluster.replicas) == 2 and all(isinstance(peer, PeerInfo) for peer in cluster.replicas)
    assert {peer.name for peer in cluster.replicas} == set(names) - {leader}

    consumer_leader = names[nats_cluster.consumer_leader_of("ORDERS", "work")]
    assert consumer.leader() == consumer_leader
    consumer_cluster = consumer.cached_info.cluster
    assert consumer_cluster is not None and len(consumer_cluster.replicas) == 2
    assert {peer.name for peer in consumer_cluster.replicas} == set(names) - {consumer_leader}

    new = names[nats_cluster.step_down("ORDERS")]
    assert new != leader
    wait_until(lambda: stream.leader() == new, timeout=ELECTION_PROOF)


def test_a_stream_placed_in_the_cluster(nats_cluster, cluster_js):
    placement = Placement(cluster=nats_cluster.name)
    placed = cluster_js.create_stream(StreamConfig(name="PLACED", subjects=["placed.>"], placement=placement))
    info = placed.info()
    assert info.config.placement == placement
    assert info.cluster is not None and info.cluster.name == nats_cluster.name
    # an R1 stream of a cluster has no Raft group, but still a server that leads it
    assert info.cluster.raft_group is None and info.cluster.replicas == []
    assert placed.leader() == nats_cluster.names[nats_cluster.leader_of("PLACED")]

    with pytest.raises(errors.APIError, match="no suitable peers for placement"):
        cluster_js.create_stream(StreamConfig(name="NOWHERE", subjects=["nowhere.>"], placement={"cluster": "other"}))


def test_dead_letter_events_are_replicated_like_the_stream_they_watch(cluster_js):
    cluster_js.create_stream(StreamConfig(name="JOBS", subjects=["jobs.>"], num_replicas=3))
    cluster_js.create_consumer("JOBS", ConsumerConfig(durable_name="w", max_deliver=2))
    with cluster_js.dead_letter("JOBS", "w", to="dead.jobs") as mover:
        events = cluster_js.stream_info(mover.events_stream)
    assert events.config.num_replicas == 3  # an advisory kept on one node would be lost with it
    assert len(events.cluster.replicas) == 2
