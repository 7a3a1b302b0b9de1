"""A 3-node cluster and an R3 stream: each fault on its own, and the consume goes on within 5 s of the new
leader being elected, with nothing lost."""

from __future__ import annotations

import threading
import time

import pytest

import jetstream_sync
from jetstream_sync import ConsumerConfig, StreamConfig, errors
from tests.helpers import wait_until

pytestmark = pytest.mark.cluster

RESUME_WITHIN = 5.0
#: a publish rides through an election: nats-server elects a new leader 4-9 s after losing the old one, so
#: code that publishes into a cluster gives a publish longer than the client's default 5 s (and a msg_id)
ELECTION_PROOF = 30.0


class Collector:
    """A consume handler: the payloads it acked, in order, and a way to wait for a given one."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.seen: list[int] = []

    def __call__(self, msg: jetstream_sync.Msg) -> None:
        with self.lock:
            self.seen.append(int(msg.data))
        msg.ack()

    def has(self, values: range) -> bool:
        with self.lock:
            return set(values) <= set(self.seen)


@pytest.fixture
def cluster_js(nats_cluster):
    with jetstream_sync.connect(nats_cluster.urls, name="cluster-test", max_reconnect_attempts=-1) as nc:
        js = nc.jetstream(timeout=ELECTION_PROOF)  # API calls too ride through an election
        js.create_stream(StreamConfig(name="ORDERS", subjects=["orders.>"], num_replicas=3))
        js.create_consumer("ORDERS", ConsumerConfig(durable_name="work", num_replicas=3, ack_wait=5))
        yield nc, js


def publish(js, values: range) -> None:
    for i in values:
        js.publish("orders.new", b"%d" % i, msg_id=f"m{i}", timeout=ELECTION_PROOF)


def resumed_after(fault, js, collector: Collector) -> float:
    """Run ``fault`` (which returns once the new leader is elected), publish, and time how long the consume
    takes to receive what was published after it."""
    fault()
    elected = time.monotonic()
    publish(js, range(100, 150))
    wait_until(lambda: collector.has(range(100, 150)), timeout=RESUME_WITHIN + 10)
    return time.monotonic() - elected


def test_the_cluster_helper_reports_leaders_and_steps_them_down(nats_cluster, cluster_js):
    nc, _js = cluster_js
    leader = nats_cluster.leader_of("ORDERS")
    assert 0 <= leader < 3
    assert nats_cluster.step_down("ORDERS") != leader
    consumer_leader = nats_cluster.consumer_leader_of("ORDERS", "work")
    assert nats_cluster.step_down_consumer("ORDERS", "work") != consumer_leader
    assert nc.connected_url in [u.replace("nats://", "nats://") for u in nats_cluster.urls]


@pytest.mark.parametrize(
    "fault",
    ["stream_step_down", "consumer_step_down", "kill_stream_leader", "restart_stream_leader", "partition", "rolling"],
)
def test_a_consume_resumes_within_5s_of_the_new_leader(nats_cluster, cluster_js, fault):
    nc, js = cluster_js
    collector = Collector()
    cons = js.consumer("ORDERS", "work")
    with cons.consume(collector, expires=2):
        publish(js, range(100))
        wait_until(lambda: collector.has(range(100)), timeout=10)

        def do_fault() -> None:
            if fault == "stream_step_down":
                nats_cluster.step_down("ORDERS")
            elif fault == "consumer_step_down":
                nats_cluster.step_down_consumer("ORDERS", "work")
            elif fault in ("kill_stream_leader", "restart_stream_leader"):
                victim = nats_cluster.leader_of("ORDERS")
                nats_cluster.servers[victim].kill()
                wait_until(lambda: _has_other_leader(nats_cluster, victim), timeout=30)
                if fault == "restart_stream_leader":  # it comes back as a follower and catches up
                    nats_cluster.servers[victim].start()
                    nats_cluster.wait_formed()
            elif fault == "rolling":
                nats_cluster.rolling_restart()  # every node in turn, the client's too
            else:
                # a client connected to the cut-off node stays connected to it (the node is up): partition a
                # leader the client is not connected to
                mine = nats_cluster.urls.index(nc.connected_url)
                while nats_cluster.leader_of("ORDERS") == mine:
                    nats_cluster.step_down("ORDERS")
                victim = nats_cluster.leader_of("ORDERS")
                nats_cluster.partition(victim)
                wait_until(lambda: _has_other_leader(nats_cluster, victim), timeout=30)

        took = resumed_after(do_fault, js, collector)
    assert took < RESUME_WITHIN, f"the consume resumed {took:.1f}s after the election"
    assert collector.has(range(150))


def test_killing_the_connected_node_moves_the_client(nats_cluster, cluster_js):
    nc, js = cluster_js
    collector = Collector()
    with js.consumer("ORDERS", "work").consume(collector, expires=2):
        publish(js, range(100))
        wait_until(lambda: collector.has(range(100)), timeout=10)
        before = nc.connected_url
        victim = nats_cluster.urls.index(before)
        nats_cluster.servers[victim].kill()
        wait_until(lambda: nc.is_connected and nc.connected_url != before, timeout=10)
        publish(js, range(100, 150))
        wait_until(lambda: collector.has(range(150)), timeout=15)


def _has_other_leader(cluster, old: int) -> bool:
    try:
        return cluster.leader_of("ORDERS") != old
    except Exception:
        return False


def test_a_client_given_one_node_learns_the_others_and_moves_to_them(nats_cluster):
    first = nats_cluster.urls[0]
    with jetstream_sync.connect(first, name="one-url", max_reconnect_attempts=-1, reconnect_wait=0.1) as nc:
        wait_until(lambda: set(nats_cluster.urls) <= set(nc.servers), timeout=10)  # announced in INFO
        assert nc.server_info["server_name"] == "n1"
        js = nc.jetstream(timeout=ELECTION_PROOF)
        js.create_stream(StreamConfig(name="ONE", subjects=["one.>"], num_replicas=3))
        js.publish("one.a", b"before", msg_id="before")
        nats_cluster.servers[0].kill()
        wait_until(lambda: nc.is_connected and nc.connected_url != first, timeout=10)
        assert nc.server_info["server_name"] in ("n2", "n3")  # the INFO of the node it moved to
        assert js.publish("one.a", b"after", msg_id="after").seq == 2
        assert js.stream_info("ONE").state.messages == 2


def test_an_impossible_placement_fails_at_once(nats_cluster):
    with jetstream_sync.connect(nats_cluster.urls) as nc:
        js = nc.jetstream(timeout=ELECTION_PROOF)
        started = time.monotonic()
        with pytest.raises(errors.APIError) as caught:
            js.create_stream(StreamConfig(name="FIVE", subjects=["five.>"], num_replicas=5))  # 3 nodes
        assert caught.value.err_code == 10005
        assert time.monotonic() - started < 5  # not retried until the 30 s timeout: waiting will not help
