"""What fetch(), messages() and consume() hand to the user: a batch, an iterator, a running consume."""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from datetime import timedelta
from types import TracebackType

from . import errors
from ._pull import ConsumeStats, ContinuousPull, FetchPull
from ._validate import check_timeout
from .buffer import BufferFinished
from .message import Msg

__all__ = ["ConsumeContext", "ConsumeStats", "MessageBatch", "MessagesIterator"]

log = logging.getLogger("jetstream_sync")

# How many buffered messages a reader takes under one lock: one wake-up per burst (DESIGN.md rule 5).
_TAKE = 256


class MessageBatch:
    """The messages of one fetch, yielded as they arrive.

    Iteration ends when the batch is complete, the pull expired (an empty or short batch is normal) or the
    client-side deadline (expires + 1 s) passed. Terminal statuses and a missed heartbeat raise from the
    iteration; ``error`` keeps what was raised.
    """

    def __init__(self, pull: FetchPull, deadline: float) -> None:
        self._pull = pull
        self._deadline = deadline
        self.error: BaseException | None = None
        self._ended = False

    def __iter__(self) -> Iterator[Msg]:
        return self

    def __next__(self) -> Msg:
        if self._ended:
            raise StopIteration
        pull = self._pull
        while True:
            now = time.monotonic()
            remaining = self._deadline - now
            if remaining <= 0:
                return self._stop()
            wait = remaining
            if pull.heartbeat > 0:
                wait = min(wait, max(0.0, pull.last_activity + 2 * pull.heartbeat - now) + 0.01)
            try:
                return pull.buffer.get(wait)
            except BufferFinished:
                self._ended = True
                raise StopIteration from None
            except errors.TimeoutError:
                if pull.missed_heartbeat(time.monotonic()):
                    self._fail(
                        errors.MissedHeartbeatError(
                            f"fetch: nothing from the server for {2 * pull.heartbeat:g}s (twice the idle heartbeat)"
                        )
                    )
            except errors.JetStreamError as exc:
                self._fail(exc)

    def _stop(self) -> Msg:
        self._ended = True
        self._pull.cancel()
        raise StopIteration

    def _fail(self, exc: errors.JetStreamError) -> None:
        self._ended = True
        self.error = exc
        self._pull.cancel()
        raise exc

    @property
    def received(self) -> int:
        """Messages received so far (handed out or not)."""
        return self._pull.received

    def __repr__(self) -> str:
        return f"<MessageBatch {self._pull.consumer_label} received={self._pull.received} done={self._ended}>"


class _Reporter:
    """Delivers asynchronous errors and warnings to the user's error handler on the watchdog thread."""

    def __init__(
        self,
        pull_label: str,
        error_handler: Callable[[BaseException], object] | None,
        run_on_watchdog: Callable[..., None],
    ) -> None:
        self._label = pull_label
        self._handler = error_handler
        self._run_on_watchdog = run_on_watchdog

    def __call__(self, exc: BaseException) -> None:
        if self._handler is None:
            log.warning("consume %s: %s", self._label, exc)
            return
        self._run_on_watchdog(self._handler, exc)


class MessagesIterator:
    """A continuous pull (ADR-37 consume) read by iteration. Use it as a context manager: exit stops it.

    ``for msg in it`` blocks until a message comes and ends after ``stop()`` or ``drain()``; a terminal status
    (consumer deleted...) raises after the buffered messages were delivered; closing the client raises
    ConnectionClosedError. Warnings and missed heartbeats go to ``error_handler`` (or the log).
    """

    def __init__(self, pull: ContinuousPull) -> None:
        self._pull = pull
        self._lock = threading.Lock()
        self._taken: deque[Msg] = deque()

    def __enter__(self) -> MessagesIterator:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def __iter__(self) -> Iterator[Msg]:
        while True:
            try:
                yield self._next(None)
            except errors.IteratorClosedError:
                return

    def next(self, timeout: float | timedelta | None = None) -> Msg:
        """The next message within ``timeout`` seconds (None: wait until one comes); TimeoutError otherwise.

        IteratorClosedError once the iterator was stopped or drained empty.
        """
        return self._next(None if timeout is None else check_timeout(timeout, 0.0))

    def _next(self, timeout: float | None) -> Msg:
        pull = self._pull
        with self._lock:
            if pull.halted:
                self._taken.clear()  # stop() or close: what was taken is not delivered
            if not self._taken:
                try:
                    self._taken.extend(pull.buffer.get_many(_TAKE, timeout))
                except BufferFinished:
                    raise errors.IteratorClosedError("the iterator was stopped or drained") from None
            msg = self._taken.popleft()
            pull.handed_out(msg)
            return msg

    def stop(self) -> None:
        """End at once; unprocessed buffered messages are not delivered (the server redelivers them)."""
        self._pull.stop()
        with self._lock:
            self._taken.clear()

    def drain(self) -> None:
        """Stop pulling; iteration delivers what is buffered, then ends."""
        self._pull.drain()

    @property
    def closed(self) -> bool:
        return self._pull.stopped or self._pull.draining

    def stats(self) -> ConsumeStats:
        return self._pull.stats()


class ConsumeContext:
    """A running consume(): the handler runs serially on this consume's own thread.

    ``closed`` is set once the consume ended (stop, drain, terminal error or client close) and its thread
    finished the message in hand. A handler that raises reports to ``error_handler``; the consume goes on.
    """

    def __init__(
        self,
        pull: ContinuousPull,
        handler: Callable[[Msg], object],
        reporter: _Reporter,
    ) -> None:
        self._pull = pull
        self._handler = handler
        self._report = reporter
        self.closed = threading.Event()
        self.error: BaseException | None = None
        self._thread = threading.Thread(
            target=self._run, name=f"jetstream-sync-consume-{pull.consumer_label}", daemon=True
        )

    def _start(self) -> None:
        self._pull.client.register_dispatcher(self._thread)
        self._thread.start()

    def _run(self) -> None:
        pull = self._pull
        try:
            while True:
                try:
                    batch = pull.buffer.get_many(_TAKE, None)
                except BufferFinished:
                    return
                except errors.JetStreamError as exc:  # terminal status (already reported) or client closed
                    self.error = exc
                    return
                for msg in batch:
                    if pull.halted:
                        return
                    pull.handed_out(msg)
                    try:
                        self._handler(msg)
                    except Exception as exc:
                        self._report(exc)
        finally:
            pull.stop()
            self.closed.set()

    def stop(self) -> None:
        """End delivery at once; the message in hand finishes, buffered ones are left for redelivery."""
        self._pull.stop()

    def drain(self) -> None:
        """Stop pulling, deliver what is buffered to the handler, then end."""
        self._pull.drain()

    def wait(self, timeout: float | timedelta | None = None) -> None:
        """Block until the consume ended; TimeoutError if it is still running after ``timeout`` seconds."""
        seconds = None if timeout is None else check_timeout(timeout, 0.0)
        if threading.current_thread() is self._thread:
            raise RuntimeError("wait() cannot be called from the consume's own handler")
        if not self.closed.wait(seconds):
            raise errors.TimeoutError(f"consume {self._pull.consumer_label} still running after {seconds:g}s")

    def stats(self) -> ConsumeStats:
        return self._pull.stats()

    def __repr__(self) -> str:
        state = "closed" if self.closed.is_set() else "running"
        return f"<ConsumeContext {self._pull.consumer_label} {state}>"
