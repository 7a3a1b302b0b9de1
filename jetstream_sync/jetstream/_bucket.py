"""What key-value buckets and object stores share: each is a stream named ``<prefix><bucket>``.

These helpers turn the stream API's answers into the stores' own errors (a missing stream is a missing
bucket, a name in use is a bucket that exists with another configuration) and list the buckets of a kind by
the subjects their streams capture, as every other client does.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Generator, Iterator
from typing import TYPE_CHECKING, NoReturn, cast

from .. import errors
from .._validate import check_bucket_name
from ..models import StreamConfig, StreamInfo

if TYPE_CHECKING:
    from .._runtime import Runtime
    from ..message import Msg
    from .consumers import OrderedConsumer
    from .context import JetStream

__all__ = [
    "WATCH_EXPIRES",
    "BucketWalk",
    "as_jetstream",
    "bucket_names",
    "bucket_stream_info",
    "create_bucket_stream",
    "raise_for_bucket",
    "stream_as_bucket",
    "update_bucket_stream",
]


#: A watcher's pulls expire after this many seconds, so the server's idle heartbeats come every 5 s and a link
#: that went silent (its consumer gone without a 409 reaching the pull, as when a bucket is deleted while a
#: reset recreates it) is replaced within 10 s, not the 30 s of the default pull.
WATCH_EXPIRES = 10.0


def as_jetstream(manager: object) -> JetStream:
    """The JetStream context a store manager mixin is part of (mypy cannot see the mixin's final class)."""
    return cast("JetStream", manager)


def _bucket_gone(
    bucket: str, exc: errors.StreamNotFoundError, state: str = "was deleted"
) -> errors.BucketNotFoundError:
    """The BucketNotFoundError a missing stream of ``bucket`` stands for (already one: as is)."""
    if isinstance(exc, errors.BucketNotFoundError):
        return exc
    gone = errors.BucketNotFoundError(exc.code, exc.err_code, f"bucket {bucket!r} {state}", exc.stream, bucket)
    gone.__cause__ = exc
    return gone


def raise_for_bucket(bucket: str, exc: errors.JetStreamError) -> NoReturn:
    """Raise what a read of ``bucket`` raises for ``exc``: BucketNotFoundError when the bucket's stream is
    missing (``exc`` is StreamNotFoundError, or an ordered read that ended because of one), else ``exc``."""
    if isinstance(exc, errors.BucketNotFoundError):
        raise exc
    if isinstance(exc, errors.StreamNotFoundError):
        raise _bucket_gone(bucket, exc, "not found") from exc
    cause = exc.__cause__
    if isinstance(exc, errors.OrderedConsumerResetError) and isinstance(cause, errors.StreamNotFoundError):
        raise _bucket_gone(bucket, cause) from exc
    raise exc


@contextlib.contextmanager
def stream_as_bucket(bucket: str) -> Iterator[None]:
    """Around a read of ``bucket`` (not per message: a try block is cheaper there): a missing stream is a
    missing bucket."""
    try:
        yield
    except (errors.StreamNotFoundError, errors.OrderedConsumerResetError) as exc:
        raise_for_bucket(bucket, exc)


def bucket_stream_info(js: JetStream, prefix: str, bucket: str) -> StreamInfo:
    """The info of bucket ``bucket``'s stream; BucketNotFoundError when there is none."""
    check_bucket_name("bucket", bucket)
    try:
        return js.stream_info(prefix + bucket)
    except errors.StreamNotFoundError as exc:
        raise errors.BucketNotFoundError(
            exc.code, exc.err_code, f"bucket {bucket!r} not found", prefix + bucket, bucket
        ) from exc


def create_bucket_stream(js: JetStream, bucket: str, config: StreamConfig) -> StreamInfo:
    """Create the stream; the same configuration again is no error (as for streams), another one is
    BucketExistsError."""
    try:
        return js.create_stream(config).cached_info
    except errors.StreamNameInUseError as exc:
        raise errors.BucketExistsError(
            exc.code, exc.err_code, f"bucket {bucket!r} exists with another configuration; update it instead"
        ) from exc


def update_bucket_stream(js: JetStream, bucket: str, config: StreamConfig) -> StreamInfo:
    """Update the stream; BucketNotFoundError when the bucket does not exist, StreamConfigError (naming the
    bucket) when the server refuses the change (a bucket's storage type is fixed once it is made)."""
    try:
        return js.update_stream(config).cached_info
    except errors.StreamNotFoundError as exc:
        raise errors.BucketNotFoundError(
            exc.code, exc.err_code, f"bucket {bucket!r} not found", config.name, bucket
        ) from exc
    except errors.StreamConfigError as exc:
        raise errors.StreamConfigError(
            exc.code, exc.err_code, f"bucket {bucket!r} cannot take this configuration: {exc.description}"
        ) from exc


def bucket_names(js: JetStream, prefix: str, subject_filter: str) -> Iterator[str]:
    """The buckets whose streams capture ``subject_filter`` (``$KV.*.>``, ``$O.*.C.>``), without ``prefix``."""
    for name in js.stream_names(subject_filter):
        if name.startswith(prefix):
            yield name[len(prefix) :]


class BucketWalk:
    """One walk of a bucket (KV ``keys``, ``history``, ``purge_deletes``; object store ``list``) under one
    deadline: creating its ordered consumer, every pull and whatever the caller does after (purges) share
    ``seconds``, and when they run out the walk raises TimeoutError saying what did not finish and how much
    was read, its ordered consumer deleted.

    What counts is the time the walk itself waits, not the time its caller spends between batches (a
    ``for key in kv.keys(): ...`` whose body is slow): the deadline moves on by each such pause. A timeout is
    a bound on how long the client may block, and a loop that does real work per key must not fail for it.

    Made and read on the walking (user) thread. A read that waits on a link gone silent cannot look at the
    clock itself, so the deadline is also watched on the watchdog's shared tick (``Runtime.watch``), which
    stops the read when it passes: the walk ends within a tick (0.25 s) of its deadline, not whenever the link
    comes back.
    """

    def __init__(self, runtime: Runtime, seconds: float, what: str, unit: str = "entries") -> None:
        self.seconds = seconds
        self.deadline = time.monotonic() + seconds
        #: names the walk in the TimeoutError ("keys() of bucket 'flags'")
        self.what = what
        self.unit = unit
        #: messages delivered so far (user thread)
        self.read = 0
        self._runtime = runtime
        # Set on the watchdog when it stopped the read at the deadline, read by the walking thread once the read
        # ended; only ever set, so no lock (docs/ARCHITECTURE.md, "Rules: one writer per piece of state").
        self._expired = False
        # Written by the walking thread only, read by the watchdog's check: whether the walk waits in a read now
        # (False while a batch is with the caller) and the deadline, moved on by the caller's time
        self._waiting = True

    def left(self, detail: str = "") -> float:
        """The seconds left; TimeoutError (with ``detail`` after how much was read) when none are."""
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise self.timed_out(detail)
        return left

    def timed_out(self, detail: str = "") -> errors.TimeoutError:
        """The error of a walk that ran out of time."""
        return errors.TimeoutError(
            f"{self.what} did not finish within {self.seconds:g}s: {self.read} {self.unit} read{detail}"
        )

    def batches(
        self, open_consumer: Callable[[float], OrderedConsumer], bucket: str, window: int | None = None
    ) -> Generator[list[Msg], None, None]:
        """The messages of the consumer ``open_consumer(seconds_left)`` makes, as of now, a buffered batch at a
        time (``window`` messages per pull; None: the default), ending when caught up. The consumer is made
        when the iteration starts and deleted when it ends, however it ends. A missing stream raises
        BucketNotFoundError."""
        try:
            consumer = open_consumer(self.left())
        except errors.TimeoutError as exc:
            raise self.timed_out() from exc
        try:
            if consumer.cached_info.num_pending == 0:
                return
            with stream_as_bucket(bucket), consumer.messages(until_drained=True, max_messages=window) as it:

                def stop_at_deadline(now: float) -> None:
                    """Watchdog thread: end a read that waited past the walk's deadline (stop_soon only posts)."""
                    if self._waiting and now >= self.deadline and not self._expired:
                        self._expired = True
                        consumer.stop_soon()

                self._runtime.watch(stop_at_deadline)
                clock = time.monotonic
                try:
                    for batch in it.batches():
                        self.read += len(batch)
                        self._waiting = False
                        paused = clock()
                        yield batch
                        self.deadline += clock() - paused  # the caller's time is not the walk's
                        self._waiting = True
                finally:
                    self._runtime.unwatch(stop_at_deadline)
            if self._expired:  # the read was stopped: what it delivered is only part of the walk
                raise self.timed_out()
        finally:
            consumer.close()
