"""consume(auto_in_progress=True): a handler that works longer than ack_wait is not redelivered meanwhile."""

from __future__ import annotations

import threading
import time

import pytest

from jetstream_sync import AckPolicy, ConsumerConfig, StreamConfig, errors


def slow_consume(stream, js, name, auto: bool, workers: int = 1, push: bool = False) -> list[int]:
    """One message, a handler that works 3.5 s (ack_wait is 1 s: the ratio of the issue's 7 s and 2 s) and
    acks: the deliveries it saw."""
    js.publish(f"{name}.a", b"slow")
    if push:
        config = ConsumerConfig(durable_name=f"p{int(auto)}", ack_wait=1, deliver_subject=f"dl.{name}.{int(auto)}")
        consumer = js.create_push_consumer(stream.name, config)
    else:
        consumer = stream.create_consumer(ConsumerConfig(durable_name=f"w{int(auto)}", ack_wait=1))
    seen: list[int] = []
    done = threading.Event()

    def handler(msg) -> None:
        seen.append(msg.metadata.num_delivered)
        if len(seen) == 1:
            time.sleep(3.5)  # the work itself, 3.5 times ack_wait
        msg.ack_sync()
        done.set()

    ctx = consumer.consume(handler, auto_in_progress=auto, workers=workers)
    try:
        assert done.wait(10)
        # a redelivery, if one was made, arrives within ack_wait of the first delivery's last +WPI
        deadline = time.monotonic() + 1.5
        while time.monotonic() < deadline and len(seen) < 2:
            time.sleep(0.05)  # the poll of a bounded wait for a redelivery that must not come (auto) or must
        return seen
    finally:
        ctx.stop()
        ctx.wait(5)


@pytest.mark.parametrize("workers", [1, 3])
def test_a_slow_handler_keeps_its_message(js, name, workers):
    stream = js.create_stream(StreamConfig(name=name, subjects=[f"{name}.>"]))
    assert slow_consume(stream, js, name, auto=True, workers=workers) == [1]


def test_a_push_consumes_slow_handler_keeps_its_message(js, name):
    stream = js.create_stream(StreamConfig(name=name, subjects=[f"{name}.>"]))
    assert slow_consume(stream, js, name, auto=True, push=True) == [1]


def test_without_it_the_same_handler_sees_a_redelivery(js, name):
    stream = js.create_stream(StreamConfig(name=name, subjects=[f"{name}.>"]))
    seen = slow_consume(stream, js, name, auto=False)
    # Redelivered every ack_wait while the handler works: the second delivery, and any that were buffered
    # behind it by the time the handler came back (the third comes about 2 s in), reach the same handler.
    assert seen[:2] == [1, 2] and seen == sorted(seen), seen


def test_auto_in_progress_is_refused_where_it_cannot_work(stream):
    none = stream.create_consumer(ConsumerConfig(durable_name="n", ack_policy=AckPolicy.NONE))
    with pytest.raises(errors.InvalidArgumentError, match="AckNone"):
        none.consume(lambda m: None, auto_in_progress=True)
    explicit = stream.create_consumer(ConsumerConfig(durable_name="e"))
    with pytest.raises(errors.InvalidTypeError, match="auto_in_progress"):
        explicit.consume(lambda m: None, auto_in_progress="yes")
    js = stream.jetstream
    for ordered in (js.ordered_consumer(stream.name), js.ordered_push_consumer(stream.name)):
        with pytest.raises(errors.InvalidArgumentError, match="ordered consumer"):
            ordered.consume(lambda m: None, auto_in_progress=True)
