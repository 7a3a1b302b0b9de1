"""The reconnect delay (``_connect.reconnect_delay``): ``reconnect_wait`` plus a jitter drawn uniformly up to
``reconnect_jitter``, or ``reconnect_jitter_tls`` for a TLS connection, as nats.go. Thousands of draws here, where
a test against a server (tests/server/test_reconnect_tuning.py) can afford a dozen."""

from __future__ import annotations

import asyncio
import statistics

from jetstream_sync import ConnectOptions
from jetstream_sync._runtime._connect import reconnect_delay
from jetstream_sync._runtime._usercode import BlockingCalls


def _delays(options: ConnectOptions, *, tls: bool, count: int = 4000) -> list[float]:
    calls = BlockingCalls()  # no delay callback: nothing runs on the connect thread

    async def draw() -> list[float]:
        delays = []
        for attempt in range(1, count + 1):
            delay, failure = await reconnect_delay(options, calls, attempt, options.reconnect_wait, tls)
            assert failure is None
            delays.append(delay)
        return delays

    return asyncio.run(draw())


def test_the_jitter_is_uniform_over_its_range_after_the_wait() -> None:
    options = ConnectOptions(servers="nats://127.0.0.1:4222", reconnect_wait=0.5, reconnect_jitter=0.2)
    delays = _delays(options, tls=False)
    assert min(delays) >= 0.5 and max(delays) <= 0.7
    quartiles = statistics.quantiles(delays, n=4)  # 0.55, 0.60, 0.65 for a uniform draw
    for got, want in zip(quartiles, (0.55, 0.6, 0.65), strict=True):
        assert abs(got - want) < 0.01, quartiles


def test_a_tls_connection_takes_the_tls_jitter() -> None:
    options = ConnectOptions(
        servers="tls://127.0.0.1:4222", reconnect_wait=0.1, reconnect_jitter=0.0, reconnect_jitter_tls=1.0
    )
    tls = _delays(options, tls=True)
    assert 0.1 <= min(tls) < 0.15 and 1.05 < max(tls) <= 1.1
    assert set(_delays(options, tls=False, count=50)) == {0.1}  # the plain jitter is 0


def test_no_jitter_is_the_wait_itself() -> None:
    options = ConnectOptions(servers="nats://127.0.0.1:4222", reconnect_wait=0.25, reconnect_jitter=0)
    assert set(_delays(options, tls=False, count=50)) == {0.25}
