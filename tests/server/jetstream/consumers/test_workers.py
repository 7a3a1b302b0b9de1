"""consume(workers=N, ordered_by=key): the handler on N threads, per-key order kept, nothing lost or doubled."""

from __future__ import annotations

import threading
import time
from collections import defaultdict

import pytest

from jetstream_sync import ConsumerConfig, StreamConfig, errors
from tests.helpers import wait_until


def fill(js, name: str, count: int, keys: int):
    stream = js.create_stream(StreamConfig(name=name, subjects=[f"{name}.>"]))
    futures = [js.publish_async(f"{name}.k{i % keys}", b"%d" % i) for i in range(count)]
    js.publish_async_complete(timeout=30)
    assert all(f.result().seq for f in futures)
    return stream.create_consumer(ConsumerConfig(durable_name="pool", max_ack_pending=-1))


class Recorder:
    """What the handler saw: per key the payloads in order, how many ran at once, and any key run twice at once."""

    def __init__(self, work: float = 0.001) -> None:
        self.work = work
        self.lock = threading.Lock()
        self.by_key: dict[str, list[int]] = defaultdict(list)
        self.running: set[str] = set()
        self.overlaps = 0
        self.concurrent = self.peak = self.handled = 0

    def __call__(self, msg) -> None:
        key = msg.subject
        with self.lock:
            self.overlaps += key in self.running
            self.running.add(key)
            self.concurrent += 1
            self.peak = max(self.peak, self.concurrent)
        time.sleep(self.work)  # the handler's work
        with self.lock:
            self.by_key[key].append(int(msg.data))
            self.running.discard(key)
            self.concurrent -= 1
            self.handled += 1
        msg.ack()


def test_ordered_by_keeps_each_keys_order_across_eight_workers(js, name):
    consumer = fill(js, name, 2000, keys=50)
    seen = Recorder()
    ctx = consumer.consume(seen, workers=8, ordered_by=lambda m: m.subject)
    wait_until(lambda: seen.handled == 2000, timeout=30)
    ctx.stop()
    ctx.wait(5)
    assert seen.overlaps == 0
    assert all(values == sorted(values) for values in seen.by_key.values())
    assert sum(len(v) for v in seen.by_key.values()) == 2000 and len(seen.by_key) == 50
    assert seen.peak > 1 and sum(ctx.worker_stats) == 2000 and len(ctx.worker_stats) == 8
    wait_until(lambda: consumer.info().num_ack_pending == 0)


def test_without_a_key_the_workers_share_the_messages(js, name):
    consumer = fill(js, name, 400, keys=1)
    seen = Recorder(work=0.01)
    ctx = consumer.consume(seen, workers=4)
    wait_until(lambda: seen.handled == 400, timeout=30)
    ctx.stop()
    ctx.wait(5)
    assert seen.peak == 4  # one key, yet four at once: no ordering was asked for
    assert sorted(v for values in seen.by_key.values() for v in values) == list(range(400))


def test_stop_finishes_the_messages_in_hand_and_leaves_the_rest(js, name):
    consumer = fill(js, name, 200, keys=10)
    started = threading.Event()

    def slow(msg) -> None:
        started.set()
        time.sleep(0.2)  # the handler's work
        msg.ack()

    ctx = consumer.consume(slow, workers=4, ordered_by=lambda m: m.subject)
    assert started.wait(5)
    ctx.stop()
    ctx.wait(5)
    assert ctx.closed.is_set() and ctx.error is None
    handled = sum(ctx.worker_stats)
    assert 1 <= handled < 200
    wait_until(lambda: consumer.info().ack_floor.stream_seq >= 1)


def test_a_worker_raising_keyboard_interrupt_ends_the_consume(js, name):
    consumer = fill(js, name, 50, keys=5)

    def handler(msg) -> None:
        if msg.data == b"7":
            raise KeyboardInterrupt
        msg.ack()

    ctx = consumer.consume(handler, workers=3, ordered_by=lambda m: m.subject)
    ctx.wait(10)
    assert isinstance(ctx.error, KeyboardInterrupt)


def test_bad_pool_arguments_are_refused(stream):
    consumer = stream.create_consumer(ConsumerConfig(durable_name="p"))
    with pytest.raises(errors.InvalidArgumentError, match="workers"):
        consumer.consume(lambda m: None, workers=0)
    with pytest.raises(errors.InvalidTypeError, match="ordered_by"):
        consumer.consume(lambda m: None, workers=2, ordered_by="subject")


@pytest.mark.parametrize("kind", ["push", "ordered", "ordered_push"])
def test_push_and_ordered_consumes_take_a_worker_pool(js, name, kind):
    fill(js, name, 600, keys=20)
    if kind == "push":
        reader = js.create_push_consumer(name, ConsumerConfig(durable_name="push", deliver_subject=f"dl.{name}"))
    elif kind == "ordered":
        reader = js.ordered_consumer(name)
    else:
        reader = js.ordered_push_consumer(name)
    seen = Recorder()
    with reader.consume(seen, workers=4, ordered_by=lambda m: m.subject) as ctx:
        wait_until(lambda: seen.handled == 600, timeout=30)
    assert seen.overlaps == 0 and seen.peak > 1
    assert all(values == sorted(values) for values in seen.by_key.values())
    assert sum(ctx.worker_stats) == 600 and len(ctx.worker_stats) == 4
    with pytest.raises(errors.InvalidArgumentError, match="workers"):
        reader.consume(seen, workers=0)
