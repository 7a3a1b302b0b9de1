"""The thread boundary: the only code that owns the IO loop, crosses into it, or touches nats-py.

The client facade and the JetStream layer use [`Runtime`][jetstream_sync.Runtime] and the few value types below; the
modules behind them (the IO loop bridge, the watchdog, the callbacks thread, the nats-py adapter, the outbound queue,
the request mux, the hand-off buffer, the light future) are private to this package. `io_thread` marks a method of
the layers above as running on the IO thread only, checked in debug mode (docs/ARCHITECTURE.md, "Checked at run
time"). `encode_pub` and `encode_pub_parts` are ``_protocol.py``'s, compiled where the extension was built
(``_scan.py``); `DeliverySink` is the extension's batching handler for the pull engines (None where it was not
built). See docs/ARCHITECTURE.md, "The runtime port".
"""

from __future__ import annotations

from ._buffer import BufferFinished, MessageBuffer
from ._callbacks import CALLBACKS_THREAD_NAME
from ._fork import ForkGuard, ProcessLocal, after_fork, check_process
from ._future import LightFuture
from ._mux import RawReply, ReplyHandler
from ._nats import Handler, NatsSubscription
from ._port import Closeable, ConnectionListener, Runtime
from ._scan import DeliverySink, encode_pub, encode_pub_parts
from ._threads import CHECK_THREADS_ENV, IOThreadChecks, check_io_threads, io_thread, io_thread_checks
from ._translate import redact_url
from ._wait import wait_while, warn_if_in_event_loop

__all__ = [
    "CALLBACKS_THREAD_NAME",
    "CHECK_THREADS_ENV",
    "BufferFinished",
    "Closeable",
    "ConnectionListener",
    "DeliverySink",
    "ForkGuard",
    "Handler",
    "IOThreadChecks",
    "LightFuture",
    "MessageBuffer",
    "NatsSubscription",
    "ProcessLocal",
    "RawReply",
    "ReplyHandler",
    "Runtime",
    "after_fork",
    "check_io_threads",
    "check_process",
    "encode_pub",
    "encode_pub_parts",
    "io_thread",
    "io_thread_checks",
    "redact_url",
    "wait_while",
    "warn_if_in_event_loop",
]
