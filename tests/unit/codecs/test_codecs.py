"""The codecs alone: round trips, what each writes (orbit.go's kvcodec and nats.js's KV codec vectors, taken
from their test files and documentation), typed errors for what does not encode or decode, and the error
that names the extra to install when a codec's package is missing."""

from __future__ import annotations

import sys

import msgspec
import pydantic
import pytest

from jetstream_sync import errors
from jetstream_sync.codecs import (
    Base64Codec,
    Base64KeyCodec,
    BytesCodec,
    Codec,
    CodecChain,
    JsonCodec,
    KeyCodecChain,
    MsgpackCodec,
    MsgspecCodec,
    NoOpKeyCodec,
    PathKeyCodec,
    PydanticCodec,
    TextCodec,
)
from jetstream_sync.codecs._keys import encode_pattern
from jetstream_sync.message import Msg


class Point(msgspec.Struct):
    x: int
    y: int


class User(pydantic.BaseModel):
    name: str
    age: int


@pytest.mark.parametrize(
    ("codec", "value"),
    [
        (BytesCodec(), b"\x00\xff"),
        (TextCodec(), "grüße"),
        (JsonCodec(), {"a": [1, 2.5, None, "é"]}),
        (MsgpackCodec(), {"a": [1, b"\x00"], "s": "x"}),
        (MsgspecCodec(Point), Point(1, 2)),
        (MsgspecCodec(Point, format="msgpack"), Point(3, 4)),
        (PydanticCodec(User), User(name="ann", age=3)),
        (PydanticCodec(list[int]), [1, 2]),
        (Base64Codec(), b"\xfb\xff binary"),
        (Base64Codec(urlsafe=False, padded=True), b"\xfb\xff"),
        (CodecChain(JsonCodec(), Base64Codec()), {"k": "v"}),
    ],
    ids=repr,
)
def test_round_trip(codec, value):
    assert isinstance(codec, Codec)
    data = codec.encode(value)
    assert type(data) is bytes
    assert codec.decode(data) == value


def test_what_the_codecs_write():
    assert JsonCodec().encode({"a": 1, "b": "é"}) == '{"a":1,"b":"é"}'.encode()  # compact, as JSON.stringify
    assert MsgspecCodec(Point).encode(Point(1, 2)) == b'{"x":1,"y":2}'
    assert Base64Codec().encode(b"\xfb\xff") == b"-_8"  # orbit's RawURLEncoding
    assert Base64Codec(urlsafe=False, padded=True).encode(b"\xfb\xff") == b"+/8="
    assert CodecChain(TextCodec(), Base64Codec()).encode("hi") == b"aGk"
    assert CodecChain(JsonCodec(), Base64Codec()).content_type == Base64Codec.content_type


@pytest.mark.parametrize(
    ("codec", "payload", "cause"),
    [
        (JsonCodec(), b"{nope", ValueError),
        (MsgspecCodec(Point), b'{"x": "one", "y": 2}', msgspec.ValidationError),
        (PydanticCodec(User), b'{"name": "ann"}', pydantic.ValidationError),
        (MsgpackCodec(), b"\xc1", ValueError),
        (Base64Codec(), b"not*base64", ValueError),
        (TextCodec(), b"\xff", UnicodeDecodeError),
    ],
    ids=repr,
)
def test_a_payload_that_does_not_decode_is_a_typed_error_carrying_the_message(codec, payload, cause):
    msg = Msg("orders.1", "", payload, None, None)
    msg._codec = codec
    with pytest.raises(errors.PayloadDecodeError) as failed:
        _ = msg.value
    assert failed.value.message is msg and failed.value.codec is codec
    assert isinstance(failed.value.__cause__, cause)
    assert "orders.1" in str(failed.value) and "nak()" in str(failed.value)


def test_value_is_decoded_once():
    msg = Msg("s", "", b"[1]", None, None)
    msg._codec = JsonCodec()
    assert msg.value is msg.value


def test_a_missing_extra_is_named(monkeypatch):
    for module in ("msgspec", "msgspec.json", "msgpack", "pydantic"):
        monkeypatch.setitem(sys.modules, module, None)  # what an absent package looks like to import
    for make, extra in (
        (lambda: MsgspecCodec(Point), "msgspec"),
        (MsgpackCodec, "msgpack"),
        (lambda: PydanticCodec(User), "pydantic"),
    ):
        with pytest.raises(errors.CodecExtraMissingError) as missing:
            make()
        assert missing.value.extra == extra and f"jetstream-sync[{extra}]" in str(missing.value)
        assert isinstance(missing.value, ImportError)


def test_msgspec_format_is_checked():
    with pytest.raises(errors.InvalidArgumentError, match="format"):
        MsgspecCodec(Point, format="yaml")  # type: ignore[arg-type]


# -- KV key codecs: orbit.go kvcodec (codec_test.go) and nats.js @nats-io/kv (types.d.ts) vectors -------------


def test_orbit_base64_key_codec_vectors():
    codec = Base64KeyCodec()
    key = "test.key.with.special.chars!@#$%^&*()"
    assert codec.encode_key(key) == "dGVzdA.a2V5.d2l0aA.c3BlY2lhbA.Y2hhcnMhQCMkJV4mKigp"
    assert codec.decode_key("dGVzdA.a2V5.d2l0aA.c3BlY2lhbA.Y2hhcnMhQCMkJV4mKigp") == key
    assert codec.encode_filter("user.123") == "dXNlcg.MTIz"
    assert codec.encode_filter("user.*") == "dXNlcg.*"
    assert codec.encode_filter("user.>") == "dXNlcg.>"
    assert codec.encode_filter("app.*.config.>") == "YXBw.*.Y29uZmln.>"
    assert codec.decode_key(codec.encode_key("Acme Inc.contact ünïcode")) == "Acme Inc.contact ünïcode"


def test_natsjs_base64_key_codec_vectors():
    codec = Base64KeyCodec.natsjs()
    assert codec.encode_key("users.john.profile") == "dXNlcnM=.am9obg==.cHJvZmlsZQ=="
    assert codec.encode_key("users.*.profile") == "dXNlcnM=.*.cHJvZmlsZQ=="
    assert codec.decode_key("dXNlcnM=.am9obg==.cHJvZmlsZQ==") == "users.john.profile"
    assert codec.encode_key("café") == "Y2Fm6Q=="  # btoa: one byte per character (Latin-1)
    with pytest.raises(errors.KeyCodecError, match="latin-1"):
        codec.encode_key("€uro")  # btoa throws on it too


@pytest.mark.parametrize(
    ("path", "stored", "back"),
    [
        ("/foo/bar", "_root_.foo.bar", "/foo/bar"),
        ("foo/bar", "foo.bar", "foo/bar"),
        ("/foo/bar/baz/qux", "_root_.foo.bar.baz.qux", "/foo/bar/baz/qux"),
        ("/foo", "_root_.foo", "/foo"),
        ("foo/bar/", "foo.bar", "foo/bar"),
        ("/", "_root_", "/"),
        ("/foo/bar/", "_root_.foo.bar", "/foo/bar"),
    ],
)
def test_orbit_path_key_codec_vectors(path, stored, back):
    codec = PathKeyCodec()
    assert codec.encode_key(path) == stored
    assert codec.decode_key(stored) == back


def test_path_filters_and_chains():
    assert PathKeyCodec().encode_filter("/app/*/config/>") == "_root_.app.*.config.>"
    chain = KeyCodecChain(PathKeyCodec(), Base64KeyCodec())
    assert chain.encode_key("/users/ann b") == "X3Jvb3Rf.dXNlcnM.YW5uIGI"
    assert chain.decode_key("X3Jvb3Rf.dXNlcnM.YW5uIGI") == "/users/ann b"
    assert chain.encode_filter("/users/*") == "X3Jvb3Rf.dXNlcnM.*"


class _Reverse:
    """A key codec without encode_filter (as ADR-54 allows)."""

    def encode_key(self, key: str) -> str:
        return key[::-1]

    def decode_key(self, key: str) -> str:
        return key[::-1]


def test_a_wildcard_filter_needs_a_filterable_codec():
    assert encode_pattern(_Reverse(), "ab.cd") == "dc.ba"
    with pytest.raises(errors.KeyCodecError, match="encode_filter"):
        encode_pattern(_Reverse(), "ab.*")
    with pytest.raises(errors.KeyCodecError, match="codec 1"):
        KeyCodecChain(NoOpKeyCodec(), _Reverse()).encode_filter("a.>")


def test_a_stored_key_that_is_not_base64_is_a_typed_error():
    with pytest.raises(errors.KeyCodecError, match="not base64"):
        Base64KeyCodec().decode_key("plain key!")


def test_importing_the_library_imports_no_optional_codec_package():
    import subprocess

    code = (
        "import sys, jetstream_sync, jetstream_sync.codecs; "
        "print(sorted(m for m in ('msgspec', 'msgpack', 'pydantic') if m in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert result.stdout.strip() == "[]"
