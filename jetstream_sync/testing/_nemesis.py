"""Nemesis: breaks an EmbeddedCluster one fault at a time while a workload runs, and heals it, noting each step in
the workload's History (Jepsen's nemesis process).

The faults come from the cluster's own methods (``partition``/``heal``, ``step_down``, ``restart_node``, a
node's ``kill``/``start``) plus one it lacks: pausing a node's process (SIGSTOP, then SIGCONT), the fault that
best imitates a long garbage-collection pause or an overloaded VM, where a leader stops without knowing it and
wakes up still believing it leads. Only one node is broken at a time, so a majority always remains and the
cluster can make progress; the target is usually the leader of one of the workload's streams (the interesting
case), sometimes another node. [`FAULTS`][jetstream_sync.testing.FAULTS] are these single-node faults;
[`EVERY_FAULT`][jetstream_sync.testing.EVERY_FAULT] adds ``isolate_leader`` (a partition that always cuts a stream's
leader off from the majority), ``rolling_restart`` (every node restarted in turn, each once the cluster is whole again)
and ``kill_client_node`` (SIGKILL of a node a workload's client is connected to, so the client must move).

The faults are dealt from a shuffled deck, so every kind comes up once before any comes up twice;
[`Nemesis.dealt_all`][jetstream_sync.testing.Nemesis.dealt_all] is set once every kind has been applied, and
[`Nemesis.counts`][jetstream_sync.testing.Nemesis.counts] says how many times each was (a run that must show every fault
waits for the first and checks the second).

Whatever happens, [`Nemesis.heal_all`][jetstream_sync.testing.Nemesis.heal_all] resumes, reconnects and restarts every
node it touched, so the cluster is whole for the final reads and for stopping (a paused process would ignore SIGTERM
until the stop's timeout).
"""

from __future__ import annotations

import logging
import os
import random
import signal
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from ..errors import InvalidArgumentError, JetStreamError
from ._history import History

if TYPE_CHECKING:
    from ._cluster import EmbeddedCluster

__all__ = ["EVERY_FAULT", "FAULTS", "Nemesis", "pause_node", "resume_node"]

logger = logging.getLogger("jetstream_sync.testing")

#: the single-node faults; ``pause`` only where the platform has SIGSTOP (not on Windows)
FAULTS: tuple[str, ...] = ("pause", "kill", "restart", "partition", "step_down")
#: every fault the nemesis knows: the single-node ones, a partition of a stream's leader, a rolling restart, and
#: the kill of a node a client is connected to (which needs ``client_nodes``)
EVERY_FAULT: tuple[str, ...] = (*FAULTS, "isolate_leader", "rolling_restart", "kill_client_node")
_CAN_PAUSE = hasattr(signal, "SIGSTOP")
#: how long the cluster may take to form again after a heal before the nemesis goes on anyway (and says so)
_HEAL_TIMEOUT = 30.0
_START_TIMEOUT = 30.0
#: the share of faults aimed at the stream's leader rather than at any node
_AT_LEADER = 0.7


def pause_node(cluster: EmbeddedCluster, i: int) -> None:
    """Stop node ``i``'s process with SIGSTOP: it keeps its sockets and its beliefs, and answers nothing until
    [`resume_node`][jetstream_sync.testing.resume_node]. Not on Windows (InvalidArgumentError there)."""
    pid = cluster.servers[i].pid
    if not _CAN_PAUSE:
        raise InvalidArgumentError("fault", "pausing a process needs SIGSTOP, which this platform does not have")
    if pid is None:
        raise InvalidArgumentError("i", f"node {cluster.names[i]} is not running")
    os.kill(pid, signal.SIGSTOP)


def resume_node(cluster: EmbeddedCluster, i: int) -> None:
    """Let a node paused by [`pause_node`][jetstream_sync.testing.pause_node] run again (SIGCONT); nothing happens to
    one that is not paused."""
    pid = cluster.servers[i].pid
    if pid is not None and _CAN_PAUSE:
        os.kill(pid, signal.SIGCONT)


class Nemesis:
    """Applies the ``faults`` (names from [`EVERY_FAULT`][jetstream_sync.testing.EVERY_FAULT]) to ``cluster``, one at a
    time, aimed mostly at the leader of one of the streams ``stream`` names (one name or several); each fault and heal
    is noted in ``history``. ``client_nodes`` returns the indexes of the nodes the workload's clients are connected to
    now (``kill_client_node`` needs it). [`run`][jetstream_sync.testing.Nemesis.run] is the loop a workload starts on a
    thread of its own; [`heal_all`][jetstream_sync.testing.Nemesis.heal_all] undoes everything (call it after that
    thread ended)."""

    def __init__(
        self,
        cluster: EmbeddedCluster,
        *,
        stream: str | Sequence[str],
        faults: Sequence[str] = FAULTS,
        history: History | None = None,
        seed: int | None = None,
        client_nodes: Callable[[], Sequence[int]] | None = None,
    ) -> None:
        unknown = [fault for fault in faults if fault not in EVERY_FAULT]
        if unknown:
            raise InvalidArgumentError("faults", f"unknown faults {unknown}; choose from {list(EVERY_FAULT)}")
        if "kill_client_node" in faults and client_nodes is None:
            raise InvalidArgumentError("client_nodes", "kill_client_node needs to know where the clients are")
        self.cluster = cluster
        self.streams = (stream,) if isinstance(stream, str) else tuple(stream)
        if not self.streams:
            raise InvalidArgumentError("stream", "name at least one stream to aim at")
        self.faults = tuple(f for f in faults if f != "pause" or _CAN_PAUSE)
        self.history = history if history is not None else History()
        self._client_nodes = client_nodes
        self._rng = random.Random(seed)
        self._deck: list[str] = []
        self._lock = threading.Lock()  # the broken-node sets: the run thread changes them, heal_all reads them
        self._paused: set[int] = set()
        self._killed: set[int] = set()
        self._partitioned: set[int] = set()
        #: every fault applied, as "pause n2 (leader of S)", in order
        self.applied: list[str] = []
        #: the faults that did not complete (no election in time, a node that did not come back), as applied
        self.incomplete: list[str] = []
        #: set once every kind of ``faults`` has been applied and completed at least once
        self.dealt_all = threading.Event()
        if not self.faults:
            self.dealt_all.set()

    @property
    def stream(self) -> str:
        """The first stream aimed at (the only one, for a nemesis made with one name)."""
        return self.streams[0]

    def counts(self) -> dict[str, int]:
        """How many times each kind of ``faults`` was applied and completed (zeros included)."""
        done = dict.fromkeys(self.faults, 0)
        failed = list(self.incomplete)
        for what in self.applied:
            if what in failed:
                failed.remove(what)
            else:
                done[what.split()[0]] += 1
        return done

    # -- one fault --------------------------------------------------------------------------------------------
    def _leader(self, stream: str) -> int | None:
        try:
            return self.cluster.leader_of(stream)
        except JetStreamError as exc:
            logger.info("nemesis: no leader of %s to aim at (%s)", stream, exc)
            return None

    def _target(self, fault: str) -> tuple[int, str]:
        """A node to break: a stream's leader most of the time (asked while every node is well), else any; for
        ``isolate_leader`` always a leader, for ``kill_client_node`` a node a client is connected to."""
        if fault == "kill_client_node" and self._client_nodes is not None:
            nodes = sorted(set(self._client_nodes()))
            if nodes:
                return self._rng.choice(nodes), " (a client's)"
        if fault == "isolate_leader" or self._rng.random() < _AT_LEADER:
            stream = self._rng.choice(self.streams)
            leader = self._leader(stream)
            if leader is not None:
                return leader, f" (leader of {stream})"
        return self._rng.randrange(self.cluster.size), ""

    def _next_fault(self) -> str:
        """The next card of the deck, shuffled anew once it is dealt out: every kind once before any twice."""
        if not self._deck:
            self._deck = list(self.faults)
            self._rng.shuffle(self._deck)
        return self._deck.pop()

    def break_one(self, fault: str | None = None) -> str:
        """Apply ``fault`` (or the next of the deck); returns what was done, as noted in the history. Faults
        that take no time (``restart``, ``step_down``, ``rolling_restart``) are over when this returns; the
        others last until [`heal`][jetstream_sync.testing.Nemesis.heal]."""
        fault = fault or self._next_fault()
        node, role = self._target(fault)
        what = f"{self.cluster.names[node]}{role}"
        if fault == "step_down":  # always a leader's: the target only matters to the other faults
            what = self._rng.choice(self.streams)
        elif fault == "rolling_restart":
            what = "every node"
        self.history.note(fault, what)
        logger.info("nemesis: %s %s", fault, what)
        done = f"{fault} {what}"
        self.applied.append(done)
        try:
            self._apply(fault, node, what)
        except (JetStreamError, OSError) as exc:  # no election in time, a slow restart, a process gone: noted
            logger.warning("nemesis: %s did not complete: %s", done, exc)
            self.history.note(f"{fault} incomplete", f"{what}: {exc}")
            self.incomplete.append(done)
        if all(self.counts().values()):
            self.dealt_all.set()
        return done

    def _apply(self, fault: str, node: int, what: str) -> None:
        if fault == "pause":
            pause_node(self.cluster, node)
            with self._lock:
                self._paused.add(node)
        elif fault in ("kill", "kill_client_node"):
            self.cluster.servers[node].kill()
            with self._lock:
                self._killed.add(node)
        elif fault in ("partition", "isolate_leader"):
            self.cluster.partition(node)
            with self._lock:
                self._partitioned.add(node)
        elif fault == "restart":
            self.cluster.restart_node(node, _START_TIMEOUT)
        elif fault == "step_down":
            new = self.cluster.step_down(what)
            self.history.note("new leader", f"{what}: {self.cluster.names[new]}")
        elif fault == "rolling_restart":
            for i in range(self.cluster.size):
                self.cluster.restart_node(i, _HEAL_TIMEOUT)
                self.history.note("restarted", self.cluster.names[i])

    def heal(self) -> None:
        """Undo the faults that last (resume, start, heal), then wait until the cluster has formed again."""
        with self._lock:
            paused, killed, partitioned = set(self._paused), set(self._killed), set(self._partitioned)
            self._paused.clear()
            self._killed.clear()
            self._partitioned.clear()
        for node in sorted(paused):
            resume_node(self.cluster, node)
            self.history.note("resume", self.cluster.names[node])
        for node in sorted(partitioned):
            self.cluster.heal(node)
            self.history.note("heal", self.cluster.names[node])
        for node in sorted(killed):
            try:
                self.cluster.servers[node].start(_START_TIMEOUT)
                self.history.note("start", self.cluster.names[node])
            except JetStreamError as exc:
                logger.warning("nemesis: %s did not start again: %s", self.cluster.names[node], exc)
                with self._lock:
                    self._killed.add(node)  # heal_all tries again
        if paused or partitioned or killed:
            try:
                self.cluster.wait_formed(_HEAL_TIMEOUT)
            except JetStreamError as exc:
                logger.warning("nemesis: the cluster did not form again within %gs: %s", _HEAL_TIMEOUT, exc)

    def heal_all(self) -> None:
        """Undo every fault still in place; safe to call more than once, and after
        [`run`][jetstream_sync.testing.Nemesis.run] raised."""
        self.heal()
        with self._lock:
            left = set(self._killed)
        if left:
            self.heal()

    # -- the loop ---------------------------------------------------------------------------------------------
    def run(self, stop: threading.Event, *, quiet: tuple[float, float], hold: tuple[float, float]) -> None:
        """Until ``stop`` is set: wait a quiet spell (seconds, uniform in ``quiet``), break one thing, let it last
        (``hold``), heal. Returns with the cluster healed. Meant for a thread of its own."""
        try:
            while not stop.wait(self._rng.uniform(*quiet)):
                self.break_one()
                stop.wait(self._rng.uniform(*hold))
                self.heal()
        finally:
            self.heal_all()
