"""Helpers shared by the key-value server tests: making buckets, reading watchers, consumer counts, nats-py."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

from jetstream_sync import KeyValue, KeyValueConfig, KeyValueEntry, KeyWatcher, StoredMsg, errors
from tests.helpers import wait_until


def bucket(js, name: str, **config: Any) -> KeyValue:
    return js.create_key_value(KeyValueConfig(bucket=name, **config))


def fill(js, kv: KeyValue, n: int, prefix: str = "k", value: bytes = b"v") -> None:
    """Put ``<prefix>.0`` .. ``<prefix>.<n-1>`` quickly (async publishes to the bucket's subjects)."""
    for i in range(n):
        js.publish_async(f"{kv.prefix}{prefix}.{i}", value)
    js.publish_async_complete(timeout=20)


def until_none(w: KeyWatcher, timeout: float = 5.0) -> list[KeyValueEntry]:
    """The entries a watcher hands out before its ``None`` (each within ``timeout``)."""
    got: list[KeyValueEntry] = []
    while (entry := w.next(timeout)) is not None:
        got.append(entry)
    return got


def take(w: KeyWatcher, n: int, timeout: float = 5.0) -> list[KeyValueEntry | None]:
    return [w.next(timeout) for _ in range(n)]


def quiet(w: KeyWatcher, timeout: float = 0.3) -> bool:
    """True when the watcher hands out nothing within ``timeout``."""
    try:
        w.next(timeout)
    except errors.TimeoutError:
        return True
    return False


def stored_last(js, kv: KeyValue, key: str) -> StoredMsg:
    """The key's last message as the stream stores it (headers and all), read around the KV API."""
    return js.stream(kv.stream_name).get_last_msg(kv.prefix + key)


def gone(kv: KeyValue, key: str) -> bool:
    """True when the key has no live value (never written, or its latest entry is a marker)."""
    try:
        kv.get(key)
    except errors.KeyNotFoundError:  # KeyDeletedError included: a marker is no value
        return True
    return False


def readable(kv: KeyValue, key: str, value: bytes) -> bool:
    """True once ``key`` reads back as ``value`` (a mirror or a sourced bucket catches up asynchronously)."""
    try:
        return kv.get(key).value == value
    except errors.KeyNotFoundError:
        return False


def consumers(js, bucket_name: str) -> list[str]:
    return list(js.consumer_names(f"KV_{bucket_name}"))


def wait_no_consumers(js, bucket_name: str, timeout: float = 5.0) -> None:
    wait_until(lambda: consumers(js, bucket_name) == [], timeout=timeout)


def view(entries) -> list[tuple[str, bytes, int, str]]:
    """(key, value, revision, operation) of entries from either client."""
    out = []
    for e in entries:
        op = e.operation  # ours: a KeyValueOp; nats-py: None for a value, else the header's text
        name = "PUT" if op is None else op if isinstance(op, str) else op.value
        out.append((e.key, bytes(e.value or b""), e.revision, name))
    return out


async def nats_py_listing(call: Callable[[], Coroutine[Any, Any, Any]]) -> Any:
    """``await call()`` for a nats-py ``keys()`` or ``history()``, asked up to three times while it raises
    NoKeysError: nats-py's listings can end before their first entry (nats.py #842, its watcher's "done"
    marker coming first), and a key or bucket that has entries then looks empty. A real empty listing still
    raises NoKeysError, on the third try."""
    from nats.js.errors import NoKeysError

    for _ in range(2):
        try:
            return await call()
        except NoKeysError:
            continue
    return await call()


async def nats_py_watched(watcher: Any, count: int) -> list[Any]:
    """The first ``count`` entries a nats-py watcher gives, skipping its "initial values done" None markers.

    nats-py can put that marker first, before entries it already has (nats.py #842): it asks for the consumer's
    info once the server has delivered everything, and counts only what its callback has handled so far. Waiting
    for the entries themselves still fails (nats-py's TimeoutError, 5 s) when one never comes.
    """
    got = []
    while len(got) < count:
        entry = await watcher.updates(timeout=5)
        if entry is not None:
            got.append(entry)
    return got


def with_nats_py(url: str, body: Callable[[Any, Any], Coroutine[Any, Any, Any]]) -> Any:
    """Run ``await body(nc, js)`` on a nats-py connection to ``url``, in a fresh event loop."""
    import nats

    async def main() -> Any:
        nc = await nats.connect(url)
        try:
            return await body(nc, nc.jetstream())
        finally:
            await nc.close()

    return asyncio.run(main())
