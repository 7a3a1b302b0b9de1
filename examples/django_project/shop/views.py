"""Views using the three parts of the app: the cache (a visit counter), JetStream (an order event) and Django
tasks (the order's receipt, run by the task worker)."""

from __future__ import annotations

import json

from django.core.cache import cache
from django.http import HttpRequest, JsonResponse

from jetstream_sync.integrations.django import get_jetstream
from shop.tasks import send_receipt


def order(request: HttpRequest, item: str) -> JsonResponse:
    """Count the order in the cache (atomic across processes) and publish it for the fulfilment worker."""
    cache.add("orders:count", 0, timeout=None)
    count = cache.incr("orders:count")
    ack = get_jetstream().publish(f"orders.{item}", json.dumps({"item": item, "n": count}).encode())
    receipt = send_receipt.enqueue(item, count)  # returns at once; a worker process runs it
    return JsonResponse({"item": item, "count": count, "seq": ack.seq, "receipt": receipt.id})


def receipt(request: HttpRequest, result_id: str) -> JsonResponse:
    """The receipt task's result, read from the results bucket (any process can)."""
    result = send_receipt.get_result(result_id)
    body = {"status": str(result.status), "attempts": result.attempts}
    if result.is_finished and not result.errors:
        body["receipt"] = result.return_value
    return JsonResponse(body)
