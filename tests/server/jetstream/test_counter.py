"""Counters (ADR-49, nats-server 2.12+): the server adds, big integers, many writers lose nothing, and what we
write reads back in nats-py (and the reverse)."""

from __future__ import annotations

import asyncio
import threading

import nats
import pytest

from jetstream_sync import Counter, StreamConfig, errors
from tests.helpers import wait_until


@pytest.fixture
def counter(js, name) -> Counter:
    js.create_stream(StreamConfig(name=name, subjects=[f"{name}.>"], allow_msg_counter=True, allow_direct=True))
    return js.counter(name)


def test_add_returns_the_total_and_load_reads_it(counter):
    s = counter.name
    assert counter.add(f"{s}.home", 5) == 5
    assert counter.add(f"{s}.home", -2) == 3
    assert counter.add(f"{s}.home", 0) == 3
    assert counter.load(f"{s}.home") == 3
    huge = 10**30
    assert counter.add(f"{s}.big", huge) == huge  # past int64: the server's totals are arbitrary precision
    assert counter.add(f"{s}.big", huge) == 2 * huge
    with pytest.raises(errors.MessageNotFoundError):
        counter.load(f"{s}.never")


def test_get_many_reads_every_matching_subject_at_once(counter):
    s = counter.name
    for page, hits in (("home", 3), ("about", 1), ("blog", 7)):
        counter.add(f"{s}.pages.{page}", hits)
    counter.add(f"{s}.other", 1)
    assert counter.get_many([f"{s}.pages.*"]) == {f"{s}.pages.home": 3, f"{s}.pages.about": 1, f"{s}.pages.blog": 7}
    assert counter.get_many([f"{s}.pages.none"]) == {}


def test_concurrent_writers_lose_no_increment(counter):
    s = counter.name

    def writer() -> None:
        for _ in range(200):
            counter.add(f"{s}.shared", 1)

    threads = [threading.Thread(target=writer) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert counter.load(f"{s}.shared") == 800


def test_a_stream_without_counters_and_bad_input_are_refused(js, name, counter):
    js.create_stream(StreamConfig(name=f"{name}_PLAIN", subjects=[f"{name}_plain.>"]))
    with pytest.raises(errors.InvalidArgumentError, match="allow_msg_counter"):
        js.counter(f"{name}_PLAIN")
    with pytest.raises(errors.InvalidTypeError, match="delta"):
        counter.add(f"{counter.name}.x", 1.5)
    with pytest.raises(errors.InvalidTypeError, match="delta"):
        counter.add(f"{counter.name}.x", True)
    with pytest.raises(errors.StreamNotFoundError):
        js.counter("NO_SUCH_STREAM")


def test_counters_interoperate_with_nats_py(counter, nats_server):
    """nats-py increments with the raw header and reads our total; we read its increments."""
    s = counter.name
    counter.add(f"{s}.shared", 10)

    async def other_client() -> tuple[bytes, bytes]:
        nc = await nats.connect(nats_server.url)
        try:
            ack = await nc.request(f"{s}.shared", b"", headers={"Nats-Incr": "+5"}, timeout=5)
            stored = await nc.jetstream().get_last_msg(s, f"{s}.shared")
            return ack.data, stored.data
        finally:
            await nc.close()

    ack, stored = asyncio.run(other_client())
    assert b'"val":"15"' in ack and stored == b'{"val":"15"}'
    assert counter.load(f"{s}.shared") == 15
    assert counter.add(f"{s}.shared", 1) == 16


def test_get_many_reads_totals_the_server_aggregated_from_sources(js, name):
    """ADR-49: a counter stream sourcing others adds their increments into its own totals (here two regions
    mapped onto one subject), and get_many reads the sums."""
    for region in ("EU", "US"):
        js.create_stream(StreamConfig(name=f"{name}_{region}", subjects=[f"{region}.{name}.>"], allow_msg_counter=True))
    js.create_stream(
        StreamConfig(
            name=name,
            allow_msg_counter=True,
            allow_direct=True,
            sources=[
                {"name": f"{name}_{region}", "subject_transforms": [{"src": f"{region}.{name}.>", "dest": f"{name}.>"}]}
                for region in ("EU", "US")
            ],
        )
    )
    eu, us, total = js.counter(f"{name}_EU"), js.counter(f"{name}_US"), js.counter(name)
    eu.add(f"EU.{name}.hits", 5)
    us.add(f"US.{name}.hits", 7)
    eu.add(f"EU.{name}.hits", 1)
    us.add(f"US.{name}.other", 2)
    wait_until(lambda: total.get_many([f"{name}.>"]) == {f"{name}.hits": 13, f"{name}.other": 2}, timeout=10)
    assert total.load(f"{name}.hits") == 13
