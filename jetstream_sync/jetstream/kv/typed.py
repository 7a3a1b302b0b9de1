"""A bucket read and written through codecs (ADR-54): application keys and objects in, stored keys and bytes out.

[`CodecKeyValue`][jetstream_sync.CodecKeyValue] wraps a [`KeyValue`][jetstream_sync.KeyValue] handle, as orbit.go's
``kvcodec.New`` wraps a nats.go bucket: every call encodes its key with the key codec (a filter with ``*`` or
``>`` through the codec's ``encode_filter``) and its value with the value codec, and hands back
[`CodecEntry`][jetstream_sync.CodecEntry] objects whose ``key`` and ``value`` decode on access. What is stored is
what orbit's ``kvcodec`` and nats.js's KV codecs store, so the three clients share a bucket.

Unlike orbit, which returns the stored key or value when decoding fails (and skips such keys in a listing),
nothing here is passed off silently: a key that does not decode raises KeyCodecError, a value
PayloadDecodeError, each carrying what failed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import datetime, timedelta
from types import TracebackType
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from ...codecs._keys import KeyCodec, NoOpKeyCodec, encode_pattern
from ...codecs._payload import BytesCodec, Codec, check_codec, encode_payload
from ...errors import CodecError, KeyCodecError, PayloadDecodeError
from ...models.kv import KeyValueEntry, KeyValueOp, KeyValueStatus
from .._consistency import ReadMode
from ._keys import DEFAULT_PURGE_DELETES_OLDER_THAN

if TYPE_CHECKING:
    from .bucket import KeyValue
    from .watch import KeyWatcher

__all__ = ["CodecEntry", "CodecKeyValue", "CodecKeyWatcher"]

V = TypeVar("V")


def _through(step: Callable[[str], str], key: str, what: str, codec: KeyCodec) -> str:
    """``step(key)`` (a key codec's work); a user codec's own exception becomes a KeyCodecError naming ``key``."""
    try:
        return step(key)
    except CodecError:
        raise
    except Exception as exc:
        raise KeyCodecError(key, f"{what} with {codec!r}: {type(exc).__name__}: {exc}") from exc


def _encode_key(codec: KeyCodec, key: str) -> str:
    return _through(codec.encode_key, key, "could not encode the key", codec)


def _decode_key(codec: KeyCodec, stored: str) -> str:
    return _through(codec.decode_key, stored, "the stored key does not decode", codec)


def _encode_pattern(codec: KeyCodec, pattern: str) -> str:
    return _through(lambda p: encode_pattern(codec, p), pattern, "could not encode the filter", codec)


class CodecEntry(Generic[V]):
    """One entry of a [`CodecKeyValue`][jetstream_sync.CodecKeyValue]: the stored
    [`KeyValueEntry`][jetstream_sync.models.KeyValueEntry] (``entry``) with its key and value decoded on first
    access. ``value`` is None for a delete or purge marker and for a ``meta_only`` read (they carry no value);
    a value the codec cannot read raises PayloadDecodeError carrying this entry, a key KeyCodecError."""

    __slots__ = ("_codecs", "_has_value", "_key", "_value", "entry")

    _key: str  # unset until ``key`` decoded it (or a get by key set it)
    _value: V  # unset until ``value`` decoded it

    def __init__(self, entry: KeyValueEntry, codecs: CodecKeyValue[V], *, has_value: bool = True) -> None:
        #: the entry as stored (the encoded key, the payload bytes)
        self.entry = entry
        self._codecs = codecs
        self._has_value = has_value and entry.operation is KeyValueOp.PUT

    @property
    def key(self) -> str:
        """The application's key (decoded)."""
        try:
            return self._key
        except AttributeError:
            key = self._key = _decode_key(self._codecs.key_codec, self.entry.key)
            return key

    @property
    def value(self) -> V | None:
        """The decoded value; None for a marker or a ``meta_only`` entry."""
        if not self._has_value:
            return None
        try:
            return self._value
        except AttributeError:
            pass
        codec = self._codecs.value_codec
        try:
            value = codec.decode(self.entry.value)
        except Exception as exc:
            raise PayloadDecodeError(self, codec, exc) from exc
        self._value = value
        return value

    @property
    def bucket(self) -> str:
        """The bucket's name."""
        return self.entry.bucket

    @property
    def raw_key(self) -> str:
        """The key as stored (encoded)."""
        return self.entry.key

    @property
    def data(self) -> bytes:
        """The value as stored (encoded bytes)."""
        return self.entry.value

    @property
    def revision(self) -> int:
        """The entry's revision (its stream sequence)."""
        return self.entry.revision

    @property
    def created(self) -> datetime:
        """When the entry was stored."""
        return self.entry.created

    @property
    def delta(self) -> int:
        """How many newer entries matched the read when this one was delivered."""
        return self.entry.delta

    @property
    def operation(self) -> KeyValueOp:
        """A value (PUT) or a delete/purge marker."""
        return self.entry.operation

    def __repr__(self) -> str:
        return f"CodecEntry(raw_key={self.entry.key!r}, revision={self.revision}, operation={self.operation.value})"


class CodecKeyWatcher(Generic[V]):
    """A [`KeyWatcher`][jetstream_sync.KeyWatcher] handing out [`CodecEntry`][jetstream_sync.CodecEntry] objects
    (and its one ``None`` once the initial values are done). Use it as a context manager."""

    def __init__(self, watcher: KeyWatcher, codecs: CodecKeyValue[V], *, has_value: bool) -> None:
        #: the underlying watcher
        self.watcher = watcher
        self._codecs = codecs
        self._has_value = has_value

    def _wrap(self, entry: KeyValueEntry | None) -> CodecEntry[V] | None:
        return None if entry is None else CodecEntry(entry, self._codecs, has_value=self._has_value)

    def __enter__(self) -> CodecKeyWatcher[V]:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def __iter__(self) -> Iterator[CodecEntry[V] | None]:
        for entry in self.watcher:
            yield self._wrap(entry)

    def next(self, timeout: float | timedelta | None = None) -> CodecEntry[V] | None:
        """The next entry (or the ``None`` that ends the initial values) within ``timeout``; as ``KeyWatcher.next``."""
        return self._wrap(self.watcher.next(timeout))

    @property
    def initial_done(self) -> bool:
        """True once the initial values were handed out."""
        return self.watcher.initial_done

    @property
    def revision(self) -> int:
        """The revision of the last entry handed out."""
        return self.watcher.revision

    def stop(self) -> None:
        """Stop watching (deletes the server-side consumer)."""
        self.watcher.stop()


class CodecKeyValue(Generic[V]):
    """A bucket through a key codec and a value codec (ADR-54), made by
    [`KeyValue.with_codecs`][jetstream_sync.KeyValue.with_codecs]. Thread-safe as the handle it wraps; the codecs
    run on the calling thread.

    Writes take application keys and objects; reads give [`CodecEntry`][jetstream_sync.CodecEntry] objects and
    application keys. Errors are the bucket's, plus KeyCodecError (a key the codec cannot encode, a stored key
    it cannot decode, a wildcard filter it cannot keep) and PayloadEncodeError / PayloadDecodeError.
    """

    def __init__(self, kv: KeyValue, *, key_codec: KeyCodec | None = None, value_codec: Codec[V] | None = None) -> None:
        if key_codec is not None and not (
            callable(getattr(key_codec, "encode_key", None)) and callable(getattr(key_codec, "decode_key", None))
        ):
            from ...errors import InvalidTypeError

            raise InvalidTypeError("key_codec", f"must have encode_key() and decode_key(), got {key_codec!r}")
        check_codec(value_codec, "value_codec")
        #: the plain handle (stored keys, bytes)
        self.kv = kv
        self.key_codec: KeyCodec = key_codec if key_codec is not None else NoOpKeyCodec()
        self.value_codec: Codec[V] = value_codec if value_codec is not None else BytesCodec()  # type: ignore[assignment]

    @property
    def bucket(self) -> str:
        """The bucket's name."""
        return self.kv.bucket

    def __repr__(self) -> str:
        return f"<CodecKeyValue {self.bucket!r} key_codec={self.key_codec!r} value_codec={self.value_codec!r}>"

    def _entry(self, entry: KeyValueEntry, *, has_value: bool = True) -> CodecEntry[V]:
        return CodecEntry(entry, self, has_value=has_value)

    # -- writes -----------------------------------------------------------------------------------------
    def put(self, key: str, value: V, *, ttl: float | timedelta | None = None) -> int:
        """``value`` encoded as ``key``'s newest value; its revision (as ``KeyValue.put``)."""
        stored = _encode_key(self.key_codec, key)
        return self.kv.put(stored, encode_payload(self.value_codec, value), ttl=ttl)

    def create(self, key: str, value: V, *, ttl: float | timedelta | None = None) -> int:
        """``value`` only if ``key`` has no live value; KeyExistsError otherwise (as ``KeyValue.create``)."""
        stored = _encode_key(self.key_codec, key)
        return self.kv.create(stored, encode_payload(self.value_codec, value), ttl=ttl)

    def update(self, key: str, value: V, last: int, *, ttl: float | timedelta | None = None) -> int:
        """``value`` only if ``last`` is still the key's revision (as ``KeyValue.update``)."""
        stored = _encode_key(self.key_codec, key)
        return self.kv.update(stored, encode_payload(self.value_codec, value), last, ttl=ttl)

    def delete(self, key: str, *, last: int | None = None) -> None:
        """Mark ``key`` deleted (as ``KeyValue.delete``)."""
        self.kv.delete(_encode_key(self.key_codec, key), last=last)

    def purge(self, key: str, *, last: int | None = None, ttl: float | timedelta | None = None) -> None:
        """Remove ``key``'s history, leaving a purge marker (as ``KeyValue.purge``)."""
        self.kv.purge(_encode_key(self.key_codec, key), last=last, ttl=ttl)

    def purge_deletes(
        self,
        *,
        older_than: float | timedelta | None = DEFAULT_PURGE_DELETES_OLDER_THAN,
        timeout: float | timedelta | None = None,
    ) -> int:
        """Remove the delete and purge markers and the history behind them (as ``KeyValue.purge_deletes``: no key
        needs encoding, so it is the bucket's own call)."""
        return self.kv.purge_deletes(older_than=older_than, timeout=timeout)

    # -- reads ------------------------------------------------------------------------------------------
    def get(self, key: str, *, revision: int | None = None, read: ReadMode | None = None) -> CodecEntry[V]:
        """``key``'s newest entry (or the one at ``revision``); KeyNotFoundError / KeyDeletedError as
        ``KeyValue.get`` (whose ``entry`` is the stored one)."""
        entry = self.kv.get(_encode_key(self.key_codec, key), revision=revision, read=read)
        typed = self._entry(entry)
        typed._key = key
        return typed

    def get_many(self, keys: Iterable[str], *, read: ReadMode | None = None) -> dict[str, CodecEntry[V]]:
        """The newest entry of each of ``keys`` in one round trip, by application key (as ``KeyValue.get_many``)."""
        if isinstance(keys, str):
            from ...errors import InvalidTypeError

            raise InvalidTypeError("keys", "must be an iterable of keys, not a str; use [key]")
        stored = {_encode_key(self.key_codec, key): key for key in keys}
        out: dict[str, CodecEntry[V]] = {}
        for raw_key, entry in self.kv.get_many(list(stored), read=read).items():
            typed = self._entry(entry)
            typed._key = stored[raw_key]
            out[typed._key] = typed
        return out

    def keys(self, *filters: str, timeout: float | timedelta | None = None) -> Iterator[str]:
        """The application keys with a live value matching any of ``filters`` (encoded with the key codec's
        ``encode_filter`` when they hold wildcards); KeyCodecError for a stored key that does not decode."""
        stored = [_encode_pattern(self.key_codec, f) for f in filters]
        raw = self.kv.keys(*stored, timeout=timeout)
        return (_decode_key(self.key_codec, key) for key in raw)

    def history(
        self,
        key: str,
        *,
        meta_only: bool = False,
        ignore_deletes: bool = False,
        timeout: float | timedelta | None = None,
    ) -> list[CodecEntry[V]]:
        """Every stored entry of ``key``, oldest first (as ``KeyValue.history``)."""
        entries = self.kv.history(
            _encode_key(self.key_codec, key), meta_only=meta_only, ignore_deletes=ignore_deletes, timeout=timeout
        )
        return [self._entry(e, has_value=not meta_only) for e in entries]

    def watch(
        self,
        keys: str | Sequence[str] = ">",
        *,
        include_history: bool = False,
        ignore_deletes: bool = False,
        meta_only: bool = False,
        updates_only: bool = False,
        resume_from_revision: int | None = None,
    ) -> CodecKeyWatcher[V]:
        """Watch ``keys`` (filters in application form, encoded as ``keys`` encodes them); the options as
        [`KeyValue.watch`][jetstream_sync.KeyValue.watch]."""
        filters = [keys] if isinstance(keys, str) else list(keys)
        watcher = self.kv.watch(
            [_encode_pattern(self.key_codec, f) for f in filters],
            include_history=include_history,
            ignore_deletes=ignore_deletes,
            meta_only=meta_only,
            updates_only=updates_only,
            resume_from_revision=resume_from_revision,
        )
        return CodecKeyWatcher(watcher, self, has_value=not meta_only)

    def watch_all(self, **options: Any) -> CodecKeyWatcher[V]:
        """[`watch`][jetstream_sync.CodecKeyValue.watch] of every key."""
        return self.watch(">", **options)

    def status(self) -> KeyValueStatus:
        """The bucket's state (as ``KeyValue.status``)."""
        return self.kv.status()
