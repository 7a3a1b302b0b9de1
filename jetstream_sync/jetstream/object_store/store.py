"""ObjectStore: one bucket's objects (ADR-20, with nats.go's semantics and wire format).

An object is chunks plus one metadata message. ``put`` publishes the chunks to a fresh subject
``$O.<bucket>.C.<nuid>`` (``_upload.py``: a bounded window, so memory stays a few chunks whatever the size),
then the metadata to ``$O.<bucket>.M.<name in base64>`` with ``Nats-Rollup: sub`` (the stream keeps one per
name), and only then purges the chunks of the version it replaced: a reader never finds metadata whose chunks
are gone, and a read of the old version that loses its chunks midway says so (DigestMismatchError) instead of
passing off part of an object as whole.

Every metadata write is a compare-and-set, redone from a fresh read when another writer got in between
(``_records.py``), so racing writers of one name leave no orphaned chunks and no metadata pointing at purged
ones.

Reads stream the chunks through an ordered pull consumer ([`ObjectReader`][jetstream_sync.ObjectReader]); metadata reads
are direct gets; ``list`` and ``watch`` walk the metadata subjects with an ordered consumer.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING

import attrs

from ... import errors
from ..._runtime import ProcessLocal
from ..._validate import check_timeout
from ...models import DeliverPolicy, StreamInfo
from ...models.object_store import (
    DEFAULT_CHUNK_SIZE,
    ObjectInfo,
    ObjectLink,
    ObjectMeta,
    ObjectStoreStatus,
    check_object_name,
)
from .._bucket import BucketWalk
from .._consistency import ReadMode, check_read_mode
from ..consumers import OrderedConsumer, OrderedConsumerConfig
from ..streams import Stream
from ._files import replace_atomically
from ._meta import chunk_subject, decode_info, meta_subject
from ._records import MetaRecords
from ._source import ObjectData, chunks_of
from ._upload import upload_chunks
from .reader import ObjectReader
from .watch import ObjectWatcher

if TYPE_CHECKING:
    from ..context import JetStream

__all__ = ["ObjectStore"]

log = logging.getLogger("jetstream_sync")

#: default wait for each chunk while reading
DEFAULT_READ_TIMEOUT = 30.0
# How many links get() follows before giving up (add_link refuses links to links; this guards against
# stores written by something else).
_MAX_LINK_HOPS = 8


class ObjectStore(ProcessLocal):
    """A handle on one bucket. Thread-safe; it caches only the stream's name and configuration at bind time,
    so several threads may put and read at once (each read has its own consumer).

    Object names are any non-empty str of at most 2,048 bytes of UTF-8 (``/`` and spaces included: they
    are stored base64-encoded); InvalidObjectNameError otherwise, before anything is sent.
    """

    def __init__(self, js: JetStream, bucket: str, info: StreamInfo, *, read: ReadMode = "leader") -> None:
        #: the JetStream context this handle was made by
        self.jetstream = js
        #: the bucket's name
        self.bucket = bucket
        #: how `info` and `get` read an object's metadata: from the stream leader by default, so a
        #: read after a completed put (by any client) finds the new version; "read_your_writes" or "direct" as
        #: for `KeyValue`
        self.read: ReadMode = check_read_mode("read", read)
        self._stream = Stream(js, info)
        self._records = MetaRecords(js, bucket, self._stream)

    def __repr__(self) -> str:
        return f"<ObjectStore {self.bucket!r}>"

    @property
    def stream_name(self) -> str:
        """The bucket's stream, ``OBJ_<bucket>``."""
        return self._stream.name

    # -- writes -----------------------------------------------------------------------------------------
    def put(self, name: str, data: ObjectData, meta: ObjectMeta | None = None) -> ObjectInfo:
        """Store ``data`` as object ``name``, replacing any object (or link) of that name; returns its info.

        ``data`` is bytes, a binary file object (read chunk by chunk) or an iterable of bytes-like pieces of
        any size (a generator: never held whole). ``meta`` adds a description, headers, metadata or a chunk
        size (default 128 KiB, or the server's max_payload when that is smaller; at most max_payload). If
        anything fails, the chunks sent so far are purged and the previous object stays as it was.
        ObjectStoreSealedError on a sealed bucket.
        """
        check_object_name("name", name)
        meta = self._put_meta(name, meta)
        limit = self.jetstream.runtime.max_payload
        # The default fits any server: one whose max_payload is below 128 KiB gets chunks of max_payload.
        chunk_size = meta.max_chunk_size or min(DEFAULT_CHUNK_SIZE, limit)
        if chunk_size > limit:
            raise errors.InvalidArgumentError(
                "meta", f"max_chunk_size {chunk_size} exceeds the server's max_payload ({limit} bytes)"
            )
        chunks = chunks_of(data, chunk_size)
        nuid = self.jetstream.runtime.new_token()
        subject = chunk_subject(self.bucket, nuid)
        try:
            with self._records.write_errors():
                uploaded = upload_chunks(self.jetstream, subject, chunks)
        except BaseException as exc:
            if not isinstance(exc, (errors.ObjectStoreSealedError, errors.BucketNotFoundError)):
                self._records.discard(subject, "a failed put")
            raise
        info = ObjectInfo(
            name=name,
            bucket=self.bucket,
            nuid=nuid,
            size=uploaded.size,
            chunks=uploaded.chunks,
            digest=uploaded.digest,
            description=meta.description,
            headers=meta.headers,
            metadata=meta.metadata,
            max_chunk_size=chunk_size,
        )
        basis: list[ObjectInfo | None] = []  # what each attempt's compare-and-set was based on

        def record(current: ObjectInfo | None) -> ObjectInfo:
            basis.append(current)
            return info

        try:
            replaced = self._records.write(name, record, strict=False)
        except (errors.TimeoutError, errors.NotConnectedError):
            # No ack: the metadata may or may not be stored. Purging our chunks under stored metadata would
            # break the object, so ask first: not stored, the chunks go; stored, the put succeeded after all
            # (and, being a compare-and-set, replaced what its last attempt read); unknown, they stay.
            landed = self._records.stored_as(name, nuid)
            if landed is None:
                raise
            if not landed:
                self._records.discard(subject, "a put whose metadata was not stored")
                raise
            log.info("object store %s: the metadata of %r was stored though its ack was lost", self.bucket, name)
            replaced = basis[-1]
        except BaseException:
            self._records.discard(subject, "a failed put")
            raise
        if replaced is not None and not replaced.deleted and not replaced.is_link and replaced.nuid != nuid:
            self._records.discard(chunk_subject(self.bucket, replaced.nuid), f"the replaced version of {name!r}")
        return attrs.evolve(info, mtime=datetime.now(timezone.utc))

    def put_file(self, name: str, path: str | os.PathLike[str], meta: ObjectMeta | None = None) -> ObjectInfo:
        """[`put`][jetstream_sync.ObjectStore.put] of the file at ``path``, read chunk by chunk."""
        check_object_name("name", name)
        with open(path, "rb") as file:
            return self.put(name, file, meta)

    def update_meta(self, name: str, meta: ObjectMeta) -> ObjectInfo:
        """Replace object ``name``'s description, headers and metadata; a different ``meta.name`` renames it
        (ObjectExistsError when a live object has that name). The data and chunk size stay as they are.
        ObjectNotFoundError (ObjectDeletedError) when there is no such live object."""
        check_object_name("name", name)
        if not isinstance(meta, ObjectMeta):
            raise errors.InvalidTypeError("meta", f"must be an ObjectMeta, got {type(meta).__name__}")
        new_name = meta.name or name

        def updated(source: ObjectInfo) -> ObjectInfo:
            return attrs.evolve(
                source, name=new_name, description=meta.description, headers=meta.headers, metadata=meta.metadata
            )

        if new_name == name:
            written = self._records.write_of(name, lambda current: updated(self._live(name, current)))
            assert written is not None  # updated() never declines
            return attrs.evolve(written, mtime=datetime.now(timezone.utc))
        source = self._records.lookup(name)
        source_info = self._live(name, source.info)

        def renamed(existing: ObjectInfo | None) -> ObjectInfo:
            if existing is not None and not existing.deleted:
                raise errors.ObjectExistsError(
                    f"cannot rename {name!r} to {new_name!r} in bucket {self.bucket!r}: that name is taken"
                )
            return updated(source_info)

        self._records.write(new_name, renamed)
        # Drop the old name's metadata up to the version renamed, so a put to the old name racing this rename
        # is kept (a plain purge of the subject would drop its metadata and orphan its chunks).
        with self._records.write_errors():
            self._stream.purge(subject=meta_subject(self.bucket, name), sequence=source.seq + 1)
        return attrs.evolve(updated(source_info), mtime=datetime.now(timezone.utc))

    def delete(self, name: str) -> None:
        """Delete object ``name``: its data is purged and a deleted record stays (``info(name,
        show_deleted=True)``, ``list(show_deleted=True)`` and watchers see it). Deleting a deleted object does
        nothing, as in nats.go; ObjectNotFoundError when there never was one."""
        check_object_name("name", name)

        def deleted(current: ObjectInfo | None) -> ObjectInfo | None:
            if current is None:
                raise errors.ObjectNotFoundError(f"object {name!r} not found in bucket {self.bucket!r}")
            if current.deleted:
                return None
            return attrs.evolve(current, deleted=True, size=0, chunks=0, digest=None)

        gone = self._records.write_of(name, deleted)
        if gone is not None:
            with self._records.write_errors():
                self._stream.purge(subject=chunk_subject(self.bucket, gone.nuid))

    def add_link(self, name: str, obj: ObjectInfo) -> ObjectInfo:
        """Make ``name`` a link to the object ``obj`` describes (in this or another bucket); ``get(name)`` then
        reads that object. The target is looked up now: NoLinkToDeletedError when it is deleted or gone,
        NoLinkToLinkError when it is a link. ObjectExistsError when a live object (not a link) has ``name``."""
        check_object_name("name", name)
        if not isinstance(obj, ObjectInfo):
            raise errors.InvalidTypeError("obj", f"must be an ObjectInfo (from put or info), got {type(obj).__name__}")
        check_object_name("obj.name", obj.name)
        if obj.deleted:
            raise errors.NoLinkToDeletedError("obj", f"object {obj.name!r} is deleted; link to a live object")
        if obj.is_link:
            raise errors.NoLinkToLinkError("obj", f"{obj.name!r} is a link; link to the object it points at")
        home = self if obj.bucket == self.bucket else self.jetstream.object_store(obj.bucket)
        target = home._records.lookup(obj.name).info
        if target is None or target.deleted:
            raise errors.NoLinkToDeletedError(
                "obj", f"object {obj.name!r} in bucket {obj.bucket!r} is deleted or gone; link to a live object"
            )
        if target.is_link:
            raise errors.NoLinkToLinkError("obj", f"{obj.name!r} in bucket {obj.bucket!r} is now a link")
        return self._put_link(name, ObjectLink(bucket=obj.bucket, name=obj.name))

    def add_bucket_link(self, name: str, bucket: ObjectStore) -> ObjectInfo:
        """Make ``name`` a link to the whole bucket ``bucket`` (a directory-like reference other clients
        understand; ``get`` refuses it with LinkIsABucketError). ObjectExistsError when a live object (not a
        link) has ``name``."""
        check_object_name("name", name)
        if not isinstance(bucket, ObjectStore):
            raise errors.InvalidTypeError("bucket", f"must be an ObjectStore, got {type(bucket).__name__}")
        return self._put_link(name, ObjectLink(bucket=bucket.bucket))

    def seal(self) -> None:
        """Make the bucket read-only for good (its stream's ``sealed``): every later write fails with
        ObjectStoreSealedError. Reads, lists and watches go on working. Sealing twice is no error."""
        with self._records.bucket_errors():
            info = self._stream.info()
            if not info.config.sealed:
                self.jetstream.update_stream(attrs.evolve(info.config, sealed=True))

    def _put_meta(self, name: str, meta: ObjectMeta | None) -> ObjectMeta:
        if meta is None:
            return ObjectMeta(name=name)
        if not isinstance(meta, ObjectMeta):
            raise errors.InvalidTypeError("meta", f"must be an ObjectMeta, got {type(meta).__name__}")
        if meta.name is not None and meta.name != name:
            raise errors.InvalidArgumentError(
                "meta", f"meta.name {meta.name!r} differs from the name {name!r}; leave meta.name out"
            )
        return meta

    def _put_link(self, name: str, link: ObjectLink) -> ObjectInfo:
        nuid = self.jetstream.runtime.new_token()

        def make(current: ObjectInfo | None) -> ObjectInfo:
            if current is not None and not current.is_link and not current.deleted:
                raise errors.ObjectExistsError(
                    f"{name!r} is an object in bucket {self.bucket!r}; delete it first to put a link in its place"
                )
            return ObjectInfo(name=name, bucket=self.bucket, nuid=nuid, link=link)

        info = self._records.write_of(name, make)
        assert info is not None  # make never declines
        return attrs.evolve(info, mtime=datetime.now(timezone.utc))

    def _live(self, name: str, info: ObjectInfo | None) -> ObjectInfo:
        if info is None:
            raise errors.ObjectNotFoundError(f"object {name!r} not found in bucket {self.bucket!r}")
        if info.deleted:
            raise errors.ObjectDeletedError(f"object {name!r} in bucket {self.bucket!r} was deleted", info)
        return info

    # -- reads ------------------------------------------------------------------------------------------
    def info(self, name: str, *, show_deleted: bool = False) -> ObjectInfo:
        """Object ``name``'s info (its metadata, read as [`read`][jetstream_sync.ObjectStore.read] says; a link's own
        info, not its target's). ObjectNotFoundError when there is none; ObjectDeletedError (a subclass) when it was
        deleted and ``show_deleted`` is False. BadObjectMetaError when its metadata is unreadable."""
        check_object_name("name", name)
        if not isinstance(show_deleted, bool):
            raise errors.InvalidTypeError("show_deleted", f"must be a bool, got {type(show_deleted).__name__}")
        info = self._records.lookup(name, read=self.read).info
        return info if show_deleted and info is not None else self._live(name, info)

    def get(self, name: str, *, timeout: float | timedelta | None = None) -> ObjectReader:
        """Object ``name`` as a readable binary file (a link is followed to its object). Use it in a ``with``
        block. ``timeout`` (default 30 s) bounds the wait for each chunk. The SHA-256 digest is checked when
        the end is read: DigestMismatchError then. ObjectNotFoundError (ObjectDeletedError) when there is no
        such live object, also behind a link; LinkIsABucketError for a link to a whole bucket."""
        wait = check_timeout(timeout, DEFAULT_READ_TIMEOUT)
        store: ObjectStore = self
        info = self.info(name)
        for _ in range(_MAX_LINK_HOPS):
            link = info.link
            if link is None:
                return store._reader(info, wait)
            if link.name is None:
                raise errors.LinkIsABucketError(
                    "name", f"{info.name!r} links to the whole bucket {link.bucket!r}, which has no data to get"
                )
            if link.bucket != store.bucket:
                store = self.jetstream.object_store(link.bucket)
            info = store.info(link.name)
        raise errors.LinkError("name", f"{name!r}: more than {_MAX_LINK_HOPS} links in a row")

    def _reader(self, info: ObjectInfo, timeout: float) -> ObjectReader:
        subject = chunk_subject(self.bucket, info.nuid)

        def replaced() -> bool:
            try:
                now = self._records.lookup(info.name, strict=False).info
            except errors.JetStreamError:
                return False
            return now is None or now.deleted or now.nuid != info.nuid

        def chunks_from(seq: int) -> OrderedConsumer:
            if seq == 0:
                return self._ordered_consumer([subject], DeliverPolicy.ALL)
            return self._ordered_consumer([subject], DeliverPolicy.BY_START_SEQUENCE, start_seq=seq)

        return ObjectReader(info, chunks_from, timeout, replaced)

    def get_bytes(self, name: str, *, timeout: float | timedelta | None = None) -> bytes:
        """The whole of object ``name`` in memory (digest verified); for large objects use
        [`get`][jetstream_sync.ObjectStore.get]."""
        with self.get(name, timeout=timeout) as reader:
            return reader.readall()

    def get_file(
        self, name: str, path: str | os.PathLike[str], *, timeout: float | timedelta | None = None
    ) -> ObjectInfo:
        """Write object ``name`` to ``path`` through a temporary file beside it, renamed into place only once
        the whole object was read and its digest verified: ``path`` never holds a partial or corrupt object,
        and on any error the old file stays as it was. Returns the object's info."""
        target = Path(path)
        with self.get(name, timeout=timeout) as reader:

            def fill(fd: int) -> None:
                buffer = bytearray(DEFAULT_CHUNK_SIZE)
                with memoryview(buffer) as view:
                    while n := reader.readinto(view):
                        written = 0
                        while written < n:
                            written += os.write(fd, view[written:n])

            replace_atomically(target, fill)
            return reader.info

    def list(self, *, show_deleted: bool = False, timeout: float | timedelta | None = None) -> list[ObjectInfo]:
        """The info of every object in the bucket (links too; deleted ones with ``show_deleted``), read from
        the newest metadata per name through an ordered consumer. An empty bucket gives an empty list.

        ``timeout`` (seconds; default: the context's) bounds the whole walk: TimeoutError (saying how many
        metadata records were read) rather than a wait on a link gone silent, and the walk's consumer is
        deleted. Runs on the calling thread.
        """
        if not isinstance(show_deleted, bool):
            raise errors.InvalidTypeError("show_deleted", f"must be a bool, got {type(show_deleted).__name__}")
        walk = BucketWalk(
            self.jetstream.runtime,
            check_timeout(timeout, self.jetstream.timeout),
            f"list() of object store {self.bucket!r}",
            "metadata records",
        )
        subjects = [f"$O.{self.bucket}.M.>"]
        # Keyed by name, the newest wins: an ordered consumer that resets mid-walk goes on from a stream
        # sequence, so it may deliver a version of a name written after the walk began besides the one before.
        newest: dict[str, ObjectInfo] = {}
        for batch in walk.batches(
            lambda left: self._ordered_consumer(subjects, DeliverPolicy.LAST_PER_SUBJECT, timeout=left), self.bucket
        ):
            for msg in batch:
                info = self._info_of(msg.data, msg.metadata.timestamp)
                if info is not None:
                    newest.pop(info.name, None)
                    newest[info.name] = info
        return [info for info in newest.values() if show_deleted or not info.deleted]

    def watch(
        self, *, include_history: bool = False, ignore_deletes: bool = False, updates_only: bool = False
    ) -> ObjectWatcher:
        """Objects' info as they change: first the current ones (every stored version with
        ``include_history``; none with ``updates_only``), then ``None`` once, then every change. Use it as a
        context manager; ``ignore_deletes`` leaves deleted records out."""
        return ObjectWatcher(
            self, include_history=include_history, ignore_deletes=ignore_deletes, updates_only=updates_only
        )

    def status(self) -> ObjectStoreStatus:
        """The bucket's state (size, sealed, TTL, ...), from its stream's info."""
        with self._records.bucket_errors():
            return ObjectStoreStatus.from_stream_info(self.bucket, self._stream.info())

    def _info_of(self, data: bytes, stored_at: datetime | None) -> ObjectInfo | None:
        """The info in a metadata message read by a walk; None (logged) for metadata no client could read."""
        try:
            return decode_info(data, self.bucket, stored_at)
        except errors.BadObjectMetaError as exc:
            log.warning("object store %s: skipping unreadable metadata: %s", self.bucket, exc)
            return None

    def _ordered_consumer(
        self,
        subjects: Sequence[str],
        policy: DeliverPolicy,
        *,
        timeout: float | None = None,
        start_seq: int | None = None,
    ) -> OrderedConsumer:
        """An ordered consumer on this bucket's stream (what reads, lists and watchers go through), its first
        server-side consumer created within ``timeout`` (default: the context's)."""
        config = OrderedConsumerConfig(filter_subjects=[*subjects], deliver_policy=policy, opt_start_seq=start_seq)
        with self._records.bucket_errors():
            return OrderedConsumer(self.jetstream, self._stream.name, config, timeout=timeout)
