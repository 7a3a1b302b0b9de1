"""The metadata records of one bucket: the newest metadata message per object name, read from the stream
leader (or as a read mode says) and written by compare-and-set.

Every decision taken on a record (what a write replaces, whether a put's chunks were stored, whether an object
was replaced while it was read) reads it from the stream leader: a replica behind it would point at chunks an
acknowledged put has already purged. Only what a caller reads (``info``, ``get``) may use a faster read mode.

Every metadata write carries ``Nats-Expected-Last-Subject-Sequence`` from the read it was based on, and is
redone from a fresh read when another writer got in first. nats.go writes blindly; here two racing puts of
one name leave no orphaned chunks behind (each purges exactly the version its write replaced), and an
``update_meta`` racing a ``put`` cannot point the metadata back at chunks the put just purged. The stream's
answers become the object store's errors here too: a missing stream is BucketNotFoundError, a sealed one
ObjectStoreSealedError.
"""

from __future__ import annotations

import contextlib
import logging
import random
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import attrs

from ... import errors
from ...models import StoredMsg
from ...models.object_store import ObjectInfo
from .._bucket import stream_as_bucket
from .._consistency import ReadMode, incarnation_of, known_revisions_of, read_checked
from ..streams import Stream
from ._meta import ROLLUP_HEADERS, decode_info, encode_info, meta_subject

if TYPE_CHECKING:
    from ..context import JetStream

__all__ = ["Current", "MetaRecords"]

log = logging.getLogger("jetstream_sync")

# How long a metadata write keeps retrying after losing compare-and-sets to other writers (at least this,
# or the context's timeout); each loss means another write succeeded, so running out takes a storm of writes
# to one name. Between attempts a random pause of at most _CAS_MAX_PAUSE.
_CAS_MIN_PATIENCE = 5.0
_CAS_MAX_PAUSE = 0.02
# The server's error code for any change to a sealed stream.
_SEALED_ERR_CODE = 10109


@attrs.frozen
class Current:
    """The newest metadata message of a name: its info (None when there is none, or it is unreadable and the
    caller asked to overwrite it) and its stream sequence (0: none), the basis of a compare-and-set."""

    info: ObjectInfo | None
    seq: int


class MetaRecords:
    """Reads and compare-and-set writes of the metadata of bucket ``bucket`` (whose stream is ``stream``)."""

    def __init__(self, js: JetStream, bucket: str, stream: Stream) -> None:
        self.jetstream = js
        self.bucket = bucket
        self._stream = stream
        self._known = known_revisions_of(js.client)

    def lookup(self, name: str, *, strict: bool = True, read: ReadMode = "leader") -> Current:
        """The newest metadata of ``name``, deleted or not, read as ``read`` says (see
        `jetstream_sync.jetstream._consistency`). Unreadable metadata raises BadObjectMetaError when
        ``strict``, else it counts as no object (what a put overwrites)."""
        subject = meta_subject(self.bucket, name)
        prefix = self.jetstream.api_prefix
        known = self._known.known(prefix, incarnation_of(self._stream.cached_info), subject)
        try:
            stored = read_checked(
                read,
                bool(self._stream.cached_info.config.allow_direct),
                lambda: self._direct_last(subject),
                lambda: self._stream.get_last_msg(subject, direct=False),
                lambda stored: (stored.seq if stored else 0) < known,
            ).stored
        except errors.MessageNotFoundError:
            return Current(None, 0)
        except errors.StreamNotFoundError as exc:
            raise errors.BucketNotFoundError(
                exc.code, exc.err_code, f"bucket {self.bucket!r} not found", f"OBJ_{self.bucket}", self.bucket
            ) from exc
        except errors.JetStreamNotEnabledError:
            # A direct get to a stream that is gone has no responders, which reads as "no JetStream": ask the
            # stream API which it is (BucketNotFoundError when the bucket is gone).
            self._check_bucket()
            raise
        if stored is None:
            return Current(None, 0)
        self._known.saw(prefix, incarnation_of(self._stream.cached_info), subject, stored.seq)
        try:
            return Current(decode_info(stored.data, self.bucket, stored.time), stored.seq)
        except errors.BadObjectMetaError as exc:
            if strict:
                raise
            log.warning("object store %s: overwriting unreadable metadata of %r: %s", self.bucket, name, exc)
            return Current(None, stored.seq)

    def _direct_last(self, subject: str) -> StoredMsg | None:
        """A replica's latest message on ``subject``; None when it has none."""
        try:
            return self._stream.get_last_msg(subject, direct=True)
        except errors.MessageNotFoundError:
            return None

    def write(
        self, name: str, make: Callable[[ObjectInfo | None], ObjectInfo | None], *, strict: bool = True
    ) -> ObjectInfo | None:
        """Compare-and-set the metadata stored under ``name``: ``make(current)`` gives the record to write
        (None: nothing to write) or raises; redone from a fresh read when another writer got in first.
        Returns the record that was replaced (None when there was none or nothing was written)."""
        deadline = time.monotonic() + max(self.jetstream.timeout, _CAS_MIN_PATIENCE)
        attempt = 0
        while True:
            current = self.lookup(name, strict=strict)
            record = make(current.info)
            if record is None:
                return None
            try:
                with self.write_errors():
                    ack = self.jetstream.publish(
                        meta_subject(self.bucket, record.name),
                        encode_info(record),
                        ROLLUP_HEADERS,
                        expected_last_subject_sequence=current.seq,
                    )
                self._known.saw(
                    self.jetstream.api_prefix,
                    incarnation_of(self._stream.cached_info),
                    meta_subject(self.bucket, record.name),
                    ack.seq,
                )
            except errors.WrongLastSequenceError as exc:
                attempt += 1
                if time.monotonic() >= deadline:
                    raise errors.ObjectStoreError(
                        f"object {name!r} in bucket {self.bucket!r} was changed by other writers {attempt} times "
                        "while this write was attempted; try again"
                    ) from exc
                # Another writer got in between the read and the write. A random pause (growing to 20 ms)
                # keeps writers that keep colliding from doing so in lockstep.
                time.sleep(random.uniform(0, min(_CAS_MAX_PAUSE, 0.0005 * 2**attempt)))
                continue
            return current.info

    def write_of(self, name: str, make: Callable[[ObjectInfo | None], ObjectInfo | None]) -> ObjectInfo | None:
        """`write`, returning what was written (None: nothing) instead of what was replaced."""
        written: list[ObjectInfo | None] = [None]

        def remember(current: ObjectInfo | None) -> ObjectInfo | None:
            written[0] = make(current)
            return written[0]

        self.write(name, remember)
        return written[0]

    def stored_as(self, name: str, nuid: str) -> bool | None:
        """Whether ``name``'s metadata now names the chunks ``nuid``; None when that cannot be told (the
        caller then keeps the chunks: a purge cannot be undone, an orphan only costs space)."""
        try:
            current = self.lookup(name, strict=False).info
        except errors.JetStreamError as exc:
            log.warning(
                "object store %s: cannot tell whether the metadata of %r was stored (%s); its chunks %s are kept",
                self.bucket,
                name,
                exc,
                nuid,
            )
            return None
        return current is not None and current.nuid == nuid

    def discard(self, subject: str, what: str) -> None:
        """Purge chunks no metadata points to any more; a failure costs space only, so it is logged."""
        try:
            self._stream.purge(subject=subject)
        except errors.JetStreamError as exc:
            log.warning("object store %s: could not purge the chunks of %s (%s): %s", self.bucket, what, subject, exc)

    @contextlib.contextmanager
    def bucket_errors(self) -> Iterator[None]:
        """A missing stream is a missing bucket (also when a walk's ordered consumer ended because of it)."""
        with stream_as_bucket(self.bucket):
            yield

    @contextlib.contextmanager
    def write_errors(self) -> Iterator[None]:
        """The stream's answers to a write, as the object store's errors."""
        try:
            with self.bucket_errors():
                yield
        except errors.NoRespondersError:
            # No stream took the publish: the bucket is gone, or JetStream is briefly away. Ask which.
            self._check_bucket()
            raise
        except errors.StreamStoreFailedError as exc:
            raise errors.BucketFullError(exc.code, exc.err_code, f"bucket {self.bucket!r}: {exc.description}") from exc
        except errors.APIError as exc:
            if exc.err_code == _SEALED_ERR_CODE:
                raise errors.ObjectStoreSealedError(f"bucket {self.bucket!r} is sealed: {exc.description}") from exc
            raise

    def _check_bucket(self) -> None:
        """BucketNotFoundError when the bucket's stream is gone; nothing otherwise."""
        with self.bucket_errors():
            self._stream.info()
