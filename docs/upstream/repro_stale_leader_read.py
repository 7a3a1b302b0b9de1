"""A leader read (``$JS.API.STREAM.MSG.GET``) answered by a partitioned node with a value older than an
acknowledged write.

See stale-leader-read.md next to this file. From the project's root:

    python docs/upstream/repro_stale_leader_read.py                          # nats-py alone talks to the cluster
    python docs/upstream/repro_stale_leader_read.py --client jetstream_sync  # kv.get(key, read="leader")

A 3-node EmbeddedCluster (real nats-servers; each route runs through a proxy, so one node can be cut off from
the others while its clients still reach it). Per attempt, on a fresh key:

1. put the key ("v0"); find the stream leader L; a client P connects to L alone, a client M to the other two;
2. partition L; wait for the other two to elect a new leader L'; M puts "v1" and gets its ack;
3. P asks for the key's last message every 100 ms: L still believes it leads (a raft leader steps down on its
   own only when its lost-quorum check, every 10 s, finds no peer heard from for 10 s), so it answers from its
   store, "v0", until that check or its own meta layer going leaderless stops it;
4. heal L.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import time
import urllib.request
from typing import Any

from jetstream_sync.testing import EmbeddedCluster

BUCKET = "REPRO"
STREAM = f"KV_{BUCKET}"
READ_EVERY = 0.1
READ_FOR = 25.0  # seconds: longer than the 10-20 s a deposed leader can go on believing it leads


def leader_seen_by(cluster: EmbeddedCluster, node: int) -> str | None:
    """The stream's leader as ``node`` knows it (``/jsz``): its own name if it believes it leads."""
    url = f"{cluster.servers[node].monitor_url}/jsz?streams=true"
    with urllib.request.urlopen(url, timeout=2) as answer:
        jsz = json.load(answer)
    for account in jsz.get("account_details") or []:
        for stream in account.get("stream_detail") or []:
            if stream.get("name") == STREAM:
                return (stream.get("cluster") or {}).get("leader") or None
    return None


def wait_leader(cluster: EmbeddedCluster, nodes: list[int], not_: str | None = None, timeout: float = 40) -> str:
    """Wait until ``nodes`` all name one leader (other than ``not_``); its name."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        seen = {leader_seen_by(cluster, i) for i in nodes}
        if len(seen) == 1 and None not in seen and not_ not in seen:
            return seen.pop()  # type: ignore[return-value]
        time.sleep(0.05)
    raise RuntimeError(f"nodes {nodes} agreed on no leader (other than {not_}) within {timeout}s")


def _answer(data: bytes) -> str:
    """A MSG.GET answer in a word: the value stored, or the error code."""
    body = json.loads(data)
    if "error" in body:
        return f"error {body['error'].get('err_code')}"
    return base64.b64decode(body["message"]["data"]).decode()


# -- nats-py alone on the data path -------------------------------------------------------------------------------
async def attempt_nats_py(cluster: EmbeddedCluster, n: int, meta_too: bool) -> dict[str, Any]:
    import nats

    key = f"k{n}"
    get = f"$JS.API.STREAM.MSG.GET.{STREAM}"
    query = json.dumps({"last_by_subj": f"$KV.{BUCKET}.{key}"}).encode()
    everyone = await nats.connect(cluster.urls)
    await (await everyone.jetstream(timeout=10).key_value(BUCKET)).put(key, b"v0")
    leader = wait_leader(cluster, list(range(cluster.size)))
    meta = cluster.meta_leader()
    if meta_too and meta is not None and cluster.names[meta] != leader:
        # hand the stream's leadership to the meta leader, so the node cut off leads both
        step_down = json.dumps({"placement": {"preferred": cluster.names[meta]}}).encode()
        await everyone.request(f"$JS.API.STREAM.LEADER.STEPDOWN.{STREAM}", step_down, timeout=5)
        leader = await asyncio.to_thread(wait_leader, cluster, list(range(cluster.size)), leader)
    await everyone.close()
    node = cluster.names.index(leader)
    majority = [i for i in range(cluster.size) if i != node]
    p = await nats.connect(cluster.servers[node].url, max_reconnect_attempts=-1)
    m = await nats.connect([cluster.servers[i].url for i in majority], max_reconnect_attempts=-1)

    cluster.partition(node)
    partitioned = time.monotonic()
    new = await asyncio.to_thread(wait_leader, cluster, majority, leader)
    await (await m.jetstream(timeout=10).key_value(BUCKET)).put(key, b"v1")
    acked = time.monotonic()
    during: list[tuple[float, str]] = []
    while time.monotonic() - acked < READ_FOR:
        try:
            reply = await p.request(get, query, timeout=1)
            during.append((time.monotonic() - partitioned, _answer(reply.data)))
        except nats.errors.TimeoutError:
            during.append((time.monotonic() - partitioned, "timeout"))
        if len(during) >= 5 and all(a != "v0" for _, a in during[-5:]):
            break  # L no longer answers as leader
        await asyncio.sleep(READ_EVERY)

    cluster.heal(node)
    await p.close()
    await m.close()
    return outcome(cluster, leader, meta, new, acked - partitioned, during)


def outcome(
    cluster: EmbeddedCluster,
    leader: str,
    meta: int | None,
    new: str,
    acked_after: float,
    during: list[tuple[float, str]],
) -> dict[str, Any]:
    """What one attempt saw: the reads of the cut-off leader that still returned v0 after v1 was acknowledged."""
    stale = [(round(t, 1), a) for t, a in during if a == "v0"]
    return {
        "old_leader": leader,
        "meta_leader_was": cluster.names[meta] if meta is not None else None,
        "new_leader": new,
        "v1_acked_at": round(acked_after, 1),
        "stale_reads": len(stale),
        "stale_from_to": (stale[0][0], stale[-1][0]) if stale else None,
        "then": during[-1],
        "anomaly": bool(stale),
    }


# -- the same through jetstream_sync ----------------------------------------------------------------------------------
def attempt_jetstream_sync(cluster: EmbeddedCluster, n: int) -> dict[str, Any]:
    import jetstream_sync
    from jetstream_sync import errors

    key = f"k{n}"
    with jetstream_sync.connect(cluster.urls) as everyone:
        everyone.jetstream(timeout=10).key_value(BUCKET).put(key, b"v0")
    leader = wait_leader(cluster, list(range(cluster.size)))
    node = cluster.names.index(leader)
    majority = [i for i in range(cluster.size) if i != node]
    meta = cluster.meta_leader()
    with (
        jetstream_sync.connect(cluster.servers[node].url, max_reconnect_attempts=-1) as p,
        jetstream_sync.connect([cluster.servers[i].url for i in majority], max_reconnect_attempts=-1) as m,
    ):
        pkv = p.jetstream(timeout=1).key_value(BUCKET, read="leader")
        mkv = m.jetstream(timeout=10).key_value(BUCKET)
        cluster.partition(node)
        partitioned = time.monotonic()
        new = wait_leader(cluster, majority, leader)
        mkv.put(key, b"v1")
        acked = time.monotonic()
        during: list[tuple[float, str]] = []
        while time.monotonic() - acked < READ_FOR:
            try:
                during.append((time.monotonic() - partitioned, pkv.get(key).value.decode()))
            except errors.JetStreamError as exc:
                during.append((time.monotonic() - partitioned, type(exc).__name__))
            if len(during) >= 5 and all(a != "v0" for _, a in during[-5:]):
                break  # L no longer answers as leader
            time.sleep(READ_EVERY)
        cluster.heal(node)
    return outcome(cluster, leader, meta, new, acked - partitioned, during)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--client", choices=["nats-py", "jetstream_sync"], default="nats-py")
    parser.add_argument("--attempts", type=int, default=5)
    parser.add_argument(
        "--meta-leader-too", action="store_true", help="cut off a node that leads the meta group too (nats-py)"
    )
    args = parser.parse_args()
    seen = 0
    with EmbeddedCluster(size=3, name="repro-read") as cluster:
        import jetstream_sync
        from jetstream_sync import KeyValueConfig

        with jetstream_sync.connect(cluster.urls) as nc:  # the bucket: R3, one value per key
            nc.jetstream(timeout=30).create_key_value(KeyValueConfig(bucket=BUCKET, replicas=3))
        for n in range(args.attempts):
            started = time.monotonic()
            if args.client == "nats-py":
                result = asyncio.run(attempt_nats_py(cluster, n, args.meta_leader_too))
            else:
                result = attempt_jetstream_sync(cluster, n)
            seen += result["anomaly"]
            print(f"attempt {n + 1} ({time.monotonic() - started:.0f}s): {result}", flush=True)
            cluster.wait_formed()
    print(f"stale leader reads: {seen} of {args.attempts} attempts ({args.client})")


if __name__ == "__main__":
    main()
