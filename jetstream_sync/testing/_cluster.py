"""EmbeddedCluster: several EmbeddedServers routed into one JetStream cluster on loopback, for tests.

Each node is an [`EmbeddedServer`][jetstream_sync.testing.EmbeddedServer] named ``n1``, ``n2``, ... with its own store
and ports. Routes do not go straight from node to node: every ordered pair (a -> b) has its own FaultProxy in front of
b's route port, and a's route list names that proxy. So one node can be cut off from all the others (``partition(i)``,
undone by ``heal(i)``) while it keeps serving its clients, as in a real network partition; a plain forwarding proxy
costs the routes nothing measurable.

Who leads what comes from the JetStream API (stream and consumer info), asked through a client of this
package connected to every node, so a node going down does not blind the helper.

``sync_interval`` is the nodes' fsync setting (nats-server's ``jetstream { sync_interval }``): ``"always"`` makes a
node flush every write to disk before it acknowledges it, a duration (``"10s"``) how often it flushes at the
latest; None leaves the server's default (every 2 minutes).
[`EmbeddedCluster.fsync`][jetstream_sync.testing.EmbeddedCluster.fsync] says what the running nodes report, which is
what a test of durability should print with its results.

    with EmbeddedCluster(size=3) as cluster:
        nc = connect(cluster.urls)
        js.create_stream(StreamConfig(name="S", subjects=["s.>"], num_replicas=3))
        old = cluster.leader_of("S")
        cluster.step_down("S")             # the new leader's index, once elected (else StepDownError says why)
        cluster.servers[old].kill(); cluster.servers[old].restart()
"""

from __future__ import annotations

import logging
import re
import threading
import time
from types import TracebackType
from typing import TYPE_CHECKING, Any, NamedTuple

from ..errors import (
    APIError,
    ClusterUnavailableError,
    InvalidArgumentError,
    InvalidTypeError,
    JetStreamError,
    JetStreamNotEnabledError,
    NotConnectedError,
)
from ..errors import TimeoutError as JetStreamTimeoutError
from ..jetstream._features import server_version
from ._server import _STOP_TIMEOUT, EmbeddedServer, ServerStartError, _free_port, _get_json

if TYPE_CHECKING:
    from ..client import Client
    from ._proxy import FaultProxy

__all__ = ["ClusterError", "EmbeddedCluster", "StepDownError"]

logger = logging.getLogger("jetstream_sync.testing")

_FORM_TIMEOUT = 60.0  # a cold cluster elects its meta leader in a few seconds; CI machines are slow
_ELECTION_TIMEOUT = 30.0
_POLL = 0.05
_START_ATTEMPTS = 3
_NOWHERE = "127.0.0.1:1"  # a privileged port on loopback: nothing of ours listens there, a connect is refused
# A step-down request is answered at once by the leader; one that is not (the leader just changed) is sent again.
_STEP_DOWN_REQUEST_TIMEOUT = 2.0
# One look at who leads: an INFO nobody answers (no leader at the moment) is given up after this and asked again.
_LOOK_TIMEOUT = 1.0
_LEADER_REQUEST_TIMEOUT = 5.0  # leader_of: one INFO request, retried inside by the client during an election
# The old leader still seen this long after the last step-down request (or seen elected again): send another.
# Long enough that a request queued behind others on a loaded leader is not doubled (a second one would reach
# the new leader and make it step down too); short enough for a few tries within a 10 s timeout.
_RESEND_AFTER = 2.0
_RAFT_GENERAL = 10041  # "{err}" from the leader's raft node: "not leader" when leadership moved as it was asked
_NO_PEERS = 10005  # "no suitable peers": the preferred successor is the leader by now, or no longer known
_PREFERRED_SINCE = (2, 11, 0)  # a step-down request may name the successor (2.10 refuses any request body)
_SYNC_INTERVAL = re.compile(r"always|(\d+(\.\d+)?(ns|us|ms|s|m|h))+")  # what nats-server parses: a Go duration
_JETSTREAM_BLOCK = re.compile(r"^\s*jetstream\s*[:={]", re.MULTILINE)


class ClusterError(JetStreamError, RuntimeError):
    """The cluster did not reach the state asked for in time (no meta leader, no new stream leader, ...)."""


class StepDownError(ClusterError):
    """[`EmbeddedCluster.step_down`][jetstream_sync.testing.EmbeddedCluster.step_down] (or ``step_down_consumer``) saw
    no other node lead within its timeout.

    ``target`` names what was asked to change leader (``stream 'S'``, ``consumer 'S' > 'C'``); ``old`` is the
    index of the leader asked to step down (None: no leader was found to ask); ``leader`` the leader the cluster
    named last (None: none was named, as in an election that outlasted the timeout; ``old``: it never moved, or
    was elected again); ``attempts`` how many step-down requests were sent and ``last_answer`` what the last one
    got (``"accepted"``, or the error). So a failing test says which of these happened, not just "no leader".
    """

    def __init__(
        self,
        message: str,
        *,
        target: str,
        old: int | None,
        leader: int | None,
        attempts: int,
        last_answer: str | None,
    ) -> None:
        super().__init__(message)
        self.target = target
        self.old = old
        self.leader = leader
        self.attempts = attempts
        self.last_answer = last_answer

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickle with the keyword fields (the default would call ``__init__`` with the message alone)."""
        fields = {
            "target": self.target,
            "old": self.old,
            "leader": self.leader,
            "attempts": self.attempts,
            "last_answer": self.last_answer,
        }
        return (_rebuild_step_down_error, (str(self), fields))


def _rebuild_step_down_error(message: str, fields: dict[str, Any]) -> StepDownError:
    return StepDownError(message, **fields)


def _sync_config(sync_interval: str | None, config: str) -> str:
    """The config text that sets ``sync_interval`` (nothing for None); InvalidArgumentError for a value
    nats-server would not take, or a ``config`` with a ``jetstream`` block (a second block would replace it)."""
    if sync_interval is None:
        return ""
    if not isinstance(sync_interval, str) or not _SYNC_INTERVAL.fullmatch(sync_interval):
        raise InvalidArgumentError(
            "sync_interval", f'must be "always" or a duration such as "10s", got {sync_interval!r}'
        )
    if _JETSTREAM_BLOCK.search(config):
        raise InvalidArgumentError("sync_interval", "config has a jetstream block: set sync_interval inside it instead")
    return f'\njetstream {{\n  sync_interval: "{sync_interval}"\n}}\n'


class _LeaderView(NamedTuple):
    """One INFO answer's word on who leads: the node (None: none of ours is named), since when (``leader_since``,
    nats-server 2.11+), and the follower best placed to take over (current, least behind; None if none is)."""

    leader: int | None
    since: str | None
    successor: str | None


_NOBODY = _LeaderView(None, None, None)


def _transient(exc: JetStreamError) -> bool:
    """What a step-down request meets while leadership is moving, so it is asked again, not given up on.

    A member that sees no leader answers 10008 at once (ClusterUnavailableError), often before the leader itself
    (the first answer wins); a request that reached a node which has just stopped leading goes unanswered
    (TimeoutError); the raft node answers "not leader" (10041) when leadership moved between the server's checks,
    and "no suitable peers" (10005) when the successor named has become the leader meanwhile or is not known; a
    node restarting answers nothing at all ("no responders", which the API reports as JetStreamNotEnabledError
    with no err_code), or the admin client is reconnecting (NotConnectedError).
    """
    if isinstance(exc, (ClusterUnavailableError, JetStreamTimeoutError, NotConnectedError)):
        return True
    if isinstance(exc, JetStreamNotEnabledError):
        return exc.err_code == 0
    return isinstance(exc, APIError) and exc.err_code in (_RAFT_GENERAL, _NO_PEERS)


class EmbeddedCluster:
    """``size`` nats-servers with JetStream in one cluster on 127.0.0.1 (see the module docstring).

    ``config`` is extra nats-server config text given to every node. ``servers[i]`` is node ``i`` (an
    EmbeddedServer: ``stop``/``start``/``restart``/``kill`` keep its ports and store, so it rejoins).
    ``sync_interval`` is the nodes' fsync setting (``"always"``, a duration such as ``"10s"``, or None for the
    server's default of 2 minutes); a ``config`` with a ``jetstream`` block of its own sets it there instead.
    """

    def __init__(
        self,
        size: int = 3,
        *,
        config: str | None = None,
        name: str = "jetstream-sync",
        sync_interval: str | None = None,
    ) -> None:
        if isinstance(size, bool) or not isinstance(size, int):
            raise InvalidTypeError("size", f"must be an int, got {type(size).__name__}")
        if not 2 <= size <= 9:
            raise InvalidArgumentError("size", f"must be 2 to 9 nodes, got {size}")
        if not isinstance(name, str) or not name.replace("-", "").replace("_", "").isalnum():
            raise InvalidArgumentError("name", f"{name!r}: letters, digits, '-' and '_' only")
        self.size = size
        self.name = name
        self.names = [f"n{i + 1}" for i in range(size)]
        self.sync_interval = sync_interval
        self._extra_config = (config or "") + _sync_config(sync_interval, config or "")
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

    def fsync(self) -> str:
        """The fsync setting the running nodes report (``/varz``): ``"always"`` (every write is flushed before
        it is acknowledged) or ``"every <duration>"``; several when the nodes differ, ``"unknown"`` when none
        answers."""
        seen: set[str] = set()
        for server in self.servers:
            if not server.is_running:
                continue
            varz = _get_json(f"{server.monitor_url}/varz", 2.0) or {}
            config = (varz.get("jetstream") or {}).get("config") or {}
            if config.get("sync_always"):
                seen.add("always")
            elif isinstance(config.get("sync_interval"), int):
                seen.add(f"every {config['sync_interval'] / 1e9:g}s")
        return " / ".join(sorted(seen)) or "unknown"

    # -- partitions -------------------------------------------------------------------------------------------
    def partition(self, i: int) -> None:
        """Cut node ``i`` off from the other nodes (its clients still reach it): its routes are closed and new
        ones refused until [`heal`][jetstream_sync.testing.EmbeddedCluster.heal]."""
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
        """Make the leader of ``stream`` step down; returns the new leader's index once it is elected (a node other
        than the old leader). StepDownError if no other node leads within ``timeout`` seconds."""
        return self._step_down(
            f"stream {stream!r}", f"STREAM.INFO.{stream}", f"STREAM.LEADER.STEPDOWN.{stream}", timeout
        )

    def step_down_consumer(self, stream: str, consumer: str, timeout: float = _ELECTION_TIMEOUT) -> int:
        """Make the leader of a consumer step down; returns the new leader's index once it is elected (a node other
        than the old leader). StepDownError if no other node leads within ``timeout`` seconds."""
        return self._step_down(
            f"consumer {stream!r} > {consumer!r}",
            f"CONSUMER.INFO.{stream}.{consumer}",
            f"CONSUMER.LEADER.STEPDOWN.{stream}.{consumer}",
            timeout,
        )

    def _step_down(self, target: str, info: str, request: str, timeout: float) -> int:
        """Ask until a node other than the old leader leads, all within ``timeout``.

        Once is not enough on a busy cluster. Every node receives the request and the first answer wins, so a
        member that sees no leader for a moment (just healed or restarted) answers 10008 before the leader does;
        the leader may not get it at all (its routes coming back). And the leader hands over to the first peer
        it heard from lately, caught up or not: a follower behind on the log (just healed, or slow under a
        publisher) cannot win, and the group has no leader until an election 4-9 s later, which the old leader
        may win again. So the request names the successor (nats-server 2.11+): the follower the leader reports
        current and least behind. It is sent again while the old leader is still seen leading ``_RESEND_AFTER``
        after the last one, or at once when it was elected anew (its ``leader_since`` moved); while no leader is
        named an election is under way and only waited for. A new leader counts once two looks in a row name
        it, as a node healed from a partition may still answer for a moment as leader.
        """
        deadline = time.monotonic() + timeout
        try:
            old, old_since = self._leader_since(info, timeout)
        except ClusterError as exc:
            raise StepDownError(
                f"cluster {self.name}: {target} has no leader to step down within {timeout:g}s ({exc})",
                target=target,
                old=None,
                leader=None,
                attempts=0,
                last_answer=None,
            ) from exc
        attempts, last_answer, sent_at = 0, None, -_RESEND_AFTER
        view = self._look(info, deadline)
        if view.leader != old:  # it moved meanwhile: ask it as found a moment ago
            view = _LeaderView(old, old_since, None)
        asked_since = old_since  # the old leader's leader_since when last asked
        candidate: int | None = None
        while True:
            now = time.monotonic()
            if now >= deadline:
                elected_again = view.leader == old and view.since != old_since
                raise self._step_down_failed(target, timeout, old, view.leader, elected_again, attempts, last_answer)
            if view.leader == old:
                elected_again = view.since is not None and asked_since is not None and view.since != asked_since
                if elected_again or now - sent_at >= _RESEND_AFTER:
                    attempts += 1
                    sent_at, asked_since = now, view.since
                    last_answer = self._send_step_down(request, view.successor, deadline)
                    logger.debug(
                        "cluster %s: step-down %d of %s (to %s): %s",
                        self.name,
                        attempts,
                        target,
                        view.successor or "any",
                        last_answer,
                    )
            looked = self._look(info, deadline)
            if looked[:2] != view[:2]:
                name = self._name_of(looked.leader)
                logger.debug("cluster %s: %s: leader %s since %s", self.name, target, name, looked.since)
            view = looked
            if view.leader is not None and view.leader != old:
                if view.leader == candidate:
                    new = view.leader
                    logger.info("cluster %s: %s leader %s -> %s", self.name, target, self.names[old], self.names[new])
                    return new
                candidate = view.leader
                continue  # look once more at once: a node healed from a partition may have answered as leader
            candidate = None
            time.sleep(_POLL)

    def _send_step_down(self, request: str, successor: str | None, deadline: float) -> str:
        """Send one step-down request; what it got back (``"accepted"`` or the error) for the log and the error."""
        admin = self._admin_client()
        body = None
        if successor is not None and (server_version(admin.server_info) or (0, 0, 0)) >= _PREFERRED_SINCE:
            body = {"placement": {"preferred": successor}}
        try:
            timeout = min(_STEP_DOWN_REQUEST_TIMEOUT, max(_POLL, deadline - time.monotonic()))
            admin.jetstream().api.request(request, body, timeout)
        except JetStreamError as exc:
            if not _transient(exc):  # the stream or consumer is gone, or the request is wrong: no retry mends it
                raise
            return f"{type(exc).__name__}: {exc}"
        return "accepted"

    def _look(self, info: str, deadline: float) -> _LeaderView:
        """One look at who leads (see `_LeaderView`); nobody while no one answers or the answer names no
        leader, as during an election."""
        try:
            body = self._api(info, min(_LOOK_TIMEOUT, max(_POLL, deadline - time.monotonic())))
        except InvalidArgumentError:  # a bad name will not get better by asking again
            raise
        except JetStreamError as exc:
            if not _transient(exc):
                raise
            return _NOBODY
        return self._view(body)

    def _step_down_failed(
        self,
        target: str,
        timeout: float,
        old: int,
        seen: int | None,
        elected_again: bool,
        attempts: int,
        last_answer: str | None,
    ) -> StepDownError:
        if seen is None:
            state = "no leader is named (an election is still under way)"
        elif elected_again:
            state = f"{self.names[old]} was elected again"
        else:
            state = f"{self.names[old]} still leads"
        message = (
            f"cluster {self.name}: {target}: no leader other than {self.names[old]} within {timeout:g}s; {state}; "
            f"{attempts} step-down request(s) sent, the last answered: {last_answer}"
        )
        return StepDownError(message, target=target, old=old, leader=seen, attempts=attempts, last_answer=last_answer)

    def _leader(self, info: str, timeout: float | None) -> int:
        return self._leader_since(info, timeout)[0]

    def _leader_since(self, info: str, timeout: float | None) -> tuple[int, str | None]:
        """The node the ``info`` answer names as leader and its ``leader_since`` (None from servers before 2.11),
        asked until one is named; ClusterError when none is within ``timeout`` (default 30 s), with the most
        telling answer seen (a "stream not found" rather than the timeout of the last, cut-short request)."""
        deadline = time.monotonic() + (timeout if timeout is not None else _ELECTION_TIMEOUT)
        cause: JetStreamError | None = None
        while True:
            try:
                body = self._api(info, min(_LEADER_REQUEST_TIMEOUT, max(_POLL, deadline - time.monotonic())))
            except InvalidArgumentError:  # a bad name will not get better by asking again
                raise
            except JetStreamError as exc:  # unanswered during an election: ask again
                if cause is None or not isinstance(exc, JetStreamTimeoutError):
                    cause = exc
                if time.monotonic() >= deadline:
                    raise ClusterError(f"cluster {self.name}: {info} unanswered: {cause}") from exc
                time.sleep(_POLL)
                continue
            view = self._view(body)
            if view.leader is not None:
                return view.leader, view.since
            if time.monotonic() >= deadline:
                raise ClusterError(f"cluster {self.name}: {info} names no leader")
            time.sleep(_POLL)

    def _view(self, body: dict[str, Any]) -> _LeaderView:
        """What an INFO answer says of its group's leader; the successor is a follower it reports current and
        online (a running node outside any partition), the least behind."""
        cluster = body.get("cluster") or {}
        leader = cluster.get("leader") or ""
        if leader not in self.names:
            return _NOBODY
        since = cluster.get("leader_since")
        ready = [
            (int(peer.get("lag") or 0), int(peer.get("active") or 0), peer["name"])
            for peer in cluster.get("replicas") or []
            if peer.get("name") in self.names
            and peer.get("current")
            and not peer.get("offline")
            and self.names.index(peer["name"]) not in self._partitioned
            and self.servers[self.names.index(peer["name"])].is_running
        ]
        return _LeaderView(
            self.names.index(leader), since if isinstance(since, str) else None, min(ready)[2] if ready else None
        )

    def _api(self, suffix: str, timeout: float | None = None) -> dict[str, Any]:
        """One JetStream API request through the admin client; ``timeout`` bounds it with any retries inside."""
        return self._admin_client().jetstream().api.request(suffix, timeout=timeout)

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

    def _name_of(self, i: int | None) -> str:
        return "none" if i is None else self.names[i]

    def _index(self, i: int) -> int:
        if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < self.size:
            raise InvalidArgumentError("i", f"must be a node index 0 to {self.size - 1}, got {i!r}")
        return i
