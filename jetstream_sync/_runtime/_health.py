"""What the client's health snapshot needs from the runtime, at no cost to the message paths.

- **Double acks in flight** (``acks_unconfirmed``): ``ack_sync`` calls sent and not yet confirmed by the server.
  Counted under a lock of its own, taken twice per ``ack_sync``, a call that waits a round trip anyway; the
  fire-and-forget ``ack()`` is not counted (it has nothing to wait for, and counting it would cost every ack).
- **RTT without blocking the IO thread** (``measure_rtt``): a PING sent from a task on the IO loop, whose PONG
  sets ``rtt`` when it comes; the IO thread never waits for it, and nobody else does either. One measurement at a
  time: a PONG that has not come by the next request is still being waited for.
- **A timer on the watchdog** (``call_at``): the stats reporter's period, library code only, like every watchdog
  timer (docs/ARCHITECTURE.md, "Rules: no user code on the watchdog"); the user's callback itself runs on the
  callbacks thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from .. import errors
from ._watchdog import Timer, Watchdog

if TYPE_CHECKING:
    from ._io import IOLoop
    from ._nats import NatsConnection

__all__ = ["HealthProbe"]

log = logging.getLogger("jetstream_sync")


class HealthProbe:
    """The runtime's health counters and probes (``Runtime.health``); thread-safe unless a method says so."""

    def __init__(self, io: IOLoop, nc: NatsConnection, watchdog: Watchdog) -> None:
        self._io = io
        self._nc = nc
        self._watchdog = watchdog
        self._acks_lock = threading.Lock()
        #: ``ack_sync`` calls sent and waiting for the server's confirmation
        self.acks_unconfirmed = 0
        #: the last round trip measured by ``measure_rtt`` (seconds), None before the first or after a failed one
        self.rtt: float | None = None
        #: time.monotonic() when ``rtt`` was measured (0.0: never)
        self.rtt_at = 0.0
        # Two-writer handshake, on purpose: the thread asking sets it when it posts a measurement, the IO thread
        # clears it when the PONG came or the PING failed, so at most one measurement is in flight.
        self._measuring = False
        self._task: asyncio.Task[None] | None = None  # the measurement's task, referenced until it is done

    @contextlib.contextmanager
    def ack_in_flight(self) -> Iterator[None]:
        """Any thread: count one double ack for as long as the block waits for its confirmation."""
        with self._acks_lock:
            self.acks_unconfirmed += 1
        try:
            yield
        finally:
            with self._acks_lock:
                self.acks_unconfirmed -= 1

    def measure_rtt(self, timeout: float) -> None:
        """Any thread, never waits: send a PING from the IO loop; ``rtt`` is set when its PONG comes (None when
        none comes within ``timeout`` or the connection is down). Nothing is sent while one is in flight, or once
        the loop is gone."""
        if self._measuring or self._io.closed:
            return
        self._measuring = True
        try:
            self._io.post(self._start_measuring, timeout)
        except errors.ConnectionClosedError:  # the client closed meanwhile: nothing to measure on
            self._measuring = False
        except BaseException:  # ForkedClientError in a forked child: raised to the caller, nothing left in flight
            self._measuring = False
            raise

    def _start_measuring(self, timeout: float) -> None:
        """IO thread: the PING as a task of its own (the loop goes on with everything else)."""
        self._task = asyncio.get_running_loop().create_task(self._measure(timeout))

    async def _measure(self, timeout: float) -> None:
        try:
            self.rtt = await self._nc.round_trip(timeout)
        except Exception as exc:  # not connected, or no PONG in time: the snapshot says "unknown" (None)
            log.debug("the health probe's PING got no PONG: %s", exc)
            self.rtt = None
        finally:
            self.rtt_at = time.monotonic()
            self._measuring = False

    def call_at(self, when: float, fn: Callable[[], object]) -> Timer:
        """Any thread: run the library function ``fn`` on the watchdog thread at ``when`` (time.monotonic())."""
        return self._watchdog.call_at(when, fn)
