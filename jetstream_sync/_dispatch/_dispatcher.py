"""Dispatcher: a user handler for each message of a hand-off buffer, on threads the client owns.

A core subscription made with ``handler=`` keeps its bounded hand-off buffer (the IO thread fills it and drops
past its limits with a SlowConsumerError, as for a subscription read with ``next_msg``). Its dispatcher's thread
takes bursts from that buffer and calls the handler one message at a time, in order; with ``workers=N`` it hands
each message to a `WorkerPool` of N threads instead (with ``ordered_by``, one key at a time, in
order), blocking while the pool holds 8 messages per worker. So nothing queues without bound: the buffer is
bounded, the pool is bounded, and a handler slower than the publishers makes the buffer drop, and say so.

What a handler raises is reported, never the end of the subscription: an Exception goes to ``report`` (the
subscription's error handler on the callbacks thread, else the client's error callback, else the log), and the
next message is handled. SystemExit or KeyboardInterrupt is the handler asking to stop: the dispatcher ends,
keeping it in ``error``, and stops its source. The dispatcher also ends when its source ends: at once after an
unsubscribe (what is buffered is not handled; core messages take no acks), after every buffered message after a
drain, and when the client closes (its threads are joined by ``close()``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Hashable
from typing import Protocol

from .. import errors
from .._runtime import BufferFinished
from ..message import Msg
from ._pool import WorkerPool

__all__ = ["Dispatcher", "HandlerSource"]

log = logging.getLogger("jetstream_sync")

# How many buffered messages the dispatcher takes under one lock (one wake-up per burst).
_TAKE = 256


class HandlerSource(Protocol):
    """What a dispatcher reads: a bounded buffer's consumer side."""

    @property
    def halted(self) -> bool:
        """Stopped at once (unsubscribed, or closed): messages taken but not handled are not handled."""

    def take_many(self, limit: int, timeout: float | None) -> list[Msg]:
        """Up to ``limit`` messages, waiting for the first; BufferFinished at a clean end, the JetStreamError
        that ended it otherwise."""

    def stop(self) -> None:
        """A handler asked to stop (SystemExit, KeyboardInterrupt): end the source."""


class Dispatcher:
    """Runs ``handler(msg)`` for every message of ``source`` on a thread named ``name`` (see the module docstring).

    Any thread may call `wait`; everything else runs on the dispatcher's own threads.
    """

    def __init__(
        self,
        name: str,
        source: HandlerSource,
        handler: Callable[[Msg], object],
        report: Callable[[BaseException], None],
        *,
        workers: int = 1,
        ordered_by: Callable[[Msg], Hashable] | None = None,
    ) -> None:
        self._source = source
        self._handler = handler
        self._report = report
        self._pool = WorkerPool(self._call, workers, ordered_by, name, report) if workers > 1 else None
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        #: set once the dispatcher ended and the message in hand (every worker's) was handled
        self.closed = threading.Event()
        #: what ended the dispatcher: a handler's SystemExit/KeyboardInterrupt, or the source's error (a close)
        self.error: BaseException | None = None
        self._handled = 0

    @property
    def handled(self) -> int:
        """Messages the handler was called with (it may have raised)."""
        if self._pool is not None:
            return sum(self._pool.processed)
        return self._handled

    def start(self, adopt: Callable[[threading.Thread], None]) -> None:
        """Start the threads; ``adopt`` hands each to the client, whose close() joins them."""
        adopt(self._thread)
        if self._pool is not None:
            self._pool.start(adopt)
        self._thread.start()

    def wait(self, timeout: float | None) -> bool:
        """Any thread: block until the dispatcher ended (False when ``timeout`` passed first)."""
        return self.closed.wait(timeout)

    def _call(self, msg: Msg) -> bool:
        """A handler thread: the handler on ``msg``; False when it asked to stop."""
        try:
            self._handler(msg)
        except Exception as exc:
            self._report(exc)
        except BaseException as exc:  # SystemExit, KeyboardInterrupt: the handler asked to stop
            log.warning("%s: the handler raised %r; its subscription ends", self._thread.name, exc)
            self.error = exc
            self._source.stop()
            return False
        return True

    def _run(self) -> None:
        source = self._source
        pool = self._pool
        try:
            while True:
                try:
                    batch = source.take_many(_TAKE, None)
                except BufferFinished:  # unsubscribed or drained empty: the dispatcher's work is done
                    return
                except errors.JetStreamError as exc:  # the client closed
                    self.error = exc
                    return
                for msg in batch:
                    if source.halted:
                        return
                    if pool is None:
                        self._handled += 1
                        if not self._call(msg):
                            return
                    elif not pool.submit(msg, lambda: source.halted):
                        return
        finally:
            if pool is not None:
                dropped = source.halted or pool.halted
                pool.finish(drop_queued=dropped)
                if dropped:
                    pool.left_over()  # core messages take no acks: what no worker ran is simply not run
            self.closed.set()
