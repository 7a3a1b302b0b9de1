"""What key-value buckets and object stores share: each is a stream named ``<prefix><bucket>``.

These helpers turn the stream API's answers into the stores' own errors (a missing stream is a missing
bucket, a name in use is a bucket that exists with another configuration) and list the buckets of a kind by
the subjects their streams capture, as every other client does.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, NoReturn, cast

from .. import errors
from .._validate import check_bucket_name
from ..models import StreamConfig, StreamInfo

if TYPE_CHECKING:
    from .context import JetStream

__all__ = [
    "WATCH_EXPIRES",
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
    gone = errors.BucketNotFoundError(exc.code, exc.err_code, f"bucket {bucket!r} {state}")
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
        raise errors.BucketNotFoundError(exc.code, exc.err_code, f"bucket {bucket!r} not found") from exc


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
        raise errors.BucketNotFoundError(exc.code, exc.err_code, f"bucket {bucket!r} not found") from exc
    except errors.StreamConfigError as exc:
        raise errors.StreamConfigError(
            exc.code, exc.err_code, f"bucket {bucket!r} cannot take this configuration: {exc.description}"
        ) from exc


def bucket_names(js: JetStream, prefix: str, subject_filter: str) -> Iterator[str]:
    """The buckets whose streams capture ``subject_filter`` (``$KV.*.>``, ``$O.*.C.>``), without ``prefix``."""
    for name in js.stream_names(subject_filter):
        if name.startswith(prefix):
            yield name[len(prefix) :]
