"""Nemesis: breaks an EmbeddedCluster one fault at a time while a workload runs, and heals it, noting each step in
the workload's History (Jepsen's nemesis process).

The faults come from the cluster's own methods (``partition``/``heal``, ``step_down``, ``restart_node``, a
node's ``kill``/``start``) plus one it lacks: pausing a node's process (SIGSTOP, then SIGCONT), the fault that
best imitates a long garbage-collection pause or an overloaded VM, where a leader stops without knowing it and
wakes up still believing it leads. Only one node is broken at a time, so a majority always remains and the
cluster can make progress; the target is usually the leader of the workload's stream (the interesting case),
sometimes another node.

Whatever happens, :meth:`Nemesis.heal_all` resumes, reconnects and restarts every node it touched, so the
cluster is whole for the final reads and for stopping (a paused process would ignore SIGTERM until the stop's
timeout).
"""

from __future__ import annotations

import logging
import os
import random
import signal
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..errors import InvalidArgumentError, JetStreamError
from ._history import History

if TYPE_CHECKING:
    from ._cluster import EmbeddedCluster

__all__ = ["FAULTS", "Nemesis", "pause_node", "resume_node"]

logger = logging.getLogger("jetstream_sync.testing")

#: every fault the nemesis knows; ``pause`` only where the platform has SIGSTOP (not on Windows)
FAULTS: tuple[str, ...] = ("pause", "kill", "restart", "partition", "step_down")
_CAN_PAUSE = hasattr(signal, "SIGSTOP")
#: how long the cluster may take to form again after a heal before the nemesis goes on anyway (and says so)
_HEAL_TIMEOUT = 30.0
_START_TIMEOUT = 30.0
#: the share of faults aimed at the stream's leader rather than at any node
_AT_LEADER = 0.7


def pause_node(cluster: EmbeddedCluster, i: int) -> None:
    """Stop node ``i``'s process with SIGSTOP: it keeps its sockets and its beliefs, and answers nothing until
    :func:`resume_node`. Not on Windows (InvalidArgumentError there)."""
    pid = cluster.servers[i].pid
    if not _CAN_PAUSE:
        raise InvalidArgumentError("fault", "pausing a process needs SIGSTOP, which this platform does not have")
    if pid is None:
        raise InvalidArgumentError("i", f"node {cluster.names[i]} is not running")
    os.kill(pid, signal.SIGSTOP)


def resume_node(cluster: EmbeddedCluster, i: int) -> None:
    """Let a node paused by :func:`pause_node` run again (SIGCONT); nothing happens to one that is not paused."""
    pid = cluster.servers[i].pid
    if pid is not None and _CAN_PAUSE:
        os.kill(pid, signal.SIGCONT)


class Nemesis:
    """Applies the ``faults`` (names from :data:`FAULTS`) to ``cluster``, one at a time, aimed mostly at the
    leader of ``stream``; each fault and heal is noted in ``history``. :meth:`run` is the loop a workload
    starts on a thread of its own; :meth:`heal_all` undoes everything (call it after that thread ended)."""

    def __init__(
        self,
        cluster: EmbeddedCluster,
        *,
        stream: str,
        faults: Sequence[str] = FAULTS,
        history: History | None = None,
        seed: int | None = None,
    ) -> None:
        unknown = [fault for fault in faults if fault not in FAULTS]
        if unknown:
            raise InvalidArgumentError("faults", f"unknown faults {unknown}; choose from {list(FAULTS)}")
        self.cluster = cluster
        self.stream = stream
        self.faults = tuple(f for f in faults if f != "pause" or _CAN_PAUSE)
        self.history = history if history is not None else History()
        self._rng = random.Random(seed)
        self._lock = threading.Lock()  # the broken-node sets: the run thread changes them, heal_all reads them
        self._paused: set[int] = set()
        self._killed: set[int] = set()
        self._partitioned: set[int] = set()
        #: every fault applied, as "pause n2 (leader)", in order
        self.applied: list[str] = []

    # -- one fault --------------------------------------------------------------------------------------------
    def _target(self) -> tuple[int, str]:
        """A node to break: the stream's leader most of the time (asked while every node is well), else any."""
        if self._rng.random() < _AT_LEADER:
            try:
                return self.cluster.leader_of(self.stream), " (leader)"
            except JetStreamError as exc:
                logger.info("nemesis: no leader of %s to aim at (%s); any node then", self.stream, exc)
        return self._rng.randrange(self.cluster.size), ""

    def break_one(self, fault: str | None = None) -> str:
        """Apply ``fault`` (or one chosen at random); returns what was done, as noted in the history. Faults
        that take no time (``restart``, ``step_down``) are over when this returns; the others last until
        :meth:`heal`."""
        fault = fault or self._rng.choice(self.faults)
        node, role = self._target()
        what = f"{self.cluster.names[node]}{role}"
        if fault == "step_down":  # always the leader's: the target only matters to the other faults
            what = self.stream
        self.history.note(fault, what)
        logger.info("nemesis: %s %s", fault, what)
        try:
            if fault == "pause":
                pause_node(self.cluster, node)
                with self._lock:
                    self._paused.add(node)
            elif fault == "kill":
                self.cluster.servers[node].kill()
                with self._lock:
                    self._killed.add(node)
            elif fault == "partition":
                self.cluster.partition(node)
                with self._lock:
                    self._partitioned.add(node)
            elif fault == "restart":
                self.cluster.restart_node(node, _START_TIMEOUT)
            elif fault == "step_down":
                what += f", new leader {self.cluster.names[self.cluster.step_down(self.stream)]}"
        except (JetStreamError, OSError) as exc:  # no election in time, a slow restart, a process gone: noted
            logger.warning("nemesis: %s %s did not complete: %s", fault, what, exc)
            self.history.note(f"{fault} incomplete", f"{what}: {exc}")
        self.applied.append(f"{fault} {what}")
        return f"{fault} {what}"

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
        """Undo every fault still in place; safe to call more than once, and after :meth:`run` raised."""
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
