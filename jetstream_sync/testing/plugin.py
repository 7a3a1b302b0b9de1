"""The pytest plugin of jetstream_sync.testing: fixtures that give tests a real nats-server, or a FaultProxy before one.

Loaded by ``pytest_plugins = ["jetstream_sync.testing"]`` in a top-level conftest.py (the package's own
``pytest_plugins`` names this module), or by naming it directly: ``pytest_plugins = ["jetstream_sync.testing.plugin"]``
or ``-p jetstream_sync.testing.plugin``. The fixtures:

- ``nats_server``: one server for the whole session; streams persist between tests.
- ``nats_server_function``: a fresh server for one test, for tests that restart, kill or fill it.
- ``nats_url``: the session server's client URL.
- ``fault_proxy``: a started FaultProxy in front of a fresh server, to stall, delay, cut or refuse connections.
- ``nats_cluster``: a fresh 3-node JetStream cluster (an EmbeddedCluster), for tests of replicated streams,
  elections, node failures and partitions.

A module of its own so that only a test run imports pytest (code that just starts an EmbeddedServer does not), and
so that the proxy module is imported only when a test asks for ``fault_proxy``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from ._server import EmbeddedServer

if TYPE_CHECKING:
    from ._cluster import EmbeddedCluster
    from ._proxy import FaultProxy

__all__ = ["fault_proxy", "nats_cluster", "nats_server", "nats_server_function", "nats_url"]


@pytest.fixture(scope="session")
def nats_server() -> Iterator[EmbeddedServer]:
    """One nats-server with JetStream for the whole session; streams persist between tests."""
    with EmbeddedServer() as server:
        yield server


@pytest.fixture
def nats_server_function() -> Iterator[EmbeddedServer]:
    """A fresh nats-server for one test, for tests that restart, kill or fill it."""
    with EmbeddedServer() as server:
        yield server


@pytest.fixture(scope="session")
def nats_url(nats_server: EmbeddedServer) -> str:
    """The session server's client URL."""
    return nats_server.url


@pytest.fixture
def fault_proxy(nats_server_function: EmbeddedServer) -> Iterator[FaultProxy]:
    """A started FaultProxy in front of a fresh nats-server (``nats_server_function``); connect to its url."""
    from ._proxy import FaultProxy  # here, not at the top: sessions without fault tests never load the proxy

    with FaultProxy(nats_server_function) as proxy:
        yield proxy


@pytest.fixture
def nats_cluster() -> Iterator[EmbeddedCluster]:
    """A fresh 3-node JetStream cluster on loopback; ``urls`` for ``connect``, ``servers[i]`` to stop, kill or
    restart a node, ``leader_of`` / ``step_down`` / ``partition`` for elections and partitions."""
    from ._cluster import EmbeddedCluster  # here: sessions without cluster tests never load it

    with EmbeddedCluster(size=3) as cluster:
        yield cluster
