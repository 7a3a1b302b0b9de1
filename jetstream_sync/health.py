"""The client's health snapshot and the periodic stats callback (confluent-kafka's ``stats_cb``, typed).

``connect(..., stats_callback=fn, stats_interval=5.0)`` calls ``fn(ClientStats)`` every ``stats_interval`` seconds
with the counters people graph: messages and bytes in and out, acks awaiting the server, reconnects, the round
trip, and how full each running consume's buffer is. [`Client.stats_snapshot`][jetstream_sync.Client.stats_snapshot]
takes the same snapshot on demand (the OpenTelemetry gauges read it).

Who runs what (docs/ARCHITECTURE.md, "Threads and ownership"):

- the **watchdog** keeps the period (a timer, library code only) and posts a PING for the round trip; it reads
  nothing of the user's and never waits;
- the **IO thread** sends that PING and notes the PONG as any other; the message paths count as they did, plus
  one integer add per pulled message for the bytes a consume holds;
- the **callbacks thread** takes the snapshot and calls the user's function, in order with the other callbacks.
  A snapshot is not queued while the previous one is still waiting there (a slow callback skips periods, counted
  in ``skipped``, instead of piling them up), and none is taken once the client closed.

A callback that raises is logged once, with its traceback, at ERROR; later raises are counted in
``callback_errors`` (which the callback itself sees) and logged at DEBUG, and the timer goes on.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import attrs

from ._runtime._callbacks import callback_name

if TYPE_CHECKING:
    from ._runtime import Runtime

__all__ = ["ClientStats", "ConsumeFill", "StatsCallback"]

log = logging.getLogger("jetstream_sync")


@attrs.frozen(kw_only=True)
class ConsumeFill:
    """How much one running ``consume()`` or ``messages()`` holds against its bounds.

    ``held_messages`` / ``held_bytes``: delivered to this client and not yet handed to the application (the
    buffer and a reader's current burst). ``max_messages`` / ``max_bytes`` are the bounds that hold them: a pull
    consume's ``max_messages`` and ``max_bytes`` (0: not bounded by bytes; pulls ask for no more than fits), a push
    consume's ``pending_msgs_limit`` and ``pending_bytes_limit`` (past them new messages are dropped). A consume
    whose fill stays near 1 has a handler slower than its delivery; one near 0 waits on the server.
    ``delivered``: messages handed to the application since the consume started.
    """

    label: str
    kind: str  # "pull" or "push"
    held_messages: int
    held_bytes: int
    max_messages: int
    max_bytes: int
    delivered: int

    @property
    def fill(self) -> float:
        """The fuller of messages held / ``max_messages`` and bytes held / ``max_bytes`` (when bounded), 0-1."""
        by_messages = self.held_messages / self.max_messages if self.max_messages > 0 else 0.0
        by_bytes = self.held_bytes / self.max_bytes if self.max_bytes > 0 else 0.0
        return min(1.0, max(by_messages, by_bytes))


@attrs.frozen(kw_only=True)
class ClientStats:
    """A snapshot of one client's health, taken on the callbacks thread (see the module docstring).

    Counters (``*_msgs``, ``*_bytes``, ``reconnects``, ``callbacks_dropped``, ``callback_errors``, ``skipped``) are
    totals since the client was made: a rate is the difference between two snapshots over ``interval``.

    - ``in_msgs`` / ``in_bytes``: messages received (every subscription's, consume's and reply's) and their
      payload bytes (headers not included); ``out_msgs`` / ``out_bytes``: messages sent (publishes, acks, pull and
      API requests) and the bytes written for them, protocol lines and headers included (the
      [`Client.stats`][jetstream_sync.Client.stats] counters, as nats-py and this client have always counted
      them).
    - ``acks_unconfirmed``: double acks (``ack_sync``) sent and not yet confirmed by the server. Plain ``ack()``
      waits for nothing and is not counted; what the server still waits to hear about is a consumer's
      ``ack_pending`` ([`ConsumerLag`][jetstream_sync.models.ConsumerLag]).
    - ``publish_acks_pending``: ``publish_async`` messages whose PubAck has not come yet.
    - ``rtt``: the last round trip to the server in seconds (a PING sent by the stats timer, answered without
      holding up anything else); None before the first answer, while disconnected, or when the last PING got no
      PONG within the interval.
    - ``consumes``: one [`ConsumeFill`][jetstream_sync.ConsumeFill] per running consume and messages iterator.
    - ``callback_errors``: how many times the stats callback raised; ``skipped``: periods for which no snapshot
      was queued because the last one still waited on the callbacks thread.
    - ``interval``: seconds since the previous snapshot of this timer (0.0 for the first, and on demand).
    """

    taken_at: datetime
    interval: float
    connected: bool
    in_msgs: int
    in_bytes: int
    out_msgs: int
    out_bytes: int
    reconnects: int
    acks_unconfirmed: int
    publish_acks_pending: int
    rtt: float | None
    callbacks_dropped: int
    consumes: tuple[ConsumeFill, ...]
    callback_errors: int = 0
    skipped: int = 0


#: stats_callback(stats): the periodic health snapshot, on the client's callbacks thread
StatsCallback = Callable[[ClientStats], object]


@runtime_checkable
class _Fills(Protocol):
    """A running delivery that reports its buffer (the pull and push engines)."""

    def fill(self) -> ConsumeFill | None: ...


def take_snapshot(runtime: Runtime, *, interval: float = 0.0, errors: int = 0, skipped: int = 0) -> ClientStats:
    """Any thread: the client's health now, from counters each kept by its own thread (read, never locked)."""
    from .jetstream.publish import AsyncPublisher  # here: the JetStream layer imports this module's types

    counters = runtime.stats()
    tracked = runtime.tracked()
    fills: list[ConsumeFill] = []
    awaiting = 0
    for item in tracked:
        if isinstance(item, _Fills):
            fill = item.fill()
            if fill is not None:
                fills.append(fill)
        elif isinstance(item, AsyncPublisher):
            awaiting += item.pending
    health = runtime.health
    return ClientStats(
        taken_at=datetime.now(timezone.utc),
        interval=interval,
        connected=runtime.is_connected,
        in_msgs=counters.get("in_msgs", 0),
        in_bytes=counters.get("in_bytes", 0),
        out_msgs=counters.get("out_msgs", 0),
        out_bytes=counters.get("out_bytes", 0),
        reconnects=runtime.reconnects,
        acks_unconfirmed=health.acks_unconfirmed,
        publish_acks_pending=awaiting,
        rtt=health.rtt if runtime.is_connected else None,
        callbacks_dropped=counters.get("callbacks_dropped", 0),
        consumes=tuple(sorted(fills, key=lambda f: f.label)),
        callback_errors=errors,
        skipped=skipped,
    )


class StatsReporter:
    """The periodic stats callback of one client (``stats_callback``, ``stats_interval``).

    The period is kept on the watchdog at fixed times (start + k * interval, so it does not drift with the work
    of each tick); a tick that finds the watchdog late past a whole period skips to the next due time.
    """

    def __init__(self, runtime: Runtime, callback: StatsCallback, interval: float) -> None:
        self._runtime = runtime
        self._callback = callback
        self._interval = interval
        self._started = time.monotonic()
        self._due = self._started + interval
        self._last = 0.0  # time.monotonic() of the last snapshot (0.0: none yet)
        self.errors = 0  # callbacks thread only
        self.skipped = 0  # watchdog only
        self._stopped = False  # any thread, only ever set
        # Two-writer handshake, on purpose: the watchdog sets it when it queues a snapshot, the callbacks thread
        # clears it once that ran, so at most one snapshot waits on the callbacks thread.
        self._queued = False
        self._lock = threading.Lock()  # guards _timer against a stop racing the tick that re-arms it
        self._timer = runtime.health.call_at(self._due, self._tick)
        runtime.track(self)
        runtime.health.measure_rtt(min(interval, runtime.default_timeout))

    def _tick(self) -> None:
        """Watchdog: queue a snapshot (unless one still waits), ask for a round trip, arm the next period."""
        if self._stopped or self._runtime.is_closed:
            return
        if self._queued:
            self.skipped += 1
        else:
            self._queued = True
            self._runtime.run_callback(self._deliver)
        self._runtime.health.measure_rtt(min(self._interval, self._runtime.default_timeout))
        now = time.monotonic()
        self._due += self._interval
        if self._due <= now:  # late by a whole period or more: the missed ones are not made up for
            self._due = now + self._interval - ((now - self._started) % self._interval)
        with self._lock:
            if not self._stopped:
                self._timer = self._runtime.health.call_at(self._due, self._tick)

    def _deliver(self) -> None:
        """Callbacks thread: take the snapshot and hand it to the user's function."""
        self._queued = False
        if self._stopped or self._runtime.is_closed:
            return
        now = time.monotonic()
        interval = now - self._last if self._last else 0.0
        self._last = now
        stats = take_snapshot(self._runtime, interval=interval, errors=self.errors, skipped=self.skipped)
        try:
            self._callback(stats)
        except Exception:
            self.errors += 1
            if self.errors == 1:
                log.exception(
                    "the stats callback %s raised; it is still called every %gs (later raises are counted in "
                    "ClientStats.callback_errors and logged at DEBUG)",
                    callback_name(self._callback),
                    self._interval,
                )
            else:
                log.debug("the stats callback raised again (%d times)", self.errors, exc_info=True)

    def stop(self) -> None:
        """Any thread: no snapshot is taken after this returns (one already running on the callbacks thread
        finishes)."""
        with self._lock:
            self._stopped = True
            self._timer.cancel()
        self._runtime.untrack(self)

    def on_client_closed(self, exc: BaseException) -> None:
        """Closing the client stops the timer (any thread)."""
        self.stop()
