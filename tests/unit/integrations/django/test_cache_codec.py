"""KeyValueCache's key and value encodings, without a server: every Django key maps to a valid bucket key and
back, and a stored value carries its expiry ahead of the pickle."""

from __future__ import annotations

import pickle

import pytest

from jetstream_sync.integrations.django.cache import HEADER, decode_key, decode_value, encode_key, encode_value
from jetstream_sync.jetstream.kv._keys import check_key

KEYS = [
    ":1:plain",
    "a.b..c.",
    ".",
    "with space and\ttab\n",
    "=41",
    "ünïcødé 清 🎉",
    "*>$%&'()+,;<>?@[]^`{|}~",
    "\x00\x7f",
    "\ud800",  # a lone surrogate: still a key, and still the same key after the round trip
    "CUSTOM-cacheprefix-1-k",
    "-_/",
]


@pytest.mark.parametrize("key", KEYS)
def test_every_key_encodes_to_a_valid_bucket_key_and_back(key):
    encoded = encode_key(key)
    assert check_key(encoded) == encoded
    assert decode_key(encoded) == key


def test_the_encoding_is_readable_and_keeps_safe_characters():
    assert encode_key(":1:user_42/a-b") == "=3A1=3Auser_42/a-b"
    assert encode_key("a.b") == "a=2Eb"
    assert encode_key("=") == "=3D"
    assert encode_key("é") == "=C3=A9"
    assert len({encode_key(k) for k in KEYS}) == len(KEYS)


@pytest.mark.parametrize("bad", ["=", "=4", "=4g", "=4a", "a.b", "a b", "é"])
def test_decode_refuses_what_encode_never_makes(bad):
    with pytest.raises(ValueError):
        decode_key(bad)


def test_a_value_carries_its_expiry():
    payload = pickle.dumps({"a": 1})
    data = encode_value(payload, 1_900_000_000.25)
    assert data[:1] == b"\x01" and len(data) == HEADER.size + len(payload)
    assert decode_value(data) == (1_900_000_000.25, payload)
    assert decode_value(encode_value(payload, None)) == (None, payload)
    assert decode_value(b"") is None and decode_value(b"\x02" + data[1:]) is None and decode_value(b"\x01abc") is None
