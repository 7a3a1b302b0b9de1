"""The per-client memory behind read_your_writes: the highest revision per key, least recently used out first."""

from __future__ import annotations

import threading

import pytest

from jetstream_sync import errors
from jetstream_sync.jetstream._consistency import KnownRevisions, check_read_mode


def test_a_key_keeps_its_highest_revision():
    known = KnownRevisions()
    known.saw("$JS.API", "KV_A", "$KV.A.k", 7)
    known.saw("$JS.API", "KV_A", "$KV.A.k", 3)  # an older read does not lower what a write made known
    assert known.known("$JS.API", "KV_A", "$KV.A.k") == 7
    assert known.known("$JS.API", "KV_A", "$KV.A.other") == 0


def test_domains_and_streams_are_apart():
    known = KnownRevisions()
    known.saw("$JS.hub.API", "KV_A", "$KV.A.k", 9)
    assert known.known("$JS.API", "KV_A", "$KV.A.k") == 0
    assert known.known("$JS.hub.API", "KV_B", "$KV.A.k") == 0


def test_the_least_recently_used_key_is_forgotten_first():
    known = KnownRevisions(capacity=3)
    for i, key in enumerate(["a", "b", "c"], start=1):
        known.saw("p", "s", key, i)
    known.saw("p", "s", "a", 10)  # used again: now the most recent
    known.saw("p", "s", "d", 4)
    assert len(known) == 3
    assert [known.known("p", "s", k) for k in "abcd"] == [10, 0, 3, 4]


def test_threads_raising_one_key_end_at_the_highest():
    known = KnownRevisions()

    def work(base: int) -> None:
        for i in range(1_000):
            known.saw("p", "s", "k", base + i)

    threads = [threading.Thread(target=work, args=(t * 1_000,)) for t in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert known.known("p", "s", "k") == 3_999


@pytest.mark.parametrize("mode", ["direct", "read_your_writes", "leader"])
def test_the_read_modes_are_accepted(mode):
    assert check_read_mode("read", mode) == mode


@pytest.mark.parametrize("bad", ["strong", "", None, 1])
def test_another_read_mode_is_refused_naming_the_choices(bad):
    with pytest.raises(errors.InvalidArgumentError, match="read_your_writes"):
        check_read_mode("read", bad)


def test_a_forgotten_key_is_unknown():
    known = KnownRevisions()
    known.saw("p", "s", "k", 5)
    known.forget("p", "s", "k")
    known.forget("p", "s", "never-seen")
    assert known.known("p", "s", "k") == 0
