"""Helpers shared by the object store server tests: the digest, the stream's chunks, corruption, nats-py."""

from __future__ import annotations

import asyncio
import base64
import hashlib
from collections.abc import Callable, Coroutine
from typing import Any

from jetstream_sync import ObjectInfo, ObjectStore, StoredMsg, errors

MiB = 1024 * 1024
CHUNK = 128 * 1024


def digest(data: bytes) -> str:
    """The digest every client records: ``SHA-256=`` and the URL-safe, padded base64 of the SHA-256."""
    return "SHA-256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).decode()


def meta_subject(obs: ObjectStore, name: str) -> str:
    return f"$O.{obs.bucket}.M." + base64.urlsafe_b64encode(name.encode()).decode()


def chunks_on(js, obs: ObjectStore, nuid: str) -> list[StoredMsg]:
    """The chunk messages stored for ``nuid``, in stream order (``next_by_subj`` walks just that subject)."""
    subject = f"$O.{obs.bucket}.C.{nuid}"
    found: list[StoredMsg] = []
    seq = 1
    while True:
        try:
            reply = js.api.request(f"STREAM.MSG.GET.{obs.stream_name}", {"seq": seq, "next_by_subj": subject})
        except errors.MessageNotFoundError:
            return found
        msg = StoredMsg.from_api(reply)
        found.append(msg)
        seq = msg.seq + 1


def chunk_messages(js, obs: ObjectStore) -> int:
    """How many chunk messages the bucket's stream holds, over every object."""
    info = js.api.request(f"STREAM.INFO.{obs.stream_name}", {"subjects_filter": f"$O.{obs.bucket}.C.>"})
    return sum(int(n) for n in (info["state"].get("subjects") or {}).values())


def replace_chunk(js, obs: ObjectStore, info: ObjectInfo, index: int, data: bytes) -> None:
    """Corrupt an object through the raw stream API: delete chunk ``index`` and publish ``data`` on the same
    chunk subject (it lands after the last chunk, so it is read last)."""
    chunks = chunks_on(js, obs, info.nuid)
    assert len(chunks) == info.chunks
    js.stream(obs.stream_name).delete_msg(chunks[index].seq)
    js.publish(f"$O.{obs.bucket}.C.{info.nuid}", data)


def with_nats_py(url: str, body: Callable[[Any], Coroutine[Any, Any, Any]]) -> Any:
    """Run ``await body(js)`` on a nats-py connection to ``url``, in a fresh event loop."""
    import nats

    async def main() -> Any:
        nc = await nats.connect(url)
        try:
            return await body(nc.jetstream())
        finally:
            await nc.close()

    return asyncio.run(main())
