"""put from every kind of source, get as a file object, get_bytes, put_file and get_file, object names."""

from __future__ import annotations

import io
import os
import shutil
import stat

import pytest

import jetstream_sync
from jetstream_sync import ObjectMeta, ObjectStoreConfig, errors
from jetstream_sync.testing import EmbeddedServer

from .obshelpers import CHUNK, chunk_messages, chunks_on, digest, replace_chunk


def test_put_bytes_and_read_back(obs):
    data = bytes(range(256)) * 2000  # 512,000 bytes: 4 chunks of 128 KiB (the last one short)
    info = obs.put("2026/q3.pdf", data, meta=ObjectMeta(description="Q3", headers={"Content-Type": "application/pdf"}))
    assert (info.name, info.bucket, info.size, info.chunks) == ("2026/q3.pdf", obs.bucket, len(data), 4)
    assert info.digest == digest(data)
    assert (info.description, info.headers) == ("Q3", {"Content-Type": ["application/pdf"]})
    assert info.max_chunk_size == CHUNK and info.mtime is not None and not info.deleted
    assert obs.get_bytes("2026/q3.pdf") == data
    stored = obs.info("2026/q3.pdf")
    assert (stored.nuid, stored.digest, stored.size, stored.description) == (info.nuid, info.digest, len(data), "Q3")
    assert stored.mtime is not None


def test_put_from_file_object_iterable_and_generator(obs):
    data = b"abcdefghij" * 50_000
    assert obs.put("file", io.BytesIO(data)).size == len(data)
    assert obs.put("list", [data[:7], data[7:300_000], data[300_000:]]).size == len(data)
    assert obs.put("gen", (data[i : i + 999] for i in range(0, len(data), 999))).size == len(data)
    assert obs.put("bytearray", bytearray(data)).size == len(data)
    assert obs.put("memoryview", memoryview(data)).size == len(data)
    for name in ("file", "list", "gen", "bytearray", "memoryview"):
        assert obs.get_bytes(name) == data
        info = obs.info(name)
        assert (info.digest, info.chunks) == (digest(data), 4)


def test_reader_read_readinto_read1_and_copyfileobj(obs):
    data = b"line one\nline two\n" + b"x" * 300_000 + b"\nend"
    info = obs.put("text", data)
    with obs.get("text") as r:
        assert r.readable() and not r.seekable() and r.info.nuid == info.nuid
        assert r.read(9) == b"line one\n"
        buf = bytearray(9)
        assert r.readinto(buf) == 9 and bytes(buf) == b"line two\n"
        rest = io.BytesIO()
        shutil.copyfileobj(r, rest)
        assert rest.getvalue() == data[18:]
        assert r.read(10) == b"" and r.bytes_read == len(data)
    with obs.get("text") as r:
        assert r.read() == data
    with obs.get("text") as r:
        assert r.read(200_000) == data[:200_000]  # spans chunks: a read returns all it was asked for
        assert r.read1(1_000_000) == data[200_000 : 2 * CHUNK]  # at most the rest of the chunk at hand
        rest = bytearray(100_000)
        assert r.readinto(rest) == len(data) - 2 * CHUNK  # fewer only at the end
        assert bytes(rest[: len(data) - 2 * CHUNK]) == data[2 * CHUNK :]
        assert r.readinto(rest) == 0
    with pytest.raises(ValueError, match="closed"):  # a closed file raises ValueError, as every io object does
        r.read(1)


def test_reader_lines_peek_and_iteration(obs):
    lines = [b"%06d some text\n" % i for i in range(30_000)]  # 540,000 bytes over 5 chunks
    data = b"".join(lines)
    obs.put("lines", data)
    with obs.get("lines") as r:
        assert r.peek().startswith(b"000000 some text\n") and len(r.peek()) == CHUNK  # the chunk at hand
        assert r.readline() == lines[0]
        assert list(r) == lines[1:]  # lines across chunk boundaries come whole
        assert r.peek() == b""
    with obs.get("lines") as r:
        assert r.readlines() == lines


def test_small_chunks_from_meta(obs):
    data = bytes(range(100)) * 10
    info = obs.put("small", data, meta=ObjectMeta(max_chunk_size=64))
    assert (info.chunks, info.max_chunk_size) == (16, 64)
    assert obs.info("small").max_chunk_size == 64
    assert obs.get_bytes("small") == data


def test_chunk_larger_than_max_payload_is_refused_before_sending(js, obs):
    with pytest.raises(errors.InvalidArgumentError, match="max_payload"):
        obs.put("big", b"x" * 10, meta=ObjectMeta(max_chunk_size=64 * 1024 * 1024))
    assert js.stream_info(obs.stream_name).state.messages == 0


def test_empty_object(obs):
    info = obs.put("empty", b"")
    assert (info.size, info.chunks, info.digest) == (0, 0, digest(b""))
    assert obs.get_bytes("empty") == b""
    with obs.get("empty") as r:
        assert r.read(10) == b"" and r.read() == b""
    assert obs.put("empty-gen", iter([])).size == 0


def test_put_file_and_get_file(obs, tmp_path):
    src = tmp_path / "in.bin"
    data = bytes(range(256)) * 1500
    src.write_bytes(data)
    put = obs.put_file("in", src, meta=ObjectMeta(description="file"))
    assert put.size == len(data) and put.digest == digest(data)
    target = tmp_path / "out" / "copy.bin"
    target.parent.mkdir()
    info = obs.get_file("in", target)
    assert target.read_bytes() == data
    assert info.description == "file" and info.nuid == put.nuid
    assert list(target.parent.iterdir()) == [target]  # the temporary file was renamed, nothing left behind


def test_get_file_permissions_are_those_open_would_give(obs, tmp_path):
    obs.put("x", b"data")
    umask = os.umask(0o022)
    os.umask(umask)
    fresh = tmp_path / "fresh.bin"
    obs.get_file("x", fresh)
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o666 & ~umask  # not mkstemp's 0600
    kept = tmp_path / "kept.bin"
    kept.write_bytes(b"old")
    kept.chmod(0o640)
    obs.get_file("x", str(kept))
    assert kept.read_bytes() == b"data" and stat.S_IMODE(kept.stat().st_mode) == 0o640


def test_get_file_leaves_the_target_untouched_on_a_digest_mismatch(js, obs, tmp_path):
    info = obs.put("x", b"a" * 300_000)
    replace_chunk(js, obs, info, 1, b"b" * CHUNK)
    target = tmp_path / "x.bin"
    target.write_bytes(b"old")
    with pytest.raises(errors.DigestMismatchError):
        obs.get_file("x", target)
    assert target.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.bin"]


def test_get_file_of_a_missing_object_creates_nothing(obs, tmp_path):
    with pytest.raises(errors.ObjectNotFoundError):
        obs.get_file("missing", tmp_path / "m.bin")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "object_name",
    ["a", "dir/sub/file.txt", "with space", "ü ∑ 日本語", "*", ">", "a.b.c", "..", "=", "a" * 2048, "é" * 1024],
)
def test_any_name_up_to_2048_bytes_round_trips(obs, object_name):
    obs.put(object_name, b"payload")
    assert obs.get_bytes(object_name) == b"payload"
    assert [i.name for i in obs.list()] == [object_name]
    obs.delete(object_name)
    assert obs.info(object_name, show_deleted=True).deleted


def test_bad_names_are_refused_before_sending(js, obs):
    for bad in ("", "a" * 2049, "é" * 1025, "\ud800"):
        with pytest.raises(errors.InvalidObjectNameError):
            obs.put(bad, b"x")
        with pytest.raises(errors.InvalidObjectNameError):
            obs.info(bad)
    with pytest.raises(errors.InvalidTypeError):
        obs.put(b"bytes-name", b"x")
    with pytest.raises(errors.InvalidTypeError):
        obs.get(None)
    assert js.stream_info(obs.stream_name).state.messages == 0


def test_bad_data_and_meta_are_refused_before_sending(js, obs):
    with pytest.raises(errors.InvalidTypeError):
        obs.put("a", "text")
    with pytest.raises(errors.InvalidTypeError):
        obs.put("a", 42)
    with pytest.raises(errors.InvalidTypeError):
        obs.put("a", io.StringIO("text mode"))
    with pytest.raises(errors.InvalidArgumentError):
        obs.put("a", b"x", meta=ObjectMeta(name="b"))
    with pytest.raises(errors.InvalidTypeError):
        obs.put("a", b"x", meta={"description": "x"})
    with pytest.raises(errors.InvalidArgumentError):
        obs.get("a", timeout=-1)
    assert js.stream_info(obs.stream_name).state.messages == 0


def test_a_bad_piece_midway_purges_what_was_sent(js, obs):
    obs.put("a", b"before")
    with pytest.raises(errors.InvalidTypeError):
        obs.put("a", [b"x" * 300_000, "not bytes"])
    assert obs.get_bytes("a") == b"before"
    assert chunk_messages(js, obs) == 1


def test_a_failing_source_leaves_the_previous_object(js, obs):
    obs.put("a", b"before")

    def pieces():
        yield b"x" * 600_000
        raise RuntimeError("source failed")

    with pytest.raises(RuntimeError, match="source failed"):
        obs.put("a", pieces())
    assert obs.get_bytes("a") == b"before"
    assert chunk_messages(js, obs) == 1  # the chunks of the failed put were purged
    assert len(chunks_on(js, obs, obs.info("a").nuid)) == 1


def test_a_put_that_does_not_fit_leaves_nothing_behind(js, name):
    obs = js.create_object_store(ObjectStoreConfig(bucket=name, max_bytes=1024 * 1024))
    obs.put("a", b"x" * 1000)
    with pytest.raises(errors.BucketFullError, match="maximum bytes exceeded") as info:
        obs.put("big", b"y" * (2 * 1024 * 1024))
    assert isinstance(info.value, errors.ObjectStoreError)
    with pytest.raises(errors.ObjectNotFoundError):
        obs.info("big")
    assert chunk_messages(js, obs) == 1 and obs.get_bytes("a") == b"x" * 1000


def test_the_default_chunk_fits_a_server_with_a_small_max_payload():
    with EmbeddedServer(config="max_payload: 32768") as server, jetstream_sync.connect(server.url) as nc:
        obs = nc.jetstream().create_object_store(ObjectStoreConfig(bucket="small_payload"))
        data = bytes(range(256)) * 400  # 102,400 bytes
        info = obs.put("x", data)
        assert (info.max_chunk_size, info.chunks) == (32768, 4)
        assert obs.get_bytes("x") == data
