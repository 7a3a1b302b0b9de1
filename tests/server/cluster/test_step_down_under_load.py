"""EmbeddedCluster.step_down and step_down_consumer under load (issue 37): a publisher writing to the R3 stream,
the machine busy, a member just healed from a partition. Each step-down must end with another node leading within
10 s, the figure it used to miss now and then, and a step-down that cannot succeed must say why.

Why it failed before: every node receives a step-down request and the first answer wins. A member that sees no
leader for a moment (healed or restarted) answers 10008 at once, before the leader; the leader may hand over to a
peer behind on the log that cannot win and be elected again, so the old leader stays; and a request sent once was
never sent again. The helper now asks again while the old leader is still seen leading.
"""

from __future__ import annotations

import pickle
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest

import jetstream_sync
from jetstream_sync import ConsumerConfig, StreamConfig, errors
from jetstream_sync.testing import EmbeddedCluster
from jetstream_sync.testing._cluster import StepDownError
from tests.helpers import wait_until

pytestmark = pytest.mark.cluster

#: what a step-down gets: a new leader comes within a second or two when the handover works, and within one more
#: election (4-9 s in nats-server) when the old leader is elected again and asked once more
STEP_DOWN_TIMEOUT = 10.0
STEP_DOWNS = 10  # alternately the stream's and the consumer's
PUBLISH_TIMEOUT = 10.0  # an ack lost in an election fails its future after this (it is then not counted)


@pytest.fixture
def busy_machine() -> Iterator[None]:
    """One process spinning on a CPU for the test's length: with the cluster, the publisher and the test on the
    other, elections and API answers come late, as on a loaded CI machine."""
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        yield
    finally:
        spinner.kill()
        spinner.wait(timeout=10)


class Publisher:
    """Writes to the stream from a thread of its own, pipelined (publish_async), until stopped; keeps the msg_ids
    the stream acknowledged, so the test can check none of them went missing across the elections."""

    def __init__(self, js: jetstream_sync.JetStream) -> None:
        self.js = js
        self.acked: set[str] = set()
        self.failures: list[BaseException] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="step-down-publisher", daemon=True)

    def __enter__(self) -> Publisher:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join(PUBLISH_TIMEOUT + 10)
        assert not self._thread.is_alive(), "the publisher did not stop"

    def _run(self) -> None:
        batch = 0
        while not self._stop.is_set():
            ids = [f"b{batch}-{i}" for i in range(50)]
            futures = {
                msg_id: self.js.publish_async("orders.new", msg_id.encode(), msg_id=msg_id, timeout=PUBLISH_TIMEOUT)
                for msg_id in ids
            }
            for msg_id, future in futures.items():
                try:
                    future.result(PUBLISH_TIMEOUT + 5)
                except errors.JetStreamError as exc:  # not acked: not counted, and it may or may not be stored
                    self.failures.append(exc)
                else:
                    self.acked.add(msg_id)
            batch += 1


@pytest.fixture
def loaded(nats_cluster: EmbeddedCluster) -> Iterator[tuple[jetstream_sync.JetStream, Publisher]]:
    with jetstream_sync.connect(nats_cluster.urls, name="step-down-load", max_reconnect_attempts=-1) as nc:
        js = nc.jetstream(timeout=PUBLISH_TIMEOUT)
        js.create_stream(StreamConfig(name="ORDERS", subjects=["orders.>"], num_replicas=3))
        js.create_consumer("ORDERS", ConsumerConfig(durable_name="work", num_replicas=3))
        with Publisher(js) as publisher:
            wait_until(lambda: len(publisher.acked) >= 200, timeout=30)  # writing before the first step-down
            yield js, publisher
        wait_until(lambda: _stored(js) >= len(publisher.acked), timeout=30)


def _step_down_once(cluster: EmbeddedCluster, k: int) -> None:
    """Step the stream's leader down (even ``k``) or the consumer's (odd); the new one must lead and be another."""
    if k % 2 == 0:
        old = cluster.leader_of("ORDERS")
        started = time.monotonic()
        new = cluster.step_down("ORDERS", timeout=STEP_DOWN_TIMEOUT)
    else:
        old = cluster.consumer_leader_of("ORDERS", "work")
        started = time.monotonic()
        new = cluster.step_down_consumer("ORDERS", "work", timeout=STEP_DOWN_TIMEOUT)
    took = time.monotonic() - started
    assert new != old
    assert took < STEP_DOWN_TIMEOUT + 2  # the timeout bounds the whole call, every retry and look inside


def test_step_downs_move_the_leader_while_a_publisher_writes_on_a_busy_machine(nats_cluster, busy_machine, loaded):
    js, publisher = loaded
    for k in range(STEP_DOWNS):
        _step_down_once(nats_cluster, k)
    acked = len(publisher.acked)
    assert acked > 200
    wait_until(lambda: _stored(js) >= acked, timeout=30)  # every acknowledged publish is in the stream


def test_a_step_down_right_after_a_heal_waits_out_the_healed_node(nats_cluster, loaded):
    """The healed node answers 10008 for a moment (it sees no leader yet), faster than the leader answers: the
    step-down is asked again rather than failing with that 503."""
    _js, _publisher = loaded
    for k in range(3):
        leader = nats_cluster.leader_of("ORDERS")
        follower = next(i for i in range(nats_cluster.size) if i != leader)
        nats_cluster.partition(follower)
        time.sleep(1.0)  # the fault's length: cut long enough for the follower to lose sight of the leader
        nats_cluster.heal(follower)
        _step_down_once(nats_cluster, k)
        nats_cluster.wait_formed()  # the next cycle starts from a whole cluster, its routes back


def test_a_step_down_that_cannot_move_the_leader_says_what_happened(nats_cluster):
    """An R1 stream has no peer to hand over to: the server accepts the request and nothing changes, so the helper
    asks again until its timeout and then names the leader that stayed, the requests sent and the last answer."""
    with jetstream_sync.connect(nats_cluster.urls, name="step-down-r1") as nc:
        nc.jetstream().create_stream(StreamConfig(name="SOLO", subjects=["solo.>"], num_replicas=1))
        leader = nats_cluster.leader_of("SOLO")
        started = time.monotonic()
        with pytest.raises(StepDownError) as caught:
            nats_cluster.step_down("SOLO", timeout=5)
    assert time.monotonic() - started < 5 + 3
    err = caught.value
    assert isinstance(err, errors.JetStreamError)  # and a ClusterError, as before
    assert (err.old, err.leader) == (leader, leader)
    assert err.attempts >= 2  # asked again while the old leader stayed
    assert err.last_answer == "accepted"
    assert f"no leader other than {nats_cluster.names[leader]} within 5s" in str(err)
    assert "still leads" in str(err)
    again = pickle.loads(pickle.dumps(err))
    assert (type(again), str(again), again.old, again.attempts) == (StepDownError, str(err), leader, err.attempts)


def test_a_step_down_of_a_missing_stream_says_so_within_its_timeout(nats_cluster):
    started = time.monotonic()
    with pytest.raises(StepDownError, match=r"has no leader to step down.*stream not found") as caught:
        nats_cluster.step_down("NOPE", timeout=3)
    assert time.monotonic() - started < 3 + 3
    assert (caught.value.old, caught.value.attempts) == (None, 0)


def _stored(js: jetstream_sync.JetStream) -> int:
    try:
        return js.stream_info("ORDERS").state.messages
    except errors.JetStreamError:
        return -1
