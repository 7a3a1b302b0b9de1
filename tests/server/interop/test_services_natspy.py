"""Services interop with nats-py's micro (``nats.micro``): nats-py finds our service and calls it, reading the
answers with micro's own types and error headers; and our ServiceClient finds a nats-py micro service, reads its
PING, INFO and STATS, and calls its endpoints, getting its error replies as ServiceError.

nats-py has no discovery client of its own: its side asks with plain requests on ``$SRV.*`` and parses the answers
with ``nats.micro.service.ServicePing/ServiceInfo/ServiceStats.from_dict``, what a nats-py program does.
There was no services code before this: these are new behaviour.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from typing import Any

import nats
import pytest
from nats.micro import add_service
from nats.micro.request import ERROR_CODE_HEADER, ERROR_HEADER
from nats.micro.request import Request as NatsPyRequest
from nats.micro.request import ServiceError as NatsPyServiceError
from nats.micro.service import ServiceInfo as NatsPyInfo
from nats.micro.service import ServicePing as NatsPyPing
from nats.micro.service import ServiceStats as NatsPyStats

from jetstream_sync.services import Request, Service, ServiceClient, ServiceError


async def natspy_side(url: str, name: str, instance: str) -> dict[str, Any]:
    """What nats-py sees of our service ``name`` (instance id ``instance``)."""
    nc = await nats.connect(url)
    try:
        seen: dict[str, Any] = {}
        ping = NatsPyPing.from_dict(json.loads((await nc.request(f"$SRV.PING.{name}", timeout=5)).data))
        seen["ping"] = (ping.name, ping.id, ping.version, ping.metadata)
        info = NatsPyInfo.from_dict(json.loads((await nc.request(f"$SRV.INFO.{name}.{instance}", timeout=5)).data))
        seen["info"] = (info.description, [(e.name, e.subject, e.queue_group, e.metadata) for e in info.endpoints])
        reply = await nc.request("py.upper", b"hello", timeout=5)
        seen["upper"] = reply.data
        failed = await nc.request("py.upper", b"", timeout=5)
        seen["error"] = (failed.headers[ERROR_CODE_HEADER], failed.headers[ERROR_HEADER])
        stats = NatsPyStats.from_dict(json.loads((await nc.request(f"$SRV.STATS.{name}.{instance}", timeout=5)).data))
        seen["stats"] = [(e.name, e.num_requests, e.num_errors, e.last_error) for e in stats.endpoints]
        seen["started"] = stats.started
        return seen
    finally:
        await nc.close()


def test_nats_py_finds_and_calls_our_service(client, name):
    service = Service(name, "2.0.0", description="ours", metadata={"lang": "python-sync"})
    group = service.group("py")

    @group.endpoint(metadata={"in": "text"})
    def upper(request: Request) -> bytes:
        if not request.data:
            raise ServiceError(422, "nothing to upper-case")
        return request.data.upper()

    with service.start(client) as instance:
        seen = asyncio.run(natspy_side(client.connected_url, name, instance.id))
    assert seen["ping"] == (name, instance.id, "2.0.0", {"lang": "python-sync"})
    assert seen["info"] == ("ours", [("upper", "py.upper", "q", {"in": "text"})])
    assert seen["upper"] == b"HELLO"
    assert seen["error"] == ("422", "nothing to upper-case")
    assert seen["stats"] == [("upper", 2, 1, "422:nothing to upper-case")]
    assert seen["started"] == instance.started.replace(tzinfo=None)


class NatsPyService:
    """A nats-py micro service on an event loop of its own thread, for as long as the test needs it."""

    def __init__(self, url: str, name: str) -> None:
        self.url = url
        self.name = name
        self.id = ""
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self.loop.run_forever, name="natspy-micro", daemon=True)

    async def _start(self) -> None:
        self.nc = await nats.connect(self.url)
        self.service = await add_service(
            self.nc, name=self.name, version="0.3.0", description="theirs", metadata={"lang": "asyncio"}
        )

        async def reverse(request: NatsPyRequest) -> None:
            if request.data == b"bad":
                await request.respond_error("409", "that one is taken")
                return
            await request.respond(request.data[::-1])

        async def explode(request: NatsPyRequest) -> None:
            raise NatsPyServiceError("418", "a teapot")

        group = self.service.add_group(name="natspy")
        await group.add_endpoint(name="reverse", handler=reverse, metadata={"k": "v"})
        await group.add_endpoint(name="explode", handler=explode)
        self.id = self.service.id

    async def _stop(self) -> None:
        await self.service.stop()
        await self.nc.close()

    def __enter__(self) -> NatsPyService:
        self.thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self.loop).result(10)
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self._stop(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


@pytest.fixture
def natspy_service(nats_server, name) -> Iterator[NatsPyService]:
    with NatsPyService(nats_server.url, f"{name}_py") as service:
        yield service


def test_our_client_finds_and_calls_a_nats_py_micro_service(client, natspy_service):
    services = ServiceClient(client)
    (ping,) = services.ping(natspy_service.name)
    assert (ping.id, ping.version, ping.metadata) == (natspy_service.id, "0.3.0", {"lang": "asyncio"})
    (info,) = services.info(natspy_service.name, natspy_service.id)
    assert info.description == "theirs"
    assert [(e.name, e.subject, e.queue_group, e.metadata) for e in info.endpoints] == [
        ("reverse", "natspy.reverse", "q", {"k": "v"}),
        ("explode", "natspy.explode", "q", None or {}),
    ]
    assert services.request("natspy.reverse", b"abc").data == b"cba"
    with pytest.raises(ServiceError) as raised:
        services.request("natspy.reverse", b"bad")
    assert (raised.value.code, raised.value.description) == (409, "that one is taken")
    with pytest.raises(ServiceError) as raised:
        services.request("natspy.explode")
    assert raised.value.code == 418  # nats-py puts its exception's repr in the description
    (stats,) = services.stats(natspy_service.name)
    counts = {e.name: (e.num_requests, e.num_errors) for e in stats.endpoints}
    assert counts == {"reverse": (2, 0), "explode": (1, 1)}  # nats-py counts an error only when the handler raised
    assert stats.id == natspy_service.id
