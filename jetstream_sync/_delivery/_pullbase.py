"""The pull engines' common part: one inbox subscription per read, its pull requests, and the messages it builds
on the IO thread. `ContinuousPull` (``_pull.py``) and `FetchPull` / `AckNextPull` (``_fetch.py``) are built on it.
"""

from __future__ import annotations

import abc
import contextlib
from typing import Any, ClassVar, cast

from .. import errors
from .._protocol import ACK_PREFIX, encode_pub
from .._runtime import DeliverySink, Handler, NatsSubscription, Runtime, io_thread
from ..message import Msg
from ..models.reads import PullPriority
from . import _giveback
from ._engine import Engine
from ._target import PullTarget, pulled_message

__all__ = ["PullEngine"]


class PullEngine(Engine, abc.ABC):
    """One inbox subscription for one delivery's pulls; builds messages on the IO thread.

    Keyword arguments go on to the next base: a continuous pull is a `DeliveryEngine` too."""

    #: deliveries go through the compiled `DeliverySink` where it is built (`_handler`); an engine that must see
    #: each message itself (`OrderedPull` checks every sequence) leaves it False
    BATCHED: ClassVar[bool] = False

    def __init__(self, runtime: Runtime, target: PullTarget, **more: Any) -> None:
        super().__init__(runtime, **more)
        self.target = target
        self.inbox = runtime.new_inbox()
        self._inbox_b = self.inbox.encode()
        self._nats_sub: NatsSubscription | None = None

    @property
    def label(self) -> str:
        return self.target.label

    @io_thread
    def _make_msg(self, subject: bytes, reply: bytes, data: bytes, headers: bytes | None) -> Msg:
        return pulled_message(self.acks, self.target, subject, reply, data, headers)

    @io_thread
    def _priority_fields(self, priority: PullPriority | None) -> dict[str, object] | None:
        """IO thread: a pull's priority group members, with the pin id when this handle holds one."""
        if priority is None:
            return None
        fields = priority.fields()
        pin = self.target.pin
        if pin is not None and pin.id:
            fields["id"] = pin.id
        return fields

    @io_thread
    def _send_pull(self, body: bytes, reply: bytes | None = None) -> None:
        """IO thread: publish a pull request with our inbox (or ``reply``, a subject below it) as the reply."""
        self.runtime.send_now(encode_pub(self.target.next_subject, reply or self._inbox_b, None, body))

    def _listen_on(self) -> str:
        """The subject the engine subscribes to: its inbox (ContinuousPull: one subject per pull below it)."""
        return self.inbox

    @io_thread
    def _handler(self) -> Handler:
        """IO thread: what the inbox subscription's messages go to: the compiled `DeliverySink` where it is
        built and the engine batches (``BATCHED``), else `_on_message`.

        The sink builds each delivery's Msg in C (as `_make_msg` builds it) and hands `_on_messages` the ones
        of one read in a list: at 128 B that took the IO thread's Python work for a message from three calls
        to a share of one. Statuses and heartbeats, and with a pinned priority group any message with headers
        (its pin id is read from them), still come to `_on_message`, which the pure-Python path calls for every
        message."""
        if DeliverySink is None or not self.BATCHED:
            return self._on_message
        target = self.target
        sink = DeliverySink(
            Msg, self._on_message, self._on_messages, self.acks, target.ack_none, ACK_PREFIX, target.pin is None
        )
        return cast(Handler, sink)

    @io_thread
    async def _subscribe(self) -> None:
        self._nats_sub = await self.runtime.subscribe_async(self._listen_on(), self._handler())

    @io_thread
    async def _resubscribe(self) -> None:
        """IO thread: drop the inbox and listen on a fresh one, so nothing sent to the old one (late messages
        and statuses of a replaced consumer) can reach this engine again."""
        self._unsubscribe()
        self.inbox = self.runtime.new_inbox()
        self._inbox_b = self.inbox.encode()
        await self._subscribe()

    @io_thread
    def _unsubscribe(self, late: Handler | None = None) -> None:
        """IO thread: drop the subscription (fire and forget). With ``late``, what the server sent before it saw
        the UNSUB goes there (by default nowhere: an ordered link's late messages are of a replaced consumer)."""
        sub, self._nats_sub = self._nats_sub, None
        if sub is not None:
            self.runtime.unsubscribe_soon(sub, self.inbox, late)

    @io_thread
    def _retire(self) -> None:
        """IO thread: the read is over: drop the subscription, and give back what still arrives for it
        (``_giveback.py``). The server forgets a waiting pull once its reply subject has no interest, so no
        message of this consumer goes to a pull nobody reads any more."""
        self._unsubscribe(self._give_back_late)

    def _unsubscribe_before_giving_back(self) -> None:
        """Any thread: queue the UNSUB now, ahead of the naks of what this read gives back, so the server drops
        its waiting pulls first and none of them takes a redelivery (the IO thread's own UNSUB follows)."""
        sub = self._nats_sub
        if sub is not None:
            with contextlib.suppress(errors.JetStreamError):  # closed or cut off: the naks cannot go out either
                self.runtime.send_unsub(sub)

    @io_thread
    def _give_back_late(self, subject: bytes, reply: bytes, data: bytes, headers: bytes | None) -> None:
        """IO thread: a delivery for this ended read (the retired subscription's handler)."""
        _giveback.give_back_now(self.runtime, reply, self.target.ack_none)

    @abc.abstractmethod
    def _on_message(self, subject: bytes, reply: bytes, data: bytes, headers: bytes | None) -> None:
        """IO thread: one message, status or heartbeat on the inbox."""

    @abc.abstractmethod
    def _on_messages(self, msgs: list[Msg], size: int) -> None:
        """IO thread: deliveries the `DeliverySink` built from one read, in order, ``size`` bytes in all (as the
        server counts them); only where ``BATCHED``."""
