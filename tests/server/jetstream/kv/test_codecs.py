"""A bucket through codecs (CodecKeyValue): every call encodes keys and values and every read decodes them, what
is stored is the plain bucket's keys and bytes (so a handle without codecs, or another client, sees the
encoded form), and what does not decode is a typed error carrying what failed."""

from __future__ import annotations

import msgspec
import pytest

from jetstream_sync import KeyValueOp, errors
from jetstream_sync.codecs import Base64KeyCodec, JsonCodec, KeyCodecChain, MsgspecCodec, PathKeyCodec
from tests.server.jetstream.kv.kvhelpers import bucket, until_none


class Profile(msgspec.Struct):
    name: str
    visits: int = 0


PROFILES = MsgspecCodec(Profile)


def test_writes_and_reads_through_key_and_value_codecs(js, name):
    plain = bucket(js, name, history=5)
    kv = plain.with_codecs(key_codec=KeyCodecChain(PathKeyCodec(), Base64KeyCodec()), value_codec=PROFILES)
    first = kv.put("/users/ann smith", Profile("Ann"))
    kv.create("/users/bob", Profile("Bob"))
    with pytest.raises(errors.KeyExistsError):
        kv.create("/users/bob", Profile("Bob again"))
    kv.update("/users/ann smith", Profile("Ann", visits=1), last=first)
    with pytest.raises(errors.KeyWrongLastSequenceError):
        kv.update("/users/ann smith", Profile("Ann", visits=9), last=first)
    kv.put("/teams/core", Profile("core"))

    entry = kv.get("/users/ann smith")
    assert entry.key == "/users/ann smith" and entry.value == Profile("Ann", visits=1)
    assert entry.raw_key == "X3Jvb3Rf.dXNlcnM.YW5uIHNtaXRo" and entry.data == b'{"name":"Ann","visits":1}'
    assert plain.get("X3Jvb3Rf.dXNlcnM.YW5uIHNtaXRo").value == entry.data  # stored as the plain bucket sees it
    assert kv.get("/users/ann smith", revision=first).value == Profile("Ann")
    assert sorted(kv.keys()) == ["/teams/core", "/users/ann smith", "/users/bob"]
    assert sorted(kv.keys("/users/*")) == ["/users/ann smith", "/users/bob"]
    many = kv.get_many(["/users/bob", "/teams/core", "/nobody"])
    assert {k: e.value.name for k, e in many.items()} == {"/users/bob": "Bob", "/teams/core": "core"}

    kv.delete("/users/bob")
    with pytest.raises(errors.KeyDeletedError):
        kv.get("/users/bob")
    history = kv.history("/users/bob")
    assert [(e.operation, e.value) for e in history] == [(KeyValueOp.PUT, Profile("Bob")), (KeyValueOp.DELETE, None)]
    assert [e.value for e in kv.history("/users/ann smith", meta_only=True)] == [None, None]
    kv.purge("/teams/core")
    assert sorted(kv.keys()) == ["/users/ann smith"]
    assert kv.purge_deletes(older_than=None) == 2  # bob's delete and core's purge: no key to encode
    kv.delete("/users/bob")  # a marker again, for the watch below

    with kv.watch("/users/*") as w:
        initial = until_none(w)
        assert [(e.key, e.operation, e.value) for e in initial] == [
            ("/users/ann smith", KeyValueOp.PUT, Profile("Ann", visits=1)),
            ("/users/bob", KeyValueOp.DELETE, None),
        ]
        kv.put("/users/cy", Profile("Cy"))
        kv.put("/teams/other", Profile("not watched"))
        update = w.next(5)
        assert update.key == "/users/cy" and update.value == Profile("Cy") and w.revision == update.revision
    with kv.watch_all(include_history=True) as w:
        assert [e.key for e in until_none(w)] == [
            "/users/ann smith",
            "/users/ann smith",
            "/users/bob",
            "/users/cy",
            "/teams/other",
        ]


def test_what_does_not_decode_is_a_typed_error(js, name):
    plain = bucket(js, name)
    kv = plain.with_codecs(key_codec=Base64KeyCodec(), value_codec=JsonCodec())
    plain.put("bm90.anNvbg", b"{not json")  # the key "not.json" in base64, a value that is no JSON
    plain.put("plain_key", b"{}")
    entry = kv.get("not.json")
    with pytest.raises(errors.PayloadDecodeError) as bad_value:
        _ = entry.value
    assert bad_value.value.message is entry and "bm90.anNvbg" in str(bad_value.value)
    with pytest.raises(errors.KeyCodecError) as bad_key:
        sorted(kv.keys())
    assert bad_key.value.key == "plain_key"
    with pytest.raises(errors.InvalidTypeError, match="encode_key"):
        plain.with_codecs(key_codec=JsonCodec())  # type: ignore[arg-type]


def test_a_key_codec_without_filters_refuses_wildcards(js, name):
    class Upper:
        def encode_key(self, key: str) -> str:
            return key.upper()

        def decode_key(self, key: str) -> str:
            return key.lower()

    kv = bucket(js, name).with_codecs(key_codec=Upper())
    kv.put("a.b", b"1")
    assert kv.get("a.b").raw_key == "A.B" and kv.get("a.b").value == b"1"
    assert list(kv.keys("a.b")) == ["a.b"]
    with pytest.raises(errors.KeyCodecError, match="encode_filter"):
        kv.watch("a.*")

    class Picky(Upper):
        def decode_key(self, key: str) -> str:
            raise ValueError("no lowercase keys here")

    picky = kv.kv.with_codecs(key_codec=Picky())
    with pytest.raises(errors.KeyCodecError, match="no lowercase keys here") as failed:
        list(picky.keys())
    assert failed.value.key == "A.B" and isinstance(failed.value.__cause__, ValueError)
