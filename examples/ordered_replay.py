"""Replay a stream in order from a point in time with an ordered consumer (no acks, no gaps, no duplicates).

python examples/ordered_replay.py                          # an embedded nats-server with demo data
python examples/ordered_replay.py nats://127.0.0.1:4222    # or your own server (JetStream enabled)

An audit or a rebuild of a read model wants every message since some moment, in stream order, exactly once,
and to stop when it has caught up. ``until_drained=True`` ends the read there; if the consumer behind it is
lost on the way (a restart, a deletion, a reconnect) the client recreates it after the last message it handed
out, which ``stats()`` counts.

What it prints: the stream LEDGER gets 5 entries ("before 0".."before 4"), then a moment is taken, then 10 more
("entry 0".."entry 9"), the even ones on ``ledger.us`` and the odd ones on ``ledger.eu``. The replay asks for
``ledger.eu`` from that moment on, so it prints exactly entries 1, 3, 5, 7 and 9, in that order (the "before"
entries predate the moment, the even ones are on the other subject). The last line counts the times the client
had to recreate the consumer on the way: 0 {} when nothing went wrong; a reason per reset otherwise.
"""

from __future__ import annotations

import contextlib
import sys
import time
from datetime import datetime, timezone

import jetstream_sync
from jetstream_sync import DeliverPolicy, OrderedConsumerConfig, StreamConfig
from jetstream_sync.testing import ServerNotInstalledError


def run(url: str) -> None:
    with jetstream_sync.connect(url, name="ordered-replay") as nc:
        js = nc.jetstream()
        js.create_or_update_stream(StreamConfig(name="LEDGER", subjects=["ledger.>"]))
        for i in range(5):
            js.publish(f"ledger.{'eu' if i % 2 else 'us'}", f"before {i}".encode())
        time.sleep(0.01)  # the demo's "from now on" must fall strictly after the first five timestamps
        since = datetime.now(timezone.utc)
        for i in range(10):
            js.publish(f"ledger.{'eu' if i % 2 else 'us'}", f"entry {i}".encode())
        print(
            f"LEDGER: 5 entries before {since:%H:%M:%S.%f} UTC, then 'entry 0'..'entry 9' after it"
            " (even ones on ledger.us, odd ones on ledger.eu)"
        )
        print(f"replaying ledger.eu from {since:%H:%M:%S.%f} UTC in stream order; expected: the odd entries 1 to 9")

        replay = js.ordered_consumer(
            "LEDGER",
            OrderedConsumerConfig(
                filter_subjects=["ledger.eu"], deliver_policy=DeliverPolicy.BY_START_TIME, opt_start_time=since
            ),
        )
        replayed = []
        with replay.messages(until_drained=True) as it:
            for msg in it:
                replayed.append(msg.data.decode())
            stats = it.stats()
        print(f"replayed {len(replayed)} ledger.eu entries since {since:%H:%M:%S.%f}: {', '.join(replayed)}")
        print(
            f"consumer resets on the way: {stats.resets} {stats.reset_reasons}"
            " (the client recreates a lost consumer after the last entry it handed out; 0 when nothing went wrong)"
        )


def main() -> None:
    if len(sys.argv) > 1:
        run(sys.argv[1])
        return
    from jetstream_sync.testing import EmbeddedServer

    with EmbeddedServer() as server, contextlib.suppress(KeyboardInterrupt):
        print(f"started an embedded nats-server at {server.url}")
        run(server.url)


if __name__ == "__main__":
    try:
        main()
    except ServerNotInstalledError as exc:  # no nats-server to start: the message names the extra that has one
        sys.exit(f"{exc}; or give a running server: python examples/ordered_replay.py nats://127.0.0.1:4222")
