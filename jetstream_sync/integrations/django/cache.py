"""KeyValueCache: a Django cache backend on a JetStream key-value bucket.

::

    CACHES = {
        "default": {
            "BACKEND": "jetstream_sync.integrations.django.cache.KeyValueCache",
            "LOCATION": "django_cache",          # the bucket; created on first use if missing
            "TIMEOUT": 300,
            "OPTIONS": {"REPLICAS": 3, "STORAGE": "memory", "MAX_BYTES": 512 * 1024 * 1024},
        }
    }

The connection is ``settings.JETSTREAM`` (this process's client,
[`jetstream_sync.integrations.django.get_client`][jetstream_sync.integrations.django.get_client]), so every process of a
deployment shares one bucket, the way memcached or Redis would be shared.

How Django's cache contract maps onto a bucket:

- **Keys.** Django keys (after ``KEY_PREFIX``, ``VERSION`` and ``KEY_FUNCTION``) are any string; bucket keys
  allow only letters, digits and ``-/_=.``. Each key is stored under
  [`encode_key`][jetstream_sync.integrations.django.cache.encode_key]: its UTF-8 bytes, with letters, digits, ``-``,
  ``_`` and ``/`` kept and every other byte written ``=XX`` (upper-case hex), so ``":1:user:42"`` is
  ``=3A1=3Auser=3A42``. The mapping is reversible ([`decode_key`][jetstream_sync.integrations.django.cache.decode_key])
  and readable in ``nats kv ls``. An encoded key longer than
  [`MAX_KEY_LENGTH`][jetstream_sync.integrations.django.cache.MAX_KEY_LENGTH] raises ``InvalidCacheKey`` (it would not
  fit a NATS protocol line); keys memcached would refuse get Django's ``CacheKeyWarning``, as every backend that is not
  memcached does.
- **Values.** A stored value is [`HEADER`][jetstream_sync.integrations.django.cache.HEADER] (a format byte, 1, and the
  expiry time as a big-endian double of Unix seconds, 0 for never) followed by the pickle, as Django's other backends
  pickle (``PICKLE_PROTOCOL``, default the highest). Any client can read the entry; a value not in this format reads as
  a miss.
- **Timeouts.** ``None`` never expires; 0 or less means "do not keep": ``set`` removes the key, ``add`` stores
  nothing (and answers whether the key was free), ``touch`` removes it. A positive timeout is written twice:
  as the entry's ``Nats-TTL`` (whole seconds, rounded up: the server's minimum is 1 s), so the server removes
  the value, and as the expiry in the header, so ``get`` never returns a value past its time, even a 0.2 s
  one, before the server has removed it. The expiry is the writer's wall clock: keep the hosts' clocks in sync
  (NTP), as with any shared cache that stores expiry times.
- **Atomic operations.** ``add`` is the bucket's ``create`` (only if absent; an expired value still stored counts
  as absent and is replaced through ``update`` on its revision), ``touch``, ``incr``/``decr`` and ``delete`` are
  compare-and-set writes on the revision just read, retried when another writer came in between, so no update
  is lost between processes (the revision is read from the stream leader: see "Reads" below). ``incr`` keeps
  the value's expiry. ``delete`` and ``clear`` purge (a delete leaves a purge marker that removes itself after
  ``MARKER_TTL``).
- **A write the bucket refuses** (``MAX_BYTES`` reached, a value over ``MAX_VALUE_SIZE`` or the server's
  ``max_payload``) is logged as a warning and removes the key, so a stale value is not served in its place
  (memcached's behaviour); ``set_many`` returns those keys.
- **Reads on a replicated bucket** (``REPLICAS`` 3 or 5). A replica applies a write milliseconds after the
  stream leader acknowledged it, and a plain read may be answered by any replica, so which replica answers
  decides what a read can miss. A Django deployment is many processes, each with its own client
  ([`get_client`][jetstream_sync.integrations.django.get_client]); ``OPTIONS["READ"]`` says what ``get``, ``get_many``
  and ``has_key`` guarantee across them (the read modes of
  [`JetStream.key_value`][jetstream_sync.KeyValueManager.key_value], docs/guides/key-value.md):

  - ``"read_your_writes"`` (the default): any replica answers, checked against what this process wrote and
    read, and the leader is asked when the replica is behind. A process sees every write it completed (any
    thread's, so a request sees its own ``set`` and ``delete``, and those of earlier requests the same worker
    served, and a ``clear()`` it made) and never an older value of a key than it has seen. A write by another
    process may be missing for a few milliseconds after it completed: the next request of a user, served by
    another worker, may miss the value the last one set. Costs nothing while the replicas keep up.
  - ``"leader"``: the stream leader answers every read, so every process sees every write that completed
    before the read began, whoever made it (the exception is a network partition, until a deposed leader
    steps down). For values one request writes and the next, on any worker, must read: sessions
    (``SESSION_ENGINE = "django.contrib.sessions.backends.cache"``), one-time tokens, locks. All reads load
    one server of the three.
  - ``"direct"``: any replica answers, unchecked: the fastest read, which may miss even this process's own
    latest writes (the value before its last ``set``, one its ``delete`` removed). For values a moment old
    does no harm: rendered fragments, computed results.

  On a bucket of one replica the three read the same data. The reads that decide a write (``add``,
  ``incr``/``decr``, ``touch``, ``delete``, ``set`` with a timeout of 0) always ask the leader, whatever
  READ says: the revision a compare-and-set builds on must be the latest, or each attempt is refused and
  retried.

The bucket is created on first use with ``history`` 1 and ``limit_marker_ttl`` (which enables per-key TTLs,
nats-server 2.11+). OPTIONS: ``REPLICAS`` (1), ``STORAGE`` ("file" or "memory"; "file"), ``MAX_BYTES`` (-1:
unlimited), ``MAX_VALUE_SIZE`` (-1), ``MARKER_TTL`` (seconds the server keeps the marker of an expired or
deleted key, 1), ``READ`` ("read_your_writes", "leader" or "direct"; "read_your_writes"), ``PICKLE_PROTOCOL``,
and ``CREATE`` (True; False requires the bucket to exist). An existing bucket is used as it is, but it must
take per-key TTLs. There is no culling (``MAX_ENTRIES`` and ``CULL_FREQUENCY`` are refused): entries leave by
their timeouts, and ``MAX_BYTES`` bounds the bucket.
"""

from __future__ import annotations

import logging
import math
import pickle
import struct
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from functools import lru_cache
from typing import Any, TypeVar

from django.core.cache.backends.base import (  # type: ignore[import-untyped]
    DEFAULT_TIMEOUT,
    BaseCache,
    InvalidCacheKey,
)
from django.core.exceptions import ImproperlyConfigured  # type: ignore[import-untyped]

from ... import errors
from ...client import Client
from ...jetstream._consistency import ReadMode, check_read_mode
from ...jetstream.kv import KeyValue
from ...models import KeyValueConfig, KeyValueEntry, StorageType
from . import get_client

__all__ = ["HEADER", "MAX_KEY_LENGTH", "KeyValueCache", "decode_key", "decode_value", "encode_key", "encode_value"]

log = logging.getLogger("jetstream_sync.integrations.django")

#: what precedes the pickle in a stored value: format 1, then the expiry (Unix seconds, 0.0: never)
HEADER = struct.Struct(">Bd")
_FORMAT = 1
#: the longest encoded key accepted: a subject with the bucket's prefix must fit a NATS protocol line (4 KiB)
MAX_KEY_LENGTH = 2048
# The longest per-key TTL written to the server; a longer timeout is kept by the stored expiry alone (the
# server's TTLs, like every duration, are nanoseconds in an int64: 292 years).
_MAX_SERVER_TTL = 100 * 365 * 24 * 3600
# Compare-and-set attempts before an operation gives up on a key that other writers keep changing.
_CAS_ATTEMPTS = 1000
_T = TypeVar("_T")

_SAFE_BYTES = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_/")
_HEX = "0123456789ABCDEF"
_OPTIONS = ("REPLICAS", "STORAGE", "MAX_BYTES", "MAX_VALUE_SIZE", "MARKER_TTL", "READ", "PICKLE_PROTOCOL", "CREATE")


@lru_cache(maxsize=8192)
def encode_key(key: str) -> str:
    """The bucket key a Django key is stored under: UTF-8 with bytes outside ``[A-Za-z0-9_/-]`` as ``=XX``."""
    raw = key.encode("utf-8", "surrogatepass")  # surrogatepass: every str has a key, and decodes back to itself
    return "".join(chr(b) if b in _SAFE_BYTES else f"={_HEX[b >> 4]}{_HEX[b & 15]}" for b in raw)


def decode_key(encoded: str) -> str:
    """The Django key [`encode_key`][jetstream_sync.integrations.django.cache.encode_key] made ``encoded`` from;
    ValueError for a key it could not have made."""
    out = bytearray()
    i = 0
    while i < len(encoded):
        c = encoded[i]
        if c == "=":
            pair = encoded[i + 1 : i + 3]
            if len(pair) != 2 or any(h not in _HEX for h in pair):
                raise ValueError(f"{encoded!r}: '=' at {i} is not followed by two upper-case hex digits")
            out.append(int(pair, 16))
            i += 3
        elif ord(c) < 128 and ord(c) in _SAFE_BYTES:
            out.append(ord(c))
            i += 1
        else:
            raise ValueError(f"{encoded!r}: {c!r} at {i} is never left unescaped")
    return out.decode("utf-8", "surrogatepass")


def encode_value(payload: bytes, expires_at: float | None) -> bytes:
    """A stored value: the header (format, expiry or 0.0 for never) and the pickled ``payload``."""
    return HEADER.pack(_FORMAT, 0.0 if expires_at is None else expires_at) + payload


def decode_value(data: bytes) -> tuple[float | None, bytes] | None:
    """``(expires_at or None, pickle)`` of a stored value; None when it is not in this backend's format."""
    if len(data) < HEADER.size or data[0] != _FORMAT:
        return None
    expires_at = HEADER.unpack_from(data)[1]
    return (None if expires_at == 0.0 else expires_at), data[HEADER.size :]


class _Stored:
    """One key as read: its entry (for the revision) and the decoded value, live or expired."""

    __slots__ = ("entry", "expires_at", "payload")

    def __init__(self, entry: KeyValueEntry, expires_at: float | None, payload: bytes) -> None:
        self.entry = entry
        self.expires_at = expires_at
        self.payload = payload

    def live(self, now: float) -> bool:
        return self.expires_at is None or self.expires_at > now


class _Buckets:
    """The bound bucket of each LOCATION in this process, for the client that bound it, and the last revision
    this process's ``clear()`` removed from it.

    Django makes a backend instance per thread (``caches`` is thread-local), so binding (a stream info, maybe a
    create) is done once per process and bucket, not per thread. A handle belongs to its client: when
    [`get_client`][jetstream_sync.integrations.django.get_client] returns another one (the old one was closed, or this
    is a forked child) it is bound again.

    ``clear()`` purges the bucket's stream, which the client's record of the revisions it wrote and read (what
    "read_your_writes" checks a replica's answer against) does not see: a replica that has not applied the purge
    yet answers a value it removed, at a revision this process already knows. So the last revision the purge
    removed is kept here, per bucket and client, and a read answered at or below it is asked again of the leader.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.handles: dict[tuple[str, KeyValueConfig, bool, ReadMode], tuple[Client, KeyValue]] = {}
        self.cleared: dict[str, tuple[Client, int]] = {}

    def get(self, config: KeyValueConfig, create: bool, read: ReadMode) -> KeyValue:
        client = get_client()
        key = (config.bucket, config, create, read)
        with self.lock:
            bound = self.handles.get(key)
        if bound is not None and bound[0] is client:
            return bound[1]
        kv = _bind(client, config, create, read)
        with self.lock:
            self.handles[key] = (client, kv)
        return kv

    def forget(self, config: KeyValueConfig, create: bool, read: ReadMode) -> None:
        """Drop the handle: its bucket was deleted under it, so the next use binds (and creates) it again. The
        revision cleared goes too: the new bucket numbers its revisions from 1."""
        with self.lock:
            self.handles.pop((config.bucket, config, create, read), None)
            self.cleared.pop(config.bucket, None)

    def cleared_through(self, kv: KeyValue) -> int:
        """The last revision this client's ``clear()`` of ``kv``'s bucket removed (0: none)."""
        with self.lock:
            cleared = self.cleared.get(kv.bucket)
        return cleared[1] if cleared is not None and cleared[0] is kv.jetstream.client else 0

    def clear(self, kv: KeyValue, through: int) -> None:
        """Remember that revisions up to ``through`` of ``kv``'s bucket are purged (see the class's text)."""
        client = kv.jetstream.client
        with self.lock:
            cleared = self.cleared.get(kv.bucket)
            known = cleared[1] if cleared is not None and cleared[0] is client else 0
            self.cleared[kv.bucket] = (client, max(known, through))


_buckets = _Buckets()


def _bind(client: Client, config: KeyValueConfig, create: bool, read: ReadMode) -> KeyValue:
    js = client.jetstream()
    try:
        kv = js.key_value(config.bucket, read=read)
    except errors.BucketNotFoundError:
        if not create:
            raise ImproperlyConfigured(
                f"cache bucket {config.bucket!r} does not exist and OPTIONS['CREATE'] is False"
            ) from None
        try:
            kv = js.create_key_value(config, read=read)
            log.info("created the cache bucket %r", config.bucket)
        except errors.BucketExistsError:  # another process created it first, maybe with other options
            kv = js.key_value(config.bucket, read=read)
    if kv.status().limit_marker_ttl is None:
        raise ImproperlyConfigured(
            f"bucket {config.bucket!r} has no per-key TTLs: a cache bucket needs limit_marker_ttl "
            "(delete the bucket to have the cache create it, or update it with a limit_marker_ttl)"
        )
    return kv


def _option(options: Mapping[str, Any], name: str, default: Any) -> Any:
    value = options.get(name, default)
    return default if value is None else value


class KeyValueCache(BaseCache):  # type: ignore[misc]
    """Django's cache API on a key-value bucket (``LOCATION``); see the module's documentation."""

    def __init__(self, location: str, params: dict[str, Any]) -> None:
        options = dict(params.get("OPTIONS") or {})
        unknown = sorted(set(options) - set(_OPTIONS))
        if unknown:
            hint = " (there is no culling: entries leave by their timeouts; bound the bucket with MAX_BYTES)"
            culling = {"MAX_ENTRIES", "CULL_FREQUENCY"} & set(unknown)
            raise ImproperlyConfigured(
                f"KeyValueCache OPTIONS: unknown {', '.join(unknown)}; known: {', '.join(_OPTIONS)}"
                + (hint if culling else "")
            )
        super().__init__({k: v for k, v in params.items() if k != "OPTIONS"})
        if not location or not isinstance(location, str):
            raise ImproperlyConfigured("KeyValueCache: LOCATION must be the bucket's name")
        try:
            self._config = KeyValueConfig(
                bucket=location,
                history=1,
                replicas=_option(options, "REPLICAS", 1),
                storage=_option(options, "STORAGE", StorageType.FILE),
                max_bytes=_option(options, "MAX_BYTES", -1),
                max_value_size=_option(options, "MAX_VALUE_SIZE", -1),
                limit_marker_ttl=_option(options, "MARKER_TTL", 1.0),
            )
        except (errors.InvalidArgumentError, errors.InvalidTypeError, ValueError) as exc:
            raise ImproperlyConfigured(f"KeyValueCache {location!r}: {exc}") from exc
        self._marker_ttl = self._config.limit_marker_ttl
        self._create = bool(_option(options, "CREATE", True))
        try:
            #: how get, get_many and has_key pick the server that answers (the module's "Reads")
            self.read: ReadMode = check_read_mode("OPTIONS['READ']", _option(options, "READ", "read_your_writes"))
        except errors.InvalidArgumentError as exc:
            raise ImproperlyConfigured(f"KeyValueCache {location!r}: {exc}") from exc
        protocol = _option(options, "PICKLE_PROTOCOL", pickle.HIGHEST_PROTOCOL)
        if isinstance(protocol, bool) or not isinstance(protocol, int) or not 0 <= protocol <= pickle.HIGHEST_PROTOCOL:
            raise ImproperlyConfigured(
                f"KeyValueCache {location!r}: OPTIONS['PICKLE_PROTOCOL'] must be 0-{pickle.HIGHEST_PROTOCOL}, "
                f"got {protocol!r}"
            )
        self._protocol = protocol

    @property
    def bucket(self) -> KeyValue:
        """The bucket, bound (and created if missing) on first use in this process; its reads are ``READ``'s."""
        return _buckets.get(self._config, self._create, self.read)

    def _run(self, operation: Callable[[KeyValue], _T]) -> _T:
        """Run ``operation`` on the bucket; if the bucket was deleted meanwhile (an admin, a test's cleanup),
        bind it again, creating it, and run it once more, rather than failing until the process restarts."""
        try:
            return operation(self.bucket)
        except errors.BucketNotFoundError:
            log.warning("cache bucket %r was deleted; binding it again", self._config.bucket)
            _buckets.forget(self._config, self._create, self.read)
            return operation(self.bucket)

    # -- keys, values and timeouts ----------------------------------------------------------------------
    def validate_key(self, key: str) -> None:
        """Django's warnings for keys memcached would refuse, and InvalidCacheKey for a key too long to store."""
        super().validate_key(key)
        if len(encode_key(key)) > MAX_KEY_LENGTH:
            raise InvalidCacheKey(
                f"Cache key is too long for a NATS key-value bucket: {key[:60]!r}... encodes to more than "
                f"{MAX_KEY_LENGTH} characters"
            )

    def _key(self, key: str, version: int | None) -> str:
        return encode_key(self.make_and_validate_key(key, version=version))

    def _expiry(self, timeout: Any) -> tuple[float | None, float | None]:
        """``(server TTL, expires_at)`` for a Django timeout; expires_at in the past means "do not keep"."""
        expires_at = self.get_backend_timeout(timeout)
        if expires_at is None:
            return None, None
        remaining = expires_at - time.time()
        if remaining <= 0 or remaining > _MAX_SERVER_TTL:
            return None, expires_at
        return float(max(1, math.ceil(remaining))), expires_at

    def _pickle(self, value: Any) -> bytes:
        return pickle.dumps(value, self._protocol)

    def _read(self, kv: KeyValue, key: str, read: ReadMode) -> _Stored | None:
        """The key as ``read`` says: the READ option for a plain read, "leader" for a read a write builds on."""
        try:
            entry = kv.get(key, read=read)
            if read == "read_your_writes" and entry.revision <= _buckets.cleared_through(kv):
                entry = kv.get(key, read="leader")  # a replica that has not applied this process's clear() yet
        except errors.KeyNotFoundError:  # never written, deleted, purged, or ended by its TTL
            return None
        return self._decoded(entry)

    def _decoded(self, entry: KeyValueEntry) -> _Stored | None:
        decoded = decode_value(entry.value)
        if decoded is None:
            log.warning("cache bucket %r: key %r holds a value not written by this backend", entry.bucket, entry.key)
            return None
        return _Stored(entry, decoded[0], decoded[1])

    # -- BaseCache ----------------------------------------------------------------------------------------
    def add(self, key: str, value: Any, timeout: Any = DEFAULT_TIMEOUT, version: int | None = None) -> bool:
        """Store only if the key has no live value (an expired one still stored counts as absent)."""
        nkey = self._key(key, version)
        payload = self._pickle(value)
        return self._run(lambda kv: self._add(kv, nkey, payload, timeout))

    def _add(self, kv: KeyValue, nkey: str, payload: bytes, timeout: Any) -> bool:
        ttl, expires_at = self._expiry(timeout)
        if expires_at is not None and expires_at <= time.time():  # not kept; the answer is still "was it free?"
            stored = self._read(kv, nkey, "leader")
            return stored is None or not stored.live(time.time())
        data = encode_value(payload, expires_at)
        for _ in range(_CAS_ATTEMPTS):
            try:
                kv.create(nkey, data, ttl=ttl)
                return True
            except errors.KeyWrongLastSequenceError:  # KeyExistsError, or a marker that came and went
                stored = self._read(kv, nkey, "leader")
            if stored is None:
                continue
            if stored.live(time.time()):
                return False
            try:  # expired, not yet removed by the server: take its place, unless someone else does first
                kv.update(nkey, data, stored.entry.revision, ttl=ttl)
                return True
            except errors.KeyWrongLastSequenceError:
                continue
        return False

    def get(self, key: str, default: Any = None, version: int | None = None) -> Any:
        """The value of ``key``, or ``default`` when it is absent or expired (Django's cache API)."""
        nkey = self._key(key, version)
        stored = self._run(lambda kv: self._read(kv, nkey, self.read))
        if stored is None or not stored.live(time.time()):
            return default
        return pickle.loads(stored.payload)

    def set(self, key: str, value: Any, timeout: Any = DEFAULT_TIMEOUT, version: int | None = None) -> None:
        """Store ``value`` under ``key`` for ``timeout`` seconds (Django's cache API)."""
        nkey = self._key(key, version)
        payload = self._pickle(value)
        self._run(lambda kv: self._set(kv, key, nkey, payload, timeout))

    def _set(self, kv: KeyValue, key: str, nkey: str, payload: bytes, timeout: Any) -> bool:
        """Write one value; False (logged, the key removed) when the bucket refuses it."""
        ttl, expires_at = self._expiry(timeout)
        if expires_at is not None and expires_at <= time.time():
            self._remove(kv, nkey)
            return True
        try:
            kv.put(nkey, encode_value(payload, expires_at), ttl=ttl)
        except (errors.BucketFullError, errors.ValueTooLargeError, errors.MaxPayloadError) as exc:
            log.warning("cache bucket %r refused key %r (%s); the key is removed", kv.bucket, key, exc)
            self._remove(kv, nkey)
            return False
        return True

    def touch(self, key: str, timeout: Any = DEFAULT_TIMEOUT, version: int | None = None) -> bool:
        """Give a live value a new timeout; False when there is none. Compare-and-set on its revision."""
        nkey = self._key(key, version)
        return self._run(lambda kv: self._touch(kv, nkey, timeout))

    def _touch(self, kv: KeyValue, nkey: str, timeout: Any) -> bool:
        for _ in range(_CAS_ATTEMPTS):
            stored = self._read(kv, nkey, "leader")
            if stored is None or not stored.live(time.time()):
                return False
            ttl, expires_at = self._expiry(timeout)
            try:
                if expires_at is not None and expires_at <= time.time():
                    kv.purge(nkey, last=stored.entry.revision, ttl=self._marker_ttl)
                else:
                    kv.update(nkey, encode_value(stored.payload, expires_at), stored.entry.revision, ttl=ttl)
                return True
            except errors.KeyWrongLastSequenceError:
                continue
        return False

    def delete(self, key: str, version: int | None = None) -> bool:
        """Remove the key; True when it had a live value."""
        nkey = self._key(key, version)
        return self._run(lambda kv: self._remove(kv, nkey))

    def _remove(self, kv: KeyValue, nkey: str) -> bool:
        for _ in range(_CAS_ATTEMPTS):
            stored = self._read(kv, nkey, "leader")
            if stored is None:
                return False
            try:
                kv.purge(nkey, last=stored.entry.revision, ttl=self._marker_ttl)
            except errors.KeyWrongLastSequenceError:
                continue
            return stored.live(time.time())
        return False

    def has_key(self, key: str, version: int | None = None) -> bool:
        """Whether ``key`` holds a value that has not expired (Django's cache API)."""
        nkey = self._key(key, version)
        stored = self._run(lambda kv: self._read(kv, nkey, self.read))
        return stored is not None and stored.live(time.time())

    def incr(self, key: str, delta: int = 1, version: int | None = None) -> Any:
        """Add ``delta`` atomically (compare-and-set, retried), keeping the value's expiry.

        ValueError when the key has no live value, as Django requires; TypeError when its value takes no ``+``.
        """
        nkey = self._key(key, version)
        return self._run(lambda kv: self._incr(kv, key, nkey, delta))

    def _incr(self, kv: KeyValue, key: str, nkey: str, delta: int) -> Any:
        for _ in range(_CAS_ATTEMPTS):
            stored = self._read(kv, nkey, "leader")
            now = time.time()
            if stored is None or not stored.live(now):
                raise ValueError(f"Key '{key}' not found")
            new = pickle.loads(stored.payload) + delta
            ttl = None
            if stored.expires_at is not None and stored.expires_at - now <= _MAX_SERVER_TTL:
                ttl = float(max(1, math.ceil(stored.expires_at - now)))
            try:
                kv.update(nkey, encode_value(self._pickle(new), stored.expires_at), stored.entry.revision, ttl=ttl)
            except errors.KeyWrongLastSequenceError:
                continue
            return new
        raise errors.KeyWrongLastSequenceError(
            400, 10071, f"key {key!r} changed under each of {_CAS_ATTEMPTS} attempts to increment it"
        )

    def get_many(self, keys: Iterable[str], version: int | None = None) -> dict[str, Any]:
        """The live values of ``keys`` in one batched read (a ``multi_last`` direct get; with READ "leader", one
        read of the leader per key)."""
        wanted = {self._key(key, version): key for key in keys}
        if not wanted:
            return {}
        found = self._run(lambda kv: self._get_many(kv, list(wanted)))
        now = time.time()
        result: dict[str, Any] = {}
        for nkey, entry in found.items():
            stored = self._decoded(entry)
            if stored is not None and stored.live(now):
                result[wanted[nkey]] = pickle.loads(stored.payload)
        return result

    def _get_many(self, kv: KeyValue, nkeys: list[str]) -> dict[str, KeyValueEntry]:
        found = kv.get_many(nkeys, read=self.read)
        if self.read == "read_your_writes":
            cleared = _buckets.cleared_through(kv)
            behind = [nkey for nkey, entry in found.items() if entry.revision <= cleared]
            if behind:  # answered by a replica that has not applied this process's clear() yet
                for nkey in behind:
                    del found[nkey]
                found.update(kv.get_many(behind, read="leader"))
        return found

    def set_many(
        self, data: Mapping[str, Any], timeout: Any = DEFAULT_TIMEOUT, version: int | None = None
    ) -> list[str]:
        """Set each value; returns the keys the bucket refused (full, or a value too large)."""
        prepared = [(key, self._key(key, version), self._pickle(value)) for key, value in data.items()]
        if not prepared:
            return []
        return self._run(
            lambda kv: [key for key, nkey, payload in prepared if not self._set(kv, key, nkey, payload, timeout)]
        )

    def delete_many(self, keys: Iterable[str], version: int | None = None) -> None:
        """Delete every key of ``keys`` (Django's cache API)."""
        nkeys = [self._key(key, version) for key in keys]
        if nkeys:
            self._run(lambda kv: [self._remove(kv, nkey) for nkey in nkeys])

    def clear(self) -> None:
        """Remove every key of the bucket (one purge of its stream: every prefix and version, as Django's
        ``clear`` of any backend empties the whole cache)."""
        self._run(self._clear)

    def _clear(self, kv: KeyValue) -> None:
        kv.jetstream.stream(kv.stream_name).purge()
        # The leader's info once the purge is done: no revision below its first one exists any more (this
        # covers a write of this process that landed between the info above and the purge, which the last
        # revision before the purge would not).
        after = kv.jetstream.stream_info(kv.stream_name)
        _buckets.clear(kv, after.state.first_seq - 1)
