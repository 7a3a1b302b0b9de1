"""kombu on JetStream: ``jetstream_sync.integrations.kombu.Transport``, a kombu transport (Celery's broker).

    import kombu
    with kombu.Connection("nats://127.0.0.1:4222", transport="jetstream_sync.integrations.kombu.Transport") as conn:
        queue = conn.SimpleQueue("orders")
        queue.put({"id": 1})
        message = queue.get(timeout=5)
        message.ack()

Importing this package also registers the short scheme ``jetstream://`` (and ``jetstreams://`` for TLS) with
kombu, so ``kombu.Connection("jetstream://127.0.0.1:4222")`` works in a process that imported it.

The layout (one interest-retention stream, a durable consumer per queue, bindings as filter subjects), the
transport options and what is not supported are in docs/frameworks/celery.md; the modules say why:
``_layout`` (subjects and names), ``_queues`` (declarations), ``_delivery`` (pullers, prefetch, keep-alive),
``_qos`` (prefetch and unacked messages), ``_wire`` (the message on the wire), ``_settings`` (connection and
options), ``transport`` (kombu's classes).
"""

from __future__ import annotations

from kombu.transport import TRANSPORT_ALIASES

from ._layout import band_of, consumer_name, message_subject
from ._qos import QoS
from ._settings import Options
from .transport import Channel, Transport

__all__ = ["Channel", "Options", "QoS", "Transport", "band_of", "consumer_name", "message_subject"]

#: the name kombu resolves ``jetstream://`` URLs to (kombu's aliases are module:attribute paths)
TRANSPORT_PATH = "jetstream_sync.integrations.kombu:Transport"

TRANSPORT_ALIASES.setdefault("jetstream", TRANSPORT_PATH)
TRANSPORT_ALIASES.setdefault("jetstreams", TRANSPORT_PATH)
