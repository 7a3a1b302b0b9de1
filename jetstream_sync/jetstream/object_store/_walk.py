"""Knowing a walk is over when the message that would say so never comes.

A walk of the bucket (``list``, a watcher's initial values, a read's chunks) runs an ordered consumer until
the server reports nothing pending, and learns that from the pending count of a delivered message. When the
last pending messages vanish before they are delivered (aged out by the bucket's TTL, purged by a rename,
a delete or a replace), no such message comes and the walk would wait forever. So a walk that has been
silent for a while asks the consumer itself: nothing pending, and everything its live server-side consumer
delivered already received, means the walk is over. The consumer sequence (not the stream sequence, which
the server advances past purged messages without delivering anything) is what tells "received" exactly.
"""

from __future__ import annotations

import logging

from ... import errors
from ...message import Msg
from ..consumers import OrderedConsumer

__all__ = ["IDLE_CHECK", "DrainCheck"]

log = logging.getLogger("jetstream_sync")

#: how long a walk waits in silence before asking whether anything is left
IDLE_CHECK = 1.0


class DrainCheck:
    """Tracks the last message a walk received and answers "is anything left?" from the consumer's info."""

    def __init__(self, consumer: OrderedConsumer) -> None:
        self._consumer = consumer
        self._link: str | None = None
        self._consumer_seq = 0

    def saw(self, msg: Msg) -> None:
        """Note a message the walk received (which server-side consumer sent it, and at which position)."""
        metadata = msg.metadata
        self._link = metadata.consumer
        self._consumer_seq = metadata.sequence.consumer

    def nothing_left(self) -> bool:
        """True when the server has nothing pending for the walk and everything delivered was received.
        False when it cannot tell now (between a reset and the next consumer, or while disconnected);
        StreamNotFoundError when the bucket's stream is gone."""
        try:
            info = self._consumer.info()
        except errors.StreamNotFoundError:
            raise
        except errors.JetStreamError as exc:
            log.debug("walk of %s: cannot ask the consumer now: %s", self._consumer.stream_name, exc)
            return False
        if info.num_pending:
            return False
        delivered = info.delivered.consumer_seq
        return delivered <= self._consumer_seq if info.name == self._link else delivered == 0
