"""The thread boundary: the only code that owns the IO loop, crosses into it, or touches nats-py.

The client facade and the JetStream layer use [`Runtime`][jetstream_sync.Runtime] and the few value types below; the
modules behind them (the IO loop bridge, the watchdog, the callbacks thread, the nats-py adapter, the outbound queue,
the request mux, the hand-off buffer, the light future) are private to this package. See
docs/ARCHITECTURE.md, "The runtime port".
"""

from __future__ import annotations

from ._buffer import BufferFinished, MessageBuffer
from ._callbacks import CALLBACKS_THREAD_NAME
from ._fork import ForkGuard, ProcessLocal, after_fork, check_process
from ._future import LightFuture
from ._mux import RawReply, ReplyHandler
from ._nats import Handler, NatsSubscription
from ._port import Closeable, ConnectionListener, Runtime
from ._translate import redact_url
from ._wait import wait_while, warn_if_in_event_loop

__all__ = [
    "CALLBACKS_THREAD_NAME",
    "BufferFinished",
    "Closeable",
    "ConnectionListener",
    "ForkGuard",
    "Handler",
    "LightFuture",
    "MessageBuffer",
    "NatsSubscription",
    "ProcessLocal",
    "RawReply",
    "ReplyHandler",
    "Runtime",
    "after_fork",
    "check_process",
    "redact_url",
    "wait_while",
    "warn_if_in_event_loop",
]
