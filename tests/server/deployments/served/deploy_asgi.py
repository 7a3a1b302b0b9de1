"""A Django ASGI app for uvicorn: the workload from a sync view (Django runs it on a thread), from an async view
through ``sync_to_async``, and from an async view that calls the client on the event loop's thread."""

from __future__ import annotations

import json
import logging
import os
import sys

import django
import workload
from asgiref.sync import sync_to_async
from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import path

logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(process)d %(levelname)s %(name)s: %(message)s")


def work(request: HttpRequest, key: str) -> JsonResponse:
    return JsonResponse(workload.work(key))


async def async_work(request: HttpRequest, key: str) -> JsonResponse:
    return JsonResponse(await sync_to_async(workload.work)(key))


async def direct_work(request: HttpRequest, key: str) -> JsonResponse:
    """What not to do: the client called on the event loop's thread (it works, holding up the loop meanwhile,
    and the client logs a hint pointing at sync_to_async, once per process)."""
    return JsonResponse(workload.work(key))


def drain(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"pid": os.getpid(), "done": workload.drain()})


def not_found(request: HttpRequest, rest: str) -> HttpResponse:
    return HttpResponse(json.dumps({"error": rest}), status=404, content_type="application/json")


urlpatterns = [
    path("work/<str:key>", work),
    path("async-work/<str:key>", async_work),
    path("direct-work/<str:key>", direct_work),
    path("drain", drain),
    path("<path:rest>", not_found),
]

settings.configure(
    DEBUG=False,
    SECRET_KEY="deployments-test",
    ALLOWED_HOSTS=["127.0.0.1"],
    ROOT_URLCONF=__name__,
    INSTALLED_APPS=[],
    DATABASES={},
)
django.setup()

from django.core.asgi import get_asgi_application  # noqa: E402 - after settings.configure

application = get_asgi_application()
