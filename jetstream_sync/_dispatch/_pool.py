"""``workers=N`` (with ``ordered_by=key``): a handler on N threads, for a consume or a core subscription.

The reading thread (a consume's, a subscription's dispatcher) stays the only reader of its source and hands each
message to the pool.
Without ``ordered_by`` any idle worker takes the next message. With it, a key is *active* while a worker holds
one of its messages: later messages of that key wait behind it, and that same worker runs them, in order, when
it is done; a key with nothing in hand goes to whichever worker is idle. So per-key order holds and two messages
of a key never run at once, while the work spreads over the workers as it comes (binding each key to one worker
by its hash would leave the busiest worker the bottleneck: 50 keys over 8 workers give one of them 9).

The reader blocks while ``8 * N`` messages wait in the pool, so memory stays bounded by what the source buffers
(``max_messages``) plus that, plus the N in hand.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable, Hashable

from ..message import Msg

__all__ = ["WorkerPool"]

log = logging.getLogger("jetstream_sync")

_POLL = 0.25  # how often a blocked hand-off looks at whether the consume ended
_PER_WORKER = 8  # messages that may wait in the pool per worker
_NO_KEY = object()  # without ordered_by: every message is free to go to any worker


class WorkerPool:
    """The worker threads of one consume (see the module docstring)."""

    def __init__(
        self,
        call: Callable[[Msg], bool],
        workers: int,
        ordered_by: Callable[[Msg], Hashable] | None,
        thread_prefix: str,
        report: Callable[[BaseException], None],
    ) -> None:
        self._call = call  # runs the handler; False when the consume must end (SystemExit, KeyboardInterrupt)
        self._ordered_by = ordered_by
        self._report = report
        self._cond = threading.Condition(threading.Lock())
        self._ready: deque[tuple[object, Msg]] = deque()  # (key, message) any idle worker may take
        self._behind: dict[object, deque[Msg]] = {}  # active keys: the messages waiting behind the one in hand
        self._waiting = 0  # messages in _ready and _behind
        self._limit = _PER_WORKER * workers
        self._ending = False  # no more messages will come: workers end once nothing is left
        self._halted = False  # stop, or a handler's SystemExit: workers end now, leaving what waits
        #: messages each worker has run the handler on
        self.processed = [0] * workers
        self.threads = [
            threading.Thread(target=self._work, args=(i,), name=f"{thread_prefix}-w{i}", daemon=True)
            for i in range(workers)
        ]

    @property
    def halted(self) -> bool:
        """A handler asked the consume to end."""
        return self._halted

    def start(self, adopt: Callable[[threading.Thread], None]) -> None:
        for thread in self.threads:
            adopt(thread)
            thread.start()

    def submit(self, msg: Msg, ended: Callable[[], bool]) -> bool:
        """Reader thread: hand ``msg`` to the pool, waiting while it is full; False (nothing handed) once the
        consume ended meanwhile."""
        key = self._key(msg)
        with self._cond:
            while self._waiting >= self._limit and not (self._halted or ended()):
                self._cond.wait(_POLL)
            if self._halted or ended():
                return False
            self._enqueue(key, msg)
        return True

    def submit_next(self, held: deque[Msg], ended: Callable[[], bool]) -> Msg | None:
        """Reader thread: move the first message of ``held`` (the reader's burst) into the pool, waiting while it
        is full; the message moved, or None (nothing moved) once the consume ended meanwhile or a close emptied
        the burst. The message leaves ``held`` under the pool's lock: a close empties the burst, then the pool
        (`surrender`, the same lock), so it finds the message in one or the other, never in between."""
        try:
            first = held[0]
        except IndexError:
            return None
        key = self._key(first)  # the user's key function runs outside the lock
        with self._cond:
            while self._waiting >= self._limit and not (self._halted or ended()):
                self._cond.wait(_POLL)
            if self._halted or ended():
                return None
            try:
                msg = held.popleft()
            except IndexError:
                return None  # a close took the burst meanwhile
            if msg is not first:
                key = None  # a close is emptying the burst right now; surrender() takes this one next
            self._enqueue(key, msg)
        return msg

    def _enqueue(self, key: object, msg: Msg) -> None:
        """``_cond`` held: add ``msg`` behind its key's message in hand, or where any idle worker takes it."""
        behind = self._behind.get(key) if key is not _NO_KEY else None
        if behind is not None:
            behind.append(msg)  # its key is in a worker's hands: that worker runs it next, in order
        else:
            if key is not _NO_KEY:
                self._behind[key] = deque()  # the key is active from now until its worker runs dry
            self._ready.append((key, msg))
        self._waiting += 1
        self._cond.notify_all()

    def _key(self, msg: Msg) -> object:
        if self._ordered_by is None:
            return _NO_KEY
        try:
            return self._ordered_by(msg)
        except Exception as exc:  # a key function that fails: reported, and its messages share one key
            self._report(exc)
            return None

    def _work(self, index: int) -> None:
        key: object = _NO_KEY
        while True:
            with self._cond:
                msg = None
                if key is not _NO_KEY:  # the next message of the key this worker holds, or let the key go
                    if self._halted:
                        return  # what waits behind the key stays for left_over()
                    behind = self._behind[key]
                    if behind:
                        msg = behind.popleft()
                    else:
                        del self._behind[key]
                        key = _NO_KEY
                while msg is None:
                    if self._halted or (self._ending and not self._ready):
                        return
                    if self._ready:
                        key, msg = self._ready.popleft()
                    else:
                        self._cond.wait()
                self._waiting -= 1
                self._cond.notify_all()
            if not self._call(msg):
                with self._cond:
                    self._halted = True
                    self._cond.notify_all()
                return
            self.processed[index] += 1

    def finish(self, drop_queued: bool, timeout: float | None = None) -> None:
        """Reader thread, at the end of the consume: let the workers run what waits (or drop it when
        ``drop_queued``), then wait for them to end (at most ``timeout``)."""
        with self._cond:
            self._ending = True
            if drop_queued:
                self._halted = True
            self._cond.notify_all()
        for thread in self.threads:
            if thread is not threading.current_thread():
                thread.join(timeout)

    def left_over(self) -> list[Msg]:
        """Reader thread, after `finish` with ``drop_queued``: the messages no worker ran, taken out of the
        pool (the consume gives them back to the server)."""
        with self._cond:
            return self._take_waiting()

    def surrender(self) -> list[Msg]:
        """The closing thread (the consume's hold, ``DeliverySource.hold``): stop the workers after the message
        in hand and give up what waits, so it is given back before the connection closes. Never blocks: the
        lock is only ever held for bookkeeping, not across a handler."""
        with self._cond:
            self._halted = True
            self._cond.notify_all()
            return self._take_waiting()

    def _take_waiting(self) -> list[Msg]:
        """``_cond`` held: empty the pool of the messages no worker has taken."""
        left = [msg for _, msg in self._ready]
        for behind in self._behind.values():
            left.extend(behind)
        self._ready.clear()
        self._behind.clear()
        self._waiting = 0
        return left
