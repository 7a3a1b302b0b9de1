"""What a pull engine asks and what it hands out: the server-side consumer (`PullTarget`, with the
pin of a pinned-client priority group, `PinTracker`), the message built from a delivery, and the error
of a one-off pull that met no responders. Shared by every pull engine: ``_pull.py`` (fetch, consume),
``_single.py`` (next) and ``_ordered.py`` (ordered links).
"""

from __future__ import annotations

import attrs

from .. import errors
from .._protocol import api_response, encode_pub
from .._runtime import Runtime, io_thread
from ..message import AckSender, Msg

__all__ = [
    "CONSUMER_CHECK_TIMEOUT",
    "PinTracker",
    "PullTarget",
    "consumer_gone",
    "pull_unanswered",
    "pulled_message",
    "read_timed_out",
]


_PIN_HEADER = b"\r\nNats-Pin-Id: "


class PinTracker:
    """The pin id the server gave this consumer handle (ADR-42 pinned client), shared by its fetches and
    consumes: every pull carries it, so the server keeps delivering here. Written on the IO thread only."""

    __slots__ = ("id",)

    def __init__(self) -> None:
        self.id = ""

    @io_thread
    def note(self, headers: bytes) -> bool:
        """IO thread: take the ``Nats-Pin-Id`` of a delivered message; True when it is a new pin."""
        at = headers.find(_PIN_HEADER)
        if at < 0:
            return False
        start = at + len(_PIN_HEADER)
        pin_id = headers[start : headers.find(b"\r\n", start)].decode()
        if not pin_id or pin_id == self.id:
            return False
        self.id = pin_id
        return True


@attrs.frozen
class PullTarget:
    """The server-side consumer a pull engine asks: where its pull requests go, whether it takes acks, and
    (with a pinned-client priority group) the pin its pulls carry."""

    stream: str
    consumer: str
    next_subject: bytes  # <api prefix>.CONSUMER.MSG.NEXT.<stream>.<consumer>
    ack_none: bool
    pin: PinTracker | None = attrs.field(default=None, eq=False)

    @property
    def info_subject(self) -> bytes:
        """<api prefix>.CONSUMER.INFO.<stream>.<consumer>: asked when pulls meet no responders (ADR-37)."""
        return self.next_subject.replace(b".CONSUMER.MSG.NEXT.", b".CONSUMER.INFO.", 1)

    @property
    def label(self) -> str:
        return f"{self.stream}/{self.consumer}"


def pulled_message(
    acks: AckSender, target: PullTarget, subject: bytes, reply: bytes, data: bytes, headers: bytes | None
) -> Msg:
    """IO thread: the Msg of a delivery from ``target``, acked through ``acks`` (its engine's ConsumerAcks); its
    size counts for the byte limits as the server counts it (subject, reply, headers and data)."""
    size = len(subject) + len(reply) + len(data) + (len(headers) if headers else 0)
    return Msg(subject.decode(), reply.decode(), data, headers, acks, size=size, ack_none=target.ack_none)


#: how long the question "does the consumer exist?" may take (asked when pulls meet no responders)
CONSUMER_CHECK_TIMEOUT = 5.0


async def consumer_gone(runtime: Runtime, target: PullTarget) -> errors.JetStreamError | None:
    """IO thread: ask the consumer's info (ADR-37, after pulls met no responders). Returns the
    ConsumerNotFoundError or StreamNotFoundError that says it is gone, None when it exists; raises the
    JetStreamError of an API that could not tell (restarting, electing its own leader)."""
    subject = target.info_subject
    try:
        reply = await runtime.request_async(
            lambda inbox: encode_pub(subject, inbox, None, b""), CONSUMER_CHECK_TIMEOUT, "consumer info"
        )
        api_response(reply.data, subject.decode())  # the subject: a not-found error names the consumer
    except (errors.ConsumerNotFoundError, errors.StreamNotFoundError) as exc:
        return exc
    return None


def pull_unanswered(label: str) -> errors.ConsumerNotFoundError:
    """What a one-off pull (fetch, next) ends with when its request met no responders (503)."""
    return errors.ConsumerNotFoundError(
        503,
        10014,
        f"no responders for a pull on {label}: the consumer does not exist or JetStream is not available",
    )


def read_timed_out(label: str, seconds: float, interrupted: bool, connected: bool) -> errors.TimeoutError:
    """What a ``next()`` ends with when nothing came within its ``seconds``. One whose time included a
    disconnect waited it out (its pull asked again once reconnected) and says so, with whether the connection
    is back: a loop that reads the TimeoutError as "drained" can tell a blip from an empty consumer."""
    message = f"no message from {label} within {seconds:g}s"
    if not interrupted:
        return errors.TimeoutError(message)
    now = "reconnected, and the pull was asked again" if connected else "still reconnecting"
    return errors.TimeoutError(f"{message}; the client was disconnected meanwhile ({now})")
