"""One bucket handle shared by threads: compare-and-set writes decide exactly one winner each time."""

from __future__ import annotations

import threading

from jetstream_sync import errors
from tests.helpers import join_all


def test_one_create_wins(kv):
    barrier = threading.Barrier(8)
    won: list[int] = []
    lost: list[BaseException] = []

    def racer(i: int) -> None:
        barrier.wait(5)
        try:
            kv.create("lock", b"%d" % i)
            won.append(i)
        except errors.KeyExistsError as exc:
            lost.append(exc)

    threads = [threading.Thread(target=racer, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    assert join_all(threads, 10) == []
    assert len(won) == 1 and len(lost) == 7
    assert kv.get("lock").value == b"%d" % won[0]


def test_update_counter_from_threads(kv):
    kv.put("n", b"0")
    failures: list[BaseException] = []

    def bump(times: int) -> None:
        try:
            for _ in range(times):
                while True:
                    entry = kv.get("n")
                    try:
                        kv.update("n", b"%d" % (int(entry.value) + 1), last=entry.revision)
                        break
                    except errors.KeyWrongLastSequenceError:
                        continue  # another thread wrote in between: read again
        except BaseException as exc:  # reported to the test thread
            failures.append(exc)

    threads = [threading.Thread(target=bump, args=(25,)) for _ in range(4)]
    for t in threads:
        t.start()
    assert join_all(threads, 20) == []
    assert failures == []
    assert kv.get("n").value == b"100"
