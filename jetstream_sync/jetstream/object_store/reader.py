"""ObjectReader: one object's data as a readable binary file, streamed chunk by chunk.

The chunks come through an ordered pull consumer filtered on the object's chunk subject, pulling at most
`read_window` chunks (about `READ_BUDGET` bytes) at a time, so a reader holds that much in memory
whatever the object's size, and a slow reader slows the stream instead of piling messages up: there is no
push flow control to answer, so nothing can stall the way nats.js #430 did, and nothing is dropped. The
ordered consumer heals restarts and reconnects in the middle of a read without a gap or a repeat.

The SHA-256 is computed as the data is handed out and checked against the metadata's digest at the end:
[`DigestMismatchError`][jetstream_sync.errors.DigestMismatchError] is raised by the read that reaches the end, and by
every read after it (an error at the end is not forgotten by reading again). A reader that waits for a chunk asks
every second whether the object was replaced or deleted meanwhile, and says so at once instead of waiting out
its timeout. When chunks vanish before they are delivered, the ordered consumer notices (``CatchUpProbe``)
and ends the read, and the digest check says what happened.
"""

from __future__ import annotations

import hashlib
import io
import logging
import time
from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING

from ... import errors
from ..._protocol import stream_position
from ...models.object_store import ObjectInfo
from .._bucket import raise_for_bucket
from ..consumers import MessagesIterator, OrderedConsumer
from ._meta import digest_matches

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer

__all__ = ["READ_BUDGET", "ObjectReader", "read_window"]

log = logging.getLogger("jetstream_sync")

#: bytes of chunks a reader asks for at a time, and so about what it holds (with the chunk being read; at least
#: two chunks whatever their size). 2 MiB is 16 chunks of the default 128 KiB: four chunks left a 16 MiB read
#: waiting on the round trip of every second pull (455 against 620 MiB/s, measured side by side on one machine)
READ_BUDGET = 2 * 1024 * 1024
#: the fewest and the most chunks a pull asks for, whatever the chunk size
READ_WINDOW_BOUNDS = (2, 32)


def read_window(info: ObjectInfo) -> int:
    """How many chunks a reader of this object pulls at a time: `READ_BUDGET` over its chunk size.

    The chunk size is the one the object was written with, or its size over its chunks when the writer did
    not record it (other clients): the latter can only be smaller, never asking for more than twice the budget.
    """
    chunk = info.max_chunk_size or (-(-info.size // info.chunks) if info.chunks else 1)
    fewest, most = READ_WINDOW_BOUNDS
    return max(fewest, min(most, READ_BUDGET // max(chunk, 1)))


#: how often a waiting read asks whether its object was replaced or deleted meanwhile
REPLACED_CHECK = 1.0
# The first pause before reading on when the chunks' consumer caught up short of the object's size (it doubles).
_CATCH_UP_PAUSE = 0.02
# How long a read waits for such a replica to catch up before it lets the digest check call the chunks lost.
_CATCH_UP_LIMIT = 5.0


class ObjectReader(io.RawIOBase):
    """A readable, non-seekable binary file over one object (``read``, ``read1``, ``readinto``, ``readall``,
    ``peek``, ``readline`` and iteration, ``shutil.copyfileobj``). ``info`` is the object's metadata. Close it
    (or use ``with``): that ends the read and deletes its server-side consumer at once.

    Not for several threads at a time: like any file object, one reader per thread.
    """

    def __init__(
        self,
        info: ObjectInfo,
        open_consumer: Callable[[int], OrderedConsumer],
        timeout: float,
        replaced: Callable[[], bool] = lambda: False,
    ) -> None:
        super().__init__()
        #: the metadata of the object being read
        self.info = info
        self._timeout = timeout
        # Asked only while a read waits or goes wrong: a put or delete of the same name purges the chunks
        # being read, which looks like lost data (or a silent stream) from here, and deserves its own message.
        self._replaced = replaced
        self._sha = hashlib.sha256()
        self._received = 0
        self._chunk = memoryview(b"")
        self._eof = info.size == 0 and info.chunks == 0
        self._error: errors.JetStreamError | None = None  # raised again by every read once the read failed
        self._consumer: OrderedConsumer | None = None
        self._messages: MessagesIterator | None = None
        self._open_consumer = open_consumer
        self._next_seq = 0  # the stream sequence after the last chunk read (0: from the first)
        if self._eof:
            self._verify()  # nothing to read (an empty object has no chunks, so no consumer is made)
        else:
            self._open()

    def _open(self) -> None:
        """Calling thread: a consumer over the chunks from ``_next_seq`` on, read until it has caught up."""
        self._consumer = self._open_consumer(self._next_seq)
        try:
            self._messages = self._consumer.messages(
                until_drained=True, max_messages=read_window(self.info), error_handler=self._on_error
            )
        except BaseException:
            self._consumer.close()
            self._consumer = None
            raise

    def __repr__(self) -> str:
        return f"<ObjectReader {self.info.bucket}/{self.info.name!r} {self._received}/{self.info.size} bytes>"

    def __enter__(self) -> ObjectReader:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    @property
    def bytes_read(self) -> int:
        """How many bytes of the object have arrived so far."""
        return self._received

    def readable(self) -> bool:
        """True: an object is read, front to back (io.RawIOBase)."""
        return True

    def close(self) -> None:
        """End the read and delete its consumer now; reading afterwards raises ValueError (as for any file)."""
        if not self.closed:
            self._release()
        super().close()

    def readinto(self, buffer: WriteableBuffer) -> int:
        """Fill ``buffer`` (fewer bytes only at the end of the object); 0 at the end, after the digest was
        verified."""
        self._checkClosed()
        with memoryview(buffer) as raw, raw.cast("B") as view:
            filled = 0
            while filled < len(view) and self._fill():
                n = min(len(view) - filled, len(self._chunk))
                view[filled : filled + n] = self._chunk[:n]
                self._chunk = self._chunk[n:]
                filled += n
            return filled

    def read(self, size: int | None = -1) -> bytes:
        """``size`` bytes (fewer only at the end; all the rest for -1 or None), as a buffered file reads;
        b"" at the end, after the digest was verified."""
        self._checkClosed()
        if size is None or size < 0:
            return self.readall()
        parts = []
        left = size
        while left > 0 and self._fill():
            piece = self._chunk[:left]
            parts.append(bytes(piece))
            self._chunk = self._chunk[len(piece) :]
            left -= len(piece)
        return b"".join(parts)

    def read1(self, size: int = -1) -> bytes:
        """At most ``size`` bytes (-1: what is at hand) with at most one wait for the server: the rest of the
        current chunk, or the next one."""
        self._checkClosed()
        if size == 0 or not self._fill():
            return b""
        piece = self._chunk if size < 0 else self._chunk[:size]
        self._chunk = self._chunk[len(piece) :]
        return bytes(piece)

    def peek(self, size: int = 0) -> bytes:
        """What is at hand without consuming it (the rest of the current chunk, waiting for the next one if
        none is left); b"" at the end. ``size`` is ignored, as ``BufferedReader.peek`` may. Lines are read
        through it (``readline``, iteration), a chunk at a time instead of a byte at a time."""
        self._checkClosed()
        return bytes(self._chunk) if self._fill() else b""

    def readall(self) -> bytes:
        """The rest of the object."""
        self._checkClosed()
        parts = []
        while self._fill():
            parts.append(bytes(self._chunk))
            self._chunk = memoryview(b"")
        return b"".join(parts)

    def _on_error(self, exc: BaseException) -> None:
        """Watchdog thread: recreating the consumer failed (it retries; a deleted bucket ends the read, and
        the next read raises BucketNotFoundError)."""
        log.debug("object reader %s/%s: %s", self.info.bucket, self.info.name, exc)

    def _fill(self) -> bool:
        """Make sure a chunk is at hand; False at the end of the data (verified there)."""
        while not self._chunk:
            if self._error is not None:
                raise self._error
            if self._eof:
                return False
            try:
                data = self._next_chunk()
            except errors.JetStreamError as exc:
                self._fail(exc)
                raise
            if data is None:
                self._eof = True
                self._release()
                try:
                    self._verify()
                except errors.JetStreamError as exc:
                    self._fail(exc)
                    raise
                return False
            self._sha.update(data)
            self._received += len(data)
            self._chunk = memoryview(data)
        return True

    def _next_chunk(self) -> bytes | None:
        """The next chunk's data, None at the end of the stream's chunks (the read ends by itself when the
        last chunks vanished before delivery: the digest check then says what happened). Waits at most the
        timeout, asking every `REPLACED_CHECK` seconds whether the object was replaced."""
        if self._messages is None:
            return None
        deadline = time.monotonic() + self._timeout
        pause = _CATCH_UP_PAUSE
        catch_up_until: float | None = None
        while True:
            messages = self._messages
            wait = min(deadline - time.monotonic(), REPLACED_CHECK)
            if wait <= 0:
                raise errors.TimeoutError(
                    f"object {self.info.name!r} in bucket {self.info.bucket!r}: no chunk came within "
                    f"{self._timeout:g}s ({self._received} of {self.info.size} bytes read)"
                )
            try:
                msg = messages.next(wait) if messages is not None else None
            except errors.IteratorClosedError:
                msg = None
            except (errors.StreamNotFoundError, errors.OrderedConsumerResetError) as exc:
                raise_for_bucket(self.info.bucket, exc)
            except errors.TimeoutError:
                self._check_replaced()
                continue
            if msg is None:
                now = time.monotonic()
                catch_up_until = catch_up_until or min(deadline, now + _CATCH_UP_LIMIT)
                if self._received >= self.info.size or now + pause >= catch_up_until:
                    return None  # the end, or the rest never came: the digest check says which
                # Caught up short of the object's size: the replica holding the consumer may be behind the
                # metadata (read from the leader). Unless the object was replaced, read on from where it stopped.
                self._check_replaced()
                self._release()
                time.sleep(pause)
                pause = min(pause * 2, REPLACED_CHECK)
                self._open()
                continue
            self._next_seq = stream_position(msg.reply)[0] + 1
            return msg.data

    def _fail(self, exc: errors.JetStreamError) -> None:
        """A read failed for good: keep the error for every later read and let the consumer go. A timeout is
        not for good (the next read may get the chunk), nor is the client closing (said by every call)."""
        if isinstance(exc, (errors.TimeoutError, errors.ConnectionClosedError)):
            return
        self._error = exc
        self._chunk = memoryview(b"")
        self._release()

    def _release(self) -> None:
        messages, self._messages = self._messages, None
        consumer, self._consumer = self._consumer, None
        try:
            if messages is not None:
                messages.stop()
            if consumer is not None:
                consumer.close()
        except errors.JetStreamError as exc:  # the client closed first: nothing is left to clean up
            log.debug("object reader %s/%s: closing: %s", self.info.bucket, self.info.name, exc)

    def _check_replaced(self) -> None:
        if self._replaced():
            raise errors.DigestMismatchError(
                f"object {self.info.name!r} in bucket {self.info.bucket!r} was replaced or deleted while it was "
                f"read ({self._received} of {self.info.size} bytes read); read it again"
            )

    def _verify(self) -> None:
        info = self.info
        if info.size == 0 and self._received == 0:
            return  # nothing to verify (some clients store no digest for empty data)
        if self._received != info.size or not digest_matches(info.digest, self._sha.digest()):
            self._check_replaced()
            raise errors.DigestMismatchError(
                f"object {info.name!r} in bucket {info.bucket!r}: read {self._received} bytes that do not match "
                f"its recorded size ({info.size}) and digest ({info.digest}); a chunk was lost or changed"
            )
