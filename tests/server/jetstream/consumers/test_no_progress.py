"""Pulls the server refuses at once are never sent again in a tight loop, and a stored message larger than
``max_bytes`` is reported as a typed error instead of being waited on in silence (issue 26, item 3).

The pulls a client sends are counted on the wire, through the fault proxy: a ``watch()`` on the PUBs to
``$JS.API.CONSUMER.MSG.NEXT.>``. Before the fix a consume whose every pull met a 409 sent about 2,700 a second.
"""

from __future__ import annotations

import threading
import time

import pytest

import jetstream_sync
from jetstream_sync import ConsumerConfig, StreamConfig, errors
from tests.helpers import wait_until

PULLS = "$JS.API.CONSUMER.MSG.NEXT.>"
#: the measuring window of the spin check, and the most pulls allowed in it (backing off from 50 ms: about 4)
WINDOW = 1.0
MOST_PULLS = 10


@pytest.fixture
def nc(fault_proxy):
    with jetstream_sync.connect(fault_proxy.url) as client:
        yield client


def big_stream(nc, name: str, payloads: list[int]) -> None:
    """A stream ``name`` holding one message per payload size, in order."""
    js = nc.jetstream()
    js.create_stream(StreamConfig(name=name, subjects=[f"{name.lower()}.>"]))
    for size in payloads:
        js.publish(f"{name.lower()}.a", b"x" * size)


def test_consume_ends_with_a_typed_error_naming_max_bytes(nc, fault_proxy):
    """max_bytes below a stored message's size: no pull of this consume can ever deliver it (a consumer delivers
    in order), so the consume reports MessageExceedsMaxBytesError once and ends with it, after one pull."""
    big_stream(nc, "BIG", [2000])
    cons = nc.jetstream().create_consumer("BIG", ConsumerConfig(durable_name="c"))
    pulls = fault_proxy.watch("upstream", PULLS)
    reported: list[BaseException] = []
    handled: list[jetstream_sync.Msg] = []
    ctx = cons.consume(handled.append, max_bytes=1000, error_handler=reported.append)
    ctx.wait(5)  # before the fix the consume never ended
    assert isinstance(ctx.error, errors.MessageExceedsMaxBytesError)
    assert isinstance(ctx.error, errors.PullError)
    assert ctx.error.max_bytes == 1000
    assert "max_bytes=1000" in str(ctx.error) and "BIG/c" in str(ctx.error)
    wait_until(lambda: reported)  # the error handler runs on the watchdog
    assert [type(e) for e in reported] == [errors.MessageExceedsMaxBytesError]  # once, not per pull
    assert handled == []
    assert 1 <= pulls.count <= 2, pulls.frames


def test_messages_raises_the_typed_error_from_iteration(nc, fault_proxy):
    big_stream(nc, "BIGIT", [5000])
    cons = nc.jetstream().create_consumer("BIGIT", ConsumerConfig(durable_name="c"))
    pulls = fault_proxy.watch("upstream", PULLS)
    with cons.messages(max_bytes=4096) as it, pytest.raises(errors.MessageExceedsMaxBytesError, match="max_bytes=4096"):
        it.next(timeout=5)  # before the fix: TimeoutError after 5 s of spinning
    assert 1 <= pulls.count <= 2, pulls.frames


def test_an_ordered_consume_raises_it_too(nc):
    """An ordered consumer cannot skip the message either: a new link would stop at the same one."""
    big_stream(nc, "BIGORD", [100, 3000])
    consumer = nc.jetstream().ordered_consumer("BIGORD")
    with consumer.messages(max_bytes=1000) as it:
        assert len(it.next(timeout=5).data) == 100
        with pytest.raises(errors.MessageExceedsMaxBytesError, match="max_bytes=1000"):
            it.next(timeout=5)


def test_a_budget_too_small_for_now_backs_off_and_recovers(nc, fault_proxy):
    """A pull sized to what is left of the buffer (max_bytes minus what the handler still holds) can be too
    small for the next message: not an error (it fits once the buffer empties), but the server refuses such a
    pull at once, so pulling again at once spun while the handler worked. Now the engine backs off."""
    big_stream(nc, "HALF", [600] * 4)
    cons = nc.jetstream().create_consumer("HALF", ConsumerConfig(durable_name="c"))
    pulls = fault_proxy.watch("upstream", PULLS)
    holding = threading.Event()
    release = threading.Event()
    handled: list[int] = []
    reported: list[BaseException] = []

    def handler(msg: jetstream_sync.Msg) -> None:
        holding.set()
        release.wait(10)
        handled.append(msg.metadata.sequence.stream)
        msg.ack()

    # each message is about 680 bytes as the server counts it: one fits in 1000, a second does not
    ctx = cons.consume(handler, max_bytes=1000, threshold_bytes=900, error_handler=reported.append)
    try:
        assert holding.wait(5)
        wait_until(lambda: ctx.stats().statuses.get(409, 0) >= 2)  # small pulls were refused
        before = pulls.count
        time.sleep(WINDOW)  # the measuring window: nothing is waited for here
        during = pulls.count - before
        release.set()
        wait_until(lambda: len(handled) == 4)
    finally:
        release.set()
        ctx.stop()
    assert during <= MOST_PULLS, f"{during} pulls in {WINDOW}s while the handler held a message"
    assert handled == [1, 2, 3, 4]
    assert not [e for e in reported if isinstance(e, errors.PullError)]
