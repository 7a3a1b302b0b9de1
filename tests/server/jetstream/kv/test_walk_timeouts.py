"""Walks of a bucket under one timeout (issue 26, item 8): keys(), history() and purge_deletes() on a link that
goes silent in the middle raise TimeoutError within their timeout (the context's, or their own ``timeout=``),
say how far they got, and leave no consumer behind once the link is back; without a stall they finish as
before. Before, each of them waited for as long as the link stayed silent."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import attrs
import pytest

import jetstream_sync
from jetstream_sync import KeyValue, errors
from tests.helpers import wait_until
from tests.server.jetstream.kv.kvhelpers import bucket, consumers, fill, wait_no_consumers

#: the walk's timeout in every stalled test, and how much later than it the call may end
TIMEOUT = 2.0
MARGIN = 2.0
#: the link comes back by itself after this long at the latest: longer than TIMEOUT + MARGIN, so a call that
#: waits for the link rather than its deadline fails the timing assertion (instead of hanging the run)
STALL = 12.0
KEYS = 3000
#: the keys the tests delete: every 100th
DELETED = {f"k.{i}" for i in range(0, KEYS, 100)}

#: how a test gives the walk its timeout: the context's (the call takes none), or the call's own ``timeout=``
#: under a context whose timeout is far longer
HOW = ["context", "argument"]


@contextlib.contextmanager
def bucket_behind(proxy: Any, how: str) -> Iterator[tuple[jetstream_sync.JetStream, KeyValue, dict[str, Any]]]:
    """A client through ``proxy``, a bucket ``walks`` on it, and the keywords that give a walk TIMEOUT."""
    with jetstream_sync.connect(proxy.url, timeout=5) as nc:
        js = nc.jetstream(timeout=TIMEOUT if how == "context" else 30.0)
        yield js, bucket(js, "walks", history=5), {} if how == "context" else {"timeout": TIMEOUT}


@contextlib.contextmanager
def silent_link(proxy: Any) -> Iterator[Callable[[], None]]:
    """``stall()`` silences the link both ways; it comes back STALL seconds later, or when the block ends."""
    back = threading.Timer(STALL, proxy.resume)
    back.daemon = True

    def stall() -> None:
        proxy.stall()
        back.start()

    try:
        yield stall
    finally:
        back.cancel()
        proxy.resume()


def stall_on_first(stall: Callable[[], None], convert: Callable[..., Any]) -> Callable[..., Any]:
    """``convert`` (what a walk calls for each message it read), silencing the link at its first call: the walk
    is then in its middle, most of it still on the server."""
    stalled: list[bool] = []

    def first_stalls(*args: Any) -> Any:
        if not stalled:
            stalled.append(True)
            stall()
        return convert(*args)

    return first_stalls


def assert_within(started: float) -> None:
    took = time.monotonic() - started
    assert took < TIMEOUT + MARGIN, f"the walk with a {TIMEOUT:g}s timeout took {took:.1f}s"


def back_without_consumers(proxy: Any, js: jetstream_sync.JetStream) -> None:
    """Lift the stall: the walk's consumer is gone soon after (its delete was waiting for the link)."""
    proxy.resume()
    wait_no_consumers(js, "walks", timeout=10)


def markers(js: jetstream_sync.JetStream) -> set[str]:
    """Which of the DELETED keys still end in their delete marker (purge_deletes removes it)."""
    kv = js.key_value("walks")
    found = set()
    for key in DELETED:
        try:
            kv.get(key)
        except errors.KeyDeletedError:
            found.add(key)
        except errors.KeyNotFoundError:
            continue
    return found


def delete_some(kv: KeyValue) -> None:
    for key in DELETED:
        kv.delete(key)


@pytest.mark.parametrize("how", HOW)
def test_keys_on_a_link_silent_in_the_middle_raises_within_its_timeout(fault_proxy, small_pulls, how):
    with bucket_behind(fault_proxy, how) as (js, kv, timeout), silent_link(fault_proxy) as stall:
        fill(js, kv, KEYS)
        started = time.monotonic()
        walk = kv.keys(**timeout)
        got = [next(walk)]
        stall()  # the first pull's keys are in (50 a pull here); most of the 3,000 are still on the server
        with pytest.raises(errors.TimeoutError, match=r"keys\(\) of bucket 'walks' did not finish within 2s: \d+ "):
            got.extend(walk)
        assert_within(started)
        assert len(got) < KEYS
        back_without_consumers(fault_proxy, js)


@pytest.mark.parametrize("how", HOW)
def test_history_on_a_link_silent_in_the_middle_raises_within_its_timeout(fault_proxy, how):
    with bucket_behind(fault_proxy, how) as (js, kv, timeout), silent_link(fault_proxy) as stall:
        # more revisions of one key than a KV configuration allows (raised on the stream itself), so that its
        # history takes several pulls of 500
        config = js.stream(kv.stream_name).info().config
        js.update_stream(attrs.evolve(config, max_msgs_per_subject=KEYS))
        for i in range(KEYS):
            js.publish_async(f"{kv.prefix}k", b"%d" % i)
        js.publish_async_complete(timeout=20)
        kv.entry_of = stall_on_first(stall, kv.entry_of)  # type: ignore[method-assign]
        started = time.monotonic()
        with pytest.raises(errors.TimeoutError, match=r"history\(\) of key 'k' in bucket 'walks' did not finish"):
            kv.history("k", **timeout)
        assert_within(started)
        back_without_consumers(fault_proxy, js)


@pytest.mark.parametrize("how", HOW)
def test_purge_deletes_on_a_link_silent_in_the_middle_raises_within_its_timeout(fault_proxy, small_pulls, how):
    with bucket_behind(fault_proxy, how) as (js, kv, timeout), silent_link(fault_proxy) as stall:
        fill(js, kv, KEYS)
        delete_some(kv)
        kv.entry_of = stall_on_first(stall, kv.entry_of)  # type: ignore[method-assign]
        started = time.monotonic()
        with pytest.raises(errors.TimeoutError, match=r"purge_deletes\(\) of bucket 'walks' did not finish"):
            kv.purge_deletes(older_than=None, **timeout)
        assert_within(started)
        back_without_consumers(fault_proxy, js)
        assert markers(js) == DELETED  # the walk never finished, so nothing was purged


@pytest.mark.parametrize("how", HOW)
def test_a_walk_whose_consumer_create_goes_unanswered_times_out_and_leaves_no_consumer(fault_proxy, how):
    """The link goes silent on the way back as the walk begins: the create reaches the server, its answer does
    not. The consumer it made is deleted as well, not left for its inactive threshold (5 minutes)."""
    with bucket_behind(fault_proxy, how) as (js, kv, timeout), silent_link(fault_proxy):
        kv.put("k", b"v")
        fault_proxy.stall("downstream")
        started = time.monotonic()
        with pytest.raises(errors.TimeoutError, match=r"history\(\) of key 'k' .*: 0 entries read"):
            kv.history("k", **timeout)
        assert_within(started)
        back_without_consumers(fault_proxy, js)


def test_the_loops_own_time_between_keys_does_not_count(js, kv, name, small_pulls):
    """The timeout bounds how long the walk waits for the server, not the loop's body: a loop slower than the
    timeout still reads every key, and the walk's consumer is deleted at the end."""
    fill(js, kv, KEYS)
    walk = kv.keys(timeout=0.5)
    seen = [next(walk)]
    started = time.monotonic()
    wait_until(lambda: time.monotonic() - started > 0.7)  # the loop's body outlasting the walk's timeout
    seen.extend(walk)
    assert len(seen) == KEYS
    wait_no_consumers(js, name)


def test_walks_without_a_stall_finish_within_their_timeout(fault_proxy, small_pulls):
    with bucket_behind(fault_proxy, "argument") as (js, kv, timeout):
        fill(js, kv, KEYS)
        for i in range(3):
            kv.put("h", b"%d" % i)
        delete_some(kv)
        live = {f"k.{i}" for i in range(KEYS)} - DELETED | {"h"}
        assert set(kv.keys(**timeout)) == live
        assert list(kv.keys("h", timeout=timedelta(seconds=10))) == ["h"]
        assert [e.value for e in kv.history("h", **timeout)] == [b"0", b"1", b"2"]
        assert kv.purge_deletes(older_than=None, **timeout) == len(DELETED)
        assert markers(js) == set()
        assert set(kv.keys(**timeout)) == live
        wait_no_consumers(js, "walks")


@pytest.mark.parametrize(
    ("timeout", "error"),
    [(0, errors.InvalidArgumentError), (-1.5, errors.InvalidArgumentError), ("2", errors.InvalidTypeError)],
)
def test_a_bad_walk_timeout_is_refused_before_anything_is_sent(js, kv, name, timeout, error):
    kv.put("k", b"v")
    with pytest.raises(error, match="timeout"):
        kv.keys(timeout=timeout)  # by the call itself, not at the first key
    with pytest.raises(error, match="timeout"):
        kv.history("k", timeout=timeout)
    with pytest.raises(error, match="timeout"):
        kv.purge_deletes(timeout=timeout)
    assert consumers(js, name) == []
