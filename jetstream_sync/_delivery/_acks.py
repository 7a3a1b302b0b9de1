"""The ack sender of the messages JetStream consumers deliver: the runtime's acks, and ``Msg.ack_next``'s pull.

A [`Msg`][jetstream_sync.Msg] (``message.py``, below the JetStream layer) acks through the
[`AckSender`][jetstream_sync.AckSender] it was built with. ``ack_next`` acks *and* pulls, which needs the pull
engines, and ``message.py`` must not import them; so the engines give their messages a `ConsumerAcks`, which
offers [`AckNextSender.ack_next`][jetstream_sync.message.AckNextSender.ack_next] on top of the runtime's acks. A
message of a core subscription acks through the runtime itself and has no ``ack_next``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from .._runtime import Runtime
from ..headers import HeadersInput
from ..message import Msg
from ..models.reads import FetchOptions
from ._target import PullTarget

if TYPE_CHECKING:
    from ..jetstream.consumers.delivery import MessageBatch

__all__ = ["ConsumerAcks"]


class ConsumerAcks:
    """An [`AckNextSender`][jetstream_sync.message.AckNextSender] over a client's runtime: one per engine, made
    when the engine is. Its ack members are the runtime's own methods, bound once, so an ack costs what it cost
    through the runtime; ``ack_next`` starts an ``AckNextPull``."""

    __slots__ = ("default_timeout", "request_ack", "respond", "runtime", "send_ack")

    default_timeout: float
    send_ack: Callable[[str, bytes], None]
    request_ack: Callable[[str, bytes, float], None]
    respond: Callable[[str, bytes, HeadersInput | None], None]

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.default_timeout = runtime.default_timeout
        self.send_ack = runtime.send_ack
        self.request_ack = runtime.request_ack
        self.respond = runtime.respond

    def ack_next(
        self, msg: Msg, batch: int, expires: float, max_bytes: int | None, plain: bool
    ) -> Callable[[], MessageBatch]:
        """Calling thread: the pull of ``msg.ack_next``, checked and built; the function returned sends its
        ``+NXT`` (which acks ``msg``) and returns the batch it delivers to."""
        # Imported here: the fetch engine is built on the pull engine, which makes this sender; and the batch
        # is the one handle this layer hands out itself (Msg.ack_next's promise), from the layer above it.
        from ..jetstream.consumers.delivery import MessageBatch
        from ._fetch import AckNextPull

        options = FetchOptions(max_messages=batch, max_bytes=max_bytes, expires=expires)
        meta = msg.metadata
        target = PullTarget(meta.stream, meta.consumer, msg.reply.encode(), False)
        pull = AckNextPull(self.runtime, target, options)
        pull.plain = plain

        def send() -> MessageBatch:
            pull.start()
            return MessageBatch(pull, time.monotonic() + expires + (0.0 if plain else 1.0))

        return send
