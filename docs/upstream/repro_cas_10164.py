"""A KV compare-and-set refused with err_code 10164 ("wrong last sequence") that is stored anyway.

See kv-cas-refused-but-stored.md next to this file. From the project's root:

    python docs/upstream/repro_cas_10164.py                          # nats-py alone talks to the cluster
    python docs/upstream/repro_cas_10164.py --client jetstream_sync  # the same through this project's client

A 3-node EmbeddedCluster (real nats-servers; each route runs through a proxy, so one node can be cut off from
the others while its clients still reach it). Per attempt, on a fresh key:

1. put the key (revision ``rev``); find the stream leader L; a client P connects to L alone;
2. partition L, and have P write the key once: L proposes it and can never commit it, so the key stays
   "in flight" on L, the state in which L refuses any compare-and-set on it at once with 10164;
3. wait for the other two nodes to elect a new leader L', then heal L;
4. P sends ``update(key, "cas-<i>", last=rev)`` every 10 ms until L' answers alone.

L believes it leads until a message of the newer term reaches it, up to a heartbeat (1 s) after the routes come
back, and a stream's leader subscribes to the stream's subjects. So a publish in that window reaches both: L
refuses it with 10164 in about a millisecond, L' stores it and acknowledges a few milliseconds later, and the
publisher keeps the first answer. The nats-py variant gives every CAS its own reply subject and keeps every
answer, which shows the two answers to one publish; the stored value is then read from the leader once all
three nodes agree on it.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import json
import time
import urllib.request
from typing import Any

from jetstream_sync.testing import EmbeddedCluster

BUCKET = "REPRO"
STREAM = f"KV_{BUCKET}"
EXPECTED_LAST = "Nats-Expected-Last-Subject-Sequence"
CAS_EVERY = 0.01
CAS_FOR = 6.0  # seconds of CAS after the heal: the routes come back within about a second


# -- the cluster's view, from each node's monitoring port (no client library involved) -----------------------
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


# -- nats-py alone on the data path -------------------------------------------------------------------------------
async def attempt_nats_py(cluster: EmbeddedCluster, n: int, resend_after: float) -> dict[str, Any]:
    import nats

    key = f"k{n}"
    subject = f"$KV.{BUCKET}.{key}"
    everyone = await nats.connect(cluster.urls)
    kv = await everyone.jetstream(timeout=10).key_value(BUCKET)
    rev = await kv.put(key, b"v0")
    leader = wait_leader(cluster, list(range(cluster.size)))
    node = cluster.names.index(leader)
    p = await nats.connect(cluster.servers[node].url, max_reconnect_attempts=-1)
    replies: dict[int, list[tuple[float, dict[str, Any]]]] = {}
    sent: dict[int, float] = {}

    async def on_reply(msg: Any) -> None:
        i = int(msg.subject.rsplit(".", 1)[1])
        replies.setdefault(i, []).append((time.monotonic() - sent[i], json.loads(msg.data)))

    inbox = p.new_inbox()
    await p.subscribe(f"{inbox}.*", cb=on_reply)
    await p.flush()

    cluster.partition(node)
    sent[-1] = time.monotonic()  # the write L can never commit: no answer is expected
    await p.publish(subject, b"during-partition", reply=f"{inbox}.-1", headers={EXPECTED_LAST: str(rev)})
    await p.flush()
    majority = [i for i in range(cluster.size) if i != node]
    new = await asyncio.to_thread(wait_leader, cluster, majority, leader)
    cluster.heal(node)
    healed = time.monotonic()
    i = 0
    while time.monotonic() - healed < CAS_FOR:
        sent[i] = time.monotonic()
        await p.publish(subject, f"cas-{i}".encode(), reply=f"{inbox}.{i}", headers=cas_headers(n, i, rev))
        i += 1
        await asyncio.sleep(CAS_EVERY)
        if any(_code(answer) in (0, 10071) for answers in replies.values() for _, answer in answers):
            break  # L' answered on its own (an ack or "wrong last sequence: N"): the window is over
    await asyncio.sleep(0.5)
    await asyncio.to_thread(wait_leader, cluster, list(range(cluster.size)))
    read = json.dumps({"last_by_subj": subject}).encode()
    for _ in range(50):  # the healed node may still answer 10008 ("no meta leader") before the leader answers
        got = json.loads((await everyone.request(f"$JS.API.STREAM.MSG.GET.{STREAM}", read, timeout=5)).data)
        if "message" in got:
            break
        await asyncio.sleep(0.1)
    message = got["message"]
    stored = base64.b64decode(message["data"]).decode()
    j = int(stored.split("-")[1]) if stored.startswith("cas-") else None
    to_stored = replies.get(j, []) if j is not None else []  # every answer to the CAS whose value was stored
    # What a client can do: send a refused CAS again, same Nats-Msg-Id, once the deposed leader has stepped down.
    # The leader checks the id before the expected revision: "duplicate" (with the sequence) means it was stored.
    resent: dict[str, int] = {}
    await asyncio.sleep(resend_after)
    for k, answers in sorted(replies.items()):
        if k >= 0 and answers and _code(answers[0][1]) != 0:
            again = await everyone.request(subject, f"cas-{k}".encode(), timeout=5, headers=cas_headers(n, k, rev))
            outcome = _describe(json.loads(again.data)) + (" (the stored one)" if k == j else "")
            resent[outcome] = resent.get(outcome, 0) + 1
    await p.close()
    await everyone.close()
    return {
        "old_leader": leader,
        "new_leader": new,
        "sent": i,
        "stored": f"{stored} at revision {message['seq']}",
        "answers_to_stored": [(round(t * 1000, 1), _describe(a)) for t, a in to_stored],
        "answered_twice": sum(len(a) > 1 for k, a in replies.items() if k >= 0),
        "anomaly": bool(to_stored) and _code(to_stored[0][1]) == 10164,
        "refused_cas_sent_again": resent,
    }


def cas_headers(n: int, i: int, rev: int) -> dict[str, str]:
    """A compare-and-set's headers: the revision it expects, and an id of its own for the stream's dedupe."""
    return {EXPECTED_LAST: str(rev), "Nats-Msg-Id": f"repro-{n}-{i}"}


def _code(answer: dict[str, Any]) -> int:
    """0 for an ack, else the err_code."""
    return int((answer.get("error") or {}).get("err_code", -1)) if "error" in answer else 0


def _describe(answer: dict[str, Any]) -> str:
    if "error" in answer:
        return f"{answer['error'].get('err_code')} {answer['error'].get('description')}"
    return f"ack seq={answer.get('seq')}" + (" duplicate" if answer.get("duplicate") else "")


# -- the same through jetstream_sync ----------------------------------------------------------------------------------
def attempt_jetstream_sync(cluster: EmbeddedCluster, n: int) -> dict[str, Any]:
    import jetstream_sync
    from jetstream_sync import errors

    key = f"k{n}"
    with jetstream_sync.connect(cluster.urls, max_reconnect_attempts=-1) as everyone:
        kv = everyone.jetstream(timeout=10).key_value(BUCKET)
        rev = kv.put(key, b"v0")
        leader = wait_leader(cluster, list(range(cluster.size)))
        node = cluster.names.index(leader)
        with jetstream_sync.connect(cluster.servers[node].url, max_reconnect_attempts=-1) as p:
            pkv = p.jetstream(timeout=1).key_value(BUCKET)
            cluster.partition(node)
            with contextlib.suppress(errors.TimeoutError):  # L proposes it and cannot commit it
                pkv.update(key, b"during-partition", last=rev)
            majority = [i for i in range(cluster.size) if i != node]
            new = wait_leader(cluster, majority, leader)
            cluster.heal(node)
            healed = time.monotonic()
            refused: dict[int, tuple[int, float]] = {}
            acked: int | None = None
            i = 0
            while time.monotonic() - healed < CAS_FOR:
                started = time.monotonic()
                try:
                    pkv.update(key, f"cas-{i}".encode(), last=rev)
                    acked = i
                    break
                except errors.KeyWrongLastSequenceError as exc:
                    refused[i] = (exc.err_code, (time.monotonic() - started) * 1000)
                    if exc.err_code == 10071:
                        break  # L' answered alone: the window is over
                except errors.TimeoutError:
                    pass
                finally:
                    i += 1
                time.sleep(CAS_EVERY)
        wait_leader(cluster, list(range(cluster.size)))
        entry = kv.get(key, read="leader")
    stored = entry.value.decode()
    j = int(stored.split("-")[1]) if stored.startswith("cas-") else None
    return {
        "old_leader": leader,
        "new_leader": new,
        "sent": i,
        "stored": f"{stored} at revision {entry.revision}",
        "acked": acked,
        "refusal_of_stored": refused.get(j) if j is not None else None,
        "anomaly": j is not None and j in refused and refused[j][0] == 10164,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--client", choices=["nats-py", "jetstream_sync"], default="nats-py")
    parser.add_argument("--attempts", type=int, default=5)
    parser.add_argument(
        "--resend-after", type=float, default=2.0, help="seconds before the refused CASes are sent again (nats-py)"
    )
    args = parser.parse_args()
    seen = 0
    with EmbeddedCluster(size=3, name="repro-cas") as cluster:
        import jetstream_sync
        from jetstream_sync import KeyValueConfig

        with jetstream_sync.connect(cluster.urls) as nc:  # the bucket: R3, one value per key
            nc.jetstream(timeout=30).create_key_value(KeyValueConfig(bucket=BUCKET, replicas=3))
        for n in range(args.attempts):
            started = time.monotonic()
            if args.client == "nats-py":
                result = asyncio.run(attempt_nats_py(cluster, n, args.resend_after))
            else:
                result = attempt_jetstream_sync(cluster, n)
            seen += result["anomaly"]
            print(f"attempt {n + 1} ({time.monotonic() - started:.0f}s): {result}", flush=True)
            cluster.wait_formed()
    print(f"refused with 10164 and stored: {seen} of {args.attempts} attempts ({args.client})")


if __name__ == "__main__":
    main()
