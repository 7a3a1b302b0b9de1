"""The chunk upload of a ``put``: a bounded window of asynchronous publishes to one chunk subject.

Up to `PUT_WINDOW` chunks are in flight (published, ack not yet in); the next chunk is read from the
source only when the oldest ack arrived. That keeps the memory of a put at a few chunks whatever the object's
size, and keeps the stream's acks pacing the writer, while the window hides most of the round trip (one
publish at a time would wait a round trip per 128 KiB).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import hashlib
from collections import deque
from collections.abc import Iterable
from typing import TYPE_CHECKING

import attrs

from ... import errors
from ...models import PubAck
from ._meta import digest_of

if TYPE_CHECKING:
    from ..context import JetStream

__all__ = ["PUT_WINDOW", "Uploaded", "upload_chunks"]

#: chunks published and not yet acknowledged during a put
PUT_WINDOW = 4


@attrs.frozen
class Uploaded:
    """What was stored: the object's size, its number of chunks and its digest (``SHA-256=...``)."""

    size: int
    chunks: int
    digest: str


def upload_chunks(js: JetStream, subject: str, chunks: Iterable[bytes]) -> Uploaded:
    """Publish every chunk to ``subject`` and wait for each ack.

    On any failure (the source raising too) the chunks still in flight are waited for, so that nothing of
    this upload lands after the caller purges the subject, and the error propagates.
    """
    sha = hashlib.sha256()
    size = count = 0
    window: deque[concurrent.futures.Future[PubAck]] = deque()
    bound = js.timeout * 2 + 5  # every publish future resolves by its own ack timeout; this only guards that
    try:
        for chunk in chunks:
            if len(window) >= PUT_WINDOW:
                _settle(window.popleft(), bound, subject)
            sha.update(chunk)
            size += len(chunk)
            count += 1
            window.append(js.publish_async(subject, chunk))
        while window:
            _settle(window.popleft(), bound, subject)
    except BaseException:
        for future in window:
            with contextlib.suppress(BaseException):
                future.result(bound)
        raise
    return Uploaded(size, count, digest_of(sha.digest()))


def _settle(future: concurrent.futures.Future[PubAck], bound: float, subject: str) -> None:
    try:
        future.result(bound)
    except concurrent.futures.TimeoutError:
        raise errors.TimeoutError(f"a chunk published to {subject!r} was not acknowledged in time") from None
