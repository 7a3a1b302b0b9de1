"""Object-level calls: info, replace, update_meta (and rename), delete, links to objects and buckets."""

from __future__ import annotations

import base64
import json

import pytest

from jetstream_sync import ObjectLink, ObjectMeta, ObjectStoreConfig, errors

from .obshelpers import chunk_messages, chunks_on, meta_subject


def test_put_replaces_and_purges_the_old_chunks_after_the_new_metadata(js, obs):
    old = obs.put("doc", b"1" * 300_000)
    new = obs.put("doc", b"2" * 1000, meta=ObjectMeta(description="v2"))
    assert new.nuid != old.nuid
    assert obs.get_bytes("doc") == b"2" * 1000 and obs.info("doc").description == "v2"
    assert chunks_on(js, obs, old.nuid) == []
    assert len(chunks_on(js, obs, new.nuid)) == 1
    assert js.stream_info(obs.stream_name).state.messages == 2  # one chunk, one metadata message


def test_info_not_found_deleted_and_show_deleted(obs):
    with pytest.raises(errors.ObjectNotFoundError):
        obs.info("nope")
    with pytest.raises(errors.ObjectNotFoundError):
        obs.info("nope", show_deleted=True)
    with pytest.raises(errors.ObjectNotFoundError):
        obs.get("nope")
    put = obs.put("d", b"data" * 100_000, meta=ObjectMeta(description="kept"))
    obs.delete("d")
    with pytest.raises(errors.ObjectDeletedError) as raised:
        obs.info("d")
    assert raised.value.info.deleted and raised.value.info.nuid == put.nuid
    with pytest.raises(errors.ObjectDeletedError):
        obs.get_bytes("d")
    gone = obs.info("d", show_deleted=True)
    assert gone.deleted and (gone.size, gone.chunks, gone.digest) == (0, 0, None)
    assert gone.description == "kept" and gone.mtime is not None
    with pytest.raises(errors.InvalidTypeError):
        obs.info("d", show_deleted="yes")


def test_delete_purges_chunks_and_deleting_again_does_nothing(js, obs):
    info = obs.put("d", b"z" * 500_000)
    obs.delete("d")
    assert chunks_on(js, obs, info.nuid) == []
    last = js.stream_info(obs.stream_name).state.last_seq
    obs.delete("d")  # as nats.go: no error, and nothing written
    assert js.stream_info(obs.stream_name).state.last_seq == last
    assert js.stream_info(obs.stream_name).state.messages == 1
    with pytest.raises(errors.ObjectNotFoundError):
        obs.delete("never")


def test_put_after_delete_brings_the_name_back(obs):
    obs.put("d", b"1")
    obs.delete("d")
    obs.put("d", b"2")
    assert obs.get_bytes("d") == b"2" and not obs.info("d").deleted


def test_update_meta(obs):
    put = obs.put("a", b"data", meta=ObjectMeta(description="old", metadata={"k": "v"}, max_chunk_size=1024))
    updated = obs.update_meta("a", ObjectMeta(description="new", headers={"X": ["1", "2"]}))
    assert (updated.description, updated.headers, updated.metadata) == ("new", {"X": ["1", "2"]}, None)
    stored = obs.info("a")
    assert (stored.description, stored.headers, stored.metadata) == ("new", {"X": ["1", "2"]}, None)
    assert (stored.nuid, stored.digest, stored.size, stored.max_chunk_size) == (put.nuid, put.digest, 4, 1024)
    obs.update_meta("a", ObjectMeta(name="a", metadata={"m": "1"}, max_chunk_size=7))  # the chunk size stays
    assert obs.info("a").metadata == {"m": "1"} and obs.info("a").max_chunk_size == 1024
    assert obs.get_bytes("a") == b"data"


def test_update_meta_renames(js, obs):
    obs.put("a", b"data", meta=ObjectMeta(description="d"))
    renamed = obs.update_meta("a", ObjectMeta(name="b", description="moved"))
    assert renamed.name == "b" and renamed.description == "moved"
    assert obs.get_bytes("b") == b"data"
    with pytest.raises(errors.ObjectNotFoundError):
        obs.info("a", show_deleted=True)  # the old name's metadata was purged
    obs.put("c", b"other")
    with pytest.raises(errors.ObjectExistsError):
        obs.update_meta("b", ObjectMeta(name="c"))
    obs.delete("c")
    obs.update_meta("b", ObjectMeta(name="c"))  # onto a deleted name is fine
    assert obs.get_bytes("c") == b"data"
    assert [i.name for i in obs.list()] == ["c"]


def test_update_meta_of_missing_or_deleted_objects(obs):
    with pytest.raises(errors.ObjectNotFoundError):
        obs.update_meta("missing", ObjectMeta(description="x"))
    obs.put("d", b"1")
    obs.delete("d")
    with pytest.raises(errors.ObjectDeletedError):
        obs.update_meta("d", ObjectMeta(description="x"))
    with pytest.raises(errors.InvalidTypeError):
        obs.update_meta("d", {"description": "x"})


def test_links_to_objects(obs):
    target = obs.put("target", b"payload" * 10_000, meta=ObjectMeta(description="t"))
    link = obs.add_link("alias", target)
    assert link.is_link and link.link == ObjectLink(bucket=obs.bucket, name="target")
    assert (link.size, link.chunks, link.digest) == (0, 0, None) and link.nuid != target.nuid
    assert obs.info("alias").link == link.link  # info of a link is the link's own
    assert obs.get_bytes("alias") == b"payload" * 10_000
    with obs.get("alias") as r:
        assert r.info.name == "target" and r.info.nuid == target.nuid
    relinked = obs.add_link("alias", obs.put("target2", b"2"))  # a link may be replaced by a link
    assert relinked.link == ObjectLink(bucket=obs.bucket, name="target2")
    obs.put("target2", b"22")  # the link follows the name, not the version
    assert obs.get_bytes("alias") == b"22"
    obs.delete("target2")
    with pytest.raises(errors.ObjectDeletedError):
        obs.get("alias")
    obs.put("alias", b"now an object")  # a put replaces a link
    assert not obs.info("alias").is_link and obs.get_bytes("alias") == b"now an object"


def test_link_errors(obs):
    target = obs.put("target", b"x")
    link = obs.add_link("alias", target)
    with pytest.raises(errors.NoLinkToLinkError):
        obs.add_link("alias2", link)
    with pytest.raises(errors.ObjectExistsError):
        obs.add_link("target", target)  # would replace a live object
    obs.put("t3", b"3")
    obs.delete("t3")
    with pytest.raises(errors.NoLinkToDeletedError):
        obs.add_link("alias3", obs.info("t3", show_deleted=True))
    stale = obs.put("t4", b"4")
    obs.delete("t4")
    with pytest.raises(errors.NoLinkToDeletedError):
        obs.add_link("alias4", stale)  # the info passed is live, the object is not: looked up first
    with pytest.raises(errors.InvalidTypeError):
        obs.add_link("l", "target")
    with pytest.raises(errors.InvalidObjectNameError):
        obs.add_link("", target)
    obs.put("gone-later", b"x")
    obs.delete("gone-later")
    obs.add_link("gone-later", target)  # a deleted object's name can become a link
    assert obs.info("gone-later").is_link


def test_links_across_buckets_and_to_buckets(js, obs, name):
    other = js.create_object_store(ObjectStoreConfig(bucket=name + "_other"))
    far = other.put("far", b"far away")
    obs.add_link("far-link", far)
    assert obs.get_bytes("far-link") == b"far away"
    blink = obs.add_bucket_link("whole", other)
    assert blink.link == ObjectLink(bucket=other.bucket) and blink.link.is_bucket
    assert obs.info("whole").link == ObjectLink(bucket=other.bucket)
    with pytest.raises(errors.LinkIsABucketError):
        obs.get("whole")
    assert obs.add_bucket_link("far-link", other).link.is_bucket  # a link of that name may be replaced
    obs.add_link("far-link", far)
    obs.put("obj", b"1")
    with pytest.raises(errors.ObjectExistsError):
        obs.add_bucket_link("obj", other)
    with pytest.raises(errors.InvalidTypeError):
        obs.add_bucket_link("l", other.bucket)
    js.delete_object_store(other.bucket)
    with pytest.raises(errors.BucketNotFoundError):
        obs.get("far-link")


def test_a_chain_of_links_written_by_another_client_is_followed_and_bounded(js, obs):
    """add_link refuses links to links, but other writers may chain them: get follows a few hops, then says no."""
    obs.put("end", b"the end")

    def raw_link(link_name: str, to: str) -> None:
        body = {
            "name": link_name,
            "options": {"link": {"bucket": obs.bucket, "name": to}},
            "bucket": obs.bucket,
            "nuid": "N" + link_name,
            "size": 0,
            "mtime": "0001-01-01T00:00:00Z",
            "chunks": 0,
        }
        js.publish(meta_subject(obs, link_name), json.dumps(body).encode(), {"Nats-Rollup": "sub"})

    raw_link("hop1", "end")
    raw_link("hop2", "hop1")
    assert obs.get_bytes("hop2") == b"the end"
    raw_link("loop-a", "loop-b")
    raw_link("loop-b", "loop-a")
    with pytest.raises(errors.LinkError, match="links in a row"):
        obs.get("loop-a")


def test_unreadable_metadata(js, obs):
    js.publish(f"$O.{obs.bucket}.M." + base64.urlsafe_b64encode(b"junk").decode(), b"not json")
    with pytest.raises(errors.BadObjectMetaError):
        obs.info("junk")
    with pytest.raises(errors.BadObjectMetaError):
        obs.delete("junk")
    obs.put("good", b"1")
    assert [i.name for i in obs.list()] == ["good"]  # a walk skips what no client could read
    obs.put("junk", b"fixed")  # a put replaces it
    assert obs.get_bytes("junk") == b"fixed"
    assert chunk_messages(js, obs) == 2
