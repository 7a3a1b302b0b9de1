"""The seam tracing and metrics plug into, without the client importing them.

``ACTIVE`` stays None until ``jetstream_sync.integrations.otel.instrument()`` sets it (the ``otel`` extra).
Every hook site reads it once per call and does nothing more while it is None, so a client without
instrumentation pays one module attribute read per publish, request or consume: no OpenTelemetry import, no
span, no header. The `Telemetry` protocol is the whole contract between the client and an instrumenter;
a site hands over the call to make (``send``) and the instrumenter runs it inside its span, adding the headers
that carry the trace.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol, TypeVar

if TYPE_CHECKING:
    from .jetstream.consumers.delivery import ConsumeContext
    from .message import Msg
    from .models import PubAck

__all__ = [
    "ACTIVE",
    "Telemetry",
    "TraceHeaders",
    "activate",
    "deactivate",
    "note_heartbeat_missed",
    "note_reconnected",
]

T = TypeVar("T")

#: header pairs (name, value) to add to a published message: the trace context (``traceparent``, ...)
TraceHeaders = Sequence[tuple[bytes, bytes]]


class Telemetry(Protocol):
    """What an instrumenter provides. Each method runs the given call and returns what it returns (or raises
    what it raises); around it, the instrumenter opens and closes its span and records its metrics."""

    def publish(self, subject: str, size: int, msg_id: str | None, send: Callable[[TraceHeaders], PubAck]) -> PubAck:
        """A JetStream publish waiting for its ack: ``send(trace_headers)`` publishes and returns the ack."""

    def publish_async(
        self,
        subject: str,
        size: int,
        msg_id: str | None,
        send: Callable[[TraceHeaders], concurrent.futures.Future[PubAck]],
    ) -> concurrent.futures.Future[PubAck]:
        """A JetStream publish that returns a future at once: the span ends when the future resolves."""

    def request(self, subject: str, send: Callable[[], T]) -> T:
        """A JetStream API request (``$JS.API.<subject>``)."""

    def handler(self, handler: Callable[[Msg], object]) -> Callable[[Msg], object]:
        """The consume handler to run instead of ``handler``: each message processed inside a span whose parent
        is the trace the message carries."""

    def consume_started(self, context: ConsumeContext) -> None:
        """A consume started: an instrumenter may watch its buffer (``context.stats().buffered``) until it ends."""

    def reconnected(self) -> None:
        """A client re-established its connection."""

    def heartbeat_missed(self, label: str) -> None:
        """A consume (``label``: stream/consumer) missed two idle heartbeats."""


#: the instrumenter in use, or None (the default: nothing is traced or measured)
ACTIVE: Telemetry | None = None


def activate(telemetry: Telemetry) -> None:
    """Switch instrumentation on for every client of this process (calls that already started are unaffected)."""
    global ACTIVE
    ACTIVE = telemetry


def deactivate() -> None:
    """Switch instrumentation off."""
    global ACTIVE
    ACTIVE = None


def note_reconnected() -> None:
    """Tell the instrumenter, if any, that a client reconnected (IO thread)."""
    telemetry = ACTIVE
    if telemetry is not None:
        telemetry.reconnected()


def note_heartbeat_missed(label: str) -> None:
    """Tell the instrumenter, if any, that the consume ``label`` missed its heartbeats (IO thread)."""
    telemetry = ACTIVE
    if telemetry is not None:
        telemetry.heartbeat_missed(label)
