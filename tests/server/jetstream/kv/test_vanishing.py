"""Walks whose last pending entries age out before they are delivered still end.

A walk (keys(), history(), purge_deletes(), a watcher's initial values) learns it is done from a delivered
entry's pending count. With a bucket TTL and no limit markers, entries vanish without a trace: when every
entry after the ones delivered so far ages out, no entry will ever say "nothing pending". The ordered
consumer notices the silence, asks the server, and the walk ends (the watcher sends its None) within a
couple of seconds.
"""

from __future__ import annotations

import time

import pytest

from jetstream_sync import errors
from tests.helpers import wait_until
from tests.server.jetstream.kv.kvhelpers import bucket, fill, wait_no_consumers


def test_keys_end_when_the_rest_of_the_bucket_ages_out(js, name, small_pulls):
    kv = bucket(js, name, ttl=1)
    fill(js, kv, 1000)
    keys = kv.keys()
    first = next(keys)
    wait_until(lambda: kv.status().values == 0, timeout=5)
    started = time.monotonic()
    rest = list(keys)
    assert time.monotonic() - started < 4
    got = [first, *rest]
    assert len(got) == len(set(got)) < 1000  # what was delivered before the rest vanished, once each
    wait_no_consumers(js, name)


def test_watch_sends_its_none_when_the_rest_of_the_initial_values_age_out(js, name):
    kv = bucket(js, name, ttl=1)
    fill(js, kv, 1200)  # more than one pull's worth (500)
    with kv.watch_all() as w:
        first = w.next(5)
        assert first is not None
        wait_until(lambda: kv.status().values == 0, timeout=5)
        started = time.monotonic()
        initial = [first]
        while (entry := w.next(5)) is not None:
            initial.append(entry)
        assert time.monotonic() - started < 4
        assert w.initial_done
        assert 0 < len(initial) < 1200
        assert len({e.key for e in initial}) == len(initial)
        revision = kv.put("after", b"x")
        later = w.next(5)
        assert later is not None
        assert (later.key, later.revision) == ("after", revision)
    wait_no_consumers(js, name)


def test_keys_of_a_bucket_deleted_mid_walk_raise_bucket_not_found(js, name, small_pulls):
    kv = bucket(js, name)
    fill(js, kv, 1000)
    keys = kv.keys()
    next(keys)
    js.delete_key_value(name)
    started = time.monotonic()
    with pytest.raises(errors.BucketNotFoundError):
        list(keys)
    assert time.monotonic() - started < 4
