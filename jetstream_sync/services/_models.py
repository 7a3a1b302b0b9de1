"""The ADR-32 discovery replies as types: what PING, INFO and STATS answer, for our services and for others.

``to_wire()`` gives the JSON object a service sends; ``from_wire()`` reads one that any service sent (ours,
nats.go's, nats.js's, nats-py's micro), leniently where clients differ: a ``null`` where another sends ``{}`` or
``""``, a missing ``data``. Durations are seconds (float) here, as everywhere in this library, and nanoseconds on
the wire; ``started`` is written with six fraction digits always, which nats-py's parser needs.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any

import attrs

from .. import errors
from .._protocol import nanos, seconds
from ..models import parse_time

__all__ = [
    "INFO_RESPONSE_TYPE",
    "PING_RESPONSE_TYPE",
    "STATS_RESPONSE_TYPE",
    "EndpointInfo",
    "EndpointStats",
    "PingResponse",
    "ServiceInfo",
    "ServiceStats",
    "format_started",
]

#: the ``type`` of a PING reply
PING_RESPONSE_TYPE = "io.nats.micro.v1.ping_response"
#: the ``type`` of an INFO reply
INFO_RESPONSE_TYPE = "io.nats.micro.v1.info_response"
#: the ``type`` of a STATS reply
STATS_RESPONSE_TYPE = "io.nats.micro.v1.stats_response"


def format_started(value: datetime) -> str:
    """RFC 3339 in UTC with exactly six fraction digits (nats-py parses ``%Y-%m-%dT%H:%M:%S.%fZ`` only)."""
    value = value.astimezone(timezone.utc)
    return value.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond:06d}Z"


def _text(data: Mapping[str, Any], key: str, what: str, *, required: bool = True) -> str:
    value = data.get(key)
    if value is None and not required:
        return ""
    if not isinstance(value, str):
        raise errors.ProtocolError(f"{what}: {key!r} must be a string, got {value!r}")
    return value


def _int(data: Mapping[str, Any], key: str, what: str) -> int:
    value = data.get(key, 0)
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise errors.ProtocolError(f"{what}: {key!r} must be a number, got {value!r}")
    return int(value)


def _metadata(data: Mapping[str, Any], what: str) -> dict[str, str]:
    value = data.get("metadata")
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise errors.ProtocolError(f"{what}: 'metadata' must be an object of strings, got {value!r}")
    return dict(value)


def _endpoints(data: Mapping[str, Any], what: str) -> list[Mapping[str, Any]]:
    value = data.get("endpoints")
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
        raise errors.ProtocolError(f"{what}: 'endpoints' must be a list of objects, got {value!r}")
    return value


@attrs.frozen(kw_only=True)
class PingResponse:
    """What ``$SRV.PING`` answers: who a service instance is."""

    name: str
    id: str
    version: str
    metadata: dict[str, str] = attrs.field(factory=dict)
    type: str = PING_RESPONSE_TYPE

    def to_wire(self) -> dict[str, Any]:
        """The JSON object of the reply."""
        return {"type": self.type, "name": self.name, "id": self.id, "version": self.version, "metadata": self.metadata}

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> PingResponse:
        """Read a PING reply (ProtocolError naming the field when it is malformed)."""
        what = "a service's PING reply"
        return cls(
            name=_text(data, "name", what),
            id=_text(data, "id", what),
            version=_text(data, "version", what),
            metadata=_metadata(data, what),
            type=_text(data, "type", what, required=False) or PING_RESPONSE_TYPE,
        )


@attrs.frozen(kw_only=True)
class EndpointInfo:
    """One endpoint in an INFO reply: its name, the subject it listens on, its queue group ("" for none)."""

    name: str
    subject: str
    queue_group: str
    metadata: dict[str, str] = attrs.field(factory=dict)

    def to_wire(self) -> dict[str, Any]:
        """The JSON object of the endpoint."""
        return {"name": self.name, "subject": self.subject, "queue_group": self.queue_group, "metadata": self.metadata}

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> EndpointInfo:
        """Read one endpoint of an INFO reply."""
        what = "an endpoint of a service's INFO reply"
        return cls(
            name=_text(data, "name", what),
            subject=_text(data, "subject", what),
            queue_group=_text(data, "queue_group", what, required=False),
            metadata=_metadata(data, what),
        )


@attrs.frozen(kw_only=True)
class ServiceInfo:
    """What ``$SRV.INFO`` answers: a service instance and its endpoints."""

    name: str
    id: str
    version: str
    description: str = ""
    metadata: dict[str, str] = attrs.field(factory=dict)
    endpoints: list[EndpointInfo] = attrs.field(factory=list)
    type: str = INFO_RESPONSE_TYPE

    def to_wire(self) -> dict[str, Any]:
        """The JSON object of the reply."""
        return {
            "type": self.type,
            "name": self.name,
            "id": self.id,
            "version": self.version,
            "description": self.description,
            "metadata": self.metadata,
            "endpoints": [endpoint.to_wire() for endpoint in self.endpoints],
        }

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> ServiceInfo:
        """Read an INFO reply."""
        what = "a service's INFO reply"
        return cls(
            name=_text(data, "name", what),
            id=_text(data, "id", what),
            version=_text(data, "version", what),
            description=_text(data, "description", what, required=False),
            metadata=_metadata(data, what),
            endpoints=[EndpointInfo.from_wire(item) for item in _endpoints(data, what)],
            type=_text(data, "type", what, required=False) or INFO_RESPONSE_TYPE,
        )


@attrs.frozen(kw_only=True)
class EndpointStats:
    """One endpoint's counters in a STATS reply. ``processing_time`` (seconds) is the handlers' total time,
    ``average_processing_time`` that over ``num_requests``; ``last_error`` is ``"<code>:<description>"`` of the
    latest error ("" before the first); ``data`` is what the service's stats handler returned for it (None
    without one). Requests refused because the endpoint was full (503) count as requests and errors."""

    name: str
    subject: str
    queue_group: str
    num_requests: int = 0
    num_errors: int = 0
    last_error: str = ""
    processing_time: float = 0.0
    average_processing_time: float = 0.0
    data: Any = None

    def to_wire(self) -> dict[str, Any]:
        """The JSON object of the endpoint (times in nanoseconds)."""
        return {
            "name": self.name,
            "subject": self.subject,
            "queue_group": self.queue_group,
            "num_requests": self.num_requests,
            "num_errors": self.num_errors,
            "last_error": self.last_error,
            "processing_time": nanos(self.processing_time),
            "average_processing_time": nanos(self.average_processing_time),
            "data": self.data,
        }

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> EndpointStats:
        """Read one endpoint of a STATS reply."""
        what = "an endpoint of a service's STATS reply"
        return cls(
            name=_text(data, "name", what),
            subject=_text(data, "subject", what),
            queue_group=_text(data, "queue_group", what, required=False),
            num_requests=_int(data, "num_requests", what),
            num_errors=_int(data, "num_errors", what),
            last_error=_text(data, "last_error", what, required=False),
            processing_time=seconds(_int(data, "processing_time", what)),
            average_processing_time=seconds(_int(data, "average_processing_time", what)),
            data=data.get("data"),
        )


@attrs.frozen(kw_only=True)
class ServiceStats:
    """What ``$SRV.STATS`` answers: a service instance, when it started (or was last reset), and each
    endpoint's counters."""

    name: str
    id: str
    version: str
    started: datetime
    metadata: dict[str, str] = attrs.field(factory=dict)
    endpoints: list[EndpointStats] = attrs.field(factory=list)
    type: str = STATS_RESPONSE_TYPE

    def to_wire(self) -> dict[str, Any]:
        """The JSON object of the reply."""
        return {
            "type": self.type,
            "name": self.name,
            "id": self.id,
            "version": self.version,
            "metadata": self.metadata,
            "started": format_started(self.started),
            "endpoints": [endpoint.to_wire() for endpoint in self.endpoints],
        }

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> ServiceStats:
        """Read a STATS reply."""
        what = "a service's STATS reply"
        started = parse_time(_text(data, "started", what))
        if started is None:
            raise errors.ProtocolError(f"{what}: 'started' is not an RFC 3339 time: {data.get('started')!r}")
        return cls(
            name=_text(data, "name", what),
            id=_text(data, "id", what),
            version=_text(data, "version", what),
            started=started,
            metadata=_metadata(data, what),
            endpoints=[EndpointStats.from_wire(item) for item in _endpoints(data, what)],
            type=_text(data, "type", what, required=False) or STATS_RESPONSE_TYPE,
        )
