"""The nemesis of the history runs on a real cluster: it deals every kind of fault once before any twice, counts
what it applied, aims ``isolate_leader`` at a stream's leader and ``kill_client_node`` at a client's node, and
heals; and EmbeddedCluster reports the fsync setting its nodes run with."""

from __future__ import annotations

import pytest

import jetstream_sync
from jetstream_sync import StreamConfig
from jetstream_sync.errors import InvalidArgumentError
from jetstream_sync.testing import EmbeddedCluster, History, Nemesis

pytestmark = [pytest.mark.cluster, pytest.mark.history]

KINDS = ("pause", "isolate_leader", "kill_client_node")


@pytest.mark.timeout(300)
def test_the_nemesis_deals_every_fault_once_before_any_twice_and_counts_them(nats_cluster):
    with jetstream_sync.connect(nats_cluster.urls, name="setup") as nc:
        nc.jetstream(timeout=30).create_stream(StreamConfig(name="N", subjects=["n.>"], num_replicas=3))
    history = History()
    nemesis = Nemesis(nats_cluster, stream="N", faults=KINDS, history=history, seed=3, client_nodes=lambda: [1])
    dealt = []
    for _ in range(2 * len(KINDS)):
        dealt.append(nemesis.break_one().split()[0])
        if len(dealt) == len(KINDS):
            assert nemesis.dealt_all.is_set()
        nemesis.heal()
    assert sorted(dealt[:3]) == sorted(KINDS) and sorted(dealt[3:]) == sorted(KINDS), dealt
    assert nemesis.counts() == dict.fromkeys(KINDS, 2) and nemesis.incomplete == []
    assert all(" (leader of N)" in what for what in nemesis.applied if what.startswith("isolate_leader"))
    assert all(what == "kill_client_node n2 (a client's)" for what in nemesis.applied if "client" in what)
    noted = [event.what for event in history.events]
    assert noted.count("heal") == 2 and noted.count("resume") == 2 and noted.count("start") == 2, noted
    assert all(server.is_running for server in nats_cluster.servers)


def test_kill_client_node_needs_to_know_where_the_clients_are(nats_cluster):
    with pytest.raises(InvalidArgumentError, match="client_nodes"):
        Nemesis(nats_cluster, stream="N", faults=("kill_client_node",))


@pytest.mark.timeout(120)
def test_the_cluster_reports_the_fsync_setting_of_its_nodes():
    with EmbeddedCluster(size=2, sync_interval="always") as cluster:
        assert cluster.fsync() == "always"
    with EmbeddedCluster(size=2) as cluster:
        assert cluster.fsync() == "every 120s"  # nats-server's default: every two minutes
