"""A Celery app whose tasks publish to and consume from JetStream (see run.py for the one-command demo).

The broker is kombu's filesystem transport, so the example needs nothing but a nats-server: tasks are files in
``CELERY_BROKER_DIR``. ``JETSTREAM_URL`` is the nats-server; each prefork pool process connects its own client
on first use (jetstream_sync.integrations.celery), never the parent's.
"""

from __future__ import annotations

import os

from celery import Celery

from jetstream_sync.integrations.celery import JetStream

broker_dir = os.environ.get("CELERY_BROKER_DIR", "/tmp/jetstream-sync-celery")
app = Celery("tasks", broker="filesystem://")
app.conf.update(
    broker_transport_options={
        "data_folder_in": broker_dir,
        "data_folder_out": broker_dir,
        "control_folder": os.path.join(broker_dir, "control"),  # kombu's default is ./control, in the cwd
        "polling_interval": 0.05,
    },
    task_ignore_result=True,
    worker_hijack_root_logger=False,
    broker_connection_retry_on_startup=True,
    jetstream={"SERVERS": [os.environ.get("JETSTREAM_URL", "nats://127.0.0.1:4222")], "NAME": "celery-worker"},
)
jetstream = JetStream(app)


@app.task(name="tasks.record")
def record(order_id: str) -> int:
    """Record an order: publish it to the ORDERS stream, once, whichever process runs the task."""
    ack = jetstream.js.publish("orders.recorded", f"{order_id} by {os.getpid()}".encode(), msg_id=order_id)
    return ack.seq


@app.task(name="tasks.bill")
def bill(batch: int) -> int:
    """Take up to ``batch`` recorded orders from the durable consumer ``billing``, ack them, and publish one
    ``billing.done`` message per order (the consume side of a task)."""
    js = jetstream.js
    billed = 0
    for msg in js.consumer("ORDERS", "billing").fetch(batch, expires=1):
        order_id = msg.data.split(b" ", 1)[0].decode()
        js.publish("billing.done", order_id.encode(), msg_id=f"billed-{order_id}")
        msg.ack_sync()
        billed += 1
    return billed
