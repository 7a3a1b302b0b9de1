"""kombu's QoS of a channel: its prefetch, and the messages delivered and not yet acked, by delivery tag.

The prefetch itself is kept by the channel's `Quota` (its pullers reserve room from it);
this class is what kombu sees of it, and what acks, rejects and gives back the messages it holds.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from typing import TYPE_CHECKING

from ... import errors

if TYPE_CHECKING:
    from ...message import Msg
    from .transport import Channel

__all__ = ["QoS"]

log = logging.getLogger("jetstream_sync.integrations")


class QoS:
    """Prefetch and the messages delivered and not yet acked, by delivery tag. Thread-safe: Celery acks from
    its pool's result handler thread as well as from the consuming one."""

    def __init__(self, channel: Channel) -> None:
        self.channel = channel
        self._lock = threading.Lock()
        self._delivered: OrderedDict[str, Msg] = OrderedDict()
        self._restored = False

    @property
    def prefetch_count(self) -> int:
        """The channel's prefetch (``basic_qos``); 0 is no limit (the channel still holds at most
        ``unlimited_prefetch``)."""
        return self.channel.quota.prefetch

    @prefetch_count.setter
    def prefetch_count(self, value: int) -> None:
        self.channel.quota.set_prefetch(value)

    def __len__(self) -> int:
        return len(self._delivered)

    def can_consume(self) -> bool:
        """Whether one more message may be delivered within the prefetch count."""
        prefetch = self.prefetch_count
        return not prefetch or len(self._delivered) < prefetch

    def can_consume_max_estimate(self) -> int | None:
        """How many more messages may be delivered within the prefetch (None: no limit)."""
        prefetch = self.prefetch_count
        return max(prefetch - len(self._delivered), 0) if prefetch else None

    def append(self, delivery_tag: str, msg: Msg) -> None:
        """A message was delivered to kombu: held, and kept alive, until it is acked or rejected."""
        with self._lock:
            self._delivered[delivery_tag] = msg

    def held(self) -> list[Msg]:
        """The messages delivered and not yet acked (the keeper's thread reads them)."""
        with self._lock:
            return list(self._delivered.values())

    def _pop(self, delivery_tag: str, multiple: bool) -> list[Msg]:
        with self._lock:
            if not multiple:
                msg = self._delivered.pop(delivery_tag, None)
                return [] if msg is None else [msg]
            taken: list[Msg] = []
            while self._delivered:
                tag, msg = self._delivered.popitem(last=False)
                taken.append(msg)
                if tag == delivery_tag:
                    break
            return taken

    def ack(self, delivery_tag: str, multiple: bool = False) -> None:
        """Ack the message (with ``multiple``, every one delivered before it too); any thread."""
        for msg in self._pop(delivery_tag, multiple):
            msg.ack()
        self.channel.room_freed()

    def reject(self, delivery_tag: str, requeue: bool = False) -> None:
        """``requeue``: nak, redelivered now (counts as a delivery toward ``max_deliver``); else the message
        leaves the queue for good: to the dead-letter stream (``Channel.dead_letter``)."""
        for msg in self._pop(delivery_tag, False):
            if requeue:
                msg.nak()
                self.channel.flush()  # the next get or pull of this thread finds it requeued, as AMQP promises
            else:
                self.channel.dead_letter(msg)
        self.channel.room_freed()

    def restore_unacked(self) -> list[tuple[BaseException, Msg]]:
        """Give back every unacked message (nak): redelivered now rather than after the ack wait."""
        with self._lock:
            msgs = list(self._delivered.values())
            self._delivered.clear()
        failed: list[tuple[BaseException, Msg]] = []
        for msg in msgs:
            try:
                msg.nak()
            except errors.JetStreamError as exc:  # redelivered after its ack wait anyway
                failed.append((exc, msg))
        if failed:
            log.warning(
                "%d unacked message(s) could not be given back now; redelivered after the ack wait", len(failed)
            )
        return failed

    def restore_unacked_once(self, stderr: object = None) -> None:
        """[`restore_unacked`][jetstream_sync.integrations.kombu.QoS.restore_unacked], once per channel (kombu calls it
        when the channel closes)."""
        if not self._restored:
            self._restored = True
            self.restore_unacked()
