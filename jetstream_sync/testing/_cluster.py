"""EmbeddedCluster: several EmbeddedServers routed into one JetStream cluster on loopback, for tests.

Each node is an :class:`EmbeddedServer` named ``n1``, ``n2``, ... with its own store and ports. Routes do not
go straight from node to node: every ordered pair (a -> b) has its own FaultProxy in front of b's route port,
and a's route list names that proxy. So one node can be cut off from all the others (``partition(i)``, undone
by ``heal(i)``) while it keeps serving its clients, as in a real network partition; a plain forwarding proxy
costs the routes nothing measurable.

Who leads what comes from the JetStream API (stream and consumer info), asked through a client of this
package connected to every node, so a node going down does not blind the helper.

    with EmbeddedCluster(size=3) as cluster:
        nc = connect(cluster.urls)
        js.create_stream(StreamConfig(name="S", subjects=["s.>"], num_replicas=3))
        old = cluster.leader_of("S")
        cluster.step_down("S")             # returns the new leader's index, once elected
        cluster.servers[old].kill(); cluster.servers[old].restart()
"""

from __future__ import annotations

import logging
import threading
import time
from types import TracebackType
from typing import TYPE_CHECKING, Any

from ..errors import InvalidArgumentError, InvalidTypeError, JetStreamError
from ._server import _STOP_TIMEOUT, EmbeddedServer, ServerStartError, _free_port, _get_json

if TYPE_CHECKING:
    from ..client import Client
    from ._proxy import FaultProxy

__all__ = ["ClusterError", "EmbeddedCluster"]

logger = logging.getLogger("jetstream_sync.testing")

_FORM_TIMEOUT = 60.0  # a cold cluster elects its meta leader in a few seconds; CI machines are slow
_ELECTION_TIMEOUT = 30.0
_POLL = 0.05
_START_ATTEMPTS = 3
_NOWHERE = "127.0.0.1:1"  # a privileged port on loopback: nothing of ours listens there, a connect is refused


class ClusterError(JetStreamError, RuntimeError):
    """The cluster did not reach the state asked for in time (no meta leader, no new stream leader, ...)."""


class EmbeddedCluster:
    """``size`` nats-servers with JetStream in one cluster on 127.0.0.1 (see the module docstring).

    ``config`` is extra nats-server config text given to every node. ``servers[i]`` is node ``i`` (an
    EmbeddedServer: ``stop``/``start``/``restart``/``kill`` keep its ports and store, so it rejoins).
    """

    def __init__(self, size: int = 3, *, config: str | None = None, name: str = "jetstream-sync") -> None:
        if isinstance(size, bool) or not isinstance(size, int):
            raise InvalidTypeError("size", f"must be an int, got {type(size).__name__}")
        if not 2 <= size <= 9:
            raise InvalidArgumentError("size", f"must be 2 to 9 nodes, got {size}")
        if not isinstance(name, str) or not name.replace("-", "").replace("_", "").isalnum():
            raise InvalidArgumentError("name", f"{name!r}: letters, digits, '-' and '_' only")
        self.size = size
        self.name = name
        self.names = [f"n{i + 1}" for i in range(size)]
        self._extra_config = config or ""
        self._route_ports: list[int] = []
        self._proxies: list[dict[int, FaultProxy]] = []  # _proxies[a][b]: node a's route to node b
        self.servers: list[EmbeddedServer] = []
        self._lay_out()
        self._admin: Client | None = None
        self._admin_urls: list[str] = []
        self._admin_lock = threading.Lock()
        self._partitioned: set[int] = set()

    def _lay_out(self) -> None:
        """Pick route ports and make the route proxies and the nodes (again, after a port conflict)."""
        from ._proxy import FaultProxy  # the route proxies: loaded only by code that makes a cluster

        size = self.size
        self._route_ports = [_free_port("127.0.0.1") for _ in range(size)]
        self._proxies = [
            {b: FaultProxy(target_port=self._route_ports[b]) for b in range(size) if b != a} for a in range(size)
        ]
        self.servers = [EmbeddedServer(config=self._node_config(i, self._extra_config)) for i in range(size)]

    def _node_config(self, i: int, extra: str) -> str:
        routes = ", ".join(f"nats-route://127.0.0.1:{proxy.port}" for proxy in self._proxies[i].values())
        return (
            f"{extra}\n"
            f"server_name: {self.names[i]}\n"
            "cluster {\n"
            f"  name: {self.name}\n"
            f"  listen: 127.0.0.1:{self._route_ports[i]}\n"
            # Nodes gossip their route address and dial each other there, past the proxies; a partition
            # would then leave a direct route up. Every node lists every other explicitly (through its
            # proxy), so gossip is not needed: it advertises an address where nothing listens.
            f"  advertise: {_NOWHERE}\n"
            f"  routes: [{routes}]\n"
            "}\n"
        )

    # -- properties -------------------------------------------------------------------------------------------
    @property
    def urls(self) -> list[str]:
        """Every node's client URL (give them all to ``connect``)."""
        return [server.url for server in self.servers]

    def __repr__(self) -> str:
        running = sum(server.is_running for server in self.servers)
        return f"<EmbeddedCluster {self.name} {running}/{self.size} running>"

    # -- lifecycle --------------------------------------------------------------------------------------------
    def start(self, timeout: float = _FORM_TIMEOUT) -> EmbeddedCluster:
        """Start the route proxies and every node (together: a node is not ready alone), then wait until the
        cluster has a meta leader that every node knows."""
        for attempt in range(1, _START_ATTEMPTS + 1):
            for proxies in self._proxies:
                for proxy in proxies.values():
                    proxy.start()
            try:
                self._start_nodes(range(self.size), timeout)
                break
            except ServerStartError as exc:
                # A route port picked free was taken meanwhile by another process: start over on new ones.
                if attempt == _START_ATTEMPTS or "address already in use" not in str(exc).lower():
                    raise
                logger.info("cluster %s: a route port was taken (attempt %d); new ports", self.name, attempt)
                self.stop()
                self._lay_out()
        self.wait_formed(timeout)
        return self

    def stop(self, timeout: float = _STOP_TIMEOUT) -> None:
        """Stop every node and proxy and remove the stores."""
        with self._admin_lock:
            admin, self._admin = self._admin, None
        if admin is not None:
            admin.close()
        for server in self.servers:
            server.stop(timeout)
        for proxies in self._proxies:
            for proxy in proxies.values():
                proxy.stop()

    def __enter__(self) -> EmbeddedCluster:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def _start_nodes(self, indexes: range | list[int], timeout: float) -> None:
        failures: list[BaseException] = []

        def run(i: int) -> None:
            try:
                self.servers[i].start(timeout)
            except BaseException as exc:  # reported below, from the caller's thread
                failures.append(exc)

        threads = [threading.Thread(target=run, args=(i,), name=f"cluster-start-{i}") for i in indexes]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout + _STOP_TIMEOUT)
        if failures:
            raise failures[0]

    def restart_node(self, i: int, timeout: float = _FORM_TIMEOUT) -> None:
        """Restart node ``i`` (graceful stop, same ports and store) and wait until it is back in the cluster."""
        self.servers[self._index(i)].restart(timeout)
        self.wait_formed(timeout)

    def rolling_restart(self, timeout: float = _FORM_TIMEOUT) -> None:
        """Restart the nodes one after another, each once the cluster is whole again."""
        for i in range(self.size):
            self.restart_node(i, timeout)

    # -- partitions -------------------------------------------------------------------------------------------
    def partition(self, i: int) -> None:
        """Cut node ``i`` off from the other nodes (its clients still reach it): its routes are closed and new
        ones refused until :meth:`heal`."""
        i = self._index(i)
        for proxy in self._route_proxies_of(i):
            proxy.refuse(True)
            proxy.cut()
        self._partitioned.add(i)
        logger.info("cluster %s: %s partitioned", self.name, self.names[i])

    def heal(self, i: int) -> None:
        """Let node ``i`` route to the others again (the nodes reconnect their routes by themselves)."""
        i = self._index(i)
        for proxy in self._route_proxies_of(i):
            proxy.refuse(False)
        self._partitioned.discard(i)
        logger.info("cluster %s: %s healed", self.name, self.names[i])

    def _route_proxies_of(self, i: int) -> list[FaultProxy]:
        own = list(self._proxies[i].values())
        return own + [self._proxies[a][i] for a in range(self.size) if a != i]

    # -- leaders ----------------------------------------------------------------------------------------------
    def meta_leader(self) -> int | None:
        """The index of the meta leader as the running nodes agree on it, or None while they do not."""
        seen = set()
        for server in self.servers:
            if not server.is_running:
                continue
            jsz = _get_json(f"{server.monitor_url}/jsz", 1.0)
            meta = (jsz or {}).get("meta_cluster") or {}
            seen.add(meta.get("leader") or "")
        if len(seen) != 1:
            return None
        leader = seen.pop()
        return self.names.index(leader) if leader in self.names else None

    def wait_formed(self, timeout: float = _FORM_TIMEOUT) -> int:
        """Wait until the running nodes agree on a meta leader and it sees every other running, unpartitioned
        node as current; returns the leader's index."""
        deadline = time.monotonic() + timeout
        while True:
            leader = self.meta_leader()
            if leader is not None and self._followers_current(leader) and self._healthy() and self._placeable():
                return leader
            if time.monotonic() >= deadline:
                raise ClusterError(f"cluster {self.name}: no meta leader agreed on within {timeout:g}s")
            time.sleep(_POLL)

    def _placeable(self) -> bool:
        """A stream replicated on every reachable node can be made now: the meta leader knows them all as
        online (right after forming it may still call one offline and refuse placement, err_code 10005)."""
        replicas = sum(s.is_running for s in self.servers) - len(self._partitioned)
        name = f"EMBEDDED_CLUSTER_PROBE_{self.name.replace('-', '_')}"
        try:
            js = self._admin_client().jetstream(timeout=2.0)
            js.api.request(
                f"STREAM.CREATE.{name}",
                {
                    "name": name,
                    "subjects": [f"_embedded_cluster_probe.{name}"],
                    "num_replicas": max(1, replicas),
                    "storage": "memory",
                },
            )
            js.api.request(f"STREAM.DELETE.{name}")
        except JetStreamError as exc:
            logger.debug("cluster %s: not placeable yet: %s", self.name, exc)
            return False
        return True

    def _healthy(self) -> bool:
        """Every running, unpartitioned node reports JetStream healthy (its meta state is current)."""
        for i, server in enumerate(self.servers):
            if server.is_running and i not in self._partitioned:
                health = _get_json(f"{server.monitor_url}/healthz", 1.0)
                if (health or {}).get("status") != "ok":
                    return False
        return True

    def _followers_current(self, leader: int) -> bool:
        jsz = _get_json(f"{self.servers[leader].monitor_url}/jsz", 1.0)
        replicas = ((jsz or {}).get("meta_cluster") or {}).get("replicas") or []
        current = {r.get("name") for r in replicas if r.get("current") and not r.get("offline")}
        wanted = {
            self.names[i]
            for i, server in enumerate(self.servers)
            if i != leader and server.is_running and i not in self._partitioned
        }
        return wanted <= current

    def leader_of(self, stream: str) -> int:
        """The index of the node leading ``stream``."""
        return self._leader(f"STREAM.INFO.{stream}", None)

    def consumer_leader_of(self, stream: str, consumer: str) -> int:
        """The index of the node leading consumer ``consumer`` of ``stream``."""
        return self._leader(f"CONSUMER.INFO.{stream}.{consumer}", None)

    def step_down(self, stream: str, timeout: float = _ELECTION_TIMEOUT) -> int:
        """Make the leader of ``stream`` step down; returns the new leader's index once it is elected."""
        return self._step_down(f"STREAM.INFO.{stream}", f"STREAM.LEADER.STEPDOWN.{stream}", timeout)

    def step_down_consumer(self, stream: str, consumer: str, timeout: float = _ELECTION_TIMEOUT) -> int:
        """Make the leader of a consumer step down; returns the new leader's index once it is elected."""
        info = f"CONSUMER.INFO.{stream}.{consumer}"
        return self._step_down(info, f"CONSUMER.LEADER.STEPDOWN.{stream}.{consumer}", timeout)

    def _step_down(self, info: str, request: str, timeout: float) -> int:
        old = self._leader(info, None)
        self._api(request)
        deadline = time.monotonic() + timeout
        while True:
            try:
                new = self._leader(info, deadline - time.monotonic())
            except JetStreamError:
                new = old
            if new != old:
                logger.info("cluster %s: %s -> leader %s", self.name, info, self.names[new])
                return new
            if time.monotonic() >= deadline:
                raise ClusterError(f"cluster {self.name}: no new leader for {info} within {timeout:g}s")
            time.sleep(_POLL)

    def _leader(self, info: str, timeout: float | None) -> int:
        deadline = time.monotonic() + (timeout if timeout is not None else _ELECTION_TIMEOUT)
        while True:
            try:
                body = self._api(info)
            except InvalidArgumentError:  # a bad name will not get better by asking again
                raise
            except JetStreamError as exc:  # unanswered during an election: ask again
                if time.monotonic() >= deadline:
                    raise ClusterError(f"cluster {self.name}: {info} unanswered: {exc}") from exc
                time.sleep(_POLL)
                continue
            leader = ((body.get("cluster") or {}).get("leader")) or ""
            if leader in self.names:
                return self.names.index(leader)
            if time.monotonic() >= deadline:
                raise ClusterError(f"cluster {self.name}: {info} names no leader")
            time.sleep(_POLL)

    def _api(self, suffix: str) -> dict[str, Any]:
        return self._admin_client().jetstream().api.request(suffix)

    def _admin_client(self) -> Client:
        """A client of the nodes outside any partition: a cut-off node still believes what it last knew, so it
        must not be the one asked who leads."""
        urls = [self.servers[i].url for i in range(self.size) if i not in self._partitioned]
        with self._admin_lock:
            if self._admin is not None and (self._admin.is_closed or self._admin_urls != urls):
                self._admin.close()
                self._admin = None
            if self._admin is None:
                from ..client import connect  # the client package is only needed for leader queries

                self._admin = connect(urls, name="embedded-cluster-admin", max_reconnect_attempts=-1)
                self._admin_urls = urls
            return self._admin

    def _index(self, i: int) -> int:
        if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < self.size:
            raise InvalidArgumentError("i", f"must be a node index 0 to {self.size - 1}, got {i!r}")
        return i
