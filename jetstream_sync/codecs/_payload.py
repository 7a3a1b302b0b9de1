"""Payload codecs: objects to bytes on publish, bytes to objects on read.

A codec is anything with ``encode(obj) -> bytes``, ``decode(bytes) -> obj`` and a ``content_type`` (the
[`Codec`][jetstream_sync.codecs.Codec] protocol), so a user's own serializer needs no base class. The
built-ins cover the stdlib (JSON, UTF-8 text, raw bytes, base64) and three optional packages (msgpack,
msgspec, pydantic), each imported only when its codec is made: the library itself imports none of them.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable
from typing import Any, Generic, Literal, Protocol, TypeVar, runtime_checkable

from ..errors import CodecExtraMissingError, PayloadEncodeError

__all__ = [
    "Base64Codec",
    "BytesCodec",
    "Codec",
    "CodecChain",
    "JsonCodec",
    "MsgpackCodec",
    "MsgspecCodec",
    "PydanticCodec",
    "TextCodec",
]

T = TypeVar("T")
M = TypeVar("M")


@runtime_checkable
class Codec(Protocol[T]):
    """What turns a ``T`` into a payload and back. ``decode`` may raise anything: the library wraps it in a
    PayloadDecodeError that carries the message (so a handler can still nak or term it); ``encode`` likewise
    in a PayloadEncodeError. The built-ins also have ``content_type``, a MIME type for a ``Content-Type``
    header if an application wants one (the library sends none by itself)."""

    def encode(self, obj: T, /) -> bytes:
        """The payload for ``obj``."""
        ...

    def decode(self, data: bytes, /) -> T:
        """The object a payload holds."""
        ...


def check_codec(codec: object, field: str = "codec") -> None:
    """Refuse what is no codec before anything is sent or read (a class instead of an instance is the usual
    slip); None (no codec) passes."""
    from ..errors import InvalidTypeError

    if codec is None:
        return
    if isinstance(codec, type):
        raise InvalidTypeError(field, f"pass a codec instance ({codec.__name__}(...)), not the class")
    if not (callable(getattr(codec, "encode", None)) and callable(getattr(codec, "decode", None))):
        raise InvalidTypeError(
            field, f"must have encode() and decode() (a jetstream_sync.codecs.Codec), got {type(codec).__name__}"
        )


def encode_payload(codec: Codec[Any], obj: object) -> bytes:
    """``obj`` through ``codec`` for a publish; PayloadEncodeError (nothing sent) when the codec refuses it."""
    check_codec(codec)
    try:
        data: object = codec.encode(obj)  # a user's codec may return anything
    except Exception as exc:
        raise PayloadEncodeError(obj, codec, exc) from exc
    if type(data) is not bytes:
        if not isinstance(data, (bytearray, memoryview)):
            from ..errors import InvalidTypeError

            raise InvalidTypeError("codec", f"{codec!r}.encode returned a {type(data).__name__}, not bytes")
        data = bytes(data)
    return data


def payload_of(data: object, codec: Codec[Any] | None) -> bytes:
    """What a publish given ``data`` and ``codec=`` sends: ``data`` itself without a codec (its type is checked
    with the message, as always), else ``data`` encoded."""
    if codec is None:
        return data  # type: ignore[return-value]  # prepare_message checks it is bytes-like
    return encode_payload(codec, data)


def _require(codec: str, module: str, extra: str) -> Any:
    """Import an optional package for a codec, or say which extra brings it."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise CodecExtraMissingError(codec, module.split(".", maxsplit=1)[0], extra) from exc


class BytesCodec:
    """The payload as it is: ``bytes`` in, ``bytes`` out (a ``bytearray`` or ``memoryview`` is copied to bytes)."""

    content_type = "application/octet-stream"

    def encode(self, obj: bytes, /) -> bytes:
        """``obj`` as bytes."""
        return obj if type(obj) is bytes else bytes(obj)

    def decode(self, data: bytes, /) -> bytes:
        """``data`` unchanged."""
        return data

    def __repr__(self) -> str:
        return "BytesCodec()"


class TextCodec:
    """``str`` as UTF-8 (or ``encoding``): nats.js's ``entry.string()``, nats.go's ``string(data)``."""

    content_type = "text/plain; charset=utf-8"

    def __init__(self, encoding: str = "utf-8") -> None:
        self.encoding = encoding
        if encoding.lower().replace("_", "-") not in ("utf-8", "utf8"):
            self.content_type = f"text/plain; charset={encoding}"

    def encode(self, obj: str, /) -> bytes:
        """``obj`` encoded."""
        return obj.encode(self.encoding)

    def decode(self, data: bytes, /) -> str:
        """``data`` decoded; a byte the encoding does not allow raises (and becomes a PayloadDecodeError)."""
        return data.decode(self.encoding)

    def __repr__(self) -> str:
        return f"TextCodec({self.encoding!r})"


class JsonCodec:
    """JSON with the standard library: compact (no spaces), UTF-8, what nats.js's ``entry.json()`` and
    ``JSON.stringify`` read and write. ``default`` converts objects JSON does not know (as ``json.dumps``),
    ``object_hook`` builds objects from decoded dicts (as ``json.loads``)."""

    content_type = "application/json"

    def __init__(
        self,
        *,
        default: Callable[[Any], Any] | None = None,
        object_hook: Callable[[dict[str, Any]], Any] | None = None,
    ) -> None:
        self._encoder = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, default=default)
        self._decoder = json.JSONDecoder(object_hook=object_hook)

    def encode(self, obj: Any, /) -> bytes:
        """``obj`` as JSON text in UTF-8."""
        return self._encoder.encode(obj).encode()

    def decode(self, data: bytes, /) -> Any:
        """The JSON value in ``data``."""
        return self._decoder.decode(data.decode())

    def __repr__(self) -> str:
        return "JsonCodec()"


class MsgpackCodec:
    """MessagePack with the ``msgpack`` package (the ``msgpack`` extra): dicts, lists, strings, numbers and
    bytes, smaller and faster than JSON. Strings decode as ``str`` and binary as ``bytes`` (msgpack's
    ``raw=False``), which is what the other languages' msgpack libraries write."""

    content_type = "application/msgpack"

    def __init__(self) -> None:
        msgpack = _require("MsgpackCodec", "msgpack", "msgpack")
        self._packb: Callable[[Any], bytes] = msgpack.Packer(use_bin_type=True).pack
        self._unpackb: Callable[..., Any] = msgpack.unpackb

    def encode(self, obj: Any, /) -> bytes:
        """``obj`` packed."""
        return self._packb(obj)

    def decode(self, data: bytes, /) -> Any:
        """The value packed in ``data`` (exactly one: trailing bytes are an error)."""
        return self._unpackb(data, raw=False)

    def __repr__(self) -> str:
        return "MsgpackCodec()"


class MsgspecCodec(Generic[T]):
    """Typed messages with ``msgspec`` (the ``msgspec`` extra): ``type`` is a ``msgspec.Struct`` (or any type
    msgspec handles: a dataclass, ``list[int]``...); decoding validates against it, so a payload of the wrong
    shape is a PayloadDecodeError, not a half-filled object. ``format`` is ``"json"`` (the default) or
    ``"msgpack"``. The fastest of the typed codecs: the encoder and decoder are made once, here."""

    def __init__(self, type: type[T], *, format: Literal["json", "msgpack"] = "json") -> None:  # noqa: A002
        if format not in ("json", "msgpack"):
            from ..errors import InvalidArgumentError

            raise InvalidArgumentError("format", f"must be 'json' or 'msgpack', got {format!r}")
        module = _require("MsgspecCodec", f"msgspec.{format}", "msgspec")
        self.type = type
        self.format = format
        self.content_type = "application/json" if format == "json" else "application/msgpack"
        self._encode: Callable[[Any], bytes] = module.Encoder().encode
        self._decode: Callable[[bytes], T] = module.Decoder(type).decode

    def encode(self, obj: T, /) -> bytes:
        """``obj`` serialized."""
        return self._encode(obj)

    def decode(self, data: bytes, /) -> T:
        """A ``type`` read and validated from ``data``."""
        return self._decode(data)

    def __repr__(self) -> str:
        return f"MsgspecCodec({getattr(self.type, '__name__', self.type)!r}, format={self.format!r})"


class PydanticCodec(Generic[M]):
    """Models of ``pydantic`` v2 (the ``pydantic`` extra) as JSON: ``model`` is a ``BaseModel`` subclass (or
    any type pydantic validates, through a ``TypeAdapter``); decoding validates, so a payload that does not
    fit the model is a PayloadDecodeError carrying pydantic's ``ValidationError`` as its cause."""

    content_type = "application/json"

    def __init__(self, model: type[M]) -> None:
        pydantic = _require("PydanticCodec", "pydantic", "pydantic")
        self.model = model
        adapter = pydantic.TypeAdapter(model)
        self._dump: Callable[[Any], bytes] = adapter.dump_json
        self._validate: Callable[[bytes], M] = adapter.validate_json

    def encode(self, obj: M, /) -> bytes:
        """``obj`` as JSON (pydantic's serializer: aliases and custom serializers apply)."""
        return self._dump(obj)

    def decode(self, data: bytes, /) -> M:
        """A validated ``model`` from JSON."""
        return self._validate(data)

    def __repr__(self) -> str:
        return f"PydanticCodec({getattr(self.model, '__name__', self.model)!r})"


class Base64Codec:
    """Bytes as base64 text, as orbit.go's ``kvcodec.Base64Codec`` writes values: the URL-safe alphabet
    without padding by default (``urlsafe=False, padded=True`` is the standard alphabet with ``=``). For a
    payload that must stay printable; chain it after a codec that makes bytes (``CodecChain``)."""

    content_type = "text/plain; charset=us-ascii"

    def __init__(self, *, urlsafe: bool = True, padded: bool = False) -> None:
        self.urlsafe = urlsafe
        self.padded = padded

    def encode(self, obj: bytes, /) -> bytes:
        """``obj`` in base64."""
        out = base64.urlsafe_b64encode(obj) if self.urlsafe else base64.b64encode(obj)
        return out if self.padded else out.rstrip(b"=")

    def decode(self, data: bytes, /) -> bytes:
        """The bytes a base64 text holds; padding is optional, characters outside the alphabet are an error."""
        padded = data + b"=" * (-len(data) % 4)
        try:
            if self.urlsafe:
                return base64.b64decode(padded, altchars=b"-_", validate=True)
            return base64.b64decode(padded, validate=True)
        except binascii.Error as exc:
            raise ValueError(f"not base64: {exc}") from exc

    def __repr__(self) -> str:
        return f"Base64Codec(urlsafe={self.urlsafe}, padded={self.padded})"


class CodecChain(Generic[T]):
    """Codecs applied in turn (ADR-54's chains): ``encode`` runs the first, then feeds its bytes to the next;
    ``decode`` runs them in reverse. The first turns the object into bytes, the rest transform bytes
    (base64, compression, encryption): ``CodecChain(JsonCodec(), Base64Codec())``."""

    def __init__(self, first: Codec[T], *then: Codec[bytes]) -> None:
        self.codecs: tuple[Codec[Any], ...] = (first, *then)
        last: object = then[-1] if then else first
        self.content_type: str = getattr(last, "content_type", BytesCodec.content_type)

    def encode(self, obj: T, /) -> bytes:
        """``obj`` through every codec, first to last."""
        data: Any = obj
        for codec in self.codecs:
            data = codec.encode(data)
        return bytes(data)

    def decode(self, data: bytes, /) -> T:
        """``data`` through every codec, last to first."""
        value: Any = data
        for codec in reversed(self.codecs):
            value = codec.decode(value)
        return value  # type: ignore[no-any-return]

    def __repr__(self) -> str:
        return f"CodecChain({', '.join(repr(c) for c in self.codecs)})"
