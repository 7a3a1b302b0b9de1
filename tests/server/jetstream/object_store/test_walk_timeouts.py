"""list() under one timeout (issue 26, item 8): on a link that goes silent in the middle of the walk it raises
TimeoutError within its timeout (the context's, or its own ``timeout=``), says how far it got, and leaves no
consumer behind once the link is back; without a stall it lists as before. Before, it waited for as long as
the link stayed silent."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

import jetstream_sync
from jetstream_sync import ObjectStore, ObjectStoreConfig, errors
from tests.helpers import wait_until
from tests.server.jetstream.object_store.obshelpers import meta_subject

#: the walk's timeout in every stalled test, and how much later than it the call may end
TIMEOUT = 2.0
MARGIN = 2.0
#: the link comes back by itself after this long at the latest: longer than TIMEOUT + MARGIN, so a call that
#: waits for the link rather than its deadline fails the timing assertion (instead of hanging the run)
STALL = 12.0
#: objects in the bucket: a list() of them takes four pulls of 500 metadata records
OBJECTS = 2000
HOW = ["context", "argument"]


@contextlib.contextmanager
def store_behind(proxy: Any, how: str) -> Iterator[tuple[jetstream_sync.JetStream, ObjectStore, dict[str, Any]]]:
    """A client through ``proxy``, a bucket ``walks`` of OBJECTS empty objects on it, and the keywords that give
    list() TIMEOUT: the context's (list takes none) or its own ``timeout=`` under a far longer context timeout."""
    with jetstream_sync.connect(proxy.url, timeout=5) as nc:
        js = nc.jetstream(timeout=TIMEOUT if how == "context" else 30.0)
        obs = js.create_object_store(ObjectStoreConfig(bucket="walks"))
        for i in range(OBJECTS):  # the metadata of empty objects, as every client writes it
            meta = {"name": f"o{i}", "bucket": "walks", "nuid": f"N{i}", "size": 0, "chunks": 0}
            js.publish_async(meta_subject(obs, f"o{i}"), json.dumps({**meta, "mtime": "0001-01-01T00:00:00Z"}).encode())
        js.publish_async_complete(timeout=20)
        yield js, obs, {} if how == "context" else {"timeout": TIMEOUT}


def no_consumers(js: jetstream_sync.JetStream, obs: ObjectStore) -> bool:
    return list(js.consumer_names(obs.stream_name)) == []


@pytest.mark.parametrize("how", HOW)
def test_list_on_a_link_silent_in_the_middle_raises_within_its_timeout(fault_proxy, how):
    with store_behind(fault_proxy, how) as (js, obs, timeout):
        back = threading.Timer(STALL, fault_proxy.resume)
        back.daemon = True
        read = obs._info_of
        stalled: list[bool] = []

        def stall_on_first(data: bytes, stored_at: Any) -> Any:
            """The walk's first record: the link goes silent with most of the bucket still on the server."""
            if not stalled:
                stalled.append(True)
                fault_proxy.stall()
                back.start()
            return read(data, stored_at)

        obs._info_of = stall_on_first  # type: ignore[method-assign]
        started = time.monotonic()
        try:
            with pytest.raises(
                errors.TimeoutError,
                match=r"list\(\) of object store 'walks' did not finish within 2s: \d+ metadata records read",
            ):
                obs.list(**timeout)
            took = time.monotonic() - started
            assert took < TIMEOUT + MARGIN, f"list() with a {TIMEOUT:g}s timeout took {took:.1f}s"
        finally:
            back.cancel()
            fault_proxy.resume()
        wait_until(lambda: no_consumers(js, obs), timeout=10)  # its delete was waiting for the link


@pytest.mark.parametrize("how", HOW)
def test_list_whose_consumer_create_goes_unanswered_times_out_and_leaves_no_consumer(fault_proxy, how):
    """The link goes silent on the way back as list() begins: the create reaches the server, its answer does
    not. The consumer it made is deleted as well, not left for its inactive threshold (5 minutes)."""
    with store_behind(fault_proxy, how) as (js, obs, timeout):
        fault_proxy.stall("downstream")
        started = time.monotonic()
        try:
            with pytest.raises(errors.TimeoutError, match=r"list\(\) of object store 'walks' .*: 0 metadata records"):
                obs.list(**timeout)
            took = time.monotonic() - started
            assert took < TIMEOUT + MARGIN, f"list() with a {TIMEOUT:g}s timeout took {took:.1f}s"
        finally:
            fault_proxy.resume()
        wait_until(lambda: no_consumers(js, obs), timeout=10)


def test_list_without_a_stall_finishes_within_its_timeout(fault_proxy):
    with store_behind(fault_proxy, "argument") as (js, obs, timeout):
        obs.put("o7", b"replaced")
        obs.delete("o8")
        listed = {info.name: info for info in obs.list(**timeout)}
        assert set(listed) == {f"o{i}" for i in range(OBJECTS)} - {"o8"}
        assert listed["o7"].size == len(b"replaced")
        assert len(obs.list(show_deleted=True, timeout=30.0)) == OBJECTS
        wait_until(lambda: no_consumers(js, obs))  # each walk's consumer is deleted without waiting for the answer


@pytest.mark.parametrize(
    ("timeout", "error"),
    [(0, errors.InvalidArgumentError), (-1.5, errors.InvalidArgumentError), ("2", errors.InvalidTypeError)],
)
def test_a_bad_list_timeout_is_refused_before_anything_is_sent(js, obs, timeout, error):
    obs.put("a", b"1")
    with pytest.raises(error, match="timeout"):
        obs.list(timeout=timeout)
    assert list(js.consumer_names(obs.stream_name)) == []
