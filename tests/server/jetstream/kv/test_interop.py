"""A bucket shared with nats-py (the other Python client) on the same server: what one writes the other reads
back identically (values, revisions, operations, deleted and purged keys), and each binds to the other's bucket."""

from __future__ import annotations

import pytest

from jetstream_sync import KeyValueOp, errors
from tests.server.jetstream.kv.kvhelpers import (
    bucket,
    nats_py_listing,
    nats_py_watched,
    take,
    until_none,
    view,
    with_nats_py,
)

KEYS = ["a", "b", "c", "d.e"]


async def _nats_py_history(js, name: str) -> dict[str, list]:
    from nats.js.errors import NoKeysError

    kv = await js.key_value(name)
    out = {}
    for key in KEYS:
        try:
            out[key] = view(await nats_py_listing(lambda key=key: kv.history(key)))
        except NoKeysError:
            out[key] = []
    return out


def _our_history(kv) -> dict[str, list]:
    out = {}
    for key in KEYS:
        try:
            out[key] = view(kv.history(key))
        except errors.KeyNotFoundError:
            out[key] = []
    return out


def test_written_by_nats_py_read_here(nats_server, js, name):
    async def write(_nc, njs):
        kv = await njs.create_key_value(bucket=name, history=5)
        await kv.put("a", b"1")
        await kv.put("b", b"1")
        await kv.put("a", b"2")
        await kv.delete("b")
        await kv.put("c", b"1")
        await kv.put("c", b"2")
        await kv.purge("c")
        await kv.put("d.e", b"\x00binary")
        return await _nats_py_history(njs, name)

    theirs = with_nats_py(nats_server.url, write)
    kv = js.key_value(name)
    assert _our_history(kv) == theirs
    assert theirs["b"][-1][3] == "DEL" and theirs["c"] == [("c", b"", 7, "PURGE")]
    assert kv.get("a").value == b"2" and kv.get("a").revision == 3
    with pytest.raises(errors.KeyDeletedError) as deleted:
        kv.get("b")
    assert deleted.value.entry.operation is KeyValueOp.DELETE
    with pytest.raises(errors.KeyDeletedError) as purged:
        kv.get("c")
    assert purged.value.entry.operation is KeyValueOp.PURGE
    assert sorted(kv.keys()) == ["a", "d.e"]
    assert kv.status().history == 5
    with kv.watch_all() as w:
        assert [(e.key, e.operation) for e in until_none(w)] == [
            ("a", KeyValueOp.PUT),
            ("b", KeyValueOp.DELETE),
            ("c", KeyValueOp.PURGE),
            ("d.e", KeyValueOp.PUT),
        ]
    # create over what nats-py deleted and purged
    kv.create("b", b"mine")
    kv.create("c", b"mine")
    with pytest.raises(errors.KeyExistsError):
        kv.create("a", b"mine")


def test_written_here_read_by_nats_py(nats_server, js, name):
    kv = bucket(js, name, history=5)
    kv.put("a", b"1")
    kv.create("b", b"1")
    kv.update("a", b"2", last=1)
    kv.delete("b")
    kv.put("c", b"1")
    kv.put("c", b"2")
    kv.purge("c")
    kv.put("d.e", b"\x00binary")
    ours = _our_history(kv)

    async def read(_nc, njs):
        from nats.js.errors import KeyNotFoundError

        nkv = await njs.key_value(name)  # binds to our bucket
        status = await nkv.status()
        got = {"history": await _nats_py_history(njs, name)}
        got["a"] = (await nkv.get("a")).value
        got["keys"] = sorted(await nats_py_listing(nkv.keys))
        deleted = []
        for key in ("b", "c"):
            try:
                await nkv.get(key)
            except KeyNotFoundError as exc:  # nats-py: a deleted key is "not found", with the marker's op
                deleted.append(exc.op)
        got["deleted"] = deleted
        got["history_setting"] = status.history
        # nats-py's create takes the place of our markers as well
        await nkv.create("b", b"theirs")
        return got

    got = with_nats_py(nats_server.url, read)
    assert got["history"] == ours
    assert got["a"] == b"2"
    assert got["keys"] == ["a", "d.e"]
    assert got["deleted"] == ["DEL", "PURGE"]
    assert got["history_setting"] == 5
    assert kv.get("b").value == b"theirs"


def test_get_many_of_a_bucket_made_by_nats_py(nats_server, js, name):
    async def write(_nc, njs):
        kv = await njs.create_key_value(bucket=name, history=2)
        await kv.put("a", b"1")
        await kv.put("b", b"2")

    with_nats_py(nats_server.url, write)
    kv = js.key_value(name)
    assert {k: e.value for k, e in kv.get_many(["a", "b", "c"]).items()} == {"a": b"1", "b": b"2"}


def test_our_watcher_sees_nats_py_writes(nats_server, js, name):
    kv = bucket(js, name, history=2)

    async def write(_nc, njs):
        nkv = await njs.key_value(name)
        revs = [await nkv.put("x", b"1"), await nkv.put("y", b"2")]
        await nkv.delete("x")
        await nkv.purge("y")
        return revs

    with kv.watch_all() as w:
        assert w.next(2) is None
        revs = with_nats_py(nats_server.url, write)
        got = take(w, 4)
    assert [(e.key, e.value, e.operation) for e in got] == [
        ("x", b"1", KeyValueOp.PUT),
        ("y", b"2", KeyValueOp.PUT),
        ("x", b"", KeyValueOp.DELETE),
        ("y", b"", KeyValueOp.PURGE),
    ]
    assert [e.revision for e in got[:2]] == revs


def test_nats_py_watcher_on_our_bucket(nats_server, js, name):
    kv = bucket(js, name, history=3)
    kv.put("a", b"1")
    kv.put("b", b"1")
    kv.put("a", b"2")
    kv.delete("b")
    ours = view(kv.history("a")[-1:] + kv.history("b")[-1:])

    async def watch(_nc, njs):
        nkv = await njs.key_value(name)
        w = await nkv.watchall()
        got = await nats_py_watched(w, len(ours))
        await w.stop()
        return view(got)

    assert sorted(with_nats_py(nats_server.url, watch), key=lambda e: e[2]) == sorted(ours, key=lambda e: e[2])


def test_nats_py_reads_revisions_history_watch_and_keys_of_ours(nats_server, js, name):
    kv = bucket(js, name, history=4)
    r1 = kv.put("a.x", b"1")
    kv.put("a.x", b"2")
    kv.put("a.y", b"1")
    kv.put("b.z", b"1")
    kv.delete("a.y")
    kv.put("p", b"1")
    kv.purge("p")
    everything = []
    for key in ("a.x", "a.y", "b.z", "p"):
        everything += kv.history(key)
    ours = sorted(view(everything), key=lambda e: e[2])

    async def read(_nc, njs):
        nkv = await njs.key_value(name)
        old = await nkv.get("a.x", revision=r1)
        w = await nkv.watchall(include_history=True)
        got = await nats_py_watched(w, len(ours))
        await w.stop()
        return old.value, view(got), sorted(await nats_py_listing(nkv.keys))

    old, watched, keys = with_nats_py(nats_server.url, read)
    assert old == b"1"
    assert watched == ours  # every value and marker, in revision order, with its operation
    assert keys == ["a.x", "b.z"]


def test_our_watch_with_history_of_a_nats_py_bucket(nats_server, js, name):
    async def write(_nc, njs):
        nkv = await njs.create_key_value(bucket=name, history=3)
        for value in (b"1", b"2", b"3", b"4"):
            await nkv.put("k", value)
        await nkv.put("j", b"1")
        await nkv.delete("j")
        history = [
            *view(await nats_py_listing(lambda: nkv.history("k"))),
            *view(await nats_py_listing(lambda: nkv.history("j"))),
        ]
        return sorted(history, key=lambda e: e[2])

    theirs = with_nats_py(nats_server.url, write)
    kv = js.key_value(name)
    with kv.watch_all(include_history=True) as w:
        assert view(until_none(w)) == theirs
    with kv.watch_all(meta_only=True) as w:
        assert [(e.key, e.value, e.operation) for e in until_none(w)] == [
            ("k", b"", KeyValueOp.PUT),
            ("j", b"", KeyValueOp.DELETE),
        ]


def test_create_over_a_bucket_nats_py_made_is_bucket_exists(nats_server, js, name):
    """nats-py makes its bucket stream differently (no direct get; message TTLs allowed), so the same settings
    are another configuration to the server: create refuses with the typed error, binding works."""

    async def write(_nc, njs):
        nkv = await njs.create_key_value(bucket=name, history=2)
        await nkv.put("k", b"v")

    with_nats_py(nats_server.url, write)
    with pytest.raises(errors.BucketExistsError):
        bucket(js, name, history=2)
    assert js.key_value(name).get("k").value == b"v"
