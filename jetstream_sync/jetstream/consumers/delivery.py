"""What fetch(), messages() and consume() hand to the user: user-thread code over the delivery layer.

The handles ([`MessageBatch`][jetstream_sync.MessageBatch], [`MessagesIterator`][jetstream_sync.MessagesIterator],
[`ConsumeContext`][jetstream_sync.ConsumeContext]) know nothing of pulls or pushes: they read a
[`BatchSource`][jetstream_sync.BatchSource] or a [`DeliverySource`][jetstream_sync.DeliverySource], the contract
``_delivery/_sources.py`` states and every engine of ``_delivery/`` implements. The contract's names are re-exported
here, where the handles' readers have always found them. See docs/ARCHITECTURE.md, "The delivery layer".
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Hashable, Iterator
from datetime import timedelta
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from ... import errors
from ..._delivery import BatchSource, ConsumeStats, DeliverySource
from ..._dispatch import WorkerPool
from ..._runtime import BufferFinished, ForkGuard, ProcessLocal
from ..._validate import check_int, check_timeout
from ...message import Msg
from ...models import ConsumerLag
from ._progress import ProgressKeeper

if TYPE_CHECKING:
    from ...codecs import Codec

__all__ = [
    "BatchSource",
    "ConsumeContext",
    "ConsumeStats",
    "DeliverySource",
    "ErrorHandler",
    "MessageBatch",
    "MessagesIterator",
]

log = logging.getLogger("jetstream_sync")

#: error_handler(exc): warnings, missed heartbeats and handler exceptions of a consume, on the callbacks thread
ErrorHandler = Callable[[BaseException], object]

# How many buffered messages a reader takes under one lock: one wake-up per burst
# (docs/ARCHITECTURE.md, "Rules: batched hand-offs").
_TAKE = 256


def _take_out(held: deque[Msg], limit: int | None = None) -> list[Msg]:
    """Any thread: take up to ``limit`` messages (all by default) out of a reader's burst, one ``popleft`` at a
    time, so a reader and a closing thread that empty the same deque at once never both take a message."""
    out: list[Msg] = []
    while limit is None or len(out) < limit:
        try:
            out.append(held.popleft())
        except IndexError:
            break
    return out


class MessageBatch:
    """The messages of one fetch, yielded as they arrive.

    Iteration ends when the batch is complete, the pull expired (an empty or short batch is normal) or the
    client-side deadline (expires plus ``FetchOptions.grace``, at most 1 s) passed. Terminal statuses and a
    missed heartbeat raise from the iteration; ``error`` keeps what was raised.

    A batch left before its end (``break``, an exception, Ctrl-C) ends its pull at the server and gives back
    (naks) what arrived and was not handed out, so the consumer's next messages go to a reader instead of
    waiting for their ack wait: at once with ``close()`` or a ``with`` block, otherwise when the batch is
    garbage-collected (at once in CPython for ``for msg in consumer.fetch(...)``). A batch kept in a variable
    can be read on later, until its deadline.
    """

    def __init__(self, source: BatchSource, deadline: float) -> None:
        self._source = source
        self._deadline = deadline
        self.error: BaseException | None = None
        self._codec: Codec[Any] | None = None  # fetch(codec=): what msg.value decodes with
        self._ended = False
        self._fork_guard = ForkGuard()  # a batch inherited through fork() raises ForkedClientError, not hangs
        # dropped unread: the pull ends and what it brought is given back (cancel() does nothing once finished)
        self._finalizer = weakref.finalize(self, source.cancel)
        self._finalizer.atexit = False  # at exit the client's close gives back what is buffered

    def __iter__(self) -> Iterator[Msg]:
        return self

    def __enter__(self) -> MessageBatch:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        """End the batch now: its pull ends at the server and what it received but did not hand out is given
        back (nak'd) for redelivery. Idempotent; nothing to do for a batch read to its end."""
        self._fork_guard.check()
        self._ended = True
        self._finalizer()

    def __next__(self) -> Msg:
        self._fork_guard.check()
        if self._ended:
            raise StopIteration
        source = self._source
        while True:
            remaining = self._deadline - time.monotonic()
            try:
                # past the deadline, what is already buffered is still handed out (take(0) waits for nothing)
                msg = source.take(max(0.0, remaining))
                if self._codec is not None:
                    msg._codec = self._codec
                return msg
            except BufferFinished:
                self._ended = True
                raise StopIteration from None
            except errors.TimeoutError:
                if remaining > 0:
                    continue
                self._ended = True
                self._finalizer()  # the deadline passed: end the pull, give back what comes late
                raise StopIteration from None
            except errors.JetStreamError as exc:
                self._ended = True
                self.error = exc
                self._finalizer()
                raise

    @property
    def received(self) -> int:
        """Messages received so far (handed out or not)."""
        return self._source.received

    def __repr__(self) -> str:
        return f"<MessageBatch {self._source.label} received={self._source.received} done={self._ended}>"


class MessagesIterator(ProcessLocal):
    """A continuous pull (ADR-37 consume) read by iteration. Use it as a context manager: exit stops it.

    ``for msg in it`` blocks until a message comes and ends after ``stop()`` or ``drain()``; a terminal status
    (consumer deleted...) raises after the buffered messages were delivered; closing the client raises
    ConnectionClosedError. Warnings and missed heartbeats go to ``error_handler`` (or the log).
    """

    def __init__(self, source: DeliverySource) -> None:
        self._source = source
        self._lock = threading.Lock()
        # The burst taken from the source and not handed out yet. Popped without the lock: the source's hold
        # empties it from the closing thread while a reader may hold the lock, so each message goes either to
        # the user or back to the server, never both and never neither.
        self._taken: deque[Msg] = deque()
        taken = self._taken
        source.hold(lambda: _take_out(taken))
        self._fork_guard = ForkGuard()  # in a forked child every entry point raises ForkedClientError
        self._codec: Codec[Any] | None = None  # messages(codec=): what msg.value decodes with

    def __enter__(self) -> MessagesIterator:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def __iter__(self) -> Iterator[Msg]:
        self._fork_guard.check()
        while True:
            try:
                yield self._next(None)
            except errors.IteratorClosedError:
                return

    def batches(self, limit: int = _TAKE) -> Iterator[list[Msg]]:
        """The messages as lists of what is buffered at the moment (at most ``limit`` each, never empty),
        ending as iteration does. For readers that handle messages in bulk: one lock and one flow-control
        update per list instead of per message. A list counts as handed out when it is yielded."""
        check_int("limit", limit, minimum=1)
        return self._batches(limit)

    def _batches(self, limit: int) -> Iterator[list[Msg]]:
        source = self._source
        while True:
            self._fork_guard.check()
            with self._lock:
                if source.halted:
                    self._give_back_taken()
                if not self._taken:
                    try:
                        source.take_into(self._taken, limit, None)
                    except BufferFinished:
                        return
                batch = _take_out(self._taken, limit)
                if not batch:
                    continue  # the client closed meanwhile and gave the burst back; the next take raises
                source.handed_out_many(batch)
            if self._codec is not None:
                for msg in batch:
                    msg._codec = self._codec
            yield batch

    def next(self, timeout: float | timedelta | None = None) -> Msg:
        """The next message within ``timeout`` seconds (None: wait until one comes); TimeoutError otherwise.

        IteratorClosedError once the iterator was stopped or drained empty.
        """
        return self._next(None if timeout is None else check_timeout(timeout, 0.0))

    def _next(self, timeout: float | None) -> Msg:
        self._fork_guard.check()
        source = self._source
        taken = self._taken
        with self._lock:
            while True:
                if source.halted:
                    self._give_back_taken()  # stop() or close: what was taken is not delivered
                if not taken:
                    try:
                        source.take_into(taken, _TAKE, timeout)
                    except BufferFinished:
                        raise errors.IteratorClosedError("the iterator was stopped or drained") from None
                try:
                    msg = taken.popleft()
                except IndexError:
                    continue  # the client closed meanwhile and gave the burst back; the next take raises
                source.handed_out(msg)
                if self._codec is not None:
                    msg._codec = self._codec
                return msg

    def stop(self) -> None:
        """End at once; buffered messages are not delivered but given back (nak'd), so the server redelivers
        them now rather than after their ack wait."""
        self._fork_guard.check()
        self._source.stop()
        with self._lock:
            self._give_back_taken()

    def _give_back_taken(self) -> None:
        """``_lock`` held: what this iterator took from the source in its last burst and will not hand out."""
        left = _take_out(self._taken)
        if left:
            self._source.give_back(left)

    def drain(self) -> None:
        """Stop pulling; iteration delivers what is buffered, then ends."""
        self._fork_guard.check()
        self._source.drain()

    @property
    def closed(self) -> bool:
        """Stopped or drained: no new pulls are made (what is buffered may still be read)."""
        return self._source.closed

    def stats(self) -> ConsumeStats:
        """A snapshot of this iterator's counters (pulls, deliveries, heartbeats missed, statuses, ...)."""
        return self._source.stats()

    def __repr__(self) -> str:
        return f"<MessagesIterator {self._source.label} {'closed' if self.closed else 'open'}>"


class ConsumeContext(ProcessLocal):
    """A running consume(): the handler runs serially on this consume's own thread (or, with ``workers=N``, on
    a pool of N threads fed by it; ``_dispatch/_pool.py``).

    ``closed`` is set once the consume ended (stop, drain, terminal error or client close) and its thread
    finished the message in hand. A handler that raises an Exception reports to ``error_handler``; the consume
    goes on. One that raises SystemExit or KeyboardInterrupt ends the consume, with the exception in ``error``.
    """

    def __init__(
        self,
        source: DeliverySource,
        handler: Callable[[Msg], object],
        progress: ProgressKeeper | None = None,
        *,
        workers: int = 1,
        ordered_by: Callable[[Msg], Hashable] | None = None,
        check_acks: bool = False,
        lag_of: Callable[[], ConsumerLag] | None = None,
    ) -> None:
        self._source = source
        self._lag_of = lag_of  # the handle's lag(): None for a consume of no single consumer (a task worker)
        self._handler = handler
        #: an AckExplicit consumer without ``deferred_ack``: a handler that returns leaving its message
        #: unanswered is logged (once per consume: the lock is taken once and never released)
        self._check_acks = check_acks
        self._unanswered_once = threading.Lock()
        self._progress = progress  # auto_in_progress: keeps the messages in hand alive while the handler works
        # workers=N: the handler runs on the pool's threads, this thread only reads
        prefix = f"jetstream-sync-consume-{source.label}"
        self._pool = WorkerPool(self._call, workers, ordered_by, prefix, source.report) if workers > 1 else None
        self.closed = threading.Event()
        self.error: BaseException | None = None
        self._fork_guard = ForkGuard()  # its thread does not exist in a forked child: wait() would never return
        self._handled = 0
        self._thread = threading.Thread(target=self._run, name=f"jetstream-sync-consume-{source.label}", daemon=True)

    @property
    def worker_stats(self) -> list[int]:
        """With ``workers=N``: how many messages each worker has handled (one entry without a pool)."""
        return list(self._pool.processed) if self._pool is not None else [self._handled]

    def start(self) -> None:
        """Start the handler thread (and the workers), once the source is running."""
        self._source.adopt_thread(self._thread)
        if self._progress is not None:
            self._progress.start()
        if self._pool is not None:
            self._pool.start(self._source.adopt_thread)
        self._thread.start()

    def _call(self, msg: Msg) -> bool:
        """Any handler thread: run the handler on ``msg``. False when it raised SystemExit or KeyboardInterrupt,
        which ends the consume (the exception is kept in ``error``); an Exception goes to the error handler."""
        progress = self._progress
        if progress is not None:
            progress.begin(msg)
        try:
            self._handler(msg)
        except Exception as exc:
            self._source.report(exc)
        except BaseException as exc:  # SystemExit, KeyboardInterrupt: the handler asked to stop
            log.warning("consume %s: the handler raised %r; the consume ends", self._source.label, exc)
            self.error = exc
            self._source.stop()
            return False
        else:
            if self._check_acks and not msg._acked and not msg._in_progress:  # two flags read: no call
                self._returned_unanswered(msg)
        finally:
            if progress is not None:
                progress.end(msg)
        return True

    def _returned_unanswered(self, msg: Msg) -> None:
        """Any handler thread: the handler returned and ``msg`` has no ack, nak, term or in_progress. Under an
        explicit ack policy the server redelivers it after ack_wait, up to max_deliver times, which looks like
        duplicates to the application; said once per consume (a handler that never acks would say it for
        every message), at WARNING, with the fix."""
        if self._source.halted:  # a stop or a close while it ran: its answer may not be sendable, nor needed
            return
        if not self._unanswered_once.acquire(blocking=False):
            return
        try:
            meta = msg.metadata
            which = f" (stream sequence {meta.sequence.stream}, delivered {meta.num_delivered} time(s))"
        except errors.InvalidAckSubjectError:
            which = ""
        log.warning(
            "consume %s: the handler returned without acknowledging a message%s; the consumer's ack policy is "
            "explicit, so the server will deliver it again after ack_wait. Answer every message in the handler: "
            "msg.ack() when done, msg.nak() to retry it, msg.term() to drop it, msg.in_progress() for more time. "
            "If another thread acks it later on purpose, pass consume(..., deferred_ack=True). "
            "(Said once per consume.)",
            self._source.label,
            which,
        )

    def _run(self) -> None:
        """This consume's thread: take a burst, hand it out one message at a time. The burst and the pool's
        queue are held (``DeliverySource.hold``), so a client closed meanwhile gives them back too."""
        source = self._source
        pool = self._pool
        held: deque[Msg] = deque()  # popped without a lock: a close empties it from the closing thread
        source.hold(lambda: _take_out(held))
        if pool is not None:
            source.hold(pool.surrender)
        try:
            while True:
                if not held:
                    try:
                        source.take_into(held, _TAKE, None)
                    except BufferFinished:
                        return
                    except errors.JetStreamError as exc:  # terminal status (already reported) or client closed
                        self.error = exc
                        return
                if source.halted:
                    source.give_back(_take_out(held))
                    return
                if pool is None:
                    try:
                        msg = held.popleft()
                    except IndexError:
                        continue  # the client closed meanwhile and gave the burst back; the next take raises
                    source.handed_out(msg)
                    if not self._call(msg):
                        source.give_back(_take_out(held))
                        return
                    self._handled += 1
                else:
                    submitted = pool.submit_next(held, lambda: source.halted)
                    if submitted is None:  # the consume ended, or a close took the burst meanwhile
                        source.give_back(_take_out(held))
                        return
                    source.handed_out(submitted)
        finally:
            if pool is not None:
                dropped = source.halted or pool.halted
                pool.finish(drop_queued=dropped)
                if dropped:
                    source.give_back(pool.left_over())
            if self._progress is not None:
                self._progress.stop()
            source.stop()
            self.closed.set()

    def __enter__(self) -> ConsumeContext:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        """``with cons.consume(handler):`` stops the consume on leaving the block and waits for the message in
        hand (from inside the handler itself it only stops)."""
        self.stop()
        if threading.current_thread() is not self._thread:
            self.closed.wait()

    def stop(self) -> None:
        """End delivery at once; the message in hand finishes, buffered ones are given back (nak'd) for
        redelivery."""
        self._fork_guard.check()
        self._source.stop()

    def drain(self) -> None:
        """Stop pulling, deliver what is buffered to the handler, then end."""
        self._fork_guard.check()
        self._source.drain()

    def wait(self, timeout: float | timedelta | None = None) -> None:
        """Block until the consume ended; TimeoutError if it is still running after ``timeout`` seconds."""
        self._fork_guard.check()
        seconds = None if timeout is None else check_timeout(timeout, 0.0)
        if threading.current_thread() is self._thread:
            raise RuntimeError("wait() cannot be called from the consume's own handler")
        if not self.closed.wait(seconds):
            raise errors.TimeoutError(f"consume {self._source.label} still running after {seconds:g}s")

    def stats(self) -> ConsumeStats:
        """A snapshot of this consume's counters (pulls, deliveries, heartbeats missed, statuses, ...)."""
        return self._source.stats()

    def lag(self) -> ConsumerLag | None:
        """Any thread: how far behind the consumer this consume reads is, asked of the server now (one consumer
        info request; see [`ConsumerLag`][jetstream_sync.models.ConsumerLag]). None for a consume started
        without a consumer handle (the Django tasks worker, which reads several). ``stats()`` is what this
        client holds of it."""
        self._fork_guard.check()
        return None if self._lag_of is None else self._lag_of()

    @property
    def label(self) -> str:
        """What this consume reads, as ``stream/consumer`` (for logs and metrics)."""
        return self._source.label

    def __repr__(self) -> str:
        state = "closed" if self.closed.is_set() else "running"
        return f"<ConsumeContext {self._source.label} {state}>"


_Read = TypeVar("_Read", MessageBatch, MessagesIterator)


def decoded_with(read: _Read, codec: Codec[Any] | None) -> _Read:
    """``read`` (a fetch's batch or a messages iterator) handing out messages whose ``value`` ``codec`` decodes
    (``codec=`` of the read APIs, checked by them before the read starts; None leaves it as it is)."""
    if codec is not None:
        read._codec = codec
    return read
