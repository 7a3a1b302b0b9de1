"""Reads that end early strand nothing (issue 32, items 3 and 4).

A JetStream message delivered to a read is ack pending until acked, nak'd, or its ack wait passes. Every test
here gives the consumer a long ack wait (60 s) and checks that what a read received and did not hand out is
redelivered long before that, and that a pull the user left does not take the consumer's next messages:

- a fetch left by ``break``, an exception or ``close()``, and ``next()`` left by a signal (Ctrl-C);
- ``messages().drain()`` with pulls in flight (a proxy delays the link, so the server always has sent messages
  the client has not yet seen when it drains), ``stop()``, and closing the client.
"""

from __future__ import annotations

import os
import queue
import signal
import threading
import time

import pytest

import jetstream_sync
from jetstream_sync import AckPolicy, ConsumerConfig, StreamConfig, errors
from tests.helpers import wait_until

ACK_WAIT = 60.0  # a message that waited for it would fail every bound below


class HandlerFailed(Exception):
    """What a user's loop body raises."""


class Interrupted(BaseException):
    """Stands for KeyboardInterrupt, delivered by a signal to the main thread while it waits."""


def publish(js, subject: str, n: int) -> None:
    for i in range(n):
        js.publish_async(subject, b"%d" % i)
    js.publish_async_complete(timeout=10)


def work_queue_consumer(stream, **config):
    return stream.create_consumer(
        ConsumerConfig(durable_name="w", ack_policy=AckPolicy.EXPLICIT, ack_wait=ACK_WAIT, **config)
    )


def leave_by_break(cons) -> None:
    for msg in cons.fetch(10, expires=30):
        msg.ack()
        break


def leave_by_exception(cons) -> None:
    with pytest.raises(HandlerFailed):
        for msg in cons.fetch(10, expires=30):
            msg.ack()
            raise HandlerFailed


def leave_by_close(cons) -> None:
    with cons.fetch(10, expires=30) as batch:
        next(batch).ack()


@pytest.mark.parametrize("leave", [leave_by_break, leave_by_exception, leave_by_close])
def test_a_fetch_left_early_ends_its_pull_so_the_next_messages_reach_a_reader(js, stream, leave):
    """Before: the left fetch's pull (9 more, 30 s) stayed at the server and took the next 5 messages; with
    max_deliver=2 the next fetch got nothing, and the messages came back only after the ack wait."""
    cons = work_queue_consumer(stream, max_deliver=2)
    js.publish(f"{stream.name}.a", b"first")
    leave(cons)
    publish(js, f"{stream.name}.a", 5)
    msgs = list(cons.fetch(5, expires=5))
    assert [m.data for m in msgs] == [b"0", b"1", b"2", b"3", b"4"]
    assert [m.metadata.num_delivered for m in msgs] == [1] * 5  # none went to the left pull first
    for m in msgs:
        m.ack()


def test_messages_a_closed_batch_did_not_hand_out_are_redelivered_at_once(js, stream):
    cons = work_queue_consumer(stream)
    publish(js, f"{stream.name}.a", 10)
    with cons.fetch(10, expires=5) as batch:
        wait_until(lambda: batch.received == 10)
        for _ in range(3):
            next(batch).ack()
    started = time.monotonic()
    rest = list(cons.fetch(7, expires=5))
    assert time.monotonic() - started < ACK_WAIT / 2
    assert [m.metadata.sequence.stream for m in rest] == list(range(4, 11))
    assert {m.metadata.num_delivered for m in rest} == {2}  # given back, then delivered again
    for m in rest:
        m.ack()


def test_a_batch_dropped_unread_gives_back_what_it_received(js, stream):
    cons = work_queue_consumer(stream)
    publish(js, f"{stream.name}.a", 4)
    batch = cons.fetch(4, expires=5)
    wait_until(lambda: cons.info().num_ack_pending == 4)  # all four delivered to the batch
    del batch  # never read: garbage-collected at once in CPython
    rest = list(cons.fetch(4, expires=5))
    assert [m.metadata.num_delivered for m in rest] == [2] * 4
    for m in rest:
        m.ack()


def test_next_left_by_an_interrupt_does_not_keep_its_pull(js, stream):
    """Ctrl-C while next() waits: its 30 s pull must not take the next message. With max_deliver=1, before, the
    message went to the abandoned pull and was never delivered to a reader."""
    assert threading.current_thread() is threading.main_thread()  # signals reach the main thread only
    cons = work_queue_consumer(stream, max_deliver=1)

    def interrupt(signum, frame):
        raise Interrupted

    previous = signal.signal(signal.SIGUSR1, interrupt)
    timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGUSR1))
    try:
        timer.start()
        with pytest.raises(Interrupted):
            cons.next(timeout=30)
    finally:
        timer.cancel()
        signal.signal(signal.SIGUSR1, previous)
    js.publish(f"{stream.name}.a", b"after")
    msg = cons.next(timeout=5)
    assert msg.data == b"after"
    assert msg.metadata.num_delivered == 1
    msg.ack()


def test_drain_hands_out_what_the_server_already_sent_and_strands_nothing(fault_proxy):
    """Before: 102-167 messages of a busy messages() stayed ack pending until their ack wait after drain(), in 3
    of 5 rounds. A 50 ms proxy delay makes every round have messages in flight when the drain starts."""
    fault_proxy.set_latency(0.05)
    with jetstream_sync.connect(fault_proxy.url) as nc:
        js = nc.jetstream()
        stream = js.create_stream(StreamConfig(name="DRAINED", subjects=["drained.>"]))
        for round_ in range(3):
            cons = stream.create_consumer(
                ConsumerConfig(durable_name=f"d{round_}", ack_policy=AckPolicy.EXPLICIT, ack_wait=ACK_WAIT)
            )
            publish(js, "drained.a", 2000)
            handed = 0
            with cons.messages(max_messages=300) as it:
                for msg in it:
                    msg.ack()
                    handed += 1
                    if handed == 400:
                        it.drain()
            nc.flush()
            assert handed >= 400
            wait_until(lambda cons=cons: cons.info().num_ack_pending == 0, timeout=10)


def test_stop_gives_back_the_buffered_messages(js, stream):
    cons = work_queue_consumer(stream)
    publish(js, f"{stream.name}.a", 50)
    with cons.messages(max_messages=50) as it:
        first = it.next(timeout=5)
        first.ack()
        wait_until(lambda: it.stats().buffered >= 40)  # most of the 50 are buffered, unread
        it.stop()
    rest = list(cons.fetch(49, expires=5))
    # all of them, in the order they were given back (what the iterator had taken from the buffer may follow)
    assert sorted(m.metadata.sequence.stream for m in rest) == list(range(2, 51))
    for m in rest:
        m.ack()


def test_stop_gives_back_each_message_for_one_more_delivery_only(js, stream):
    """stop() unsubscribes before it gives back: a pull still waiting at the server (here the read asked for 10
    and 3 came) must not take the redelivery, which the ended read would give back again, a delivery attempt
    spent on nobody (with ``max_deliver=2`` the message would be gone). Before: 8 of 30 stops did; ten rounds
    here."""
    cons = work_queue_consumer(stream, max_deliver=3)
    for _ in range(10):
        publish(js, f"{stream.name}.a", 3)
        with cons.messages(max_messages=10) as it:
            it.next(timeout=5).ack()
            wait_until(lambda: it.stats().buffered == 2)
            it.stop()
        rest = list(cons.fetch(2, expires=5))
        assert [m.metadata.num_delivered for m in rest] == [2, 2]
        for m in rest:
            m.ack()


def test_closing_the_client_gives_back_what_its_reads_buffered(nats_server, js, stream):
    cons = work_queue_consumer(stream)
    publish(js, f"{stream.name}.a", 20)
    other = jetstream_sync.connect(nats_server.url)
    it = other.jetstream().consumer(stream.name, "w").messages(max_messages=20)
    wait_until(lambda: it.stats().buffered == 20)
    other.close()
    with pytest.raises(errors.ConnectionClosedError):
        it.next(timeout=1)
    rest = list(cons.fetch(20, expires=5))
    assert len(rest) == 20 and {m.metadata.num_delivered for m in rest} == {2}
    for m in rest:
        m.ack()


def test_closing_the_client_gives_back_the_burst_an_iterator_took(nats_server, js, stream):
    """An iterator takes up to 256 buffered messages at once and hands them out one by one. Before: a client
    closed without stop() gave back only what was still buffered; the iterator's burst waited for its ack wait."""
    cons = work_queue_consumer(stream)
    publish(js, f"{stream.name}.a", 300)
    other = jetstream_sync.connect(nats_server.url)
    it = other.jetstream().consumer(stream.name, "w").messages(max_messages=300)
    wait_until(lambda: it.stats().buffered == 300)
    it.next(timeout=5).ack()  # takes a burst of 256 from the buffer, hands out the first
    other.close()
    rest = list(cons.fetch(299, expires=5))
    assert sorted(m.metadata.sequence.stream for m in rest) == list(range(2, 301))
    for m in rest:
        m.ack()


@pytest.mark.parametrize("workers", [1, 3])
def test_closing_the_client_gives_back_what_a_consume_took_and_did_not_hand_out(nats_server, js, stream, workers):
    """A consume's thread holds a burst (and with workers=N, the pool's queue) while handlers work. Before: a
    client closed meanwhile gave back only the buffer; the rest waited for the ack wait (60 s here)."""
    cons = work_queue_consumer(stream)
    publish(js, f"{stream.name}.a", 300)
    other = jetstream_sync.connect(nats_server.url)
    in_handler: queue.Queue[int] = queue.Queue()
    release = threading.Event()

    def handler(msg) -> None:
        msg.ack()
        in_handler.put(msg.metadata.sequence.stream)
        release.wait(30)

    ctx = other.jetstream().consumer(stream.name, "w").consume(handler, max_messages=300, workers=workers)
    handled = {in_handler.get(timeout=5) for _ in range(workers)}
    wait_until(lambda: cons.info().num_ack_pending == 300 - workers)  # the rest reached the other client
    if workers == 1:
        release.set()  # the next message comes from a burst taken from the full buffer
        release.clear()
        handled.add(in_handler.get(timeout=5))
    closing = threading.Thread(target=other.close)
    closing.start()
    try:
        rest = list(cons.fetch(300 - len(handled), expires=5))
        assert sorted(m.metadata.sequence.stream for m in rest) == sorted(set(range(1, 301)) - handled)
        for m in rest:
            m.ack()
    finally:
        release.set()
        closing.join(10)
    assert ctx.closed.wait(5)
