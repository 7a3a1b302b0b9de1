"""KeyValueCache on a bucket of three replicas (a 3-node EmbeddedCluster), where a replica applies each write
milliseconds after it was acknowledged: what each READ mode guarantees across processes, a ``clear()`` seen by
the next read of the process that made it, and compare-and-set operations that lose no update whatever READ
says. Django's own cases run on such a bucket too (test_django_cache_suite.py, KeyValueCacheR3Tests).

Another process is another client: a second connection, with revisions of its own that this process's client
knows nothing of.
"""

from __future__ import annotations

import pickle
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from django.test import override_settings

import jetstream_sync
from jetstream_sync.integrations.django import close_clients
from jetstream_sync.integrations.django.cache import KeyValueCache, encode_key, encode_value
from jetstream_sync.testing import EmbeddedCluster
from tests.helpers import join_all

pytestmark = pytest.mark.cluster

#: put-then-get pairs: an unchecked read from a replica returned the value before the put about once in 40
PAIRS = 500
#: set-clear-read rounds: without the check of what clear() removed, about one read in 300 returned a value
ROUNDS = 200


@pytest.fixture(scope="module")
def cluster() -> Iterator[EmbeddedCluster]:
    """One 3-node cluster for the module, named by settings.JETSTREAM while the module's tests run."""
    with EmbeddedCluster(3) as nodes:
        setting = {"SERVERS": nodes.urls, "NAME": "django-cache-cluster-tests", "TIMEOUT": 30}
        with override_settings(JETSTREAM=setting):
            try:
                yield nodes
            finally:
                close_clients()  # before the cluster stops (the session server's client reconnects on next use)


def make_cache(bucket: str, **options: Any) -> KeyValueCache:
    return KeyValueCache(bucket, {"TIMEOUT": 300, "OPTIONS": {"REPLICAS": 3, **options}})


def test_the_bucket_has_three_replicas_on_the_cluster(cluster, name):
    cache = make_cache(name)
    cache.set("k", "v")
    info = cache.bucket.status().stream_info
    assert info.config.num_replicas == 3 and info.cluster is not None and len(info.cluster.replicas or []) == 2


def test_read_leader_sees_every_write_another_process_completed(cluster, name):
    """READ "leader": a value another process has just written (acknowledged) is what get, get_many and
    has_key return, every time."""
    cache = make_cache(name, READ="leader")
    cache.set("k", -1)  # the bucket exists
    nkey = encode_key(cache.make_key("k"))
    stale: list[tuple[int, Any]] = []
    with jetstream_sync.connect(cluster.urls, name="another-process") as other:
        writer = other.jetstream(timeout=30).key_value(name)
        for i in range(PAIRS):
            writer.put(nkey, encode_value(pickle.dumps(i), None))
            read = (cache.get("k"), cache.get_many(["k"]).get("k"), cache.has_key("k"))
            if read != (i, i, True):
                stale.append((i, read))
            writer.purge(nkey)
            if cache.has_key("k"):
                stale.append((i, "has_key after the purge"))
    assert stale == []


def test_a_clear_is_seen_by_the_next_read_of_the_process_that_made_it(cluster, name):
    """clear() purges the stream, which the client's record of the revisions it wrote does not see: a replica
    that has not applied the purge yet still holds the values, at revisions the process knows. The default READ
    asks the leader for an answer at or below the last revision the clear removed."""
    cache = make_cache(name)
    stale: list[tuple[int, str]] = []
    for i in range(ROUNDS):
        cache.set_many({"a": i, "b": i, "c": i, "d": i})
        cache.clear()
        if cache.get("a") is not None:
            stale.append((i, "get"))
        if cache.has_key("b"):
            stale.append((i, "has_key"))
        if cache.get_many(["c", "d"]):
            stale.append((i, "get_many"))
    assert stale == []
    cache.set("a", "after")
    assert cache.get("a") == "after" and cache.get_many(["a", "b"]) == {"a": "after"}


@pytest.mark.parametrize("mode", ["direct", "read_your_writes"])
def test_compare_and_set_loses_no_update_whatever_read_says(cluster, name, mode):
    """8 threads x 20 incr, and 8 threads racing to add one key: the revision each builds on is read from the
    leader, so no increment is lost and exactly one add wins, with READ "direct" as with the default."""
    cache = make_cache(name, READ=mode)
    cache.set("counter", 0)
    start = threading.Barrier(8)
    added: list[bool] = []
    lock = threading.Lock()

    def work(i: int) -> None:
        start.wait(10)
        won = cache.add("lock", i)
        with lock:
            added.append(won)
        for _ in range(20):
            cache.incr("counter")

    workers = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in workers:
        t.start()
    assert join_all(workers, timeout=90) == []
    assert sorted(added) == [False] * 7 + [True]
    assert cache.get("counter") == 8 * 20 and cache.get("lock") in range(8)
