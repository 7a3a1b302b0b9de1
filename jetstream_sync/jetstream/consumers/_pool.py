"""``consume(handler, workers=N, ordered_by=key)``: the handler on N threads.

The consume's own thread stays the only reader of the delivery source and hands each message to a worker. With
``ordered_by``, every message of one key goes to the same worker (by the key's hash), through that worker's
queue of 8: per-key order is kept and two messages of a key never run at once. Without it the workers share
one queue of N. Either way the reader blocks when the queue it needs is full, so at most 8N messages wait in the
pool (and N are in hand) on top of what the source buffers: memory stays bounded by ``max_messages`` + 9N.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Hashable

from ...message import Msg

__all__ = ["WorkerPool"]

log = logging.getLogger("jetstream_sync")

_END = object()  # tells a worker there is nothing more
_POLL = 0.25  # how often a blocked hand-off looks at whether the consume ended
# Messages a keyed worker may have waiting: more than one, so that the reader, blocked on the queue of a busy
# worker (one key's messages must go to it), is blocked less often while the other workers idle.
_PER_WORKER = 8


class WorkerPool:
    """The worker threads of one consume (see the module docstring)."""

    def __init__(
        self,
        call: Callable[[Msg], bool],
        workers: int,
        ordered_by: Callable[[Msg], Hashable] | None,
        label: str,
        report: Callable[[BaseException], None],
    ) -> None:
        self._call = call  # runs the handler; False when the consume must end (SystemExit, KeyboardInterrupt)
        self._ordered_by = ordered_by
        self._report = report
        self._halt = threading.Event()
        if ordered_by is None:
            shared: queue.Queue[object] = queue.Queue(maxsize=workers)
            self._queues = [shared]
            self._queue_of = [shared] * workers
        else:
            self._queues = [queue.Queue(maxsize=_PER_WORKER) for _ in range(workers)]
            self._queue_of = list(self._queues)
        #: messages each worker has run the handler on
        self.processed = [0] * workers
        self.threads = [
            threading.Thread(target=self._work, args=(i,), name=f"jetstream-sync-consume-{label}-w{i}", daemon=True)
            for i in range(workers)
        ]

    @property
    def halted(self) -> bool:
        """A handler asked the consume to end."""
        return self._halt.is_set()

    def start(self, adopt: Callable[[threading.Thread], None]) -> None:
        for thread in self.threads:
            adopt(thread)
            thread.start()

    def submit(self, msg: Msg, ended: Callable[[], bool]) -> bool:
        """Reader thread: hand ``msg`` to its worker, waiting while that worker is busy; False (nothing handed)
        once the consume ended meanwhile."""
        target = self._queues[self._index(msg)]
        while not (self._halt.is_set() or ended()):
            try:
                target.put(msg, timeout=_POLL)
                return True
            except queue.Full:
                continue
        return False

    def _index(self, msg: Msg) -> int:
        if self._ordered_by is None:
            return 0
        try:
            key = self._ordered_by(msg)
            return hash(key) % len(self._queues)
        except Exception as exc:  # a key function that fails: reported, and its messages share worker 0
            self._report(exc)
            return 0

    def _work(self, index: int) -> None:
        source = self._queue_of[index]
        while True:
            item = source.get()
            if item is _END:
                return
            if self._halt.is_set():
                continue  # stopped: what was queued is not run (it is redelivered), the end marker still comes
            assert isinstance(item, Msg)
            if not self._call(item):
                self._halt.set()
                return
            self.processed[index] += 1

    def finish(self, drop_queued: bool, timeout: float | None = None) -> None:
        """Reader thread, at the end of the consume: let the workers run what is queued (or drop it when
        ``drop_queued``), then end them and wait for them (at most ``timeout``)."""
        if drop_queued:
            self._halt.set()
        for index, thread in enumerate(self.threads):
            target = self._queue_of[index]
            while thread.is_alive():  # a worker that ended on its own no longer takes its end marker
                try:
                    target.put(_END, timeout=_POLL)
                    break
                except queue.Full:
                    continue
        for thread in self.threads:
            if thread is not threading.current_thread():
                thread.join(timeout)
