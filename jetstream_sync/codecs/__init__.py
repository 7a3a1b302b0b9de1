"""Typed payloads: codecs that turn objects into payloads and back, and KV key codecs (ADR-54).

Pass a codec to a publish (``js.publish(subject, order, codec=codec)``) and to a read (``consume``,
``messages``, ``fetch``, ``next``: ``codec=codec``); a message read with one decodes on first access of
``msg.value``, so a payload that does not decode raises
[`PayloadDecodeError`][jetstream_sync.errors.PayloadDecodeError] inside the handler, where the message can
still be nak'd or terminated. A bucket takes a key codec and a value codec
(``js.key_value(name).with_codecs(key_codec=..., value_codec=...)``) that store what orbit.go's ``kvcodec`` and
nats.js's KV codecs store. The Typed payloads guide shows each.
"""

from ._keys import Base64KeyCodec, FilterableKeyCodec, KeyCodec, KeyCodecChain, NoOpKeyCodec, PathKeyCodec
from ._payload import (
    Base64Codec,
    BytesCodec,
    Codec,
    CodecChain,
    JsonCodec,
    MsgpackCodec,
    MsgspecCodec,
    PydanticCodec,
    TextCodec,
)

__all__ = [
    "Base64Codec",
    "Base64KeyCodec",
    "BytesCodec",
    "Codec",
    "CodecChain",
    "FilterableKeyCodec",
    "JsonCodec",
    "KeyCodec",
    "KeyCodecChain",
    "MsgpackCodec",
    "MsgspecCodec",
    "NoOpKeyCodec",
    "PathKeyCodec",
    "PydanticCodec",
    "TextCodec",
]
