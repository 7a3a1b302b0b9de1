"""ClusterWorkload: runs workload parts (a queue, a key-value bucket) together on one cluster under a nemesis, into
one History, and checks it.

A *part* ([`WorkloadPart`][jetstream_sync.testing.WorkloadPart]: ``QueueWorkload``, ``KVWorkload``) knows its own
traffic: it sets up its streams and readers on the run's clients, gives the runner its writers, and after the faults
brings its readers up to date. The runner owns what they share, in this order:

1. ``connections`` clients, connected to every node, that ping every 2 s (a paused node's clients notice within
   seconds and move on) and reconnect for ever;
2. each part's set-up (its readers start here, before anything is written);
3. the writers and the [`Nemesis`][jetstream_sync.testing.Nemesis] for ``duration`` seconds, and then, with
   ``every_fault_once``, until the nemesis has applied every kind of fault at least once (at most ``_EVERY_FAULT_GRACE``
   more seconds);
4. the heal: every node resumed, reconnected and started, the cluster formed again;
5. each part's settling (bounded waits until its readers have everything, final reads), then its closing;
6. [`check_all`][jetstream_sync.testing.check_all] on the history, and a
   [`WorkloadResult`][jetstream_sync.testing.WorkloadResult] with the faults applied (how many of each kind) and the
   fsync setting the nodes reported.

A thread of a part that raises something other than a JetStream error (a bug in the workload or the client, not a
fault) ends the run early; [`ClusterWorkload.run`][jetstream_sync.testing.ClusterWorkload.run] raises it once everything
is stopped.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import attrs

from ..errors import InvalidArgumentError, JetStreamError
from ._checker import DEFAULT_TIME_LIMIT
from ._history import History
from ._nemesis import EVERY_FAULT, Nemesis
from ._report import HistoryChecks, check_all

if TYPE_CHECKING:
    from ..client import Client
    from ._cluster import EmbeddedCluster

__all__ = ["ClusterWorkload", "Crew", "WorkloadPart", "WorkloadResult"]

logger = logging.getLogger("jetstream_sync.testing")

#: how much longer than ``duration`` a run may go on for the nemesis to apply every kind of fault once
_EVERY_FAULT_GRACE = 240.0
#: what the heal and each part's settling may take: elections (4-9 s), redeliveries after an ack wait, catch-up
_SETTLE_TIMEOUT = 120.0
_JOIN_TIMEOUT = 60.0


class Crew:
    """The threads of a run: writers (they stop when [`stop`][jetstream_sync.testing.Crew.stop] is set) and readers
    (when [`finished`][jetstream_sync.testing.Crew.finished] is set, after the settling). What a thread raises is kept
    in [`errors`][jetstream_sync.testing.Crew.errors] and ends
    the run early."""

    def __init__(self) -> None:
        self.stop = threading.Event()
        self.finished = threading.Event()
        self.errors: list[BaseException] = []
        self._writers: list[threading.Thread] = []
        self._readers: list[threading.Thread] = []

    def start(self, name: str, body: Callable[[], None], *, reader: bool = False) -> threading.Thread:
        """Run ``body`` on a new thread named ``name``: a reader (until
        [`finished`][jetstream_sync.testing.Crew.finished]) or a writer."""
        thread = threading.Thread(target=self._guarded, args=(body,), name=name, daemon=True)
        (self._readers if reader else self._writers).append(thread)
        thread.start()
        return thread

    def _guarded(self, body: Callable[[], None]) -> None:
        try:
            body()
        except BaseException as exc:  # kept for run() to raise: a thread's exception is otherwise only printed
            logger.exception("workload: %s failed", threading.current_thread().name)
            self.errors.append(exc)
            self.stop.set()

    def join_writers(self, timeout: float) -> None:
        """Wait for the writers (after [`stop`][jetstream_sync.testing.Crew.stop]); one still running is named in the
        log (its operation stays open in the history, as it should)."""
        _join(self._writers, timeout)

    def join_readers(self, timeout: float) -> None:
        """Set [`finished`][jetstream_sync.testing.Crew.finished] and wait for the reader threads."""
        self.finished.set()
        _join(self._readers, timeout)


def _join(threads: list[threading.Thread], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
        if thread.is_alive():
            logger.warning("workload: %s did not end within %gs", thread.name, timeout)


class WorkloadPart(Protocol):
    """One kind of traffic in a [`ClusterWorkload`][jetstream_sync.testing.ClusterWorkload] (see the module
    docstring)."""

    @property
    def streams(self) -> tuple[str, ...]:
        """The streams it writes, for the nemesis to aim at their leaders."""

    def set_up(self, clients: Sequence[Client], history: History, crew: Crew) -> None:
        """Create its streams and consumers and start its readers (``crew.start(..., reader=True)``); record
        into ``history``."""

    def writers(self) -> list[tuple[str, Callable[[threading.Event], None]]]:
        """Its writers, as (thread name, body); a body runs until the event it is given is set."""

    def settle(self, deadline: float) -> None:
        """After the heal: wait (until ``deadline``, ``time.monotonic()``) until its readers have everything,
        and read what it reads last."""

    def close(self) -> None:
        """Stop its readers (after ``crew.finished`` was set)."""

    def describe(self) -> list[str]:
        """Lines for the run's summary (what it did besides the operations: retries, reader errors)."""

    @property
    def kept(self) -> int | None:
        """For a key-value part: how many revisions per key its bucket keeps (None: not a bucket's part)."""


@attrs.frozen(kw_only=True)
class WorkloadResult:
    """What a [`ClusterWorkload.run`][jetstream_sync.testing.ClusterWorkload.run] did and found: the ``history`` and its
    ``checks``; the faults applied, in order, and how many of each kind completed (``fault_counts``; ``incomplete``
    lists those that did not); the ``fsync`` setting the nodes reported; how long the workload ran (``seconds``, without
    set-up and settling); the ``seed`` of its choices; ``notes``, the parts' own lines."""

    history: History
    checks: HistoryChecks
    faults: tuple[str, ...]
    fault_counts: Mapping[str, int]
    incomplete: tuple[str, ...]
    fsync: str
    nodes: int
    seconds: float
    seed: int
    notes: tuple[str, ...] = ()

    @property
    def missing_faults(self) -> list[str]:
        """The kinds of fault asked for that never completed."""
        return [fault for fault, n in self.fault_counts.items() if n == 0]

    @property
    def clean(self) -> bool:
        """Every checker valid (the registers linearizable, decided in time) and every kind of fault applied."""
        return self.checks.valid is True and not self.missing_faults

    def summary(self) -> str:
        """The run in a few lines (cluster, fsync, duration, operations, faults), the parts' notes, then the
        checkers' table and summaries."""
        counts = ", ".join(f"{name} {n:,}" for name, n in self.history.counts().items())
        faults = ", ".join(f"{kind} {n}" for kind, n in self.fault_counts.items())
        lines = [
            f"{self.nodes} nodes, fsync {self.fsync}, {self.seconds:.0f}s of workload (seed {self.seed}): {counts}",
            f"faults ({len(self.faults)}): {faults}"
            + (f"; incomplete: {'; '.join(self.incomplete)}" if self.incomplete else ""),
            *self.notes,
            self.checks.summary(),
        ]
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        """The figures as JSON-ready values (for a results file)."""
        return {
            "clean": self.clean,
            "nodes": self.nodes,
            "fsync": self.fsync,
            "seconds": self.seconds,
            "seed": self.seed,
            "operations": self.history.counts(),
            "faults": list(self.faults),
            "fault_counts": dict(self.fault_counts),
            "incomplete": list(self.incomplete),
            "notes": list(self.notes),
            "checks": self.checks.to_json(),
        }


class ClusterWorkload:
    """Runs ``parts`` on ``cluster`` under the ``faults`` of a [`Nemesis`][jetstream_sync.testing.Nemesis] (see the
    module docstring).

    ``duration``: seconds of writes; ``every_fault_once`` goes on until every kind of fault was applied once.
    ``quiet`` and ``hold`` (seconds, (low, high) ranges): the calm before each fault, and how long it lasts.
    ``connections`` clients are shared by the parts, each call bounded by ``op_timeout``. ``seed`` makes the
    choices repeatable (the timing never is); ``check_time_limit`` is the linearizability search's budget per
    key; ``history`` records into a History of yours.

        with EmbeddedCluster(size=5, sync_interval="always") as cluster:
            result = ClusterWorkload(cluster, [QueueWorkload(), KVWorkload(cluster, watchers=2)],
                                     duration=60, faults=EVERY_FAULT, every_fault_once=True).run()
        print(result.summary())
        assert result.clean
    """

    def __init__(
        self,
        cluster: EmbeddedCluster,
        parts: Sequence[WorkloadPart],
        *,
        duration: float = 60.0,
        faults: Sequence[str] = EVERY_FAULT,
        every_fault_once: bool = False,
        quiet: tuple[float, float] = (1.0, 3.0),
        hold: tuple[float, float] = (2.0, 5.0),
        connections: int = 3,
        op_timeout: float = 5.0,
        seed: int | None = None,
        check_time_limit: float = DEFAULT_TIME_LIMIT,
        history: History | None = None,
    ) -> None:
        if not parts:
            raise InvalidArgumentError("parts", "give at least one workload part")
        if not (duration > 0 and connections >= 1 and op_timeout > 0):
            raise InvalidArgumentError("workload", "duration, connections and op_timeout must be > 0")
        self.cluster = cluster
        self.parts = list(parts)
        self.duration = duration
        self.faults = tuple(faults)
        self.every_fault_once = every_fault_once
        self.quiet = quiet
        self.hold = hold
        self.connections = connections
        self.op_timeout = op_timeout
        self.seed = seed if seed is not None else random.randrange(1 << 30)
        self.check_time_limit = check_time_limit
        self.history = history if history is not None else History()
        self._clients: list[Client] = []  # the run's clients, while it runs
        streams = [stream for part in self.parts for stream in part.streams]
        self.nemesis = Nemesis(
            cluster,
            stream=streams,
            faults=self.faults,
            history=self.history,
            seed=self.seed,
            client_nodes=self._client_nodes,
        )

    def _client_nodes(self) -> list[int]:
        """The nodes the run's clients are connected to now (for ``kill_client_node``)."""
        urls = self.cluster.urls
        return [urls.index(c.connected_url) for c in self._clients if c.connected_url in urls]

    def run(self) -> WorkloadResult:
        """Set up, run the writers and the nemesis, heal, settle, check (see the module docstring)."""
        from ..client import connect  # the client is needed only by code that runs a workload

        crew = Crew()
        self._clients = []
        try:
            for i in range(self.connections):
                self._clients.append(
                    connect(
                        self.cluster.urls,
                        name=f"workload-{i}",
                        max_reconnect_attempts=-1,
                        reconnect_wait=0.5,
                        ping_interval=2.0,
                        timeout=self.op_timeout,
                    )
                )
            for part in self.parts:
                part.set_up(self._clients, self.history, crew)
            seconds = self._run_writers(crew)
            settling = time.monotonic()
            self._settle()
            logger.info("workload: writers ran %.1fs, settled in %.1fs", seconds, time.monotonic() - settling)
        finally:
            crew.stop.set()
            self.nemesis.heal_all()
            crew.join_readers(_JOIN_TIMEOUT)
            for part in self.parts:
                part.close()
            for client in self._clients:
                client.close()
        if crew.errors:
            raise crew.errors[0]
        fsync = self.cluster.fsync()
        checking = time.monotonic()
        kept = next((part.kept for part in self.parts if part.kept is not None), None)
        # The parts waited for their readers in settle(): a watcher that lacks a write at the end has lost it.
        checks = check_all(self.history, time_limit=self.check_time_limit, kept=kept, watchers_to_end=True)
        logger.info("workload: %d operations checked in %.1fs", len(self.history), time.monotonic() - checking)
        return WorkloadResult(
            history=self.history,
            checks=checks,
            faults=tuple(self.nemesis.applied),
            fault_counts=self.nemesis.counts(),
            incomplete=tuple(self.nemesis.incomplete),
            fsync=fsync,
            nodes=self.cluster.size,
            seconds=seconds,
            seed=self.seed,
            notes=tuple(line for part in self.parts for line in part.describe()),
        )

    def _run_writers(self, crew: Crew) -> float:
        """The writers and the nemesis for ``duration`` (and until every fault came up, if asked); returns how
        long they ran."""
        for part in self.parts:
            for name, body in part.writers():
                crew.start(name, _bound(body, crew.stop))
        if self.faults:
            crew.start("workload-nemesis", lambda: self.nemesis.run(crew.stop, quiet=self.quiet, hold=self.hold))
        started = time.monotonic()
        crew.stop.wait(self.duration)
        if self.every_fault_once:
            limit = time.monotonic() + _EVERY_FAULT_GRACE
            while not (self.nemesis.dealt_all.is_set() or crew.stop.is_set()):
                if time.monotonic() > limit:
                    logger.warning("workload: not every fault was applied within %gs more", _EVERY_FAULT_GRACE)
                    break
                self.nemesis.dealt_all.wait(0.5)  # or a thread's error ends the run: look at both
        crew.stop.set()
        seconds = time.monotonic() - started
        crew.join_writers(self.op_timeout * 4 + _SETTLE_TIMEOUT)
        return seconds

    def _settle(self) -> None:
        """Heal everything, wait for the cluster to form, then let each part bring its readers up to date."""
        self.nemesis.heal_all()
        try:
            self.cluster.wait_formed(_SETTLE_TIMEOUT)
        except JetStreamError as exc:
            logger.warning("workload: the cluster did not form again after the faults: %s", exc)
        deadline = time.monotonic() + _SETTLE_TIMEOUT
        for part in self.parts:
            started = time.monotonic()
            part.settle(deadline)
            logger.info("workload: %s settled in %.1fs", type(part).__name__, time.monotonic() - started)


def _bound(body: Callable[[threading.Event], None], stop: threading.Event) -> Callable[[], None]:
    return lambda: body(stop)
