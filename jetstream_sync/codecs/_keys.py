"""KV key codecs (ADR-54): keys a bucket's subjects cannot carry (spaces, paths, any text) stored as keys it can.

A key codec maps the application's key to the stored one and back, ``encode_key`` / ``decode_key``; one that
can also map a filter with ``*`` and ``>`` (for ``watch`` and ``keys``) has ``encode_filter`` (ADR-54's
filterable key codec). The built-ins store what the other clients store:

- [`Base64KeyCodec`][jetstream_sync.codecs.Base64KeyCodec] encodes each dot-separated token, so the key keeps
  its tokens and wildcards still filter. ``Base64KeyCodec()`` is orbit.go's ``kvcodec.Base64Codec`` (URL-safe,
  no padding, UTF-8); ``Base64KeyCodec.natsjs()`` is nats.js's ``Base64KeyCodec`` (the standard alphabet with
  padding, one byte per character as ``btoa``).
- [`PathKeyCodec`][jetstream_sync.codecs.PathKeyCodec] is orbit's ``kvcodec.PathCodec``: ``/a/b`` is stored
  as ``_root_.a.b``.
- [`KeyCodecChain`][jetstream_sync.codecs.KeyCodecChain] applies several in turn (orbit's ``NewKeyChainCodec``).
"""

from __future__ import annotations

import base64
import binascii
from typing import Protocol, runtime_checkable

from ..errors import KeyCodecError

__all__ = ["Base64KeyCodec", "FilterableKeyCodec", "KeyCodec", "KeyCodecChain", "NoOpKeyCodec", "PathKeyCodec"]

_WILDCARDS = frozenset(("*", ">"))
#: orbit's PathCodec stores a leading "/" as this token (a subject cannot start with ".")
ROOT_TOKEN = "_root_"


@runtime_checkable
class KeyCodec(Protocol):
    """Maps an application's keys to stored keys and back (ADR-54 ``KeyCodec``)."""

    def encode_key(self, key: str, /) -> str:
        """The stored key for ``key``."""
        ...

    def decode_key(self, key: str, /) -> str:
        """The application's key for a stored one."""
        ...


@runtime_checkable
class FilterableKeyCodec(KeyCodec, Protocol):
    """A key codec that can also encode a filter, keeping ``*`` and ``>`` as they are (ADR-54)."""

    def encode_filter(self, pattern: str, /) -> str:
        """The stored filter for ``pattern``; wildcards kept."""
        ...


class NoOpKeyCodec:
    """Keys stored as they are: what a bucket without a key codec does."""

    def encode_key(self, key: str, /) -> str:
        """``key`` unchanged."""
        return key

    def decode_key(self, key: str, /) -> str:
        """``key`` unchanged."""
        return key

    def encode_filter(self, pattern: str, /) -> str:
        """``pattern`` unchanged."""
        return pattern

    def __repr__(self) -> str:
        return "NoOpKeyCodec()"


class Base64KeyCodec:
    """Each token of the key in base64, so ``a b.c`` is stored as two tokens and ``*`` / ``>`` in a filter
    stay wildcards (as both orbit.go and nats.js do).

    The default is orbit.go's ``kvcodec.Base64Codec``: URL-safe alphabet, no padding, the text as UTF-8;
    every stored key is a valid key. [`natsjs()`][jetstream_sync.codecs.Base64KeyCodec.natsjs] is nats.js's
    ``Base64KeyCodec``: its ``btoa`` writes the standard alphabet with ``=`` padding and one byte per
    character, so only characters up to U+00FF can be encoded (nats.js cannot either), and a token whose
    base64 holds ``+`` is no valid key in any client (nats.js refuses it too: keep such keys to orbit's form).
    Decoding a wildcard token (the two flavours differ here too) leaves it as it is only in the nats.js form.
    """

    def __init__(self, *, urlsafe: bool = True, padded: bool = False, charset: str = "utf-8") -> None:
        self.urlsafe = urlsafe
        self.padded = padded
        self.charset = charset

    @classmethod
    def natsjs(cls) -> Base64KeyCodec:
        """nats.js's ``Base64KeyCodec()`` (``@nats-io/kv``): standard alphabet, padded, Latin-1 characters."""
        return cls(urlsafe=False, padded=True, charset="latin-1")

    def _encode_token(self, key: str, token: str) -> str:
        try:
            raw = token.encode(self.charset)
        except UnicodeEncodeError as exc:
            raise KeyCodecError(key, f"{exc.object[exc.start]!r} has no {self.charset} byte (nats.js's btoa)") from exc
        out = base64.urlsafe_b64encode(raw) if self.urlsafe else base64.b64encode(raw)
        return (out if self.padded else out.rstrip(b"=")).decode("ascii")

    def _decode_token(self, key: str, token: str) -> str:
        if not self.urlsafe and token in _WILDCARDS:
            return token  # nats.js's decodeKey keeps them
        data = token.encode("ascii", "replace") + b"=" * (-len(token) % 4)
        try:
            raw = base64.b64decode(data, altchars=b"-_" if self.urlsafe else None, validate=True)
            return raw.decode(self.charset)
        except (binascii.Error, UnicodeDecodeError) as exc:
            raise KeyCodecError(key, f"token {token!r} is not base64 of {self.charset} text: {exc}") from exc

    def encode_key(self, key: str, /) -> str:
        """Each token encoded (a nats.js-flavoured codec keeps wildcard tokens here too, as nats.js does)."""
        if not self.urlsafe:
            return self.encode_filter(key)
        return ".".join(self._encode_token(key, t) for t in key.split("."))

    def decode_key(self, key: str, /) -> str:
        """Each token decoded; a token that is not base64 raises KeyCodecError."""
        return ".".join(self._decode_token(key, t) for t in key.split("."))

    def encode_filter(self, pattern: str, /) -> str:
        """Each token encoded except ``*`` and ``>``."""
        return ".".join(t if t in _WILDCARDS else self._encode_token(pattern, t) for t in pattern.split("."))

    def __repr__(self) -> str:
        return f"Base64KeyCodec(urlsafe={self.urlsafe}, padded={self.padded}, charset={self.charset!r})"


class PathKeyCodec:
    """Path-style keys (``users/42/profile``) stored as subjects (``users.42.profile``), as orbit.go's
    ``kvcodec.PathCodec``: a leading ``/`` is the token ``_root_`` (``/`` alone is ``_root_``), a trailing
    ``/`` is dropped. Filters encode the same way, so ``users/*`` watches ``users.*``."""

    def encode_key(self, key: str, /) -> str:
        """The subject form of a path."""
        if key.startswith("/"):
            if key == "/":
                return ROOT_TOKEN
            key = f"{ROOT_TOKEN}.{key[1:]}"
        key = key.removesuffix("/")
        return key.replace("/", ".")

    def decode_key(self, key: str, /) -> str:
        """The path form of a stored key."""
        if key == ROOT_TOKEN:
            return "/"
        if key.startswith(ROOT_TOKEN + "."):
            return "/" + key[len(ROOT_TOKEN) + 1 :].replace(".", "/")
        return key.replace(".", "/")

    def encode_filter(self, pattern: str, /) -> str:
        """A path filter (``users/*``) in subject form."""
        return self.encode_key(pattern)

    def __repr__(self) -> str:
        return "PathKeyCodec()"


class KeyCodecChain:
    """Key codecs in turn: encoding first to last, decoding last to first (orbit's ``NewKeyChainCodec``).
    Filters encode only when every codec in the chain can (else KeyCodecError, as orbit's
    ``ErrWildcardNotSupported``): ``KeyCodecChain(PathKeyCodec(), Base64KeyCodec())``."""

    def __init__(self, first: KeyCodec, *then: KeyCodec) -> None:
        self.codecs: tuple[KeyCodec, ...] = (first, *then)

    def encode_key(self, key: str, /) -> str:
        """``key`` through every codec, first to last."""
        for codec in self.codecs:
            key = codec.encode_key(key)
        return key

    def decode_key(self, key: str, /) -> str:
        """``key`` through every codec, last to first."""
        for codec in reversed(self.codecs):
            key = codec.decode_key(key)
        return key

    def encode_filter(self, pattern: str, /) -> str:
        """``pattern`` through every codec's ``encode_filter``."""
        for i, codec in enumerate(self.codecs):
            if not isinstance(codec, FilterableKeyCodec):
                raise KeyCodecError(pattern, f"codec {i} ({codec!r}) cannot encode a filter with wildcards")
            pattern = codec.encode_filter(pattern)
        return pattern

    def __repr__(self) -> str:
        return f"KeyCodecChain({', '.join(repr(c) for c in self.codecs)})"


def encode_pattern(codec: KeyCodec, pattern: str) -> str:
    """A watch or keys filter through ``codec``, as orbit does: a filterable codec's ``encode_filter`` (it knows
    where its wildcards are: ``/users/*`` is one token to a subject, three to a path codec); any other codec's
    ``encode_key``, refusing a pattern with ``*`` or ``>`` in it. ``>`` alone (every key) needs no codec."""
    if pattern == ">":
        return pattern
    if isinstance(codec, FilterableKeyCodec):
        return codec.encode_filter(pattern)
    if "*" in pattern or ">" in pattern:
        raise KeyCodecError(
            pattern, f"{codec!r} has no encode_filter, so a filter with '*' or '>' cannot be encoded; watch every key"
        )
    return codec.encode_key(pattern)
