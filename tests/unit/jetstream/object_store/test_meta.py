"""The object store's wire format (``_meta``): subjects, names, digests, the metadata JSON."""

from __future__ import annotations

import base64
import hashlib
import json
from datetime import datetime, timezone

import pytest

from jetstream_sync import ObjectInfo, ObjectLink, errors
from jetstream_sync.jetstream.object_store import _meta

# A metadata message as nats.go writes it (json.Marshal of ObjectInfo with a link and headers).
GO_META = (
    b'{"name":"alias","description":"d","headers":{"A":["1","2"]},"metadata":{"m":"v"},'
    b'"options":{"link":{"bucket":"other","name":"target"},"max_chunk_size":65536},'
    b'"bucket":"b","nuid":"NUID123","size":0,"mtime":"0001-01-01T00:00:00Z","chunks":0}'
)


def test_names_are_url_safe_base64_with_padding():
    assert _meta.encode_name("a") == "YQ=="
    assert _meta.encode_name("a/b?") == base64.urlsafe_b64encode(b"a/b?").decode()
    assert "/" not in _meta.encode_name("???>>>") and "+" not in _meta.encode_name(">>>???")
    assert _meta.meta_subject("b", "a") == "$O.b.M.YQ=="
    assert _meta.chunk_subject("b", "N") == "$O.b.C.N"


def test_digest_format_and_matching():
    sha = hashlib.sha256(b"x").digest()
    digest = _meta.digest_of(sha)
    assert digest == "SHA-256=" + base64.urlsafe_b64encode(sha).decode()
    assert _meta.digest_matches(digest, sha)
    assert _meta.digest_matches(digest.rstrip("="), sha)  # unpadded from some other writer
    assert _meta.digest_matches("sha-256=" + digest[8:], sha)
    assert not _meta.digest_matches(_meta.digest_of(hashlib.sha256(b"y").digest()), sha)
    assert not _meta.digest_matches(None, sha)
    assert not _meta.digest_matches("SHA-256=%%%", sha)


def test_decode_go_metadata_with_a_link():
    stored_at = datetime(2026, 1, 2, tzinfo=timezone.utc)
    info = _meta.decode_info(GO_META, "b", stored_at)
    assert info.link == ObjectLink(bucket="other", name="target") and info.is_link
    assert (info.name, info.nuid, info.mtime, info.max_chunk_size) == ("alias", "NUID123", stored_at, 65536)
    assert info.headers == {"A": ["1", "2"]} and info.metadata == {"m": "v"}


def test_decode_nats_py_quirks():
    raw = json.dumps(
        {"name": "n", "bucket": "b", "nuid": "N", "size": 0, "chunks": 0, "digest": "", "deleted": True, "mtime": ""}
    ).encode()
    info = _meta.decode_info(raw, "b", None)
    assert info.deleted and info.digest is None and info.mtime is None
    iso = json.dumps({"name": "n", "nuid": "N", "mtime": "2026-11-23T02:30:00.123456+00:00", "headers": {"K": "v"}})
    info = _meta.decode_info(iso.encode(), "b", None)
    assert info.mtime == datetime(2026, 11, 23, 2, 30, 0, 123456, tzinfo=timezone.utc)
    assert info.headers == {"K": ["v"]} and info.bucket == "b"


def test_round_trip_keeps_unknown_keys():
    raw = json.dumps({"name": "n", "bucket": "b", "nuid": "N", "size": 3, "chunks": 1, "future": {"x": 1}}).encode()
    info = _meta.decode_info(raw, "b", None)
    assert info.extra == {"future": {"x": 1}}
    assert json.loads(_meta.encode_info(info))["future"] == {"x": 1}


def test_encode_writes_go_zero_time_and_omits_empty_fields():
    info = ObjectInfo(name="n", bucket="b", nuid="N", size=0, chunks=0, deleted=True)
    assert json.loads(_meta.encode_info(info)) == {
        "name": "n",
        "bucket": "b",
        "nuid": "N",
        "size": 0,
        "mtime": "0001-01-01T00:00:00Z",
        "chunks": 0,
        "deleted": True,
    }
    link = ObjectInfo(name="l", bucket="b", nuid="N", link=ObjectLink(bucket="o"))
    assert json.loads(_meta.encode_info(link))["options"] == {"link": {"bucket": "o"}}


@pytest.mark.parametrize(
    "data",
    [
        b"{not json",
        b"[1, 2]",
        b'{"name": "n"}',
        b'{"nuid": "N"}',
        b'{"name": "n", "nuid": "N", "options": 3}',
        b'{"name": "n", "nuid": "N", "size": "big"}',
        b"\xff\xfe",
    ],
)
def test_bad_metadata(data):
    with pytest.raises(errors.BadObjectMetaError):
        _meta.decode_info(data, "b", None)


def test_encoding_is_byte_identical_to_go_json_marshal():
    assert _meta.encode_info(_meta.decode_info(GO_META, "b", None)) == GO_META
    # Go escapes <, > and & (and U+2028/9) and writes other characters as UTF-8
    info = ObjectInfo(name="<ü>&\u2028", bucket="b", nuid="N", size=1, chunks=1, digest="SHA-256=x")
    assert _meta.encode_info(info) == (
        b'{"name":"\\u003c\xc3\xbc\\u003e\\u0026\\u2028","bucket":"b","nuid":"N","size":1,'
        b'"mtime":"0001-01-01T00:00:00Z","chunks":1,"digest":"SHA-256=x"}'
    )
    assert json.loads(_meta.encode_info(info))["name"] == "<ü>&\u2028"
