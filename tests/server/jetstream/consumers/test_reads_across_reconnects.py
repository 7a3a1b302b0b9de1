"""A read that waits (``next(timeout=T)``, ``fetch``) waits out its time across a reconnect (issue 26, item 4).

Before, the disconnect ended it at once: ``next()`` raised ``TimeoutError("... within Ts")`` after a fraction of
T, and a fetch came back empty, so a loop reading "a TimeoutError (or an empty batch) means drained" stopped at
any blip. Now the pull is asked again once reconnected, for what is left of the count and the time: a message
published after the reconnect, within T, is returned by the same call, and a TimeoutError comes only at T.

The link is cut through the fault proxy; a pull is known to be at the server when the consumer's info counts it
as waiting.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import jetstream_sync
from jetstream_sync import ConsumerConfig, StreamConfig, errors
from tests.helpers import wait_until

T = 5.0  # the timeout of the reads that must survive the reconnect
SHORT = 2.0  # the timeout of the reads that run out while the link is down


@pytest.fixture
def nc(fault_proxy) -> Iterator[jetstream_sync.Client]:
    with jetstream_sync.connect(fault_proxy.url, reconnect_wait=0.1, max_reconnect_attempts=-1) as client:
        client.jetstream().create_stream(StreamConfig(name="RC", subjects=["rc.>"]))
        yield client


class Call:
    """A blocking read run on a thread of its own: its outcome and how long it took."""

    def __init__(self, read: Callable[[], Any]) -> None:
        self.result: Any = None
        self.error: BaseException | None = None
        self.elapsed = 0.0
        self._read = read
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.started = time.monotonic()
        self._thread.start()

    def _run(self) -> None:
        try:
            self.result = self._read()
        except BaseException as exc:
            self.error = exc
        self.elapsed = time.monotonic() - self.started

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)
        assert not self._thread.is_alive(), "the read did not return"


def waiting(js: jetstream_sync.JetStream, consumer: Callable[[], str | None]) -> Callable[[], bool]:
    """Whether the consumer has a pull waiting at the server."""

    def check() -> bool:
        name = consumer()
        return name is not None and js.consumer_info("RC", name).num_waiting >= 1

    return check


def cut_and_reconnect(nc: jetstream_sync.Client, fault_proxy) -> None:
    before = nc.reconnects
    fault_proxy.cut()
    wait_until(lambda: nc.reconnects > before and nc.is_connected, timeout=5)


def cut_and_stay_away(fault_proxy) -> None:
    fault_proxy.refuse(True)
    fault_proxy.cut()


def durable(nc: jetstream_sync.Client) -> tuple[Any, Callable[[], str | None]]:
    cons = nc.jetstream().create_consumer("RC", ConsumerConfig(durable_name="d"))
    return cons, lambda: "d"


def ordered(nc: jetstream_sync.Client) -> tuple[Any, Callable[[], str | None]]:
    cons = nc.jetstream().ordered_consumer("RC")
    return cons, lambda: cons.name


KINDS = {"durable": durable, "ordered": ordered}


@pytest.mark.parametrize("kind", KINDS)
def test_next_returns_a_message_published_after_the_reconnect(nc, fault_proxy, kind):
    js = nc.jetstream()
    cons, name = KINDS[kind](nc)
    call = Call(lambda: cons.next(timeout=T))
    wait_until(waiting(js, name))
    cut_and_reconnect(nc, fault_proxy)
    js.publish("rc.a", b"after the reconnect")
    call.join(T + 3)
    assert call.error is None, f"{call.error!r} after {call.elapsed:.2f}s"
    assert call.result.data == b"after the reconnect"
    assert call.elapsed < T


@pytest.mark.parametrize("kind", KINDS)
def test_next_whose_time_runs_out_while_disconnected_raises_timeout_at_its_time(nc, fault_proxy, kind):
    js = nc.jetstream()
    cons, name = KINDS[kind](nc)
    call = Call(lambda: cons.next(timeout=SHORT))
    wait_until(waiting(js, name))
    cut_and_stay_away(fault_proxy)
    try:
        call.join(SHORT + 3)
    finally:
        fault_proxy.refuse(False)
    assert isinstance(call.error, errors.TimeoutError), repr(call.error)
    assert call.elapsed >= SHORT - 0.05, f"raised after {call.elapsed:.2f}s of {SHORT}s"
    assert "disconnected" in str(call.error)  # and it says why nothing came


@pytest.mark.parametrize("kind", KINDS)
def test_a_fetch_goes_on_across_the_reconnect(nc, fault_proxy, kind):
    js = nc.jetstream()
    cons, name = KINDS[kind](nc)
    call = Call(lambda: [m.data for m in cons.fetch(3, expires=T)])
    wait_until(waiting(js, name))
    cut_and_reconnect(nc, fault_proxy)
    for i in range(3):
        js.publish("rc.a", b"%d" % i)
    call.join(T + 3)
    assert call.error is None, repr(call.error)
    assert call.result == [b"0", b"1", b"2"]
    assert call.elapsed < T  # a full batch ends at once


def test_pull_subscribe_fetch_returns_a_message_published_after_the_reconnect(nc, fault_proxy):
    js = nc.jetstream()
    psub = js.pull_subscribe("rc.>", durable="ps")
    call = Call(lambda: [m.data for m in psub.fetch(1, timeout=T)])
    wait_until(waiting(js, lambda: "ps"))  # ADR-13: after the no-wait pull, the long one is at the server
    cut_and_reconnect(nc, fault_proxy)
    js.publish("rc.a", b"after the reconnect")
    call.join(T + 3)
    assert call.error is None, repr(call.error)
    assert call.result == [b"after the reconnect"]
