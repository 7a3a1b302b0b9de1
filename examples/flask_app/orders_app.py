"""A Flask app that takes orders over HTTP and a worker command that fulfils them, through JetStream.

- ``POST /orders`` publishes the order to the work-queue stream ORDERS (``orders.new``) and answers with its
  stream sequence, the order's id;
- ``flask --app orders_app:create_app jetstream consume ORDERS fulfil --handler orders_app:fulfil`` runs
  :func:`fulfil` for each order (acked when it returns) and records it in the key-value bucket ``fulfilled``;
- ``GET /orders/<id>`` answers ``pending`` or ``fulfilled`` from that bucket.

Settings: ``FLASK_JETSTREAM_SERVERS=nats://127.0.0.1:4222`` in the environment (``from_prefixed_env``), or
``create_app({"JETSTREAM_SERVERS": ...})``. ``python examples/flask_app/run.py`` runs the whole thing.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from flask import Flask, request

from jetstream_sync import AckPolicy, ConsumerConfig, KeyValueConfig, Msg, RetentionPolicy, StreamConfig, errors
from jetstream_sync.integrations.flask import JetStream

jetstream = JetStream()


def create_app(config: Mapping[str, object] | None = None) -> Flask:
    app = Flask(__name__)
    app.config.from_prefixed_env()  # FLASK_JETSTREAM_SERVERS=... -> JETSTREAM_SERVERS
    app.config.update(config or {})
    jetstream.init_app(app)  # checks the JETSTREAM_* settings; connects nothing until the first use

    @app.post("/orders")
    def new_order() -> tuple[dict[str, object], int]:
        order = request.get_json(force=True)
        ack = jetstream.js.publish("orders.new", json.dumps(order).encode())
        return {"id": ack.seq}, 201

    @app.get("/orders/<int:order_id>")
    def order_status(order_id: int) -> dict[str, object]:
        try:
            entry = jetstream.js.key_value("fulfilled").get(str(order_id))
        except errors.KeyNotFoundError:
            return {"id": order_id, "status": "pending"}
        return {"id": order_id, "status": "fulfilled", "by": entry.value.decode()}

    @app.cli.command("setup")
    def setup() -> None:
        """Create the ORDERS stream, its durable consumer 'fulfil' and the 'fulfilled' bucket."""
        create_streams()

    return app


def create_streams() -> None:
    """ORDERS keeps an order until it is fulfilled (work queue); 'fulfil' is the workers' durable consumer."""
    js = jetstream.js
    stream = js.create_or_update_stream(
        StreamConfig(name="ORDERS", subjects=["orders.>"], retention=RetentionPolicy.WORK_QUEUE)
    )
    stream.create_or_update_consumer(
        ConsumerConfig(durable_name="fulfil", filter_subject="orders.new", ack_policy=AckPolicy.EXPLICIT)
    )
    js.create_or_update_key_value(KeyValueConfig(bucket="fulfilled"))


def fulfil(msg: Msg) -> None:
    """The worker's handler: runs in the app's context, so the extension works here as in a view. Returning
    acks the order (the work queue then drops it); raising would nak it for redelivery."""
    order = json.loads(msg.data)
    jetstream.js.key_value("fulfilled").put(str(msg.metadata.sequence.stream), f"worker for {order['item']}".encode())
