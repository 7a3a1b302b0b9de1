"""NATS services (ADR-32, "micro") for synchronous code: endpoints written as Flask views, run on a thread pool.

::

    from jetstream_sync.services import Request, Service, ServiceError

    service = Service("orders", "1.0.0", description="Order intake", workers=8)

    @service.endpoint()                       # listens on "create", queue group "q"
    def create(request: Request) -> dict:
        order = request.json()                # a body that is not JSON answers 400
        if "item" not in order:
            raise ServiceError(400, "an order needs an item")
        return {"id": 42}                     # the reply (bytes, str, dict/list as JSON, None, Response)

    with jetstream_sync.connect(url) as nc, service.start(nc) as instance:
        ...                                   # served until the block ends: a graceful stop

Any NATS services client finds and calls it: ``nats micro ls``, nats.go, nats.js's ``Svcm.client()``, nats-py, and
[`ServiceClient`][jetstream_sync.services.ServiceClient] here, which finds theirs too. A handler's return value is the
reply; a [`ServiceError`][jetstream_sync.services.ServiceError] it raises becomes the ``Nats-Service-Error`` /
``Nats-Service-Error-Code`` headers; anything else it raises is logged and answered ``500``. Handlers run on the
service's worker threads, never on the client's IO thread; a full endpoint answers ``503`` at once; PING, INFO and STATS
are answered by the IO thread, so discovery stays prompt when every handler is busy. The services guide
(docs/guides/services.md) explains each part; ``manage.py jetstream_service`` and ``flask jetstream service`` run a
service as a process.
"""

from __future__ import annotations

from ._checks import API_PREFIX, DEFAULT_QUEUE_GROUP, ERROR_CODE_HEADER, ERROR_HEADER
from ._client import ServiceClient
from ._errors import ServiceError
from ._instance import DEFAULT_STOP_TIMEOUT, ServiceInstance, control_subject
from ._models import (
    INFO_RESPONSE_TYPE,
    PING_RESPONSE_TYPE,
    STATS_RESPONSE_TYPE,
    EndpointInfo,
    EndpointStats,
    PingResponse,
    ServiceInfo,
    ServiceStats,
)
from ._request import Handler, Reply, Request, Response
from .service import (
    DEFAULT_MAX_PENDING,
    DEFAULT_MAX_PENDING_BYTES,
    DEFAULT_WORKERS,
    Endpoint,
    Group,
    Service,
    StatsHandler,
)

__all__ = [
    "API_PREFIX",
    "DEFAULT_MAX_PENDING",
    "DEFAULT_MAX_PENDING_BYTES",
    "DEFAULT_QUEUE_GROUP",
    "DEFAULT_STOP_TIMEOUT",
    "DEFAULT_WORKERS",
    "ERROR_CODE_HEADER",
    "ERROR_HEADER",
    "INFO_RESPONSE_TYPE",
    "PING_RESPONSE_TYPE",
    "STATS_RESPONSE_TYPE",
    "Endpoint",
    "EndpointInfo",
    "EndpointStats",
    "Group",
    "Handler",
    "PingResponse",
    "Reply",
    "Request",
    "Response",
    "Service",
    "ServiceClient",
    "ServiceError",
    "ServiceInfo",
    "ServiceInstance",
    "ServiceStats",
    "StatsHandler",
    "control_subject",
]
