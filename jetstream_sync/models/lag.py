"""[`ConsumerLag`][jetstream_sync.models.ConsumerLag]: how far behind one consumer is, read from its
[`ConsumerInfo`][jetstream_sync.models.ConsumerInfo].

It is a view, not a wire type: the figures are the server's (nothing is counted on the client), picked out of the
info and named for what an operator graphs or alerts on, so a dashboard, a consumer group's per-member report and
the OpenTelemetry gauges all read the same numbers the same way.
"""

from __future__ import annotations

from datetime import datetime

import attrs

from .consumer import ConsumerInfo

__all__ = ["ConsumerLag"]


@attrs.frozen(kw_only=True)
class ConsumerLag:
    """One consumer's backlog as the server reported it at ``ts``.

    - ``pending``: messages of the stream (after the consumer's filter) not yet delivered to any client
      (``num_pending``): the work still to start.
    - ``ack_pending``: delivered and not acknowledged yet (``num_ack_pending``): the work in hand. A consumer
      that acks as it goes keeps this near what its readers hold; one that grows until ``max_ack_pending`` has
      handlers that stopped answering.
    - ``redelivered``: of those awaiting an ack, how many were delivered more than once (``num_redelivered``):
      the messages handlers failed on, nak'd, or let run past ``ack_wait``.
    - ``waiting``: pull requests waiting at the server (``num_waiting``): idle readers. 0 for push consumers.
    - ``delivered_stream_seq`` / ``ack_floor_stream_seq``: the stream sequence last delivered, and the one up to
      which everything is acknowledged; the gap between them is what is in flight.
    - ``last_active``: the latest activity the server reports, the later of the last delivery and the last ack
      (None when neither happened yet). A consumer whose ``pending`` grows while ``last_active`` stands still
      has no reader.
    - ``ts``: when the server took these figures (None from servers before 2.10, which do not say).

    ``lag`` is ``pending + ack_pending``: everything not yet done.
    """

    stream: str
    consumer: str
    pending: int
    ack_pending: int
    redelivered: int
    waiting: int
    last_active: datetime | None
    delivered_stream_seq: int
    ack_floor_stream_seq: int
    ts: datetime | None = None

    @classmethod
    def from_info(cls, info: ConsumerInfo) -> ConsumerLag:
        """The lag figures of ``info`` (any thread; no request: the figures are as fresh as the info;
        [`Consumer.lag`][jetstream_sync.Consumer.lag] asks for a fresh one)."""
        active = [t for t in (info.delivered.last_active, info.ack_floor.last_active) if t is not None]
        return cls(
            stream=info.stream_name,
            consumer=info.name,
            pending=info.num_pending,
            ack_pending=info.num_ack_pending,
            redelivered=info.num_redelivered,
            waiting=info.num_waiting,
            last_active=max(active) if active else None,
            delivered_stream_seq=info.delivered.stream_seq,
            ack_floor_stream_seq=info.ack_floor.stream_seq,
            ts=info.ts,
        )

    @property
    def lag(self) -> int:
        """Messages not yet done: ``pending`` (not delivered) plus ``ack_pending`` (delivered, not acked)."""
        return self.pending + self.ack_pending
