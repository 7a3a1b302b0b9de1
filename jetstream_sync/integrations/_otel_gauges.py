"""The OpenTelemetry gauges of lag and health (``otel.instrument()`` registers them; see ``otel.py``).

Two families, both observed when the SDK collects (on its reader's thread, e.g. every 60 s with a
``PeriodicExportingMetricReader``), never on a client thread:

- **Consumer lag**, the server's figures ([`ConsumerLag`][jetstream_sync.models.ConsumerLag]) of every consumer a
  running ``consume()`` of this process reads, and of the handles given to
  [`observe_lag`][jetstream_sync.integrations.otel.observe_lag]: one consumer info request per consumer per
  collection (the three gauges share it), attributes ``messaging.system=nats``, ``messaging.destination.name`` (the
  stream) and ``messaging.consumer.group.name`` (the consumer).
- **Client health**, every connected client's [`ClientStats`][jetstream_sync.ClientStats]: messages and bytes in and
  out, the round trip, acks awaiting the server, and each running consume's buffer; attribute
  ``jetstream_sync.client.name`` (the client's ``name``; clients of one name are added together).

Names: the messaging semantic conventions define client operation metrics only (``messaging.client.sent.messages``,
``messaging.client.consumed.messages``, ``messaging.client.operation.duration``, ``messaging.process.duration``), no
backlog or connection-health metric, so these are named in this library's namespace rather than in ``messaging.*``,
where a later convention could define the same name differently; the attributes are the conventions' own.
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from collections.abc import Callable, Iterable
from typing import Protocol

from opentelemetry import metrics

from .. import errors
from .._runtime._exit import LIVE
from ..health import ClientStats, take_snapshot
from ..jetstream.consumers.delivery import ConsumeContext
from ..models import ConsumerLag

__all__ = ["OBSERVED", "HealthGauges", "LagSource", "observe"]

log = logging.getLogger("jetstream_sync")

_SYSTEM = "nats"
#: figures older than this are asked again; the gauges of one collection are observed within it, so they share one
#: consumer info request per consumer and one snapshot per client
_FRESH = 1.0


class LagSource(Protocol):
    """What [`observe_lag`][jetstream_sync.integrations.otel.observe_lag] takes: a consumer handle (pull, push,
    ordered) or a running consume."""

    def lag(self) -> ConsumerLag | None:
        """The consumer's lag, asked of the server now (None: a consume that reads no single consumer)."""


#: the handles given to observe_lag(), reported while the process runs (module state: instrument() may come later)
OBSERVED: list[LagSource] = []
_OBSERVED_LOCK = threading.Lock()


def observe(sources: Iterable[LagSource]) -> None:
    """Any thread: report the lag of these handles too."""
    with _OBSERVED_LOCK:
        OBSERVED.extend(sources)


class HealthGauges:
    """The lag and health instruments of one instrumenter, and the figures they share within a collection."""

    def __init__(self, meter: metrics.Meter, consumes: weakref.WeakSet[ConsumeContext]) -> None:
        self._consumes = consumes
        self._lock = threading.Lock()  # the SDK may collect from two readers at once
        self._lags: list[ConsumerLag] = []
        self._lags_at = float("-inf")
        self._stats: dict[str, ClientStats] = {}
        self._stats_at = float("-inf")
        self._failing: set[str] = set()  # lag sources whose last request failed (logged once per failure streak)
        lag = [
            ("pending", "Messages of the stream not yet delivered to the consumer's clients (num_pending)"),
            ("ack_pending", "Messages delivered and not yet acknowledged (num_ack_pending)"),
            ("redelivered", "Messages awaiting an ack that were delivered more than once (num_redelivered)"),
        ]
        for field, description in lag:
            meter.create_observable_gauge(
                f"jetstream_sync.consumer.{field}",
                callbacks=[self._lag_gauge(field)],
                unit="{message}",
                description=description,
            )
        meter.create_observable_counter(
            "jetstream_sync.client.io.messages",
            callbacks=[self._io("msgs")],
            unit="{message}",
            description="Messages received (network.io.direction=receive) and sent (transmit) by the clients",
        )
        meter.create_observable_counter(
            "jetstream_sync.client.io.bytes",
            callbacks=[self._io("bytes")],
            unit="By",
            description="Payload bytes received, and bytes written (protocol lines included), by the clients",
        )
        client_gauges: list[tuple[str, str, str, Callable[[ClientStats], float | None]]] = [
            ("rtt", "s", "The last round trip to the server (a PING answered by a PONG)", lambda s: s.rtt),
            ("acks_unconfirmed", "{ack}", "Double acks (ack_sync) awaiting the server", lambda s: s.acks_unconfirmed),
            (
                "publish_acks_pending",
                "{message}",
                "publish_async messages awaiting their PubAck",
                lambda s: s.publish_acks_pending,
            ),
        ]
        for name, unit, description, read in client_gauges:
            meter.create_observable_gauge(
                f"jetstream_sync.client.{name}",
                callbacks=[self._client_gauge(read)],
                unit=unit,
                description=description,
            )
        meter.create_observable_gauge(
            "jetstream_sync.consume.held.bytes",
            callbacks=[self._fill_gauge(lambda fill: fill.held_bytes)],
            unit="By",
            description="Bytes a running consume holds in the client, received and not yet handed to the application",
        )
        meter.create_observable_gauge(
            "jetstream_sync.consume.buffer.usage",
            callbacks=[self._fill_gauge(lambda fill: fill.fill)],
            unit="1",
            description="How full a running consume's buffer is against its bound (0-1)",
        )

    # -- consumer lag ---------------------------------------------------------------------------------------
    def _lag_gauge(self, field: str) -> Callable[[metrics.CallbackOptions], Iterable[metrics.Observation]]:
        def observe(_options: metrics.CallbackOptions) -> Iterable[metrics.Observation]:
            for lag in self._current_lags():
                attributes = {
                    "messaging.system": _SYSTEM,
                    "messaging.destination.name": lag.stream,
                    "messaging.consumer.group.name": lag.consumer,
                }
                yield metrics.Observation(getattr(lag, field), attributes)

        return observe

    def _current_lags(self) -> list[ConsumerLag]:
        """The SDK's reader thread: each consumer's lag, asked again when older than ``_FRESH``."""
        with self._lock:
            if time.monotonic() - self._lags_at < _FRESH:
                return self._lags
            with _OBSERVED_LOCK:
                sources: list[tuple[str, LagSource]] = [(repr(s), s) for s in OBSERVED]
            for context in list(self._consumes):
                if context.closed.is_set():
                    self._consumes.discard(context)
                else:
                    sources.append((context.label, context))
            found: dict[tuple[str, str], ConsumerLag] = {}
            for label, source in sources:
                lag = self._ask(label, source)
                if lag is not None:
                    found[(lag.stream, lag.consumer)] = lag  # two consumes of one consumer: one observation
            self._lags = list(found.values())
            self._lags_at = time.monotonic()
            return self._lags

    def _ask(self, label: str, source: LagSource) -> ConsumerLag | None:
        try:
            lag = source.lag()
        except errors.JetStreamError as exc:  # not connected, timed out, the consumer deleted: no figure this time
            if label not in self._failing:
                self._failing.add(label)
                log.warning("otel: no lag for %s this collection (said once until it answers again): %s", label, exc)
            return None
        self._failing.discard(label)
        return lag

    # -- client health ----------------------------------------------------------------------------------------
    def _current_stats(self) -> dict[str, ClientStats]:
        """The SDK's reader thread: one snapshot per connected client (by name), taken again when older than
        ``_FRESH``; each asks for a round trip the next snapshot reports, without waiting for it."""
        with self._lock:
            if time.monotonic() - self._stats_at < _FRESH:
                return self._stats
            by_name: dict[str, ClientStats] = {}
            for runtime in list(LIVE):
                if runtime.is_closed or runtime.forked:  # a forked child's copy is the parent's client
                    continue
                stats = take_snapshot(runtime)
                runtime.health.measure_rtt(runtime.default_timeout)
                name = runtime.options.name or ""
                by_name[name] = _added(by_name[name], stats) if name in by_name else stats
            self._stats = by_name
            self._stats_at = time.monotonic()
            return self._stats

    def _io(self, kind: str) -> Callable[[metrics.CallbackOptions], Iterable[metrics.Observation]]:
        def observe(_options: metrics.CallbackOptions) -> Iterable[metrics.Observation]:
            for name, stats in self._current_stats().items():
                for direction, value in (
                    ("receive", stats.in_msgs if kind == "msgs" else stats.in_bytes),
                    ("transmit", stats.out_msgs if kind == "msgs" else stats.out_bytes),
                ):
                    yield metrics.Observation(value, _client_attributes(name, {"network.io.direction": direction}))

        return observe

    def _client_gauge(
        self, read: Callable[[ClientStats], float | None]
    ) -> Callable[[metrics.CallbackOptions], Iterable[metrics.Observation]]:
        def observe(_options: metrics.CallbackOptions) -> Iterable[metrics.Observation]:
            for name, stats in self._current_stats().items():
                value = read(stats)
                if value is not None:  # no RTT measured yet: no point rather than a made-up 0
                    yield metrics.Observation(value, _client_attributes(name))

        return observe

    def _fill_gauge(
        self, read: Callable[..., float]
    ) -> Callable[[metrics.CallbackOptions], Iterable[metrics.Observation]]:
        def observe(_options: metrics.CallbackOptions) -> Iterable[metrics.Observation]:
            for name, stats in self._current_stats().items():
                for fill in stats.consumes:
                    yield metrics.Observation(
                        read(fill), _client_attributes(name, {"jetstream_sync.consume": fill.label})
                    )

        return observe


def _client_attributes(name: str, more: dict[str, str] | None = None) -> dict[str, str]:
    return {"messaging.system": _SYSTEM, "jetstream_sync.client.name": name, **(more or {})}


def _added(a: ClientStats, b: ClientStats) -> ClientStats:
    """Two clients of one name as one: counters added, the slower round trip, every consume."""
    rtts = [r for r in (a.rtt, b.rtt) if r is not None]
    return ClientStats(
        taken_at=max(a.taken_at, b.taken_at),
        interval=0.0,
        connected=a.connected and b.connected,
        in_msgs=a.in_msgs + b.in_msgs,
        in_bytes=a.in_bytes + b.in_bytes,
        out_msgs=a.out_msgs + b.out_msgs,
        out_bytes=a.out_bytes + b.out_bytes,
        reconnects=a.reconnects + b.reconnects,
        acks_unconfirmed=a.acks_unconfirmed + b.acks_unconfirmed,
        publish_acks_pending=a.publish_acks_pending + b.publish_acks_pending,
        rtt=max(rtts) if rtts else None,
        callbacks_dropped=a.callbacks_dropped + b.callbacks_dropped,
        consumes=a.consumes + b.consumes,
    )
