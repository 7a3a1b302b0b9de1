"""A kombu message on the wire: the body as the NATS payload, everything else in headers.

kombu hands a transport a dict (``body``, ``content-type``, ``content-encoding``, ``headers``,
``properties``). The body goes out as it is (no base64, unlike kombu's virtual transports: a NATS payload is
bytes), so ``nats stream view`` shows a Celery task's JSON arguments as they are. The rest is one JSON header,
``Kombu-Message``, plus ``Content-Type`` for people and tools that look at the stream.

A message's ``expiration`` (milliseconds, AMQP's per-message TTL) becomes a per-message TTL on the server
(``Nats-TTL``, rounded up to whole seconds, nats-server 2.11+) and is checked again, exactly, when the message
is received; a queue's ``message_ttl`` is checked on receipt only (the server has no per-consumer TTL).

The ``Nats-Msg-Id`` (`message_id`) makes a publish that kombu retries after a connection error (the
``retry=True`` of ``Producer.publish``, Celery's ``task_publish_retry``) stored once: it is the message's
``message_id`` property when the producer set one, else an id made for the publish and kept in the properties
dict that kombu passes again to each retry. It is not derived from a Celery task's id: Celery sends more than
one message with one task id (a task replaced by a canvas hands its id to the canvas's last task), and the
stream would have dropped the second as a duplicate.
"""

from __future__ import annotations

import json
import math
import time
import uuid
from datetime import datetime, timezone
from typing import Any

from kombu.utils import json as kombu_json

from ...headers import Headers
from ...message import Msg

__all__ = [
    "HEADER",
    "PUBLISH_ID",
    "decode",
    "dumps_bindings",
    "encode",
    "expired",
    "loads_bindings",
    "message_id",
    "server_ttl",
    "ttl_seconds",
]

#: the header that carries kombu's content type and encoding, headers and properties
HEADER = "Kombu-Message"
#: the property a publish's ``Nats-Msg-Id`` is kept in across kombu's retries of it (never sent)
PUBLISH_ID = "x-jetstream-publish-id"
#: properties that belong to one delivery or one publish, not to the message: not sent
_PER_DELIVERY = ("delivery_tag", "delivery_info", "body_encoding", PUBLISH_ID)


def message_id(message: dict[str, Any], exchange: str, routing_key: str) -> str:
    """The ``Nats-Msg-Id`` of a publish (see the module docstring): the message's ``message_id`` property when
    the producer set one, else an id made for this publish and kept in its properties (`PUBLISH_ID`),
    which kombu hands again, the same dict, to every retry of the publish."""
    properties = message.get("properties")
    explicit = properties.get("message_id") if isinstance(properties, dict) else None
    if explicit:
        return f"kombu:{explicit}"
    if isinstance(properties, dict):
        return str(properties.setdefault(PUBLISH_ID, f"kombu:{uuid.uuid4().hex}"))
    return f"kombu:{uuid.uuid4().hex}"


def ttl_seconds(message: dict[str, Any]) -> float | None:
    """The message's ``expiration`` in seconds (kombu sends milliseconds as a string), or None."""
    raw = (message.get("properties") or {}).get("expiration")
    if raw in (None, ""):
        return None
    try:
        return max(0.0, float(raw) / 1000.0)
    except (TypeError, ValueError):  # not a number of milliseconds: no expiry, as kombu's virtual transports read it
        return None


def server_ttl(seconds: float) -> float:
    """The ``Nats-TTL`` of an expiration: whole seconds, at least 1 (the server's minimum)."""
    return float(max(1, math.ceil(seconds)))


def encode(message: dict[str, Any], exchange: str, routing_key: str) -> tuple[bytes, dict[str, str]]:
    """The payload and headers of ``message`` (a dict from ``Channel.prepare_message``) published to
    ``exchange`` with ``routing_key`` (kept for the receiver's ``delivery_info``)."""
    body = message.get("body")
    if body is None:
        data = b""
    elif isinstance(body, str):
        data = body.encode()
    else:
        data = bytes(body)
    properties = {k: v for k, v in (message.get("properties") or {}).items() if k not in _PER_DELIVERY}
    meta = {
        "content-type": message.get("content-type"),
        "content-encoding": message.get("content-encoding"),
        "headers": message.get("headers") or {},
        "properties": properties,
        "route": [exchange, routing_key],
    }
    headers = {HEADER: kombu_json.dumps(meta, ensure_ascii=True)}
    content_type = message.get("content-type")
    if content_type:
        headers["Content-Type"] = str(content_type)
    return data, headers


def decode(msg: Msg, delivery_tag: str) -> dict[str, Any]:
    """The kombu message dict of a received ``msg``, with a new ``delivery_tag``; its ``delivery_info`` has the
    exchange and routing key it was published with."""
    raw = _meta(msg.headers)
    properties = dict(raw.get("properties") or {})
    route = raw.get("route") or ["", ""]
    delivery_info: dict[str, Any] = {"exchange": str(route[0]), "routing_key": str(route[1])}
    try:
        delivery_info["redelivered"] = msg.metadata.num_delivered > 1
    except (ValueError, AttributeError):
        delivery_info["redelivered"] = False
    properties.update(delivery_tag=delivery_tag, delivery_info=delivery_info)
    return {
        "body": msg.data,
        "content-type": raw.get("content-type"),
        "content-encoding": raw.get("content-encoding"),
        "headers": raw.get("headers") or {},
        "properties": properties,
    }


def _meta(headers: Headers | None) -> dict[str, Any]:
    if headers is None:
        return {}
    raw = headers.get(HEADER)
    if not raw:
        return {}
    try:
        value = kombu_json.loads(raw)
    except (ValueError, TypeError):
        return {}
    return value if isinstance(value, dict) else {}


def expired(msg: Msg, queue_ttl: float | None, now: float | None = None) -> bool:
    """Whether ``msg`` outlived its own ``expiration`` or its queue's ``message_ttl`` (seconds) by now."""
    limits = [t for t in (queue_ttl, _message_ttl(msg)) if t is not None]
    if not limits:
        return False
    try:
        stored: datetime = msg.metadata.timestamp
    except (ValueError, AttributeError):
        return False
    if stored.tzinfo is None:
        stored = stored.replace(tzinfo=timezone.utc)
    age = (now if now is not None else time.time()) - stored.timestamp()
    return age >= min(limits)


def _message_ttl(msg: Msg) -> float | None:
    properties = _meta(msg.headers).get("properties") or {}
    return ttl_seconds({"properties": properties})


def dumps_bindings(bindings: list[list[str]]) -> str:
    return json.dumps(bindings, separators=(",", ":"))


def loads_bindings(text: str | None) -> list[list[str]]:
    if not text:
        return []
    try:
        value = json.loads(text)
    except ValueError:
        return []
    return [list(map(str, b)) for b in value if isinstance(b, list) and len(b) == 3]
