"""A key-value bucket with three replicas on a 3-node cluster: compare-and-set refusals are typed, a read after a
completed write returns it, and a read no replica can answer waits for one within its timeout."""

from __future__ import annotations

import threading
import time

import pytest

import jetstream_sync
from jetstream_sync import KeyValueConfig, StreamConfig, errors

pytestmark = pytest.mark.cluster

THREADS = 8
UPDATES_PER_THREAD = 150
PAIRS = 2_000


@pytest.fixture
def r3_bucket(nats_cluster):
    with jetstream_sync.connect(nats_cluster.urls, name="writer") as nc:
        js = nc.jetstream(timeout=30)
        kv = js.create_key_value(KeyValueConfig(bucket="R3", replicas=3, history=5))
        yield nats_cluster, nc, kv


def test_compare_and_set_conflicts_on_a_replicated_bucket_are_key_wrong_last_sequence_errors(r3_bucket):
    """8 threads x 150 ``update(last=...)`` on one key: each refusal is a KeyWrongLastSequenceError (the server
    answers 10164 on a replicated stream while another write to the key is in flight, 10071 otherwise), and
    the counter they build counts exactly the updates reported stored."""
    _, _, kv = r3_bucket
    kv.put("counter", b"0")
    stored = [0] * THREADS
    refused = [0] * THREADS
    other: list[BaseException] = []

    def work(t: int) -> None:
        for _ in range(UPDATES_PER_THREAD):
            entry = kv.get("counter", read="leader")
            try:
                kv.update("counter", b"%d" % (int(entry.value) + 1), last=entry.revision)
                stored[t] += 1
            except errors.KeyWrongLastSequenceError:
                refused[t] += 1
            except BaseException as exc:  # any other error fails the test below, with its class named
                other.append(exc)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not other, f"{len(other)} updates raised something else: {sorted({repr(e) for e in other})[:3]}"
    assert sum(stored) + sum(refused) == THREADS * UPDATES_PER_THREAD
    assert int(kv.get("counter", read="leader").value) == sum(stored)


def test_a_read_after_a_completed_put_returns_that_put(r3_bucket):
    """The default read mode (read_your_writes) on one connection, and read="leader" from another: 2,000
    put-then-get pairs each, and never the value before the put (replicas apply writes milliseconds apart, and
    an unchecked direct get returned the older value 50 times in 2,000)."""
    cluster, _, kv = r3_bucket
    stale_same = [i for i in range(PAIRS) if _put_then_get(kv, kv, i) != i]
    with jetstream_sync.connect(cluster.urls, name="reader") as other:
        reader = other.jetstream(timeout=30).key_value("R3", read="leader")
        stale_other = [i for i in range(PAIRS) if _put_then_get(kv, reader, PAIRS + i) != PAIRS + i]
    assert (stale_same, stale_other) == ([], [])


def _put_then_get(writer, reader, value: int, read: str | None = None) -> int:
    writer.put("k", b"%d" % value)
    return int(reader.get("k", read=read).value)


def test_a_get_while_the_stream_has_no_server_is_answered_once_it_is_back(nats_cluster):
    """An R1 bucket whose only server is down: a get has no responders. It is retried within its timeout (it
    raised JetStreamNotEnabledError at once, a false statement) and answered once the server is back."""
    with jetstream_sync.connect(nats_cluster.urls, name="setup") as nc:
        kv = nc.jetstream(timeout=30).create_key_value(KeyValueConfig(bucket="R1", replicas=1))
        kv.put("k", b"v")
        host = nats_cluster.leader_of("KV_R1")
    others = [url for i, url in enumerate(nats_cluster.urls) if i != host]
    with jetstream_sync.connect(others, name="reader") as nc:
        kv = nc.jetstream(timeout=30).key_value("R1")
        nats_cluster.servers[host].kill()  # keeps the store, as a crash does
        back = threading.Timer(2.0, nats_cluster.servers[host].restart)
        back.start()
        try:
            started = time.monotonic()
            assert kv.get("k").value == b"v"
            assert time.monotonic() - started >= 1.0  # it waited for the server, not an error and a retry
        finally:
            back.join()


def test_a_get_while_the_stream_has_no_server_raises_a_retryable_error_at_its_timeout(nats_cluster):
    with jetstream_sync.connect(nats_cluster.urls, name="setup") as nc:
        nc.jetstream(timeout=30).create_stream(
            StreamConfig(name="ONE", subjects=["one.>"], num_replicas=1, allow_direct=True)
        )
        nc.jetstream().publish("one.a", b"1")
        host = nats_cluster.leader_of("ONE")
    others = [url for i, url in enumerate(nats_cluster.urls) if i != host]
    with jetstream_sync.connect(others, name="reader") as nc:
        stream = nc.jetstream().stream("ONE")
        nats_cluster.servers[host].kill()
        started = time.monotonic()
        with pytest.raises(errors.ClusterUnavailableError) as raised:
            stream.get_last_msg("one.a", timeout=3)
        assert 2.0 <= time.monotonic() - started < 6.0
        assert not isinstance(raised.value, errors.JetStreamNotEnabledError)


def test_an_object_read_from_another_connection_after_a_completed_put_is_the_new_version(nats_cluster):
    """An R3 object store: each put of a new version, then get_bytes and info from another connection. The
    metadata is read from the stream leader, so it names the new version's chunks (a replica behind named the
    old ones, already purged: DigestMismatchError "replaced or deleted while it was read", 10 in 1,000)."""
    from jetstream_sync import ObjectStoreConfig

    with (
        jetstream_sync.connect(nats_cluster.urls, name="writer") as writer,
        jetstream_sync.connect(nats_cluster.urls, name="reader") as reader,
    ):
        put = writer.jetstream(timeout=30).create_object_store(ObjectStoreConfig(bucket="OBJ3", replicas=3))
        get = reader.jetstream(timeout=30).object_store("OBJ3")
        wrong = []
        for version in range(150):
            data = bytes([version % 251]) * 300_000
            stored = put.put("report", data)
            if get.get_bytes("report") != data or get.info("report").digest != stored.digest:
                wrong.append(version)
        assert wrong == []


def _repro():
    """docs/upstream/repro_cas_10164.py as a module: its view of the stream's leader from each node's /jsz."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[3] / "docs" / "upstream" / "repro_cas_10164.py"
    spec = importlib.util.spec_from_file_location("repro_cas_10164", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.timeout(240)
def test_a_compare_and_set_refused_by_a_deposed_leader_but_stored_is_reported_stored(nats_cluster):
    """docs/upstream/kv-cas-refused-but-stored.md: the stream leader L is cut off while this client's write to a
    key is in flight there; the majority elects L'; the partition heals. L, not yet stepped down, refuses the
    next compare-and-set at once (10164) while L' stores it. The client, whose write went unanswered moments
    before, confirms the refusal by sending the write again under its message id: a duplicate answer, so the
    call returns the revision instead of a false KeyWrongLastSequenceError. No value reported refused is ever
    stored."""
    repro = _repro()
    with jetstream_sync.connect(nats_cluster.urls, name="everyone", max_reconnect_attempts=-1) as everyone:
        kv = everyone.jetstream(timeout=30).create_key_value(KeyValueConfig(bucket=repro.BUCKET, replicas=3))
        rev = kv.put("k", b"v0")
        leader = repro.wait_leader(nats_cluster, list(range(nats_cluster.size)))
        node = nats_cluster.names.index(leader)
        refused: list[bytes] = []
        stored: list[bytes] = []
        url = nats_cluster.servers[node].url
        with jetstream_sync.connect(url, name="on-the-leader", max_reconnect_attempts=-1) as p:
            quick = p.jetstream(timeout=1).key_value(repro.BUCKET)
            nats_cluster.partition(node)
            with pytest.raises(errors.TimeoutError):  # L proposes it and cannot commit it
                quick.update("k", b"during-partition", last=rev)
            repro.wait_leader(nats_cluster, [i for i in range(nats_cluster.size) if i != node], leader)
            nats_cluster.heal(node)
            patient = p.jetstream(timeout=10).key_value(repro.BUCKET)  # room for the 2 s confirmation
            healed = time.monotonic()
            i = 0
            while time.monotonic() - healed < repro.CAS_FOR and not stored:
                value = b"cas-%d" % i
                i += 1
                try:
                    patient.update("k", value, last=rev)
                    stored.append(value)
                except errors.KeyWrongLastSequenceError:
                    refused.append(value)
                except errors.TimeoutError:
                    pass  # unknown outcome, said so: neither reported stored nor refused
                time.sleep(repro.CAS_EVERY)  # the report's pace of compare-and-sets after the heal
        repro.wait_leader(nats_cluster, list(range(nats_cluster.size)))
        final = kv.get("k", read="leader").value
    assert final not in refused, f"{final!r} was reported refused and is stored"
    assert stored == [final] or final in (b"v0",), (stored, final)
