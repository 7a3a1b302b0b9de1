"""KeyValueCache beyond Django's own cases: what lands in the bucket (keys, the value header, Nats-TTL), expiry
before the server's, atomic add and incr under concurrency, the bucket's creation and options, a deleted or
full bucket, and a value read back through nats-py."""

from __future__ import annotations

import asyncio
import io
import logging
import pickle
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from django.core.cache import InvalidCacheKey
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.test import override_settings

from jetstream_sync import KeyValueConfig, StorageType, errors
from jetstream_sync.integrations.django import close_clients
from jetstream_sync.integrations.django.cache import (
    HEADER,
    MAX_KEY_LENGTH,
    KeyValueCache,
    decode_value,
    encode_key,
)
from tests.helpers import join_all, wait_until
from tests.server.jetstream.kv.kvhelpers import gone, stored_last, with_nats_py


def make_cache(bucket: str, **options: Any) -> KeyValueCache:
    return KeyValueCache(bucket, {"TIMEOUT": 300, "OPTIONS": options})


@pytest.fixture
def cache(js, name) -> KeyValueCache:
    return make_cache(name)


def stored(js, cache: KeyValueCache, key: str):
    """The key's last message in the bucket, as the server stores it (headers and all)."""
    return stored_last(js, cache.bucket, encode_key(cache.make_key(key)))


def test_the_bucket_is_created_for_per_key_ttls(js, name):
    cache = make_cache(name, STORAGE="memory", MAX_VALUE_SIZE=4096, MARKER_TTL=5)
    cache.set("k", 1)
    status = js.key_value(name).status()
    assert (status.history, status.limit_marker_ttl, status.ttl) == (1, 5, None)
    info = js.stream_info(f"KV_{name}")
    assert info.config.storage is StorageType.MEMORY and info.config.max_msg_size == 4096


def test_an_existing_bucket_is_used_and_one_without_ttls_is_refused(js, name):
    js.create_key_value(KeyValueConfig(bucket=name, history=3, limit_marker_ttl=2))
    cache = make_cache(name)
    cache.set("k", "v")
    assert cache.get("k") == "v" and js.key_value(name).status().history == 3  # left as it was
    js.create_key_value(KeyValueConfig(bucket=name + "P"))
    with pytest.raises(ImproperlyConfigured, match="limit_marker_ttl"):
        make_cache(name + "P").get("k")
    with pytest.raises(ImproperlyConfigured, match="does not exist"):
        make_cache(name + "X", CREATE=False).get("k")


def test_options_are_checked_when_the_cache_is_made(name):
    with pytest.raises(ImproperlyConfigured, match="no culling"):
        make_cache(name, MAX_ENTRIES=30)
    with pytest.raises(ImproperlyConfigured, match="unknown REPLICA"):
        make_cache(name, REPLICA=3)
    with pytest.raises(ImproperlyConfigured, match="storage"):
        make_cache(name, STORAGE="disk")
    with pytest.raises(ImproperlyConfigured, match="limit_marker_ttl"):
        make_cache(name, MARKER_TTL=0.5)
    with pytest.raises(ImproperlyConfigured, match="PICKLE_PROTOCOL"):
        make_cache(name, PICKLE_PROTOCOL="5")
    assert make_cache(name, PICKLE_PROTOCOL=2)._protocol == 2
    with pytest.raises(ImproperlyConfigured, match=r"OPTIONS\['READ'\].*'read_your_writes', 'leader'.*'replica'"):
        make_cache(name, READ="replica")
    assert make_cache(name).read == "read_your_writes" and make_cache(name, READ="leader").read == "leader"


def test_manage_py_check_reports_a_wrong_option(name):
    """Django's own cache checks make every cache of CACHES, so the option's error stops ``manage.py check``."""
    backend = "jetstream_sync.integrations.django.cache.KeyValueCache"
    caches = {"default": {"BACKEND": backend, "LOCATION": name, "OPTIONS": {"READ": "x"}}}
    with override_settings(CACHES=caches), pytest.raises(ImproperlyConfigured, match=r"OPTIONS\['READ'\]"):
        call_command("check", stdout=io.StringIO())


@pytest.mark.parametrize("mode", ["read_your_writes", "leader", "direct"])
def test_plain_reads_use_the_read_option_and_reads_a_write_builds_on_ask_the_leader(monkeypatch, name, mode):
    """get, get_many and has_key read as READ says; add, incr/decr, touch, delete and a set or add with a
    timeout of 0 read the revision they write on from the leader, whatever READ says."""
    cache = make_cache(name, READ=mode)
    kv = cache.bucket
    assert kv.read == mode  # the handle the backend binds (and ``cache.bucket`` hands out) reads as READ says
    reads: list[str] = []
    real_get, real_get_many = kv.get, kv.get_many
    monkeypatch.setattr(kv, "get", lambda key, **kw: reads.append(kw["read"]) or real_get(key, **kw))
    monkeypatch.setattr(kv, "get_many", lambda keys, **kw: reads.append(kw["read"]) or real_get_many(keys, **kw))

    def read_by(operation: Callable[[], object]) -> list[str]:
        reads.clear()
        operation()
        return reads[:]

    cache.set("n", 1)
    assert read_by(lambda: cache.get("n")) == [mode]
    assert read_by(lambda: cache.has_key("n")) == [mode]
    assert read_by(lambda: cache.get_many(["n", "missing"])) == [mode]
    assert read_by(lambda: cache.add("n", 2)) == ["leader"]  # create refused: is the value live?
    assert set(read_by(lambda: cache.incr("n"))) == {"leader"}
    assert set(read_by(lambda: cache.decr("n"))) == {"leader"}
    assert set(read_by(lambda: cache.touch("n", 60))) == {"leader"}
    assert set(read_by(lambda: cache.add("n", 2, timeout=0))) == {"leader"}
    assert set(read_by(lambda: cache.set("n", 2, timeout=0))) == {"leader"}
    cache.set("n", 3)
    assert set(read_by(lambda: cache.delete("n"))) == {"leader"}
    assert cache.get("n") is None


def test_timeouts_become_the_entrys_ttl_and_the_stored_expiry(js, cache):
    before = time.time()
    cache.set("t", "v", timeout=90)
    cache.set("f", "v", timeout=None)
    cache.set("s", "v", timeout=2.2)
    msg = stored(js, cache, "t")
    assert msg.headers["Nats-TTL"] == "90000ms"
    expires_at, payload = decode_value(msg.data)
    assert before + 90 <= expires_at <= time.time() + 90 and pickle.loads(payload) == "v"
    assert msg.data[0] == 1 and len(msg.data) == HEADER.size + len(payload)
    assert "Nats-TTL" not in (stored(js, cache, "f").headers or {})
    assert decode_value(stored(js, cache, "f").data)[0] is None
    assert stored(js, cache, "s").headers["Nats-TTL"] == "3000ms"  # whole seconds, rounded up


def test_a_value_expires_on_time_before_the_server_removes_it(js, cache):
    cache.set("short", "v", timeout=0.3)
    assert cache.get("short") == "v"
    wait_until(lambda: cache.get("short") is None, timeout=2)
    assert not gone(cache.bucket, encode_key(cache.make_key("short")))  # the server keeps it for 1 s
    assert not cache.has_key("short") and cache.get_many(["short"]) == {}
    assert not cache.touch("short") and cache.delete("short") is False
    with pytest.raises(ValueError):
        cache.incr("short")
    cache.set("gone", "v", timeout=0.2)
    wait_until(lambda: cache.get("gone") is None, timeout=2)
    assert cache.add("gone", "new", timeout=60) is True  # expired counts as absent
    assert cache.get("gone") == "new"


def test_the_server_removes_an_expired_value(js, cache):
    cache.set("k", "v", timeout=1)
    key = encode_key(cache.make_key("k"))
    wait_until(lambda: gone(cache.bucket, key), timeout=5)
    assert cache.get("k") is None and cache.add("k", "again") is True


def test_zero_timeout_removes_and_stores_nothing(js, cache):
    cache.set("k", "v")
    cache.set("k", "w", timeout=0)
    assert gone(cache.bucket, encode_key(cache.make_key("k")))
    assert cache.add("k", "v", timeout=0) is True and cache.get("k") is None
    cache.set("k", "v")
    assert cache.add("k", "other", timeout=-1) is False  # a live value: not free


def test_incr_keeps_the_expiry_and_touch_replaces_it(js, cache):
    cache.set("n", 1, timeout=60)
    expires_at = decode_value(stored(js, cache, "n").data)[0]
    assert cache.incr("n", 5) == 6 and cache.decr("n") == 5
    msg = stored(js, cache, "n")
    assert decode_value(msg.data)[0] == expires_at
    assert msg.headers["Nats-TTL"] in ("60000ms", "59000ms")
    assert cache.touch("n", None) is True
    assert "Nats-TTL" not in (stored(js, cache, "n").headers or {})
    assert decode_value(stored(js, cache, "n").data)[0] is None and cache.get("n") == 5


def test_concurrent_incr_loses_no_update(cache):
    cache.set("counter", 0)
    per_thread, threads = 25, 8

    def work() -> None:
        for _ in range(per_thread):
            cache.incr("counter")

    workers = [threading.Thread(target=work) for _ in range(threads)]
    for t in workers:
        t.start()
    assert join_all(workers, timeout=60) == []
    assert cache.get("counter") == per_thread * threads


def test_concurrent_add_has_one_winner(cache):
    results: list[bool] = []
    lock = threading.Lock()
    start = threading.Barrier(8)

    def work(i: int) -> None:
        start.wait(5)
        won = cache.add("lock", i)
        with lock:
            results.append(won)

    workers = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in workers:
        t.start()
    assert join_all(workers, timeout=30) == []
    assert sorted(results) == [False] * 7 + [True]


@pytest.mark.filterwarnings("ignore::django.core.cache.CacheKeyWarning")
def test_any_key_is_stored_under_a_safe_reversible_key(js, cache):
    keys = ["with space", "dots.and..more.", "ünïcødé 清", "=3A", "a/b-c_d", "\x00\n\t", "*>"]
    for key in keys:
        cache.set(key, key)
    assert cache.get_many(keys) == {k: k for k in keys}
    listed = set(cache.bucket.keys())
    assert listed == {encode_key(cache.make_key(k)) for k in keys}
    assert encode_key(":1:user:42") == "=3A1=3Auser=3A42"


@pytest.mark.filterwarnings("ignore::django.core.cache.CacheKeyWarning")
def test_a_key_too_long_for_nats_is_refused_and_the_longest_one_works(cache):
    prefix_len = len(encode_key(cache.make_key("")))
    longest = "k" * (MAX_KEY_LENGTH - prefix_len)
    cache.set(longest, "v")
    assert cache.get(longest) == "v" and cache.get_many([longest]) == {longest: "v"}
    assert cache.delete(longest) is True
    with pytest.raises(InvalidCacheKey, match="too long"):
        cache.set(longest + "k", "v")


def test_a_deleted_bucket_is_created_again(js, name, cache):
    cache.set("k", "v")
    js.delete_key_value(name)
    assert cache.get("k") is None
    cache.set("k", "w")
    assert cache.get("k") == "w" and js.key_value(name).status().limit_marker_ttl == 1


def test_a_deleted_bucket_is_created_again_after_a_key_had_revisions(nats_server, js, name):
    """As above, with a key written twice before the bucket went: its new value is revision 1 of the new
    stream, below the revision 2 this process's client remembers of the old one."""
    with override_settings(JETSTREAM={"SERVERS": [nats_server.url], "NAME": "recreated", "TIMEOUT": 1}):
        cache = make_cache(name)
        try:
            cache.set("k", "v")
            cache.set("k", "v2")
            js.delete_key_value(name)
            cache.set("k", "w")
            assert cache.get("k") == "w"
        finally:
            close_clients()


def test_a_refused_write_removes_the_key_and_is_reported(js, name, caplog):
    cache = make_cache(name, MAX_VALUE_SIZE=200)
    cache.set("k", "small")
    with caplog.at_level(logging.WARNING, logger="jetstream_sync.integrations.django"):
        cache.set("k", "x" * 1000)
    assert cache.get("k") is None  # not the stale value
    assert "refused key 'k'" in caplog.text
    assert cache.set_many({"a": "small", "b": "x" * 1000}) == ["b"]
    assert cache.get("a") == "small"


def test_a_value_reads_back_through_nats_py(nats_server, js, cache):
    cache.set("shared", {"n": 1}, timeout=None)
    key = encode_key(cache.make_key("shared"))

    async def read(_nc, njs):
        kv = await njs.key_value(cache.bucket.bucket)
        return (await kv.get(key)).value

    raw = with_nats_py(nats_server.url, read)
    assert decode_value(raw) == (None, pickle.dumps({"n": 1}, pickle.HIGHEST_PROTOCOL))


def test_a_value_written_by_another_client_reads_as_a_miss(js, cache, caplog):
    cache.set("k", "v")
    cache.bucket.put(encode_key(cache.make_key("k")), b"raw bytes")
    with caplog.at_level(logging.WARNING, logger="jetstream_sync.integrations.django"):
        assert cache.get("k", "default") == "default"
    assert "not written by this backend" in caplog.text
    with pytest.raises(errors.KeyValueError):
        cache.bucket.get("no key!")


def test_the_async_api_runs_the_same_operations(cache):
    async def use() -> tuple[Any, ...]:
        await cache.aset("a", 1, timeout=60)
        added = await cache.aadd("a", 2)
        incremented = await cache.aincr("a", 4)
        many = await cache.aget_many(["a", "missing"])
        deleted = await cache.adelete("a")
        return added, incremented, many, deleted, await cache.aget("a", "default")

    assert asyncio.run(use()) == (False, 5, {"a": 5}, True, "default")
