"""Server-side progress of a streaming query: a durable consumer that nobody pulls, moved to each commit.

Spark's checkpoint stays the truth of where a query is; the consumer is a mirror of it for operators, who see
a query's lag with the tools they already use (``nats consumer info ORDERS spark-orders``: ``num_pending`` is
what the query has not committed yet, ``delivered`` where it is). Like Pulsar's ``predefinedSubscription``,
without its second source of truth: the consumer is written, never read.

It runs in the planning worker on the driver, at each ``commit``. Moving it (``CONSUMER.RESET``) needs
nats-server 2.14, which is checked when the query starts; a failure to move it later is logged and the query
goes on, since losing the mirror loses no data.
"""

from __future__ import annotations

import logging

from ... import errors
from ...jetstream._features import require_server
from ...models import AckPolicy, ConsumerConfig, DeliverPolicy
from .._clients import process_client
from .options import ReadOptions

__all__ = ["ProgressConsumer"]

log = logging.getLogger("jetstream_sync.spark")

_DESCRIPTION = "where a Spark query on this stream has committed (jetstream-sync); moved by the query, never pulled"


class ProgressConsumer:
    """Planning worker: the durable ``options.progress_consumer`` on the query's stream, kept at the next
    sequence the query will read."""

    def __init__(self, options: ReadOptions, name: str) -> None:
        self.options = options
        self.name = name
        self._checked = False
        self._failing = False

    def check(self) -> None:
        """Once, when the query starts: the server can move a consumer (nats-server 2.14+)."""
        if self._checked:
            return
        client = process_client(self.options.connection)
        try:
            require_server(client.server_info, "the option progressConsumer (moving a consumer)", (2, 14, 0))
        except errors.FeatureNotSupportedError as exc:
            raise errors.InvalidArgumentError("progressConsumer", f"{exc}; remove the option") from None
        self._checked = True

    def advance(self, next_seq: int) -> None:
        """Move the consumer so that it would deliver ``next_seq`` next (creating it the first time, and again
        after the stream was re-created); logs a warning once per run of failures, and goes on."""
        js = process_client(self.options.connection).jetstream()
        try:
            try:
                js.reset_consumer(self.options.stream, self.name, next_seq)
            except errors.ConsumerNotFoundError:
                js.stream(self.options.stream).create_consumer(self._config(next_seq))
        except errors.JetStreamError as exc:
            if not self._failing:
                self._failing = True
                log.warning(
                    "%s: could not move the progress consumer %r to sequence %d (%s); the query goes on (its "
                    "checkpoint is the truth), and the consumer shows an older position until a commit moves it",
                    self.options.stream,
                    self.name,
                    next_seq,
                    exc,
                )
            return
        if self._failing:
            self._failing = False
            log.info("%s: the progress consumer %r is at sequence %d again", self.options.stream, self.name, next_seq)

    def _config(self, next_seq: int) -> ConsumerConfig:
        subjects = list(self.options.subjects)
        return ConsumerConfig(
            durable_name=self.name,
            description=_DESCRIPTION,
            deliver_policy=DeliverPolicy.BY_START_SEQUENCE,
            opt_start_seq=next_seq,
            ack_policy=AckPolicy.NONE,
            filter_subject=subjects[0] if len(subjects) == 1 else None,
            filter_subjects=subjects if len(subjects) > 1 else None,
        )
