"""Giving back what a read received but will not hand out, so the server redelivers it now.

A JetStream message delivered to a read is "ack pending" at the server until it is acked, nak'd, or its
consumer's ack wait passes (30 s by default; minutes in many deployments). A read that ends with messages it
never handed to the user (``stop()``, a fetch the user left early, a client closed, and whatever the server
had already sent when the read unsubscribed) would otherwise leave each of them to that timeout: invisible to
every other reader meanwhile, and with ``max_deliver`` one delivery attempt spent on nobody. Each is nak'd
instead, the way ADR-37 asks a client to give back what it will not process.

Nothing is given back for a consumer that takes no acks (``AckPolicy.NONE``, ordered consumers): the server
forgot those messages when it sent them.

A push subscription that ends gives back only once the server has seen its UNSUB (`HeldGiveBack`). nats-server
learns that a deliver subject lost its last subscriber on the consumer's own goroutine, from a channel it selects
on beside "new messages"; a nak it processes while that news still waits can be redelivered to the subject with
stale interest, to nobody, and then waits for its ack wait after all (seen under load: a bound subscription that
took over the consumer went 30 s without the two messages its predecessor gave back). Given back after the UNSUB's
round trip, the redelivery goes to whoever subscribes next, or waits for them at the server; and it is never
pushed back to the retiring subscription, which would only give it back again (an extra delivery each time).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable

from .. import errors
from .._protocol import ACK_PREFIX, ACK_PREFIX_TEXT, NAK, encode_pub
from .._runtime import Handler, Runtime, io_thread
from ..message import Msg

__all__ = ["HeldGiveBack", "give_back", "give_back_all_now", "give_back_now", "late_giver"]

log = logging.getLogger("jetstream_sync")


def give_back(runtime: Runtime, msgs: Iterable[Msg], label: str) -> int:
    """Any thread: nak each of ``msgs`` that still awaits its ack, in one coalesced send; returns how many.

    When the naks cannot be sent (the connection is down or closed), the messages come back after their ack
    wait, as for any read cut off by a disconnect; that is logged at debug level, being no news to anyone.
    """
    return _send_naks(runtime, [msg.reply.encode() for msg in msgs if _awaits_ack(msg)], label)


def _awaits_ack(msg: Msg) -> bool:
    return not msg.is_acked and msg.reply.startswith(ACK_PREFIX_TEXT)


def _send_naks(runtime: Runtime, replies: list[bytes], label: str) -> int:
    """Any thread (the IO thread too: the send never waits there): one nak to each ack subject, coalesced."""
    if not replies:
        return 0
    naks = tuple(encode_pub(reply, b"", None, NAK) for reply in replies)
    try:
        runtime.send(naks)
    except (errors.ConnectionClosedError, errors.NotConnectedError, errors.ForkedClientError, errors.TimeoutError):
        log.debug("%s: %d unread messages could not be given back; they return after their ack wait", label, len(naks))
        return 0
    log.debug("%s: gave back %d messages it will not hand out", label, len(naks))
    return len(naks)


def give_back_now(runtime: Runtime, reply: bytes, ack_none: bool) -> None:
    """IO thread: nak one delivery that arrived for a read that has ended (a status or heartbeat, whose reply
    is no ack subject, needs nothing)."""
    if not ack_none and reply.startswith(ACK_PREFIX):
        runtime.send_now(encode_pub(reply, b"", None, NAK))


def give_back_all_now(runtime: Runtime, msgs: Iterable[Msg], ack_none: bool) -> None:
    """IO thread: `give_back_now` for each of ``msgs``, a batch the delivery sink built for a read that ended or
    could not take them."""
    for msg in msgs:
        give_back_now(runtime, msg.reply.encode(), ack_none)


def late_giver(runtime: Runtime, ack_none: bool) -> Handler:
    """The handler of a subscription being retired (``Runtime.unsubscribe_soon(..., late=)``), on the IO thread:
    every JetStream message that still arrives for the ended read is given back."""
    return lambda subject, reply, data, headers: give_back_now(runtime, reply, ack_none)


class HeldGiveBack:
    """What a push subscription gives back, held from its ``stop()`` until the server has seen its UNSUB (see the
    module's text for why), then sent in one burst; before ``hold()`` and after ``release()`` it goes at once.

    Any thread: the stopping thread holds the buffer's messages, the IO thread the late deliveries, a reader its
    last burst; whichever thread releases sends them all (the IO thread once the UNSUB was confirmed, the closing
    thread before the connection closes). Held messages are never handed out, so none can be acked meanwhile.
    """

    def __init__(self, runtime: Runtime, label: str, ack_none: bool) -> None:
        self._runtime = runtime
        self._label = label
        self._ack_none = ack_none
        self._lock = threading.Lock()
        self._held: list[bytes] | None = None  # None: not holding, give back at once
        self._released = threading.Event()

    def hold(self) -> None:
        """From now on hold what is given back, until ``release()``."""
        with self._lock:
            if self._held is None:
                self._held = []
                self._released.clear()

    def give_back(self, msgs: Iterable[Msg]) -> None:
        """Give back ``msgs`` (those that await an ack): held while holding, else at once."""
        if self._ack_none:
            return
        replies = [msg.reply.encode() for msg in msgs if _awaits_ack(msg)]
        with self._lock:
            if self._held is not None:
                self._held.extend(replies)
                return
        _send_naks(self._runtime, replies, self._label)

    @io_thread
    def give_back_reply(self, reply: bytes) -> None:
        """IO thread: give back one delivery that arrived for the ended read (a status or heartbeat, whose
        reply is no ack subject, needs nothing): held while holding, else at once."""
        if self._ack_none or not reply.startswith(ACK_PREFIX):
            return
        with self._lock:
            if self._held is not None:
                self._held.append(reply)
                return
        give_back_now(self._runtime, reply, self._ack_none)

    def release(self) -> int:
        """Send what is held and stop holding; returns how many were given back."""
        with self._lock:
            held, self._held = self._held, None
        try:
            return _send_naks(self._runtime, held, self._label) if held else 0
        finally:
            self._released.set()

    def wait_released(self, timeout: float) -> bool:
        """Any thread but the IO thread: wait at most ``timeout`` seconds for ``release()``; whether it came."""
        return self._released.wait(timeout)
