"""ServiceClient: find services (PING, INFO, STATS) and call their endpoints, whichever client runs them."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING, TypeVar

from .. import errors
from .._validate import check_str_or_none, check_subject, to_seconds
from ..headers import HeadersInput
from ..message import Msg
from ._checks import API_PREFIX, check_service_name
from ._errors import ServiceError
from ._instance import control_subject
from ._models import PingResponse, ServiceInfo, ServiceStats

if TYPE_CHECKING:
    from ..client import Client

__all__ = ["ServiceClient"]

log = logging.getLogger("jetstream_sync")

T = TypeVar("T")


class ServiceClient:
    """Discovery and calls over ``client`` (nats.js's ``Svcm.client()``; nats.go has it in the ``nats`` CLI).

    ``ping``, ``info`` and ``stats`` send one request to ``$SRV.<VERB>[.<name>[.<id>]]`` and gather every
    instance's answer (``request_many``): until ``timeout`` seconds passed (2 s), or ``stall`` seconds (0.3 s)
    went by without an answer once the first came, or, with an ``id``, its one answer came. No service answering
    is an empty list, not an error. An answer that is not what ADR-32 describes is logged and left out.
    ``prefix`` replaces ``$SRV`` (tools reaching services across accounts).
    """

    def __init__(
        self,
        client: Client,
        *,
        timeout: float | timedelta = 2.0,
        stall: float | timedelta = 0.3,
        prefix: str = API_PREFIX,
    ) -> None:
        self._client = client
        self.timeout = to_seconds("timeout", timeout)
        self.stall = to_seconds("stall", stall)
        self.prefix = check_subject("prefix", prefix)

    def ping(self, name: str | None = None, id: str | None = None) -> list[PingResponse]:  # noqa: A002 - ADR-32 says id
        """Every instance answering PING (all services, those named ``name``, or the instance ``id``)."""
        return self._gather("PING", name, id, PingResponse.from_wire)

    def info(self, name: str | None = None, id: str | None = None) -> list[ServiceInfo]:  # noqa: A002 - ADR-32 says id
        """Every instance's INFO: its endpoints, subjects and queue groups, description and metadata."""
        return self._gather("INFO", name, id, ServiceInfo.from_wire)

    def stats(self, name: str | None = None, id: str | None = None) -> list[ServiceStats]:  # noqa: A002 - ADR-32 says id
        """Every instance's STATS: requests, errors, last error and processing time per endpoint."""
        return self._gather("STATS", name, id, ServiceStats.from_wire)

    def _gather(
        self, verb: str, name: str | None, instance: str | None, read: Callable[[dict[str, object]], T]
    ) -> list[T]:
        if name is not None:
            check_service_name("name", name)
        if check_str_or_none("id", instance) is not None:
            check_service_name("id", instance)
        subject = control_subject(verb, name, instance, self.prefix)
        found: list[T] = []
        try:
            replies = self._client.request_many(
                subject, max_replies=1 if instance is not None else None, timeout=self.timeout, stall=self.stall
            )
            with replies:
                for reply in replies:
                    try:
                        document = json.loads(reply.data)
                        if not isinstance(document, dict):
                            raise errors.ProtocolError(f"not a JSON object: {reply.data[:200]!r}")
                        found.append(read(document))
                    except (ValueError, errors.ProtocolError) as exc:
                        log.warning("a service's %s answer on %s was left out: %s", verb, subject, exc)
        except errors.NoRespondersError:  # nobody answers: no such service (the server says so at once)
            return found
        return found

    def request(
        self,
        subject: str,
        data: bytes = b"",
        *,
        headers: HeadersInput | None = None,
        timeout: float | timedelta | None = None,
    ) -> Msg:
        """Call an endpoint: the reply, or ServiceError (its ``code``, ``description`` and ``data``) when the
        service answered with the ADR-32 error headers. NoRespondersError when no instance listens,
        TimeoutError after ``timeout`` (the client's by default)."""
        seconds = None if timeout is None else to_seconds("timeout", timeout)
        reply = self._client.request(subject, data, timeout=seconds, headers=headers)
        error = ServiceError.from_reply(reply.headers, reply.data) if reply.raw_headers else None
        if error is not None:
            raise error
        return reply

    def __repr__(self) -> str:
        return f"ServiceClient(prefix={self.prefix!r}, timeout={self.timeout:g}, stall={self.stall:g})"
