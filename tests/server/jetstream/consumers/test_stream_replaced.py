"""A stream deleted and created anew while the client is away is not read from the old cursor (issue 26, item 2).

The link is stalled, then cut; meanwhile another client replaces the stream. On reconnect, the ordered consumer's
reset used to start the next link at "old cursor + 1" of the new stream: an ordered read skipped the new stream's
first messages, and a KV watcher whose revision was past the new bucket's end got nothing, without a word.
"""

from __future__ import annotations

import pytest

import jetstream_sync
from jetstream_sync import StorageType, StreamConfig, errors
from jetstream_sync.models import KeyValueConfig
from jetstream_sync.models.reads import OrderedConsumerConfig
from tests.helpers import wait_until


def replace_while_away(fault_proxy, server_url: str, replace) -> None:
    """Stall the proxied client's link, run ``replace`` through a direct client, then cut the link."""
    fault_proxy.stall()
    with jetstream_sync.connect(server_url) as other:
        replace(other.jetstream())
    fault_proxy.cut()
    fault_proxy.resume()


def old_stream_and_reader(js, name: str, mode: str):
    """A memory stream of 20 messages ("old-1" ...) and an ordered consumer of it with ``on_stream_replaced=mode``."""
    js.create_stream(StreamConfig(name=name, subjects=[f"{name}.>"], storage=StorageType.MEMORY))
    for i in range(20):
        js.publish(f"{name}.x", f"old-{i + 1}".encode())
    return js.ordered_consumer(name, OrderedConsumerConfig(on_stream_replaced=mode))


def recreate_stream(name: str, count: int):
    def replace(js) -> None:
        js.delete_stream(name)
        js.create_stream(StreamConfig(name=name, subjects=[f"{name}.>"], storage=StorageType.MEMORY))
        for i in range(count):
            js.publish(f"{name}.x", f"new-{i + 1}".encode())

    return replace


@pytest.mark.parametrize("mode", ["restart", "error"])
def test_an_ordered_read_of_a_replaced_stream(fault_proxy, nats_server_function, name, mode):
    reports: list[BaseException] = []
    with jetstream_sync.connect(fault_proxy.url, reconnect_wait=0.1) as nc:
        consumer = old_stream_and_reader(nc.jetstream(), name, mode)
        with consumer.messages(error_handler=reports.append) as it:
            old = [it.next(timeout=10).data for _ in range(20)]
            assert old[-1] == b"old-20"
            wait_until(lambda: knows_the_stream(it), timeout=5)
            replace_while_away(fault_proxy, nats_server_function.url, recreate_stream(name, 30))
            if mode == "error":
                with pytest.raises(errors.StreamReplacedError, match="was replaced"):
                    it.next(timeout=10)
                return
            new = [it.next(timeout=10).data for _ in range(30)]
        assert new == [f"new-{i + 1}".encode() for i in range(30)]
        wait_until(lambda: any(isinstance(r, errors.StreamReplacedError) for r in reports), timeout=5)


def knows_the_stream(it) -> bool:
    """The ordered read learnt the stream's creation time (asked beside its first link, without waiting)."""
    return it._source.chain.stream_created is not None


def test_a_kv_watcher_of_a_bucket_made_anew_sees_the_new_keys(fault_proxy, nats_server_function, name):
    with jetstream_sync.connect(fault_proxy.url, reconnect_wait=0.1) as nc:
        js = nc.jetstream()
        kv = js.create_key_value(KeyValueConfig(bucket=name, storage=StorageType.MEMORY))
        for i in range(20):
            kv.put(f"k{i}", b"old")
        with kv.watch(">") as watcher:
            initial = []
            while (entry := watcher.next(timeout=5)) is not None:
                initial.append(entry.key)
            assert len(initial) == 20
            wait_until(lambda: knows_the_stream(watcher._messages), timeout=5)

            def replace(other_js) -> None:
                other_js.delete_key_value(name)
                other = other_js.create_key_value(KeyValueConfig(bucket=name, storage=StorageType.MEMORY))
                other.put("fresh", b"new")

            replace_while_away(fault_proxy, nats_server_function.url, replace)
            entry = watcher.next(timeout=10)
        assert entry is not None and entry.key == "fresh" and entry.value == b"new"


@pytest.mark.parametrize("mode", ["restart", "error"])
def test_ordered_next_of_a_replaced_stream(fault_proxy, nats_server_function, name, mode):
    """The issue's case: ordered next() read 20, the stream was replaced by one of 30; it skipped the first 20."""
    with jetstream_sync.connect(fault_proxy.url, reconnect_wait=0.1) as nc:
        consumer = old_stream_and_reader(nc.jetstream(), name, mode)
        assert [consumer.next(timeout=5).data for _ in range(20)][-1] == b"old-20"
        wait_until(lambda: consumer._chain.stream_created is not None, timeout=5)
        replace_while_away(fault_proxy, nats_server_function.url, recreate_stream(name, 30))
        wait_until(lambda: nc.reconnects == 1 and nc.is_connected, timeout=10)
        if mode == "error":
            with pytest.raises(errors.StreamReplacedError, match="was replaced"):
                consumer.next(timeout=5)
            return
        new = [consumer.next(timeout=5).data for _ in range(30)]
        assert new == [f"new-{i + 1}".encode() for i in range(30)]
