"""KeyValue: one bucket's reads and writes (ADR-8, with nats.go's semantics).

Writes are JetStream publishes to ``$KV.<bucket>.<key>``: compare-and-set through
``Nats-Expected-Last-Subject-Sequence``, deletes and purges as marker messages (a purge also rolls up the
key's history). Reads of one key go through direct get when the stream allows it (any replica answers);
``get_many`` is one batched ``multi_last`` direct get. Everything that walks the bucket (``keys``,
``history``, watchers, ``purge_deletes``) is an ordered consumer with server-side subject filters, so only the
matching keys cross the network and a restart or reconnect in the middle costs nothing but a new consumer.
"""

from __future__ import annotations

import contextlib
import logging
import re
import time
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, TypeVar

from ... import errors
from ..._protocol import datetime_from_nanos, filter_covers, stream_position
from ..._runtime import ProcessLocal
from ..._validate import check_payload, check_timeout, to_seconds
from ...message import Msg
from ...models import DeliverPolicy, StoredMsg, StreamInfo
from ...models.kv import KV_STREAM_PREFIX, KeyValueEntry, KeyValueOp, KeyValueStatus
from .._bucket import BucketWalk
from .._consistency import ReadMode, check_read_mode, incarnation_of, known_revisions_of, read_checked
from ..consumers import OrderedConsumer, OrderedConsumerConfig
from ..direct import direct_get_last_raw
from ..publish import PublishOptions
from ..streams import Stream
from ._cas import compare_and_set, is_compare_and_set
from ._keys import (
    DEFAULT_PURGE_DELETES_OLDER_THAN,
    OPERATION_HEADER,
    check_filter,
    check_key,
    operation_of,
    operation_of_raw,
)
from .typed import CodecKeyValue
from .watch import KeyWatcher, WatchOptions

if TYPE_CHECKING:
    from ...codecs import Codec, KeyCodec
    from ..context import JetStream

V = TypeVar("V")

__all__ = ["KeyValue"]

log = logging.getLogger("jetstream_sync")

_DELETE_HEADERS = {OPERATION_HEADER: KeyValueOp.DELETE.value}
_PURGE_HEADERS = {OPERATION_HEADER: KeyValueOp.PURGE.value, "Nats-Rollup": "sub"}

# "wrong last sequence: 12" (10071) names the key's latest revision; 10164 names none.
_WRONG_LAST = re.compile(r"wrong last sequence: (\d+)")

# Messages per pull for headers-only listings (keys, purge_deletes): a header block is ~100 bytes.
_HEADERS_ONLY_WINDOW = 10_000


class KeyValue(ProcessLocal):
    """A handle on one bucket. Thread-safe; every call is one or a few requests, nothing is cached but the
    stream's configuration at bind time (and, per client, the revision last seen of each key: see ``read``).

    ``read`` is how single-key reads ([`get`][jetstream_sync.KeyValue.get],
    [`get_many`][jetstream_sync.KeyValue.get_many]) pick the server that answers: ``"read_your_writes"`` (the default:
    any replica, checked against what this client wrote and read, asked again of the leader when behind), ``"leader"``
    (the stream leader: every acknowledged write), or ``"direct"`` (any replica, unchecked).
    `jetstream_sync.jetstream._consistency` says what each guarantees and costs; a call's ``read=`` overrides it.

    For a bucket that mirrors another, keys live under the origin bucket's prefix and writes go to the origin
    (as nats.go does); reads are served by this bucket's stream, whose revisions are its own, so only the
    revisions read (not those written) are checked.
    """

    def __init__(self, js: JetStream, bucket: str, info: StreamInfo, *, read: ReadMode = "read_your_writes") -> None:
        #: the JetStream context this handle was made by
        self.jetstream = js
        #: the bucket's name
        self.bucket = bucket
        self._stream = Stream(js, info)
        config = info.config
        origin = bucket
        if config.mirror is not None:
            name = config.mirror.name
            origin = name[len(KV_STREAM_PREFIX) :] if name.startswith(KV_STREAM_PREFIX) else name
        #: every key's subject starts with this: ``$KV.<bucket>.``
        self.prefix = f"$KV.{origin}."
        # Behind a domain or an imported API prefix, writes are routed through that prefix as well.
        api_prefix = js.api_prefix
        self._put_prefix = self.prefix if api_prefix == "$JS.API" else f"{api_prefix}.{self.prefix}"
        self._allow_msg_ttl = config.allow_msg_ttl
        #: how single-key reads pick the server that answers them (see the class's text)
        self.read: ReadMode = check_read_mode("read", read)
        self._mirrored = config.mirror is not None
        self._known = known_revisions_of(js.client)
        # What the client knows is of one incarnation of the stream: a bucket deleted and made anew starts its
        # revisions again at 1, and must not be held to the old ones.
        self._incarnation = incarnation_of(info)
        self._api_prefix = api_prefix

    def __repr__(self) -> str:
        return f"<KeyValue {self.bucket!r}>"

    @property
    def stream_name(self) -> str:
        """The bucket's stream, ``KV_<bucket>``."""
        return self._stream.name

    def with_codecs(
        self, *, key_codec: KeyCodec | None = None, value_codec: Codec[V] | None = None
    ) -> CodecKeyValue[V]:
        """This bucket through a key codec and a value codec (ADR-54; see `jetstream_sync.codecs`): application
        keys and objects in, what orbit.go's ``kvcodec`` and nats.js's KV codecs store out."""
        return CodecKeyValue(self, key_codec=key_codec, value_codec=value_codec)

    # -- writes -----------------------------------------------------------------------------------------
    def put(self, key: str, value: bytes, *, ttl: float | timedelta | None = None) -> int:
        """Store ``value`` as the key's newest value; returns its revision.

        ``ttl`` (a bucket with ``limit_marker_ttl``) removes this value after that many seconds, leaving a
        marker: a cache entry that expires on the server, whoever wrote it.
        """
        check_key(key)
        data = check_payload("value", value)
        return self._publish(key, data, None, None if ttl is None else self._ttl_options(ttl, PublishOptions()))

    def create(self, key: str, value: bytes, *, ttl: float | timedelta | None = None) -> int:
        """Store ``value`` only if the key has no live value (never written, deleted or purged).

        KeyExistsError otherwise. ``ttl`` (a bucket with ``limit_marker_ttl``) removes this value after that
        many seconds, leaving a marker: a lock that frees itself.
        """
        check_key(key)
        data = check_payload("value", value)
        options = self._ttl_options(ttl, PublishOptions(expected_last_subject_sequence=0))
        try:
            return self._publish(key, data, None, options)
        except errors.KeyWrongLastSequenceError as exc:
            # A delete or purge marker is "no value": take its place, still guarded against a racing writer.
            try:
                marker = self._last(key, "leader")  # the latest, whatever replica lags: it decides "exists"
            except errors.KeyNotFoundError:
                raise self._exists(key, exc) from exc
            if marker.operation is KeyValueOp.PUT:
                raise self._exists(key, exc) from exc
            retry = self._ttl_options(ttl, PublishOptions(expected_last_subject_sequence=marker.revision))
            try:
                return self._publish(key, data, None, retry)
            except errors.KeyWrongLastSequenceError as again:
                raise self._exists(key, again) from again

    def update(self, key: str, value: bytes, last: int, *, ttl: float | timedelta | None = None) -> int:
        """Store ``value`` only if ``last`` is still the key's latest revision; KeyWrongLastSequenceError if not.

        ``ttl`` as for [`put`][jetstream_sync.KeyValue.put]; without it the new value has none, whatever the one it
        replaces had.
        """
        check_key(key)
        data = check_payload("value", value)
        options = self._ttl_options(ttl, PublishOptions(expected_last_subject_sequence=_revision("last", last)))
        return self._publish(key, data, None, options)

    def delete(self, key: str, *, last: int | None = None) -> None:
        """Mark the key deleted (its history stays until purged). ``last``: only if that is its revision."""
        check_key(key)
        options = None if last is None else PublishOptions(expected_last_subject_sequence=_revision("last", last))
        self._publish(key, b"", _DELETE_HEADERS, options)

    def purge(self, key: str, *, last: int | None = None, ttl: float | timedelta | None = None) -> None:
        """Remove the key's history, leaving one purge marker. ``ttl`` (a bucket with ``limit_marker_ttl``)
        removes that marker too after that many seconds; ``last``: only if that is its revision."""
        check_key(key)
        base = (
            PublishOptions() if last is None else PublishOptions(expected_last_subject_sequence=_revision("last", last))
        )
        self._publish(key, b"", _PURGE_HEADERS, self._ttl_options(ttl, base))

    def purge_deletes(
        self,
        *,
        older_than: float | timedelta | None = DEFAULT_PURGE_DELETES_OLDER_THAN,
        timeout: float | timedelta | None = None,
    ) -> int:
        """Remove the delete and purge markers, and the history behind them; returns how many keys it cleared.

        Markers younger than ``older_than`` seconds (default 30 min) keep themselves (their history goes), so
        watchers that are behind still see the delete; ``None`` or 0 removes every marker now.

        ``timeout`` (seconds; default: the context's) bounds the whole call, the walk for markers and the
        purges after it: TimeoutError says how far it got, and the markers not yet purged stay (calling
        again finishes the job). Runs on the calling thread.
        """
        keep_younger = 0.0 if older_than is None else to_seconds("older_than", older_than, allow_zero=True)
        walk = self._walk(timeout, f"purge_deletes() of bucket {self.bucket!r}")
        now = datetime.now(timezone.utc)
        markers = [
            entry
            for entry in self._scan(walk, [f"{self.prefix}>"], DeliverPolicy.LAST_PER_SUBJECT, headers_only=True)
            if entry.operation is not KeyValueOp.PUT
        ]
        purge = f"STREAM.PURGE.{self._stream.name}"
        for done, entry in enumerate(markers):
            progress = f", {done} of {len(markers)} markers purged"
            young = keep_younger > 0 and (now - entry.created).total_seconds() < keep_younger
            body = {"filter": self.prefix + entry.key, "keep": 1 if young else 0}
            left = walk.left(progress)
            try:
                # Stream.purge with what is left of the walk's time instead of a timeout of its own; a purge is
                # sent once (never repeated), so one that times out may still happen, which is harmless.
                self.jetstream.api.request(purge, body, left)
            except errors.StreamNotFoundError as exc:
                raise errors.BucketNotFoundError(
                    exc.code, exc.err_code, f"bucket {self.bucket!r} not found", f"KV_{self.bucket}", self.bucket
                ) from exc
            except errors.TimeoutError as exc:
                raise walk.timed_out(progress) from exc
        return len(markers)

    def _publish(self, key: str, data: bytes, headers: dict[str, str] | None, options: PublishOptions | None) -> int:
        subject = self._put_prefix + key
        try:
            if options is not None and is_compare_and_set(options):
                seq = compare_and_set(self.jetstream, subject, data, headers, options, lambda r: self._in_doubt(key, r))
            else:
                seq = self.jetstream.publish(subject, data, headers, options=options).seq
            if not self._mirrored:
                self._known.saw(self._api_prefix, self._incarnation, self.prefix + key, seq)
            return seq
        except errors.WrongLastSequenceError as exc:
            named = _named_revision(exc)
            if named is not None and not self._mirrored:  # 10071 names the key's revision the server has
                self._known.saw(self._api_prefix, self._incarnation, self.prefix + key, named)
            raise errors.KeyWrongLastSequenceError(
                exc.code, exc.err_code, f"key {key!r} in bucket {self.bucket!r}: {exc.description}"
            ) from exc
        except errors.TimeoutError:
            # Unanswered: the write may be held in flight by a server cut off from its cluster, which would then
            # refuse compare-and-sets of this bucket falsely until it steps down (see _cas.py).
            self._known.write_timed_out(self._api_prefix, self._incarnation)
            raise
        except errors.NoStreamResponseError as exc:
            raise errors.BucketNotFoundError(
                404, 10059, f"bucket {self.bucket!r} not found: {exc}", f"KV_{self.bucket}", self.bucket
            ) from exc
        except errors.MessageTooLargeError as exc:
            raise errors.ValueTooLargeError(
                exc.code, exc.err_code, f"key {key!r}: the value is larger than bucket {self.bucket!r}'s max_value_size"
            ) from exc
        except errors.StreamStoreFailedError as exc:
            raise errors.BucketFullError(
                exc.code, exc.err_code, f"bucket {self.bucket!r} refused key {key!r}: {exc.description}"
            ) from exc

    def _in_doubt(self, key: str, refusal: errors.WrongLastSequenceError) -> bool:
        """Whether a compare-and-set refusal may come from a deposed stream leader (see ``_cas.py``): it names a
        revision older than this client has seen for the key, or a write of this client to the bucket went
        unanswered moments ago."""
        named = _named_revision(refusal)
        if named is not None and not self._mirrored and named < self._known_revision(key):
            return True
        return self._known.doubtful(self._api_prefix, self._incarnation)

    def _ttl_options(self, ttl: float | timedelta | None, base: PublishOptions) -> PublishOptions:
        if ttl is None:
            return base
        if not self._allow_msg_ttl:
            raise errors.InvalidArgumentError(
                "ttl",
                f"bucket {self.bucket!r} has no per-key TTLs; create it with limit_marker_ttl "
                "(nats-server 2.11 or later)",
            )
        return PublishOptions(expected_last_subject_sequence=base.expected_last_subject_sequence, ttl=ttl)

    def _exists(self, key: str, cause: errors.KeyWrongLastSequenceError) -> errors.KeyExistsError:
        return errors.KeyExistsError(cause.code, cause.err_code, f"key {key!r} exists in bucket {self.bucket!r}")

    # -- reads ------------------------------------------------------------------------------------------
    def get(self, key: str, *, revision: int | None = None, read: ReadMode | None = None) -> KeyValueEntry:
        """The key's newest value, or the one at ``revision``.

        KeyNotFoundError when there is none; KeyDeletedError (a KeyNotFoundError) when it is a delete or purge
        marker, with the marker as ``entry``. ``read`` overrides the handle's read mode for this call.
        """
        check_key(key)
        mode = self.read if read is None else check_read_mode("read", read)
        entry = self._last(key, mode) if revision is None else self._at(key, _revision("revision", revision), mode)
        if entry.operation is not KeyValueOp.PUT:
            raise errors.KeyDeletedError(f"key {key!r} in bucket {self.bucket!r} was deleted", entry)
        return entry

    def get_many(self, keys: Iterable[str], *, read: ReadMode | None = None) -> dict[str, KeyValueEntry]:
        """The newest value of each of ``keys`` in one round trip (a batched ``multi_last`` direct get, up to
        1024 keys per request, all read as of one moment). Keys without a live value are absent from the result.

        With ``read="read_your_writes"`` (the default) a key the replica answered older than this client knows
        it is read again from the leader; ``read="leader"`` reads every key from the leader, one request each.
        Needs nats-server 2.11 or later.
        """
        if isinstance(keys, str):
            raise errors.InvalidTypeError("keys", "must be an iterable of keys, not a str; use [key]")
        wanted = [check_key(k, "keys") for k in keys]
        mode = self.read if read is None else check_read_mode("read", read)
        if not wanted:
            return {}
        if mode == "leader" or not self._stream.cached_info.config.allow_direct:  # e.g. a bucket nats-py made
            return self._each(wanted, mode)
        cut = len(self.prefix)
        try:
            raw = direct_get_last_raw(self._stream, [self.prefix + k for k in wanted])
        except errors.NoRespondersError as exc:
            raise self._unanswered(exc) from exc
        latest = {m.subject[cut:]: m for m in raw}
        found: dict[str, KeyValueEntry] = {}
        behind: list[str] = []
        for k in wanted:
            m = latest.get(k)
            if mode == "read_your_writes" and (m.seq if m is not None else 0) < self._known_revision(k):
                behind.append(k)
                continue
            if m is None:
                continue
            self._saw(k, m.seq)
            operation = operation_of(dict(m.headers) if m.headers else None)
            if operation is KeyValueOp.PUT:
                found[k] = KeyValueEntry(
                    bucket=self.bucket,
                    key=k,
                    value=m.data,
                    revision=m.seq,
                    created=datetime_from_nanos(m.time_ns),
                    operation=operation,
                )
        found.update(self._each(behind, "leader"))
        return {k: found[k] for k in wanted if k in found}

    def _each(self, keys: list[str], mode: ReadMode) -> dict[str, KeyValueEntry]:
        """The live entries of ``keys``, one read each."""
        found: dict[str, KeyValueEntry] = {}
        for k in keys:
            try:
                entry = self._last(k, mode)
            except errors.KeyNotFoundError:
                continue
            if entry.operation is KeyValueOp.PUT:
                found[k] = entry
        return found

    def _known_revision(self, key: str) -> int:
        return self._known.known(self._api_prefix, self._incarnation, self.prefix + key)

    def _saw(self, key: str, revision: int) -> None:
        self._known.saw(self._api_prefix, self._incarnation, self.prefix + key, revision)

    def _last(self, key: str, mode: ReadMode) -> KeyValueEntry:
        """The key's latest entry, read as ``mode`` says (see the class's text)."""
        subject = self.prefix + key
        deadline = time.monotonic() + self.jetstream.timeout
        known = self._known_revision(key)
        answer = read_checked(
            mode,
            bool(self._stream.cached_info.config.allow_direct),
            lambda: self._read(
                key, lambda left: self._stream.get_last_msg(subject, direct=True, timeout=left), deadline
            ),
            lambda: self._leader_read(
                key, lambda left: self._stream.get_last_msg(subject, direct=False, timeout=left), deadline
            ),
            lambda stored: (stored.seq if stored else 0) < known,
        )
        stored = answer.stored
        if stored is None:
            if answer.from_leader:  # the leader's "not found": the key's history was purged; nothing to check
                self._known.forget(self._api_prefix, self._incarnation, subject)
            raise errors.KeyNotFoundError(f"key {key!r} not found in bucket {self.bucket!r}")
        self._saw(key, stored.seq)
        return self._entry(key, stored)

    def _at(self, key: str, revision: int, mode: ReadMode) -> KeyValueEntry:
        """The key's entry at ``revision``; a replica that does not have it while this client knows the key
        reached it is behind, and the leader is asked (read_your_writes)."""
        deadline = time.monotonic() + self.jetstream.timeout
        reached = revision <= self._known_revision(key)
        stored = read_checked(
            mode,
            bool(self._stream.cached_info.config.allow_direct),
            lambda: self._read(key, lambda left: self._stream.get_msg(revision, direct=True, timeout=left), deadline),
            lambda: self._read(key, lambda left: self._stream.get_msg(revision, direct=False, timeout=left), deadline),
            lambda stored: stored is None and reached,
        ).stored
        if stored is None:
            raise errors.KeyNotFoundError(f"key {key!r} has no revision {revision} in bucket {self.bucket!r}")
        return self._checked_entry(key, revision, stored)

    def _read(self, key: str, get: Callable[[float], StoredMsg], deadline: float) -> StoredMsg | None:
        """One get within what is left of ``deadline``; None for "not found", the bucket's errors otherwise."""
        try:
            return get(max(0.001, deadline - time.monotonic()))
        except errors.MessageNotFoundError:
            return None
        except errors.StreamNotFoundError as exc:
            raise errors.BucketNotFoundError(
                exc.code, exc.err_code, f"bucket {self.bucket!r} not found", f"KV_{self.bucket}", self.bucket
            ) from exc
        except (errors.JetStreamNotEnabledError, errors.NoRespondersError) as exc:
            raise self._unanswered(exc) from exc

    def _leader_read(self, key: str, get: Callable[[float], StoredMsg], deadline: float) -> StoredMsg | None:
        """A read of the key's latest entry from the stream leader, asked again while the answer is older than
        what this client knows (a deposed leader still answering during a partition): StaleReadError once the
        read's time is up. "Not found" from the leader is believed, and the key forgotten (its history was
        purged from the stream)."""
        delay = 0.05
        while True:
            stored = self._read(key, get, deadline)
            known = self._known_revision(key)
            if stored is None or stored.seq >= known or self._replaced():
                return stored
            left = deadline - time.monotonic()
            if left <= delay:
                raise errors.StaleReadError(
                    503,
                    0,
                    f"key {key!r} in bucket {self.bucket!r}: the stream leader answered revision {stored.seq}, older "
                    f"than revision {known} this client already wrote or read; a deposed leader cut off by a "
                    "network partition answers until it steps down. Read again once the cluster has healed",
                )
            time.sleep(delay)
            delay = min(delay * 2, 1.0)

    def _replaced(self) -> bool:
        """Whether the bucket's stream was deleted and made anew since this handle last looked (its creation
        time changed): then what the client knew of its revisions is void, and the handle moves to the new one."""
        try:
            info = self._stream.info()
        except errors.JetStreamError:
            return False
        now = incarnation_of(info)
        if now == self._incarnation:
            return False
        log.info("bucket %s was deleted and created anew; its revisions start again", self.bucket)
        self._incarnation = now
        return True

    def _unanswered(self, exc: Exception) -> Exception:
        """A read the bucket's stream did not answer (a direct get has no responders once the stream is gone):
        BucketNotFoundError when the stream is gone, the original error otherwise."""
        try:
            self.jetstream.stream_info(self._stream.name)
        except errors.StreamNotFoundError as gone:
            return errors.BucketNotFoundError(
                gone.code, gone.err_code, f"bucket {self.bucket!r} not found", f"KV_{self.bucket}", self.bucket
            )
        return exc

    def _checked_entry(self, key: str, revision: int, stored: StoredMsg) -> KeyValueEntry:
        if stored.subject != self.prefix + key:
            raise errors.KeyNotFoundError(f"revision {revision} of bucket {self.bucket!r} is not key {key!r}")
        return self._entry(key, stored)

    def _entry(self, key: str, stored: StoredMsg) -> KeyValueEntry:
        return KeyValueEntry(
            bucket=self.bucket,
            key=key,
            value=stored.data,
            revision=stored.seq,
            created=stored.time,
            operation=operation_of(stored.headers),
        )

    # -- walking the bucket -----------------------------------------------------------------------------
    def keys(self, *filters: str, timeout: float | timedelta | None = None) -> Iterator[str]:
        """The keys with a live value, matching any of ``filters`` (``*`` and ``>`` allowed; none: all keys).

        Filtered by the server and streamed: only matching keys' headers cross the network, whatever the
        bucket's size. Stop early by closing the iterator (``break`` in a for loop does).

        ``timeout`` (seconds; default: the context's) bounds the time the walk waits for the server, from the
        first key asked for to the last (not the time your loop spends between keys): past it the iteration
        raises TimeoutError (how many entries were read) and the walk's consumer is deleted. So a link that
        goes silent in the middle cannot hold the loop, and slow work per key does not fail it. The arguments
        are checked now; the walk runs on the iterating thread.
        """
        subjects = self._filter_subjects(filters)
        seconds = check_timeout(timeout, self.jetstream.timeout)
        return self._keys(subjects, seconds)

    def _keys(self, subjects: list[str], seconds: float) -> Iterator[str]:
        walk = BucketWalk(self.jetstream.runtime, seconds, f"keys() of bucket {self.bucket!r}")
        cut = len(self.prefix)
        put = KeyValueOp.PUT
        with contextlib.closing(self._batches(walk, subjects, DeliverPolicy.LAST_PER_SUBJECT, headers_only=True)) as it:
            for batch in it:
                for msg in batch:
                    if operation_of_raw(msg.raw_headers) is put:
                        yield msg.subject[cut:]

    def history(
        self,
        key: str,
        *,
        meta_only: bool = False,
        ignore_deletes: bool = False,
        timeout: float | timedelta | None = None,
    ) -> list[KeyValueEntry]:
        """Every stored value and marker of ``key``, oldest first; KeyNotFoundError when it has none.

        ``meta_only`` reads the entries without their values (``value`` is empty; revisions, times and
        operations cross the network, the values stay on the server); ``ignore_deletes`` leaves the delete and
        purge markers out (KeyNotFoundError when nothing else is left): nats.go's ``MetaOnly()`` and
        ``IgnoreDeletes()``.

        ``timeout`` (seconds; default: the context's) bounds the whole walk: TimeoutError (saying how many
        entries were read) rather than a wait on a link gone silent. Runs on the calling thread.
        """
        check_key(key)
        # nats.go's History is a watch with IncludeHistory: the same options, checked the same way
        options = WatchOptions(include_history=True, meta_only=meta_only, ignore_deletes=ignore_deletes)
        walk = self._walk(timeout, f"history() of key {key!r} in bucket {self.bucket!r}")
        scan = self._scan(walk, [self.prefix + key], DeliverPolicy.ALL, headers_only=options.meta_only)
        entries = [e for e in scan if not (options.ignore_deletes and e.operation is not KeyValueOp.PUT)]
        if not entries:
            raise errors.KeyNotFoundError(f"key {key!r} not found in bucket {self.bucket!r}")
        return entries

    def watch(
        self,
        keys: str | Sequence[str] = ">",
        *,
        include_history: bool = False,
        ignore_deletes: bool = False,
        meta_only: bool = False,
        updates_only: bool = False,
        resume_from_revision: int | None = None,
    ) -> KeyWatcher:
        """Entries of ``keys`` (a filter or several) as they change: first the current values, then ``None``
        once, then every change, in order, across server restarts and reconnects. Use it as a context manager.

        ``include_history`` starts with every stored value instead of the latest; ``updates_only`` starts with
        nothing (and sends no ``None``); ``resume_from_revision`` starts at that revision; ``meta_only`` leaves
        values empty; ``ignore_deletes`` skips delete and purge markers.
        """
        filters = [keys] if isinstance(keys, str) else list(keys)
        options = WatchOptions(
            include_history=include_history,
            ignore_deletes=ignore_deletes,
            meta_only=meta_only,
            updates_only=updates_only,
            resume_from_revision=resume_from_revision,
        )
        return KeyWatcher(self, self._filter_subjects(filters), options)

    def watch_all(self, **options: bool | int | None) -> KeyWatcher:
        """[`watch`][jetstream_sync.KeyValue.watch] of every key."""
        return self.watch(">", **options)  # type: ignore[arg-type]

    def status(self) -> KeyValueStatus:
        """The bucket's state (values, bytes, history, TTL, ...), from its stream's info."""
        try:
            info = self._stream.info()
        except errors.StreamNotFoundError as exc:
            raise errors.BucketNotFoundError(
                exc.code, exc.err_code, f"bucket {self.bucket!r} not found", f"KV_{self.bucket}", self.bucket
            ) from exc
        return KeyValueStatus.from_stream_info(self.bucket, info)

    def _filter_subjects(self, filters: Sequence[str]) -> list[str]:
        if not filters:
            return [f"{self.prefix}>"]
        checked = list(dict.fromkeys(check_filter(f, "keys") for f in filters))
        # The server refuses overlapping filters (10138): a filter another one covers adds nothing, drop it.
        return [self.prefix + f for f in checked if not any(o != f and filter_covers(o, f) for o in checked)]

    def _walk(self, timeout: object, what: str) -> BucketWalk:
        """The deadline of one walk of this bucket (``timeout`` checked; None: the context's)."""
        return BucketWalk(self.jetstream.runtime, check_timeout(timeout, self.jetstream.timeout), what)

    def _batches(
        self, walk: BucketWalk, subjects: list[str], policy: DeliverPolicy, *, headers_only: bool
    ) -> Generator[list[Msg], None, None]:
        """The matching messages as of now, a buffered batch at a time, through an ordered consumer that ends
        when caught up, all within ``walk``'s deadline. Headers-only reads pull 10,000 messages at a time (a
        few MiB at most: no values), a twentieth of the round trips of the default."""
        return walk.batches(
            lambda left: self.ordered_consumer(subjects, policy, headers_only=headers_only, timeout=left),
            self.bucket,
            _HEADERS_ONLY_WINDOW if headers_only else None,
        )

    def _scan(
        self, walk: BucketWalk, subjects: list[str], policy: DeliverPolicy, *, headers_only: bool
    ) -> Iterator[KeyValueEntry]:
        cut = len(self.prefix)
        entry_of = self.entry_of
        for batch in self._batches(walk, subjects, policy, headers_only=headers_only):
            for msg in batch:
                yield entry_of(msg, cut)

    def ordered_consumer(
        self,
        subjects: list[str],
        policy: DeliverPolicy,
        *,
        headers_only: bool = False,
        start_revision: int | None = None,
        timeout: float | None = None,
    ) -> OrderedConsumer:
        """An ordered consumer on this bucket's stream (what keys, history and watchers read through), its
        first server-side consumer created within ``timeout`` (default: the context's)."""
        config = OrderedConsumerConfig(
            filter_subjects=subjects,
            deliver_policy=policy,
            opt_start_seq=start_revision,
            headers_only=headers_only,
        )
        try:
            return OrderedConsumer(self.jetstream, self._stream.name, config, timeout=timeout)
        except errors.StreamNotFoundError as exc:
            raise errors.BucketNotFoundError(
                exc.code, exc.err_code, f"bucket {self.bucket!r} not found", f"KV_{self.bucket}", self.bucket
            ) from exc

    def entry_of(self, msg: Msg, cut: int | None = None) -> KeyValueEntry:
        """The entry a consumed message of this bucket stands for."""
        revision, created, delta = stream_position(msg.reply)
        return KeyValueEntry(
            bucket=self.bucket,
            key=msg.subject[len(self.prefix) if cut is None else cut :],
            value=msg.data,
            revision=revision,
            created=created,
            delta=delta,
            operation=operation_of_raw(msg.raw_headers),
        )


def _named_revision(refusal: errors.WrongLastSequenceError) -> int | None:
    """The key's revision a 10071 refusal names ("wrong last sequence: 12"); None for 10164, which names none."""
    found = _WRONG_LAST.search(refusal.description)
    return None if found is None else int(found[1])


def _revision(field: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise errors.InvalidTypeError(field, f"must be a revision (int), got {type(value).__name__}")
    if value < 0:
        raise errors.InvalidArgumentError(field, f"must be >= 0, got {value}")
    return value
