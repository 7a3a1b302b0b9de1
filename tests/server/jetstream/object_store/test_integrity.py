"""The wire format on the stream, and what a read does when the stream no longer matches the metadata."""

from __future__ import annotations

import json
import time

import pytest

from jetstream_sync import ObjectMeta, errors

from .obshelpers import CHUNK, chunks_on, digest, meta_subject, replace_chunk


def test_metadata_message_is_what_nats_go_writes(js, obs):
    info = obs.put("dir/ü name", b"hello", meta=ObjectMeta(description="d", headers={"A": "b"}, metadata={"m": "1"}))
    stored = js.stream(obs.stream_name).get_last_msg(meta_subject(obs, "dir/ü name"))
    assert stored.headers["Nats-Rollup"] == "sub"
    assert json.loads(stored.data) == {
        "name": "dir/ü name",
        "description": "d",
        "headers": {"A": ["b"]},
        "metadata": {"m": "1"},
        "options": {"max_chunk_size": 131072},
        "bucket": obs.bucket,
        "nuid": info.nuid,
        "size": 5,
        "mtime": "0001-01-01T00:00:00Z",
        "chunks": 1,
        "digest": digest(b"hello"),
    }
    assert list(json.loads(stored.data)) == [  # nats.go's field order
        "name",
        "description",
        "headers",
        "metadata",
        "options",
        "bucket",
        "nuid",
        "size",
        "mtime",
        "chunks",
        "digest",
    ]
    chunk = chunks_on(js, obs, info.nuid)
    assert [c.data for c in chunk] == [b"hello"] and chunk[0].subject == f"$O.{obs.bucket}.C.{info.nuid}"
    assert len(info.nuid) == 22  # a NUID, as nats.go's


def test_names_are_padded_url_safe_base64(js, obs):
    obs.put("a", b"1")  # base64 of "a" is "YQ==": the subject keeps the padding, as nats.go's URLEncoding
    assert js.stream(obs.stream_name).get_last_msg(f"$O.{obs.bucket}.M.YQ==").subject.endswith("YQ==")
    obs.put("??>", b"2")  # "Pz8+" in standard base64: URL-safe gives "Pz8-"
    assert js.stream(obs.stream_name).get_last_msg(f"$O.{obs.bucket}.M.Pz8-").seq > 0


def test_a_rewritten_chunk_raises_digest_mismatch_at_eof(js, obs):
    data = b"a" * 300_000
    info = obs.put("x", data)
    replace_chunk(js, obs, info, 1, b"b" * CHUNK)  # same total size, other bytes, other order
    with obs.get("x") as r:
        assert r.read(CHUNK) == data[:CHUNK]  # data is handed out as it comes; the check is at the end
        with pytest.raises(errors.DigestMismatchError):
            while r.read(2048):
                pass
        with pytest.raises(errors.DigestMismatchError):
            r.read(1)  # the error stays: reading again does not pass for a clean end


def test_same_size_other_bytes_in_the_last_chunk(js, obs):
    data = bytes(range(256)) * 1100  # 281,600 bytes: 3 chunks
    info = obs.put("x", data)
    last = data[2 * CHUNK :]
    replace_chunk(js, obs, info, 2, bytes(reversed(last)))  # order and size intact, content not
    with pytest.raises(errors.DigestMismatchError, match="do not match"):
        obs.get_bytes("x")


def test_a_lost_chunk_raises_digest_mismatch(js, obs):
    info = obs.put("x", b"a" * 300_000)
    js.stream(obs.stream_name).delete_msg(chunks_on(js, obs, info.nuid)[0].seq)
    with pytest.raises(errors.DigestMismatchError):
        obs.get_bytes("x")


def test_all_chunks_lost_raises_digest_mismatch_not_a_hang(js, obs):
    info = obs.put("x", b"a" * 300_000)
    js.stream(obs.stream_name).purge(subject=f"$O.{obs.bucket}.C.{info.nuid}")
    with obs.get("x", timeout=10) as r, pytest.raises(errors.DigestMismatchError):
        r.read()


def test_a_wrong_recorded_digest_raises(js, obs):
    info = obs.put("x", b"data")
    body = json.loads(js.stream(obs.stream_name).get_last_msg(meta_subject(obs, "x")).data)
    body["digest"] = digest(b"other")
    js.publish(meta_subject(obs, "x"), json.dumps(body).encode(), {"Nats-Rollup": "sub"})
    assert obs.info("x").nuid == info.nuid
    with pytest.raises(errors.DigestMismatchError):
        obs.get_bytes("x")


def test_chunks_purged_under_an_open_reader_end_the_read_at_once(js, obs):
    """The reader's consumer got some chunks; the rest vanish before delivery (a raw purge: the metadata does
    not change, so it is no replace). The read ends with DigestMismatchError within a second or so, not after
    the 30 s chunk timeout."""
    info = obs.put("x", b"z" * (20 * CHUNK))
    with obs.get("x") as r:
        assert r.read(10) == b"z" * 10
        js.stream(obs.stream_name).purge(subject=f"$O.{obs.bucket}.C.{info.nuid}")
        started = time.monotonic()
        with pytest.raises(errors.DigestMismatchError, match="a chunk was lost or changed"):
            r.read()
        assert time.monotonic() - started < 10
