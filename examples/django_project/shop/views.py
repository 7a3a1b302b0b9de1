"""A view that uses both halves of the app: the cache (a visit counter) and JetStream (an order event)."""

from __future__ import annotations

import json

from django.core.cache import cache
from django.http import HttpRequest, JsonResponse

from jetstream_sync.integrations.django import get_jetstream


def order(request: HttpRequest, item: str) -> JsonResponse:
    """Count the order in the cache (atomic across processes) and publish it for the fulfilment worker."""
    cache.add("orders:count", 0, timeout=None)
    count = cache.incr("orders:count")
    ack = get_jetstream().publish(f"orders.{item}", json.dumps({"item": item, "n": count}).encode())
    return JsonResponse({"item": item, "count": count, "seq": ack.seq})
