"""MessageBuffer.abort gives back what it dropped, and a put racing an abort is never lost: each item is taken by
a reader, returned by abort, or refused by put (whose caller gives it back), exactly once."""

from __future__ import annotations

import threading

from jetstream_sync._runtime import BufferFinished, MessageBuffer


def buffer() -> MessageBuffer[int]:
    return MessageBuffer(lambda notify: notify())


def test_abort_returns_what_was_not_taken_and_refuses_later_puts() -> None:
    buf = buffer()
    for i in range(5):
        assert buf.put(i)
    assert buf.get(0) == 0
    assert buf.abort(BufferFinished()) == [1, 2, 3, 4]
    assert buf.abort(BufferFinished()) == []  # idempotent: nothing twice
    assert buf.put(5) is False
    assert len(buf) == 0


def _race_once() -> None:
    """A producer puts 20,000 items while a reader takes them and this thread aborts the buffer."""
    buf = buffer()
    refused: list[int] = []
    taken: list[int] = []
    started = threading.Event()

    def produce() -> None:
        started.set()
        for i in range(20_000):
            if not buf.put(i):
                refused.append(i)

    def read() -> None:
        while True:
            try:
                taken.extend(buf.get_many(64, 1.0))
            except BufferFinished:
                return

    producer = threading.Thread(target=produce)
    reader = threading.Thread(target=read)
    producer.start()
    reader.start()
    started.wait()
    dropped = buf.abort(BufferFinished())
    producer.join()
    reader.join()
    assert sorted(taken + dropped + refused) == list(range(20_000)), "an item was lost or counted twice"


def test_an_item_put_while_another_thread_aborts_is_accounted_for_once() -> None:
    for _ in range(50):
        _race_once()
