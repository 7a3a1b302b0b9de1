"""The unit of work every deployment in the matrix runs, whatever serves it (a uWSGI or gunicorn worker, a
Celery task, a Django view, a notebook cell, a pool process): publish with a msg_id, take one message from the
shared durable consumer, record it as done, ack it.

"Done" is a publish with the key as its msg_id *before* the ack, so a message redelivered after a worker died
between the two is recorded once: the test reads the stream from outside and finds every key stored once on
``deploy.in.*`` and once on ``deploy.done.*``, and nothing pending or unacked on the consumer.

The client is the library's per-process one (``process_client``): made on first use in the process that uses it,
so a forked worker never touches its parent's.
"""

from __future__ import annotations

import os

import jetstream_sync
from jetstream_sync.integrations import ConnectionSettings, process_client

STREAM = "DEPLOY"
CONSUMER = "work"


def client() -> jetstream_sync.Client:
    """This process's client for ``$NATS_URL`` (read on each call: a forked pool process may be handed work
    for another server than the one its parent imported this module for)."""
    return process_client(
        ConnectionSettings(servers=os.environ.get("NATS_URL", "nats://127.0.0.1:4222"), name="deploy")
    )


def work(key: str) -> dict[str, object]:
    """Publish ``key`` (msg_id ``in-<key>``), then take one message of the consumer and finish it. Every call
    publishes before it pulls, so every pull finds a message (the test relies on that to count)."""
    js = client().jetstream()
    ack = js.publish(f"deploy.in.{key}", key.encode(), msg_id=f"in-{key}")
    done = [finish(js, msg) for msg in js.consumer(STREAM, CONSUMER).fetch(1, expires=10)]
    return {"pid": os.getpid(), "seq": ack.seq, "done": done}


def drain() -> list[str]:
    """Finish whatever the consumer still holds (a message redelivered after a worker was killed holding it)."""
    js = client().jetstream()
    consumer = js.consumer(STREAM, CONSUMER)
    finished: list[str] = []
    while True:
        batch = [finish(js, msg) for msg in consumer.fetch(100, expires=1)]
        if not batch:
            return finished
        finished += batch


def finish(js: jetstream_sync.JetStream, msg: jetstream_sync.Msg) -> str:
    key = msg.data.decode()
    js.publish(f"deploy.done.{key}", str(os.getpid()).encode(), msg_id=f"done-{key}")
    msg.ack_sync()
    return key


def notify(key: str) -> None:
    """A core publish, coalesced and written by the client's IO thread after the caller returned: it reaches
    the server only if that thread runs while the process is otherwise idle."""
    client().publish("deploy.notify", key.encode())
