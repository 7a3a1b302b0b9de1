"""Quickstart: connect, create a stream and a consumer, publish, and read the messages back.

python examples/quickstart.py                          # starts an embedded nats-server for the demo
python examples/quickstart.py nats://127.0.0.1:4222    # or use your own server (JetStream enabled)
"""

from __future__ import annotations

import contextlib
import sys

import jetstream_sync
from jetstream_sync import AckPolicy, ConsumerConfig, RetentionPolicy, StreamConfig
from jetstream_sync.testing import ServerNotInstalledError


def run(url: str) -> None:
    with jetstream_sync.connect(url, name="quickstart") as nc:
        js = nc.jetstream()
        stream = js.create_or_update_stream(
            StreamConfig(name="ORDERS", subjects=["orders.>"], retention=RetentionPolicy.WORK_QUEUE)
        )
        print(f"stream {stream.name}: subjects {stream.cached_info.config.subjects}")

        ack = js.publish("orders.new", b"order 1", msg_id="order-1")
        print(f"published order 1: stream={ack.stream} seq={ack.seq} duplicate={ack.duplicate}")
        again = js.publish("orders.new", b"order 1", msg_id="order-1")
        print(f"published order 1 again: seq={again.seq} duplicate={again.duplicate} (deduplicated)")

        futures = [js.publish_async("orders.new", f"order {i}".encode(), msg_id=f"order-{i}") for i in range(2, 11)]
        js.publish_async_complete(timeout=5)
        print(f"published {len(futures)} more asynchronously, last seq={futures[-1].result().seq}")

        cons = stream.create_or_update_consumer(ConsumerConfig(durable_name="dispatch", ack_policy=AckPolicy.EXPLICIT))
        print(f"consumer {cons.name}: {cons.info().num_pending} messages pending")

        handled = 0
        for msg in cons.fetch(10, expires=2.0):
            handled += 1
            msg.ack()
        print(f"fetched and acked {handled} messages")

        with cons.messages(max_messages=100) as it:
            js.publish("orders.new", b"late order", msg_id="order-late")
            msg = it.next(timeout=5)
            msg.ack_sync()
            print(f"messages() got {msg.data!r} (stream seq {msg.metadata.sequence.stream})")

        print(f"stream now holds {stream.info().state.messages} messages (work queue: acked ones are removed)")


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
        sys.exit(f"{exc}; or give a running server: python examples/quickstart.py nats://127.0.0.1:4222")
