"""KVWorkload: a Jepsen-style key-value test of this client against a real cluster under faults.

Threads share a few client connections and, for a set duration, read, write and compare-and-set a few keys of a
replicated bucket (R3 by default), each operation recorded in a [`History`][jetstream_sync.testing.History];
``watchers`` threads watch every key meanwhile, each entry they get recorded too. A
[`Nemesis`][jetstream_sync.testing.Nemesis] pauses, kills, restarts and partitions nodes and makes the bucket's leader
step down. Then the cluster is healed, every connection reads every key a last time (so a write lost in a failover
shows), the watchers catch up with the bucket, and [`check_history`][jetstream_sync.testing.check_history] (and
[`check_watches`][jetstream_sync.testing.check_watches]) judge the history.

It is a part of a [`ClusterWorkload`][jetstream_sync.testing.ClusterWorkload] (``_runner.py``), which runs it alone
([`KVWorkload.run`][jetstream_sync.testing.KVWorkload.run]) or beside other parts on the same cluster, clients and
nemesis; as a part, its run parameters (duration, faults, seed, connections...) are the ClusterWorkload's.

Every write writes a value never written before (``t<thread>-<n>``), which is what lets the checker say which
value is older and which write a read saw. A compare-and-set reads the key first and updates it only if its
revision is still the one read (``kv.update(key, value, last=revision)``, or ``kv.create`` when the key had no
value); since values are unique, "same revision" and "same value" are the same condition, which is what the
checker's register compares.

How an outcome is recorded decides what the checker may conclude, so it errs on the side of "unknown": only
``KeyWrongLastSequenceError`` (the server compared and refused) is a definite ``fail``; a timeout, a lost
connection, "no leader" and every other error are ``info`` (the write may still be applied), and the thread
carries on as a new process, as Jepsen's do: thread ``t`` takes process numbers that leave ``t`` modulo
``threads`` (``t``, then ``t + threads``, and so on, when it runs alone), so ``process % threads`` is the thread,
and thread ``t`` uses connection ``t % connections`` (the final reads of connection ``c`` are processes ``c``
modulo ``threads`` too). A value ``t<t>-<n>`` was written by thread ``t``.

A compare-and-set's own read (the get that finds the revision to compare with) is recorded as a read, unless
``record_cas_reads=False``: then the history holds the writes, the compare-and-sets and the plain reads only, the
compare-and-set history the server decides (a compare-and-set made from a stale read is refused by the stream, so
a stale answer to that get cannot make a successful one wrong). That is the way to check the server's
compare-and-set under partitions, where no read mode is linearizable: a stream leader cut off from the majority
answers reads from what it had for a few seconds (docs/upstream/stale-leader-read.md).

The read mode (``read=``) is the variable the workload exists to measure: ``"direct"`` (any replica),
``"read_your_writes"`` and ``"leader"``, as ``KeyValue.get(read=...)`` takes them. ``None`` leaves the argument
out, for clients without it.
"""

from __future__ import annotations

import functools
import logging
import random
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from ..errors import InvalidArgumentError, JetStreamError, KeyNotFoundError, KeyWrongLastSequenceError
from ..errors import TimeoutError as JetStreamTimeoutError
from ._checker import CheckResult
from ._history import History, PendingOperation
from ._nemesis import EVERY_FAULT, FAULTS
from ._runner import ClusterWorkload, Crew

if TYPE_CHECKING:
    from ..client import Client
    from ..jetstream.kv import KeyValue, KeyWatcher
    from ._cluster import EmbeddedCluster

__all__ = ["KVWorkload", "KVWorkloadResult"]

logger = logging.getLogger("jetstream_sync.testing")

#: what setting up and healing may take: longer than an election (4-9 s), as the cluster tests use
_SETUP_TIMEOUT = 30.0
#: final reads: this many rounds per connection and key, this far apart (a replica catching up gets a chance)
_FINAL_ROUNDS = 3
_FINAL_PAUSE = 0.5
_WATCH_POLL = 0.5  # a watcher looks at its stop flag this often while no entry comes


@attrs.frozen(kw_only=True)
class KVWorkloadResult:
    """What a [`KVWorkload.run`][jetstream_sync.testing.KVWorkload.run] did and found: the ``history``, the checker's
    ``check``, the ``read`` mode, the ``faults`` applied, how long the workload ran (``seconds``, without setup and the
    final reads)."""

    history: History
    check: CheckResult
    read: str | None
    faults: tuple[str, ...]
    seconds: float

    def summary(self) -> str:
        """A report: the mode, the operations by kind and outcome, the faults, then the checker's summary."""
        counts = ", ".join(f"{name} {n}" for name, n in self.history.counts().items())
        return "\n".join(
            [
                f"KV workload, read mode {self.read or 'default'}: {self.seconds:.0f}s, {counts}",
                f"faults ({len(self.faults)}): {'; '.join(self.faults) or 'none'}",
                self.check.summary(),
            ]
        )


class KVWorkload:
    """Reads, writes and compare-and-sets on a replicated bucket of ``cluster`` under faults, then a check (see
    the module docstring).

    ``threads`` workers share ``connections`` clients and operate for ``duration`` seconds on ``keys`` keys
    (``read_share`` of their operations reads, ``cas_share`` compare-and-sets, the rest writes), each call
    bounded by ``op_timeout`` (the client's default, 5 s: a shorter one turns every compare-and-set refusal the
    client must confirm, which takes 2 s after a fault, into an unknown outcome, and the checker learns less
    from those). ``watchers`` threads watch every key. The bucket has ``replicas`` replicas and keeps
    ``history`` revisions per key. ``faults`` (names from ``EVERY_FAULT``; empty for none) are applied one at a
    time: a quiet spell of ``quiet`` seconds (a (low, high) range), the fault held for ``hold`` seconds, healed.
    ``seed`` makes the choices repeatable (the timing never is). ``check_time_limit`` is the checker's time
    budget per key. ``record_cas_reads=False`` leaves a compare-and-set's own read out of the history (see the
    module docstring). ``rate`` caps each worker's operations a second (None: as fast as they complete): with
    watchers, a bucket keeps only ``history`` revisions per key, so writes slow enough that a watcher stalled by
    a fault is not left more than that behind keep every revision checkable.

        with EmbeddedCluster(size=3) as cluster:
            result = KVWorkload(cluster, duration=20, read="leader").run()
            print(result.summary())
            assert result.check.valid
    """

    def __init__(
        self,
        cluster: EmbeddedCluster,
        *,
        bucket: str = "HISTORY",
        keys: int = 3,
        threads: int = 6,
        connections: int = 3,
        duration: float = 15.0,
        read: str | None = None,
        read_share: float = 0.5,
        cas_share: float = 0.25,
        op_timeout: float = 5.0,
        faults: Sequence[str] = FAULTS,
        quiet: tuple[float, float] = (1.0, 3.0),
        hold: tuple[float, float] = (2.0, 5.0),
        seed: int | None = None,
        check_time_limit: float = 60.0,
        watchers: int = 0,
        replicas: int = 3,
        history: int = 5,
        record_cas_reads: bool = True,
        rate: float | None = None,
    ) -> None:
        if not (keys >= 1 and threads >= 1 and connections >= 1 and duration > 0 and op_timeout > 0):
            raise InvalidArgumentError("workload", "keys, threads, connections, duration and op_timeout must be > 0")
        if not (0 <= read_share <= 1 and 0 <= cas_share <= 1 - read_share):
            raise InvalidArgumentError("read_share", "read_share and cas_share are shares that add up to 1 at most")
        unknown = [fault for fault in faults if fault not in EVERY_FAULT]
        if unknown:
            raise InvalidArgumentError("faults", f"unknown faults {unknown}; choose from {list(EVERY_FAULT)}")
        if rate is not None and rate <= 0:
            raise InvalidArgumentError("rate", f"must be a positive number of operations a second, got {rate!r}")
        if watchers < 0 or not 1 <= replicas <= cluster.size or history < 1:
            raise InvalidArgumentError("watchers", "watchers >= 0, replicas 1 to the cluster's size, history >= 1")
        self.cluster = cluster
        self.bucket = bucket
        self.keys = [f"k{i}" for i in range(keys)]
        self.threads = threads
        self.connections = connections
        self.duration = duration
        self.read = read
        self.read_share = read_share
        self.cas_share = cas_share
        self.op_timeout = op_timeout
        self.faults = tuple(faults)
        self.quiet = quiet
        self.hold = hold
        self.seed = seed if seed is not None else random.randrange(1 << 30)
        self.check_time_limit = check_time_limit
        self.watchers = watchers
        self.replicas = replicas
        self.bucket_history = history
        self.record_cas_reads = record_cas_reads
        self.rate = rate
        self.history = History()
        # Passed to get() only when a mode is set, so the workload runs on a client without read modes.
        self._read_options: dict[str, Any] = {} if read is None else {"read": read}
        self._handles: list[KeyValue] = []
        self._processes: list[int] = []
        self._watched: dict[str, int] = {}  # watcher -> the highest revision it got
        self._watch_lock = threading.Lock()

    # -- the run ----------------------------------------------------------------------------------------------
    def run(self) -> KVWorkloadResult:
        """Set up the bucket and the clients, run the workers and the nemesis for ``duration``, heal, read every
        key a last time, and check the history. Raises what a worker raised that is not a JetStream error (a bug
        in the workload or the client, not a fault)."""
        result = ClusterWorkload(
            self.cluster,
            [self],
            duration=self.duration,
            faults=self.faults,
            quiet=self.quiet,
            hold=self.hold,
            connections=self.connections,
            op_timeout=self.op_timeout,
            seed=self.seed,
            check_time_limit=self.check_time_limit,
            history=self.history,
        ).run()
        return KVWorkloadResult(
            history=self.history, check=result.checks.kv, read=self.read, faults=result.faults, seconds=result.seconds
        )

    # -- as a part of a ClusterWorkload -------------------------------------------------------------------------
    @property
    def streams(self) -> tuple[str, ...]:
        """The bucket's stream, for the nemesis to aim at its leader."""
        return (f"KV_{self.bucket}",)

    @property
    def kept(self) -> int:
        """How many revisions per key the bucket keeps (for the watcher check)."""
        return self.bucket_history

    def set_up(self, clients: Sequence[Client], history: History, crew: Crew) -> None:
        """Create the bucket (waiting out an election if there is one), one handle per client, the workers'
        first process numbers, and start the watchers."""
        from ..models.kv import KeyValueConfig

        self.history = history
        self.connections = len(clients)
        admin = clients[0].jetstream(timeout=_SETUP_TIMEOUT)
        admin.create_key_value(KeyValueConfig(bucket=self.bucket, replicas=self.replicas, history=self.bucket_history))
        self._handles = [client.jetstream(timeout=self.op_timeout).key_value(self.bucket) for client in clients]
        self._processes = [history.new_process(modulo=self.threads, remainder=t) for t in range(self.threads)]
        for w in range(self.watchers):
            # The operations' timeout, as the other handles (the watch's resets ask within a share of it).
            kv = clients[w % len(clients)].jetstream(timeout=self.op_timeout).key_value(self.bucket)
            watcher = kv.watch(">")  # created here, so it sees every write from the first
            crew.start(f"kv-watcher-{w}", functools.partial(self._watch, w, watcher, crew), reader=True)

    def writers(self) -> list[tuple[str, Callable[[threading.Event], None]]]:
        """One worker per thread, on the connection ``t % connections``."""
        handles = self._handles
        return [
            (f"kv-workload-{t}", functools.partial(self._work, t, handles[t % len(handles)]))
            for t in range(self.threads)
        ]

    def settle(self, deadline: float) -> None:
        """Read every key a last time from every connection, then wait until the watchers caught up."""
        self._final_reads(self._handles)
        if not self.watchers:
            return
        try:
            last = self._handles[0].status().stream_info.state.last_seq
        except JetStreamError as exc:
            logger.warning("KV workload: the bucket's last revision is unknown (%s); watchers not waited for", exc)
            return
        while time.monotonic() < deadline:
            with self._watch_lock:
                behind = [w for w in range(self.watchers) if self._watched.get(f"watcher-{w}", 0) < last]
            if not behind:
                return
            time.sleep(_FINAL_PAUSE)  # the poll of this bounded wait for the watchers to catch up
        logger.warning("KV workload: watchers %s did not reach revision %d in time", behind, last)

    def close(self) -> None:
        """Nothing to stop: the watchers end with the crew's ``finished``."""

    def describe(self) -> list[str]:
        """The read mode, and the watchers' figures."""
        pace = f", at most {self.rate:g} operations/s each" if self.rate is not None else ""
        lines = [
            f"kv: read mode {self.read or 'default'}, {len(self.keys)} keys, R{self.replicas}, "
            f"{self.threads} threads{pace}"
        ]
        if self.watchers:
            lines.append(f"kv watchers: {self.watchers}, highest revisions {dict(sorted(self._watched.items()))}")
        return lines

    def _watch(self, w: int, watcher: KeyWatcher, crew: Crew) -> None:
        """One watcher: every entry it gets is recorded, until the crew is finished. A watch recovers from
        faults by itself; what else it raises ends it (the bucket gone, the watch stopped) and fails the run."""
        reader = f"watcher-{w}"
        process = self.history.new_process()
        with watcher:
            while not crew.finished.is_set():
                try:
                    entry = watcher.next(timeout=_WATCH_POLL)
                except JetStreamTimeoutError:  # nothing new: look at crew.finished again
                    continue
                if entry is None:
                    continue  # the end of the initial values
                self.history.watched(process, entry, reader=reader)
                with self._watch_lock:
                    self._watched[reader] = max(self._watched.get(reader, 0), entry.revision)

    def _work(self, t: int, kv: KeyValue, stop: threading.Event) -> None:
        """One worker: random operations on random keys until ``stop``."""
        rng = random.Random(self.seed * 1000 + t)
        process = self._processes[t]  # then a new one leaving t modulo threads after each unknown outcome
        count = 0
        while not stop.is_set():
            key = rng.choice(self.keys)
            dice = rng.random()
            count += 1
            if dice < self.read_share:
                sure, _value, _revision = self._get(process, kv, key)
            elif dice < self.read_share + self.cas_share:
                sure, seen = self._read_for_cas(process, kv, key)
                if seen is not None:
                    sure = self._cas(process, kv, key, f"t{t}-{count}", *seen)
            else:
                sure = self._put(process, kv, key, f"t{t}-{count}")
            if not sure:  # the last call may still be going on (Jepsen's rule)
                process = self.history.new_process(modulo=self.threads, remainder=t)
            if self.rate is not None:
                stop.wait(1.0 / self.rate)  # the worker's pace: at most ``rate`` operations a second

    def _final_reads(self, handles: list[KeyValue]) -> None:
        """After the heal: every connection reads every key a few times; a write lost in a failover shows here."""
        for _round in range(_FINAL_ROUNDS):
            time.sleep(_FINAL_PAUSE)  # gives a replica that is catching up its chance, as a client would
            for c, kv in enumerate(handles):
                process = self.history.new_process(modulo=self.threads, remainder=c % self.threads)
                for key in self.keys:
                    sure, _value, _revision = self._get(process, kv, key)
                    if not sure:
                        process = self.history.new_process(modulo=self.threads, remainder=c % self.threads)

    # -- one operation ----------------------------------------------------------------------------------------
    def _get(self, process: int, kv: KeyValue, key: str) -> tuple[bool, str | None, int | None]:
        """A recorded read; returns (completed, value, revision)."""
        op = self.history.invoke(process, "read", key)
        try:
            entry = kv.get(key, **self._read_options)
        except KeyNotFoundError:
            op.ok(None)
            return True, None, None
        except JetStreamError as exc:
            op.info(exc)
            return False, None, None
        value = entry.value.decode()
        op.ok(value, revision=entry.revision)
        return True, value, entry.revision

    def _read_for_cas(self, process: int, kv: KeyValue, key: str) -> tuple[bool, tuple[str | None, int | None] | None]:
        """A compare-and-set's own read, recorded unless ``record_cas_reads`` is off: (whether its outcome is
        known, the value and revision to compare with or None when it went unanswered)."""
        if self.record_cas_reads:
            sure, value, revision = self._get(process, kv, key)
            return sure, (value, revision) if sure else None
        try:
            entry = kv.get(key, **self._read_options)
        except KeyNotFoundError:
            return True, (None, None)
        except JetStreamError:  # unanswered, and not recorded: no compare-and-set this time, the process goes on
            return True, None
        return True, (entry.value.decode(), entry.revision)

    def _put(self, process: int, kv: KeyValue, key: str, value: str) -> bool:
        op = self.history.invoke(process, "write", key, value=value)
        return _write(op, lambda: kv.put(key, value.encode()))

    def _cas(
        self, process: int, kv: KeyValue, key: str, value: str, expected: str | None, revision: int | None
    ) -> bool:
        op = self.history.invoke(process, "cas", key, value=value, expected=expected)
        data = value.encode()
        if revision is None:
            return _write(op, lambda: kv.create(key, data))
        last = revision
        return _write(op, lambda: kv.update(key, data, last=last))


def _write(op: PendingOperation, call: Callable[[], int]) -> bool:
    """Run a write and record its outcome; True when the outcome is known (ok or fail)."""
    try:
        revision = call()
    except KeyWrongLastSequenceError as exc:  # the server compared and refused: definitely not applied
        op.fail(exc)
        return True
    except JetStreamError as exc:  # timeout, lost connection, no leader...: it may still be applied
        op.info(exc)
        return False
    op.ok(revision=revision)
    return True
