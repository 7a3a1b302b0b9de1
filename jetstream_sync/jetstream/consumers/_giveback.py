"""Giving back what a read received but will not hand out, so the server redelivers it now.

A JetStream message delivered to a read is "ack pending" at the server until it is acked, nak'd, or its
consumer's ack wait passes (30 s by default; minutes in many deployments). A read that ends with messages it
never handed to the user (``stop()``, a fetch the user left early, a client closed, and whatever the server
had already sent when the read unsubscribed) would otherwise leave each of them to that timeout: invisible to
every other reader meanwhile, and with ``max_deliver`` one delivery attempt spent on nobody. Each is nak'd
instead, the way ADR-37 asks a client to give back what it will not process.

Nothing is given back for a consumer that takes no acks (``AckPolicy.NONE``, ordered consumers): the server
forgot those messages when it sent them.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from ... import errors
from ..._protocol import ACK_PREFIX, ACK_PREFIX_TEXT, NAK, encode_pub
from ..._runtime import Handler, Runtime
from ...message import Msg

__all__ = ["give_back", "give_back_now", "late_giver"]

log = logging.getLogger("jetstream_sync")


def give_back(runtime: Runtime, msgs: Iterable[Msg], label: str) -> int:
    """Any thread: nak each of ``msgs`` that still awaits its ack, in one coalesced send; returns how many.

    When the naks cannot be sent (the connection is down or closed), the messages come back after their ack
    wait, as for any read cut off by a disconnect; that is logged at debug level, being no news to anyone.
    """
    naks = tuple(
        encode_pub(msg.reply.encode(), b"", None, NAK)
        for msg in msgs
        if not msg.is_acked and msg.reply.startswith(ACK_PREFIX_TEXT)
    )
    if not naks:
        return 0
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


def late_giver(runtime: Runtime, ack_none: bool) -> Handler:
    """The handler of a subscription being retired (``Runtime.unsubscribe_soon(..., late=)``), on the IO thread:
    every JetStream message that still arrives for the ended read is given back."""
    return lambda subject, reply, data, headers: give_back_now(runtime, reply, ack_none)
