"""The outbound queue: publishes and acks from any thread, written to the socket in one burst per IO-loop turn.

See docs/ARCHITECTURE.md, "The life of a publish".
"""

from __future__ import annotations

import asyncio
import threading

from .. import errors
from .._protocol import Command
from ._contract import CONNECTED
from ._io import IOLoop
from ._nats import NatsConnection
from ._threads import io_thread
from ._wait import wait_while

__all__ = ["Outbound"]

# Unsent bytes (nats-py's list plus the transport's buffer) above which the outbound queue waits for the socket.
# Kept small on purpose: Python 3.11's transport memmoves its whole backlog after every partial send, so a
# multi-MiB backlog makes large publishes several times slower (measured: 4 MiB 62k, 512 KiB 92k msgs/s at 16 KiB).
_WRITE_HIGH_WATER = 512 * 1024

# At most this many queued bytes ride along with a synchronous request its thread writes itself; a larger
# backlog is the IO thread's to write, as it is when the request cannot be written directly.
_CARRY_LIMIT = 16 * 1024

# At most this many queued bytes are written by the thread that flushes them (``Outbound.flush``); a larger
# burst is the IO thread's to write (a socket that takes part of it leaves the rest to the IO thread anyway).
_FLUSH_LIMIT = 64 * 1024


class Outbound:
    """Coalesces publishes and acks from any thread into one IO-thread hand-off per burst.

    Back-pressure: a thread that finds more than ``high_water`` bytes queued waits until the IO thread has taken
    them, at most its call's timeout (by default ``default_timeout``, the client's), and then raises
    TimeoutError with nothing of its command queued. While disconnected, nats-py buffers up to
    ``reconnect_buffer`` bytes for the reconnect; beyond that a publish fails at once with NotConnectedError.
    """

    def __init__(
        self, io: IOLoop, nc: NatsConnection, *, high_water: int, reconnect_buffer: int, default_timeout: float
    ) -> None:
        self._io = io
        self._alive = io.fork_guard.mark  # kept here: one subscript per put, no call (see _fork.Mark)
        self._nc = nc
        self._lock = threading.Lock()
        # Entered through its lock (``with self._lock``): the same mutual exclusion, without the Condition's
        # Python-level __enter__/__exit__ (a tenth of a 128 B publish); waits and notifies go through it.
        self._cond = threading.Condition(self._lock)
        self._queue: list[bytes] = []
        self._queued = 0
        self._count = 0
        # Two writers on purpose, both under the lock: the first user thread to queue sets it (and posts one
        # drain), the IO thread clears it when it takes the queue (docs/ARCHITECTURE.md, "Rules").
        self._scheduled = False
        self._waiters = 0
        self._high_water = high_water
        self._reconnect_buffer = reconnect_buffer
        self.default_timeout = default_timeout
        self._closed = False

    def put(self, command: Command, timeout: float | None = None, *, later: bool = False) -> None:
        """Queue one message's command (bytes, or the parts of a large one).

        Behind a backlog over high water, waits at most ``timeout`` seconds (None: the client's timeout) for the
        IO thread to take it; TimeoutError then, before anything of ``command`` was queued.

        With ``later`` the IO thread is not woken for it: the caller promises a `flush` once its burst is
        queued (a service's worker thread, after the replies of the requests it found waiting), which writes the
        burst itself when it can. Whatever another thread queues meanwhile takes it along.
        """
        if not self._alive[0]:  # in a forked child the socket and the IO thread are the parent's (_fork.py)
            raise errors.ForkedClientError()
        size = len(command) if isinstance(command, bytes) else sum(map(len, command))
        nc = self._nc
        # nats-py's status read first (a contract member, _contract.py): is_connected is two properties deep
        if (
            nc._status != CONNECTED
            and not nc.is_connected
            and nc.reconnect_buffered() + self._queued + size > self._reconnect_buffer
        ):
            if nc.is_closed or self._io.closed:
                raise errors.ConnectionClosedError()
            raise errors.NotConnectedError(
                f"not connected and the reconnect buffer ({self._reconnect_buffer} bytes) is full; "
                "wait for the reconnect (is_connected) or raise pending_size in connect()"
            )
        with self._lock:
            if self._queued > self._high_water and not self._io.in_io_thread:  # the IO thread cannot wait on itself
                self._wait_below_high_water(self.default_timeout if timeout is None else timeout)
            if isinstance(command, bytes):
                self._queue.append(command)
            else:
                self._queue.extend(command)
            self._queued += size
            self._count += 1
            if later:
                return
            schedule = not self._scheduled
            self._scheduled = True
        if schedule:
            self._io.post(self.drain_now)

    def flush(self) -> None:
        """A thread that queued with ``put(later=True)``: send what is queued now. On the calling thread, through
        the socket gate, when nothing waits in nats-py or the transport (no IO-thread wake-up at all: a service
        worker's burst of replies goes out in one ``send``); else it wakes the IO thread for it, as `put`
        does. Never blocks: the gate's lock is only tried."""
        if not self._queue or self._write_here(None):
            return
        with self._cond:
            if not self._queue or self._scheduled:
                return  # taken meanwhile, or a drain is due already and takes it along
            self._scheduled = True
        self._io.post(self.drain_now)

    def put_waiting(self, command: Command, timeout: float | None = None) -> None:
        """Queue a command whose sender waits for its reply next (a synchronous request).

        When nothing waits in nats-py or the transport, the calling thread writes it to the socket itself through
        the socket gate: one IO-thread wake-up fewer per request (``_gate.py``). Commands queued here before it
        (the ack of the message a ``next()`` loop just handled) go first in the same write, so the request does
        not wait for the IO thread to wake and write them. Otherwise, as `put`.
        """
        if not self._alive[0]:  # before the direct write: the inherited socket reaches the server
            raise errors.ForkedClientError()
        if not self._write_here(command):
            self.put(command, timeout)

    def _write_here(self, command: Command | None) -> bool:
        """Write what is queued and ``command`` (if any) on the calling thread, through the socket gate, when its
        lock is free and nothing waits in nats-py or the transport; False (nothing written) otherwise."""
        gate = self._nc.gate
        if gate.bound and self._queued <= _FLUSH_LIMIT and gate.lock.acquire(blocking=False):
            try:
                # under the gate lock the IO thread writes nothing, so what is queued cannot move meanwhile
                return self._nc.nothing_unsent() and self._send_with_queued(command)
            finally:
                gate.lock.release()
        return False

    def _send_with_queued(self, command: Command | None) -> bool:
        """Gate lock held: write what is queued and ``command`` (if any) in one send; what is queued may be at
        most ``_CARRY_LIMIT`` bytes with a command, ``_FLUSH_LIMIT`` without (a `flush`).

        A drain posted for the queue still runs and finds it empty. When the send fails, the taken commands go
        back to the front of the queue and nothing was sent.
        """
        own = b"" if command is None else command if isinstance(command, bytes) else b"".join(command)
        with self._cond:
            if self._queued > (_FLUSH_LIMIT if command is None else _CARRY_LIMIT) or not (self._queue or own):
                return False
            taken, size, count = self._queue, self._queued, self._count
            if taken:
                self._queue, self._queued, self._count = [], 0, 0
                if self._waiters:
                    self._cond.notify_all()
        data = b"".join((*taken, own)) if taken else own
        if self._nc.gate.send(data):
            self._nc.count_direct(count + (command is not None), size + len(own))
            return True
        if taken:
            with self._cond:
                self._queue[:0] = taken
                self._queued += size
                self._count += count
        return False

    def _wait_below_high_water(self, timeout: float) -> None:
        """Lock held: wait until the IO thread took the backlog; TimeoutError after ``timeout`` seconds."""
        self._waiters += 1
        try:
            wait_while(
                self._cond,
                lambda: self._queued > self._high_water,
                timeout,
                closed=lambda: self._closed or self._io.closed,
                timed_out=lambda: errors.TimeoutError(
                    f"more than {self._high_water} bytes stayed queued for {timeout:g}s (the connection is not "
                    "taking them: a stalled link or a slow server); nothing of this call was sent"
                ),
            )
        finally:
            self._waiters -= 1

    @io_thread
    def drain_queued(self) -> None:
        """IO thread: `drain_now` if anything is queued (what a thread queued with ``later`` and has not
        flushed yet goes out with this loop turn); a truth test of a list when nothing is."""
        if self._queue:
            self.drain_now()

    @io_thread
    def drain_now(self, everything: bool = False) -> None:
        """IO thread: hand what is queued to nats-py now. With ``everything`` (before a flush or a close) all of
        it, even past the socket's high water: what was published before those must go out before them.

        Under the socket gate's lock, so that a user thread's direct write cannot pass what is taken here.
        """
        with self._nc.gate.lock:
            self._drain(everything)

    def _drain(self, everything: bool = False) -> None:
        nc = self._nc
        backed_up = not everything and nc.is_connected and nc.unwritten_bytes() > _WRITE_HIGH_WATER
        with self._cond:
            if backed_up:
                commands: list[bytes] = []
                size = count = 0
            else:
                commands, self._queue = self._queue, []
                size, self._queued = self._queued, 0
                count, self._count = self._count, 0
                self._scheduled = False
                if self._waiters:
                    self._cond.notify_all()
        if backed_up:
            # Keep _scheduled set so user threads queue (and block at high water) until the socket drains.
            asyncio.get_running_loop().create_task(self._drain_when_writable())
            return
        if commands and not nc.is_closed and not nc.write_now(commands, size, count):
            nc.append_pending(commands, size, count)

    async def _drain_when_writable(self) -> None:
        await self._nc.wait_writable()
        if not self._nc.is_connected:
            await asyncio.sleep(0.001)  # reconnecting: drain_now then queues into nats-py's reconnect buffer
        self.drain_now()

    def close(self) -> None:
        """The client is closing: threads waiting at high water raise ConnectionClosedError now."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
