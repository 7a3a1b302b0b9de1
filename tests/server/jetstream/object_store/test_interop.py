"""Interoperability with nats-py's object store, both ways, on one server: what either client stores the other
reads identically (data, description, headers, digest, size, chunks, nuid), links and deleted objects too."""

from __future__ import annotations

import base64
import hashlib
import io
import json

import pytest

from jetstream_sync import ObjectMeta, ObjectStoreConfig, errors

from .obshelpers import with_nats_py

nats = pytest.importorskip("nats")
nats_api = pytest.importorskip("nats.js.api")
nats_errors = pytest.importorskip("nats.js.errors")

DATA = hashlib.sha256(b"seed").digest() * 20_000  # 640,000 bytes: 5 chunks, the last one short


async def _nats_py_link(njs, bucket: str, name: str, to_bucket: str, to_name: str | None) -> None:
    """A link as nats-py would store it if it had AddLink: its own ObjectInfo types, its publish, a rollup."""
    info = nats_api.ObjectInfo(
        name=name,
        bucket=bucket,
        nuid=njs._nc._nuid.next().decode(),
        size=0,
        chunks=0,
        options=nats_api.ObjectMetaOptions(link=nats_api.ObjectLink(bucket=to_bucket, name=to_name)),
    )
    subject = f"$O.{bucket}.M." + base64.urlsafe_b64encode(name.encode()).decode()
    await njs.publish(subject, json.dumps(info.as_dict()).encode(), headers={"Nats-Rollup": "sub"})


def test_what_nats_py_stores_reads_back_here_identically(js, nats_server, name):
    async def body(njs):
        store = await njs.create_object_store(name)
        meta = nats_api.ObjectMeta(
            name="dir/report.bin", description="from nats-py", headers={"X-Kind": ["report"], "X-Multi": ["a", "b"]}
        )
        first = await store.put("dir/report.bin", b"first version", meta=meta)
        put = await store.put("dir/report.bin", DATA, meta=meta)  # replaces the first
        small_meta = nats_api.ObjectMeta(name="small", options=nats_api.ObjectMetaOptions(max_chunk_size=1000))
        small = await store.put("small", DATA[:10_500], meta=small_meta)
        await store.put("empty", b"")
        await store.put("doomed", b"bye")
        await store.delete("doomed")
        await store.put("described", b"d")
        await store.update_meta("described", nats_api.ObjectMeta(name="described", description="changed by nats-py"))
        await _nats_py_link(njs, name, "alias", name, "dir/report.bin")
        await _nats_py_link(njs, name, "dir-link", name + "_other", None)
        return first, put, small

    first, theirs, small = with_nats_py(nats_server.url, body)
    obs = js.object_store(name)
    ours = obs.info("dir/report.bin")
    assert (ours.name, ours.nuid, ours.size, ours.chunks, ours.digest) == (
        theirs.name,
        theirs.nuid,
        theirs.size,
        theirs.chunks,
        theirs.digest,
    )
    assert ours.nuid != first.nuid and ours.max_chunk_size == 128 * 1024
    assert ours.description == "from nats-py" and ours.headers == {"X-Kind": ["report"], "X-Multi": ["a", "b"]}
    assert ours.mtime is not None
    assert obs.get_bytes("dir/report.bin") == DATA  # digest verified
    with obs.get("dir/report.bin") as r:
        got = io.BytesIO()
        while piece := r.read(2048):
            got.write(piece)
    assert got.getvalue() == DATA
    assert (obs.info("small").chunks, obs.info("small").max_chunk_size) == (small.chunks, 1000) == (11, 1000)
    assert obs.get_bytes("small") == DATA[:10_500]
    assert obs.get_bytes("empty") == b""
    gone = obs.info("doomed", show_deleted=True)
    assert gone.deleted and gone.size == 0
    with pytest.raises(errors.ObjectDeletedError):
        obs.get("doomed")
    assert obs.info("described").description == "changed by nats-py"
    assert obs.info("alias").is_link and obs.get_bytes("alias") == DATA
    assert obs.info("dir-link").link.is_bucket
    with pytest.raises(errors.LinkIsABucketError):
        obs.get("dir-link")
    listed = sorted(i.name for i in obs.list())
    assert listed == ["alias", "described", "dir-link", "dir/report.bin", "empty", "small"]
    assert sorted(i.name for i in obs.list(show_deleted=True)) == sorted([*listed, "doomed"])


def test_what_we_store_reads_back_in_nats_py_identically(js, nats_server, name):
    obs = js.create_object_store(ObjectStoreConfig(bucket=name, description="ours"))
    put = obs.put(
        "dir/report.bin",
        io.BytesIO(DATA),
        meta=ObjectMeta(description="from jetstream-sync", headers={"X-Kind": "report", "X-Multi": ["a", "b"]}),
    )
    obs.add_link("alias", put)
    obs.put("doomed", b"bye")
    obs.delete("doomed")
    other = js.create_object_store(ObjectStoreConfig(bucket=name + "_b"))
    obs.add_bucket_link("whole", other)
    obs.put("small", b"x" * 100, meta=ObjectMeta(max_chunk_size=7))
    obs.put("empty", b"")
    obs.put("renamed-from", b"moved", meta=ObjectMeta(description="before"))
    obs.update_meta("renamed-from", ObjectMeta(name="renamed-to", description="after"))

    async def body(njs):
        store = await njs.object_store(name)
        got = await store.get("dir/report.bin")
        via_link = await store.get("alias")
        gone = await store.get_info("doomed", show_deleted=True)
        try:
            await store.get_info("doomed")
            missing = False
        except nats_errors.ObjectNotFoundError:
            missing = True
        whole = await store.get_info("whole")
        try:
            await store.get("whole")
            bucket_refused = False
        except nats_errors.LinkIsABucketError:
            bucket_refused = True
        small = await store.get("small")
        empty = await store.get("empty")
        renamed = await store.get("renamed-to")
        listed = sorted(i.name for i in await store.list(ignore_deletes=True))
        status = await store.status()
        return got, via_link, gone, missing, whole, bucket_refused, small, empty, renamed, listed, status

    got, via_link, gone, missing, whole, bucket_refused, small, empty, renamed, listed, status = with_nats_py(
        nats_server.url, body
    )
    assert got.data == DATA and via_link.data == DATA
    info = got.info
    assert (info.name, info.nuid, info.size, info.chunks, info.digest) == (
        put.name,
        put.nuid,
        put.size,
        put.chunks,
        put.digest,
    )
    assert info.description == "from jetstream-sync"
    assert info.headers == {"X-Kind": ["report"], "X-Multi": ["a", "b"]}
    assert info.options.max_chunk_size == 128 * 1024
    assert gone.deleted and missing
    assert whole.is_link() and whole.options.link.bucket == name + "_b" and not whole.options.link.name
    assert bucket_refused
    assert small.data == b"x" * 100 and small.info.chunks == 15
    assert empty.data == b"" and empty.info.size == 0
    assert renamed.data == b"moved" and renamed.info.description == "after"
    assert listed == ["alias", "dir/report.bin", "empty", "renamed-to", "small", "whole"]
    assert status.description == "ours" and not status.sealed


def test_replacing_each_others_objects(js, nats_server, name):
    """A put by one client replaces the other's object and purges its chunks, whichever wrote first."""
    obs = js.create_object_store(ObjectStoreConfig(bucket=name))
    ours = obs.put("shared", DATA)

    async def body(njs):
        store = await njs.object_store(name)
        return await store.put("shared", b"nats-py's version")

    theirs = with_nats_py(nats_server.url, body)
    assert obs.get_bytes("shared") == b"nats-py's version" and obs.info("shared").nuid == theirs.nuid
    assert js.stream_info(obs.stream_name).state.messages == 2  # nats-py purged our chunks
    obs.put("shared", b"ours again")
    assert js.stream_info(obs.stream_name).state.messages == 2  # and we purged nats-py's
    assert ours.nuid != obs.info("shared").nuid

    async def read(njs):
        return (await (await njs.object_store(name)).get("shared")).data

    assert with_nats_py(nats_server.url, read) == b"ours again"


def test_a_watch_here_sees_nats_py_writes(js, nats_server, name):
    obs = js.create_object_store(ObjectStoreConfig(bucket=name))
    with obs.watch() as w:
        assert w.next(5) is None

        async def body(njs):
            store = await njs.object_store(name)
            await store.put("from-nats-py", b"x", meta=nats_api.ObjectMeta(name="from-nats-py", description="d"))
            await store.delete("from-nats-py")

        with_nats_py(nats_server.url, body)
        put = w.next(5)
        assert (put.name, put.description, put.size, put.deleted) == ("from-nats-py", "d", 1, False)
        deleted = w.next(5)
        assert deleted.name == "from-nats-py" and deleted.deleted


def test_buckets_bind_both_ways_with_the_same_stream(js, nats_server, name):
    ours = js.create_object_store(ObjectStoreConfig(bucket=name + "_ours", max_bytes=10 * 1024 * 1024))

    async def body(njs):
        await njs.create_object_store(name + "_theirs")
        await (await njs.object_store(ours.bucket)).put("x", b"1")
        return (await njs.stream_info(f"OBJ_{name}_theirs")).config

    theirs = with_nats_py(nats_server.url, body)
    mine = js.stream_info(f"OBJ_{ours.bucket}").config
    assert mine.subjects == [f"$O.{ours.bucket}.C.>", f"$O.{ours.bucket}.M.>"]
    assert theirs.subjects == [f"$O.{name}_theirs.C.>", f"$O.{name}_theirs.M.>"]
    assert (mine.discard.value, mine.allow_rollup_hdrs, mine.allow_direct) == ("new", True, True)
    discard = str(getattr(theirs.discard, "value", theirs.discard))  # nats-py leaves it a str when decoding
    assert (discard, theirs.allow_rollup_hdrs, theirs.allow_direct) == ("new", True, True)
    assert mine.max_bytes == 10 * 1024 * 1024
    assert ours.get_bytes("x") == b"1"
    assert js.object_store(name + "_theirs").status().bucket == name + "_theirs"
    assert sorted(js.object_store_names()) == sorted([name + "_ours", name + "_theirs"])


def test_a_link_as_nats_go_writes_it_is_followed(js, name):
    """nats.go's AddLink, byte for byte: metadata with options.link and no data of its own."""
    obs = js.create_object_store(ObjectStoreConfig(bucket=name))
    target = obs.put("target", b"linked data")
    link = (
        b'{"name":"go-link","options":{"link":{"bucket":"%s","name":"target"}},"bucket":"%s",'
        b'"nuid":"GOLINKNUID","size":0,"mtime":"0001-01-01T00:00:00Z","chunks":0}'
    ) % (name.encode(), name.encode())
    subject = f"$O.{name}.M." + base64.urlsafe_b64encode(b"go-link").decode()
    js.publish(subject, link, {"Nats-Rollup": "sub"})
    info = obs.info("go-link")
    assert info.is_link and info.link.name == "target" and info.mtime is not None
    with obs.get("go-link") as r:
        assert r.read() == b"linked data" and r.info.nuid == target.nuid
