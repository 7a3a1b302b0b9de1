"""Pulls the server refuses outright (409 Exceeded MaxRequestBatch / MaxRequestExpires / MaxRequestMaxBytes /
MaxWaiting, without Nats-Pending-* headers): the refused pull is not counted as pending, a consume fits its
pulls to the consumer's per-request limits and says so once, a fetch names both values, and a consumer full of
waiting pulls is asked again with back-off (a sibling of issue 26, item 3).

Before: a consume counted the refused batch as pending and sent no pull until the missed-heartbeat alarm (30 s
by default), when the same pull met the same refusal; nothing was delivered. A fetch raised a bare
PullWarning. The pulls a client sends are counted on the wire through the fault proxy.
"""

from __future__ import annotations

import json
import time

import pytest

import jetstream_sync
from jetstream_sync import ConsumerConfig, StreamConfig, errors
from tests.helpers import wait_until

PULLS = "$JS.API.CONSUMER.MSG.NEXT.>"
#: the measuring window of the back-off check, and the most pulls allowed in it (backing off from 50 ms: about 6)
WINDOW = 2.0
MOST_PULLS = 12


@pytest.fixture
def nc(fault_proxy):
    with jetstream_sync.connect(fault_proxy.url) as client:
        yield client


def limited(nc, name: str, count: int, **limits: object) -> jetstream_sync.Consumer:
    """A stream ``name`` with ``count`` messages of 100 bytes, and a durable consumer on it with ``limits``."""
    js = nc.jetstream()
    js.create_stream(StreamConfig(name=name, subjects=[f"{name.lower()}.>"]))
    for _ in range(count):
        js.publish(f"{name.lower()}.a", b"x" * 100)
    return js.create_consumer(name, ConsumerConfig(durable_name="c", **limits))


def bodies(rule) -> list[dict[str, int]]:
    return [json.loads(frame.data) for frame in rule.frames]


def only_limit_error(reported: list[BaseException]) -> errors.PullLimitError:
    """The one report: a PullLimitError (a PullWarning, as every 409 refusal was before)."""
    assert len(reported) == 1, reported
    (exc,) = reported
    assert isinstance(exc, errors.PullLimitError) and isinstance(exc, errors.PullWarning)
    return exc


def test_consume_pulls_within_max_batch_and_reports_it_once(nc, fault_proxy):
    cons = limited(nc, "BATCH", 20, max_batch=5)
    pulls = fault_proxy.watch("upstream", PULLS)
    handled: list[jetstream_sync.Msg] = []
    reported: list[BaseException] = []
    ctx = cons.consume(lambda m: (handled.append(m), m.ack()), max_messages=100, error_handler=reported.append)
    try:
        wait_until(lambda: len(handled) == 20)  # before: none, and the next pull only after 30 s
        wait_until(lambda: reported)  # the error handler runs on the callbacks thread
        assert ctx.stats().pending_messages <= 5  # the refused 100 are not owed
    finally:
        ctx.stop()
    exc = only_limit_error(reported)
    assert (exc.setting, exc.limit, exc.option, exc.requested) == ("max_batch", 5, "max_messages", 100)
    assert "BATCH/c takes at most 5 messages per pull" in str(exc) and "max_messages=100" in str(exc)
    batches = [body["batch"] for body in bodies(pulls)]
    assert batches[0] == 100 and all(batch <= 5 for batch in batches[1:]), batches
    assert ctx.stats().statuses.get(409) == 1
    assert ctx.error is None


def test_messages_pull_within_max_expires(nc, fault_proxy):
    cons = limited(nc, "EXPIRES", 3, max_expires=2)
    pulls = fault_proxy.watch("upstream", PULLS)
    reported: list[BaseException] = []
    with cons.messages(expires=10, error_handler=reported.append) as it:
        got = [it.next(timeout=5) for _ in range(3)]  # before: TimeoutError
    assert len(got) == 3
    wait_until(lambda: reported)
    exc = only_limit_error(reported)
    assert (exc.setting, exc.limit, exc.option, exc.requested) == ("max_expires", 2.0, "expires", 10.0)
    assert "at most 2s (its max_expires)" in str(exc) and "expires=10s" in str(exc)
    sent = bodies(pulls)
    assert sent[0]["expires"] == 10_000_000_000
    # within the limit, and the heartbeat at most half of it (the server refuses more)
    assert all(b["expires"] <= 2_000_000_000 and b["idle_heartbeat"] <= 1_000_000_000 for b in sent[1:]), sent


def test_consume_by_bytes_pulls_within_max_bytes(nc, fault_proxy):
    cons = limited(nc, "BYTES", 10, max_bytes=1000)
    pulls = fault_proxy.watch("upstream", PULLS)
    handled: list[jetstream_sync.Msg] = []
    reported: list[BaseException] = []
    ctx = cons.consume(lambda m: (handled.append(m), m.ack()), max_bytes=4000, error_handler=reported.append)
    try:
        wait_until(lambda: len(handled) == 10)
        wait_until(lambda: reported)
    finally:
        ctx.stop()
    exc = only_limit_error(reported)
    assert (exc.setting, exc.limit, exc.option, exc.requested) == ("max_bytes", 1000, "max_bytes", 4000)
    sent = [body["max_bytes"] for body in bodies(pulls)]
    assert sent[0] == 4000 and all(size <= 1000 for size in sent[1:]), sent


def test_a_max_expires_no_consume_can_fit_ends_it_naming_both_values(nc, fault_proxy):
    """A consume's pull needs at least 1 s: below that the consume ends, once, rather than spin or wait."""
    cons = limited(nc, "TOOSHORT", 1, max_expires=0.5)
    pulls = fault_proxy.watch("upstream", PULLS)
    reported: list[BaseException] = []
    ctx = cons.consume(lambda m: None, error_handler=reported.append)
    ctx.wait(5)  # before: TimeoutError, it never ended
    assert isinstance(ctx.error, errors.PullLimitError)
    assert (ctx.error.limit, ctx.error.requested) == (0.5, 30.0)
    assert "at most 0.5s" in str(ctx.error) and "at least 1s" in str(ctx.error)
    wait_until(lambda: reported)
    assert only_limit_error(reported) is ctx.error
    assert pulls.count == 1, pulls.frames
    with cons.messages() as it, pytest.raises(errors.PullLimitError, match="max_expires"):
        it.next(timeout=5)


@pytest.mark.parametrize(
    ("limits", "read", "expected", "says"),
    [
        (
            {"max_batch": 5},
            lambda c: list(c.fetch(100, expires=10)),
            ("max_batch", 5, "max_messages", 100),
            "fetch asked for max_messages=100, but LIMITS/c takes at most 5 per pull",
        ),
        (
            {"max_expires": 2},
            lambda c: list(c.fetch(1, expires=10)),
            ("max_expires", 2.0, "expires", 10.0),
            "fetch asked for expires=10s, but LIMITS/c lets a pull wait at most 2s",
        ),
        (
            {"max_bytes": 1000},
            lambda c: list(c.fetch_bytes(4000, expires=10)),
            ("max_bytes", 1000, "max_bytes", 4000),
            "fetch asked for max_bytes=4000, but LIMITS/c takes at most 1000 bytes per pull",
        ),
        (
            {"max_batch": 5},
            lambda c: list(c.fetch_bytes(4000, expires=10)),
            ("max_batch", 5, "max_messages", 1_000_000),
            "give max_messages=5 or fewer as well",
        ),
        (
            {"max_expires": 2},
            lambda c: c.next(timeout=10),
            ("max_expires", 2.0, "timeout", 10.0),
            "next asked for timeout=10s, but LIMITS/c lets a pull wait at most 2s",
        ),
    ],
    ids=["batch", "expires", "bytes", "fetch_bytes-batch", "next-expires"],
)
def test_a_read_past_a_limit_raises_at_once_naming_both_values(nc, limits, read, expected, says):
    cons = limited(nc, "LIMITS", 1, **limits)
    start = time.monotonic()
    with pytest.raises(errors.PullLimitError) as raised:  # before: a bare PullWarning
        read(cons)
    assert time.monotonic() - start < 5  # at once, not at the end of the pull's 10 s
    exc = raised.value
    assert (exc.setting, exc.limit, exc.option, exc.requested) == expected
    assert says in str(exc) and f"raise the consumer's {expected[0]}" in str(exc)


def test_a_consumer_full_of_waiting_pulls_is_asked_again_with_back_off_and_reported_once(nc, fault_proxy):
    """max_waiting=1 and a fetch's pull holds the slot. nats-server 2.12+ drops a pull with heartbeats then
    without a word (older ones answer 409 Exceeded MaxWaiting), so the consume hears of it from its missed-
    heartbeat alarm (2 s here), then asks without heartbeats: the server answers 409 at once, and the consume
    asks again backing off from 50 ms to 5 s, reporting the episode once. Before: a missed heartbeat reported
    every 2 s and never a word about MaxWaiting."""
    cons = limited(nc, "FULL", 0, max_waiting=1)
    blocker = cons.fetch(1, expires=6)  # its pull holds the only waiting slot for 6 s
    wait_until(lambda: cons.info().num_waiting == 1)
    pulls = fault_proxy.watch("upstream", PULLS)
    handled: list[jetstream_sync.Msg] = []
    reported: list[BaseException] = []
    ctx = cons.consume(lambda m: (handled.append(m), m.ack()), expires=2, error_handler=reported.append)
    try:
        wait_until(lambda: [e for e in reported if isinstance(e, errors.PullWarning)], timeout=5)
        before = pulls.count
        time.sleep(WINDOW)  # the measuring window: nothing is waited for here
        during = pulls.count - before
        assert list(blocker) == []  # it expires, and the slot is free
        nc.jetstream().publish("full.a", b"x")
        wait_until(lambda: handled, timeout=10)  # a retry gets in: the back-off is at most 5 s
    finally:
        ctx.stop()
    full = [e for e in reported if isinstance(e, errors.PullWarning)]
    assert len(full) == 1 and "Exceeded MaxWaiting" in str(full[0]), reported  # once, not per refusal
    assert not isinstance(full[0], errors.PullLimitError)
    assert len([e for e in reported if isinstance(e, errors.MissedHeartbeatError)]) <= 1, reported
    assert 1 <= during <= MOST_PULLS, f"{during} pulls in {WINDOW}s while the consumer was full"
    assert ctx.error is None
