"""Service, Group and Endpoint: a service's definition, written once at import time as a Flask app is.

A definition holds no connection: [`Service.start`][jetstream_sync.services.Service.start] runs it on a client and
returns the running [`ServiceInstance`][jetstream_sync.services.ServiceInstance] (one definition may run several
instances, each with its own id). So a module can define a service and a management command, a test or a ``__main__``
block can run it.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from datetime import timedelta
from typing import TYPE_CHECKING, TypeVar

import attrs

from .. import errors
from .._validate import check_callable, check_control_line, check_int, check_str_or_none
from ._checks import (
    DEFAULT_QUEUE_GROUP,
    check_group,
    check_limit,
    check_metadata,
    check_service_name,
    check_version,
    endpoint_subject,
    queue_group_of,
)
from ._request import Handler, Reply, Request

if TYPE_CHECKING:
    from ..client import Client
    from ._instance import ServiceInstance
    from ._models import EndpointStats

__all__ = ["DEFAULT_MAX_PENDING", "DEFAULT_MAX_PENDING_BYTES", "DEFAULT_WORKERS", "Endpoint", "Group", "Service"]

#: the worker threads of a service unless it says otherwise
DEFAULT_WORKERS = 4
#: requests of one endpoint that may wait for a worker; past it, new ones are answered 503 at once
DEFAULT_MAX_PENDING = 256
#: bytes (bodies and headers) of one endpoint's waiting requests; past it, new ones are answered 503 at once
DEFAULT_MAX_PENDING_BYTES = 64 * 1024 * 1024

#: what a stats handler is: a function of an endpoint's counters returning JSON-able data for its ``data``
StatsHandler = Callable[["EndpointStats"], object]

H = TypeVar("H", bound=Callable[[Request], Reply])


@attrs.frozen(kw_only=True)
class Endpoint:
    """One endpoint of a service definition (made by ``@service.endpoint()`` or ``add_endpoint``).

    ``subject`` is the full subject it listens on (its group's prefix included; wildcards allowed);
    ``queue_group`` is "" when it has none (every instance gets every request). ``concurrency`` is how many of
    its requests run at once (None: as many as the service has workers), ``max_pending`` and
    ``max_pending_bytes`` bound the requests waiting for a worker (None: the service's bounds).
    """

    name: str
    subject: str
    queue_group: str
    handler: Handler = attrs.field(repr=False)
    metadata: Mapping[str, str] = attrs.field(factory=dict)
    concurrency: int | None = None
    max_pending: int | None = None
    max_pending_bytes: int | None = None


class Group:
    """A prefix for endpoint subjects, with a default queue group: ``orders = service.group("orders")``, then
    ``@orders.endpoint()`` listens on ``orders.<name>``. Groups nest (``orders.group("admin")``)."""

    def __init__(self, service: Service, prefix: str, queue_group: str) -> None:
        self._service = service
        self.prefix = prefix
        self.queue_group = queue_group

    def __repr__(self) -> str:
        return f"Group({self.prefix!r}, queue_group={self.queue_group!r}, service={self._service.name!r})"

    def group(self, name: str, *, queue_group: str | None = None) -> Group:
        """A group under this one: its prefix is ``<this prefix>.<name>``; ``queue_group`` None inherits this
        group's, "" means none."""
        check_group(name)
        prefix = f"{self.prefix}.{name}" if self.prefix else name
        return Group(self._service, prefix, queue_group_of(queue_group, self.queue_group))

    def endpoint(
        self,
        name: str | None = None,
        *,
        subject: str | None = None,
        queue_group: str | None = None,
        metadata: Mapping[str, str] | None = None,
        concurrency: int | None = None,
        max_pending: int | None = None,
        max_pending_bytes: int | None = None,
    ) -> Callable[[H], H]:
        """Decorator: the function becomes an endpoint's handler, and is returned unchanged.

        ``name`` defaults to the function's name; ``subject`` to the name (under the group's prefix);
        ``queue_group`` None inherits the group's ("q" by default), "" means none. See
        [`Endpoint`][jetstream_sync.services.Endpoint] for the limits. Everything is checked here, when the module is
        imported: InvalidArgumentError or InvalidTypeError naming the argument.
        """
        if name is not None and not isinstance(name, str):
            raise errors.InvalidTypeError(
                "name", f"must be a str, got {type(name).__name__}; write @service.endpoint() with parentheses"
            )

        def register(handler: H) -> H:
            self.add_endpoint(
                name if name is not None else getattr(handler, "__name__", ""),
                handler,
                subject=subject,
                queue_group=queue_group,
                metadata=metadata,
                concurrency=concurrency,
                max_pending=max_pending,
                max_pending_bytes=max_pending_bytes,
            )
            return handler

        return register

    def add_endpoint(
        self,
        name: str,
        handler: Handler,
        *,
        subject: str | None = None,
        queue_group: str | None = None,
        metadata: Mapping[str, str] | None = None,
        concurrency: int | None = None,
        max_pending: int | None = None,
        max_pending_bytes: int | None = None,
    ) -> Endpoint:
        """Add an endpoint (the same as the decorator). Instances already running subscribe it at once (ADR-32
        lets endpoints come after the start); this blocks until they did."""
        check_service_name("name", name)
        check_callable("handler", handler)
        check_str_or_none("subject", subject)
        full = endpoint_subject(self.prefix, subject if subject is not None else name)
        group = queue_group_of(queue_group, self.queue_group)
        check_control_line("subject", full, group)
        endpoint = Endpoint(
            name=name,
            subject=full,
            queue_group=group,
            handler=handler,
            metadata=check_metadata("metadata", metadata),
            concurrency=None if concurrency is None else check_int("concurrency", concurrency, minimum=1),
            max_pending=None if max_pending is None else check_int("max_pending", max_pending, minimum=1),
            max_pending_bytes=(
                None if max_pending_bytes is None else check_int("max_pending_bytes", max_pending_bytes, minimum=1)
            ),
        )
        self._service._register(endpoint)
        return endpoint


class Service(Group):
    """A service: a name, a semantic version, endpoints, and how its handlers run (ADR-32, "micro").

    ::

        service = Service("orders", "1.0.0", description="Order intake")

        @service.endpoint()
        def create(request: Request) -> dict:
            order = request.json()
            if "item" not in order:
                raise ServiceError(400, "an order needs an item")
            return {"id": save(order)}

        with service.start(nc) as instance:   # runs until the block ends (a graceful stop)
            ...

    Handlers run on ``workers`` threads shared by the endpoints (each endpoint at most ``concurrency`` at
    once); at most ``max_pending`` requests per endpoint (and ``max_pending_bytes``) wait for a thread, and one
    more is answered at once with a 503 error reply, never queued without bound. ``queue_group`` is every
    endpoint's default ("q"; "" for none). ``metadata`` is fixed once given. ``stats_handler(endpoint_stats)``
    adds ``data`` to each endpoint's STATS; it runs on the client's callbacks thread, never on the IO thread.
    """

    def __init__(
        self,
        name: str,
        version: str,
        *,
        description: str = "",
        metadata: Mapping[str, str] | None = None,
        queue_group: str = DEFAULT_QUEUE_GROUP,
        workers: int = DEFAULT_WORKERS,
        max_pending: int = DEFAULT_MAX_PENDING,
        max_pending_bytes: int = DEFAULT_MAX_PENDING_BYTES,
        stats_handler: StatsHandler | None = None,
    ) -> None:
        if not isinstance(description, str):
            raise errors.InvalidTypeError("description", f"must be a str, got {type(description).__name__}")
        if stats_handler is not None:
            check_callable("stats_handler", stats_handler)
        super().__init__(self, "", queue_group_of(queue_group, DEFAULT_QUEUE_GROUP))
        self.name = check_service_name("name", name)
        self.version = check_version(version)
        self.description = description
        self.metadata = check_metadata("metadata", metadata)
        self.workers = check_limit("workers", workers, DEFAULT_WORKERS)
        self.max_pending = check_limit("max_pending", max_pending, DEFAULT_MAX_PENDING)
        self.max_pending_bytes = check_limit("max_pending_bytes", max_pending_bytes, DEFAULT_MAX_PENDING_BYTES)
        self.stats_handler = stats_handler
        self._lock = threading.Lock()
        self._endpoints: list[Endpoint] = []
        self._instances: weakref.WeakSet[ServiceInstance] = weakref.WeakSet()

    def __repr__(self) -> str:
        return f"Service({self.name!r}, {self.version!r}, endpoints={[e.name for e in self.endpoints]})"

    @property
    def endpoints(self) -> list[Endpoint]:
        """The endpoints defined so far, in the order they were added."""
        with self._lock:
            return list(self._endpoints)

    def _register(self, endpoint: Endpoint) -> None:
        with self._lock:
            for known in self._endpoints:
                if known.subject == endpoint.subject:
                    raise errors.InvalidArgumentError(
                        "subject", f"{endpoint.subject!r} is the subject of endpoint {known.name!r} already"
                    )
            self._endpoints.append(endpoint)
            for instance in list(self._instances):
                instance._add(endpoint)  # running instances subscribe it now (blocking, under the lock: rare)

    def start(
        self,
        client: Client,
        *,
        workers: int | None = None,
        around: Callable[[], AbstractContextManager[object]] | None = None,
        timeout: float | timedelta | None = None,
    ) -> ServiceInstance:
        """Run the service on ``client`` and return the running instance (a context manager that stops it).

        ``workers`` overrides the definition's thread count for this instance; ``around()``, when given, is a
        context manager entered around each handler call on its worker thread (``app.app_context`` for Flask).
        Returns once the server has the subscriptions (``timeout``: the client's by default), so a request sent
        next reaches the service. Raises InvalidArgumentError (e.g. an INFO reply larger than the server's
        max_payload) or the client's errors, with nothing left subscribed.
        """
        from ._instance import ServiceInstance

        threads = self.workers if workers is None else check_int("workers", workers, minimum=1)
        if around is not None:
            check_callable("around", around)
        with self._lock:
            instance = ServiceInstance(self, client, threads, around, list(self._endpoints))
            instance._start(timeout)
            self._instances.add(instance)
        return instance
