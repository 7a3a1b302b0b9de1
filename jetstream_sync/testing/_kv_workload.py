"""KVWorkload: a Jepsen-style key-value test of this client against a real 3-node cluster under faults.

Threads share a few client connections and, for a set duration, read, write and compare-and-set a few keys of a
bucket replicated on every node (R3), each operation recorded in a :class:`History`; meanwhile a
:class:`Nemesis` pauses, kills, restarts and partitions nodes and makes the bucket's leader step down. Then the
cluster is healed, every connection reads every key a last time (so a write lost in a failover shows), and
:func:`check_history` judges the history.

Every write writes a value never written before (``t<thread>-<n>``), which is what lets the checker say which
value is older and which write a read saw. A compare-and-set reads the key first and updates it only if its
revision is still the one read (``kv.update(key, value, last=revision)``, or ``kv.create`` when the key had no
value); since values are unique, "same revision" and "same value" are the same condition, which is what the
checker's register compares.

How an outcome is recorded decides what the checker may conclude, so it errs on the side of "unknown": only
``KeyWrongLastSequenceError`` (the server compared and refused) is a definite ``fail``; a timeout, a lost
connection, "no leader" and every other error are ``info`` (the write may still be applied), and the thread
carries on as a new process, as Jepsen's do: thread ``t`` is process ``t``, then ``t + threads``, and so on, so
``process % threads`` is the thread, and thread ``t`` uses connection ``t % connections`` (the final reads of
connection ``c`` are processes ``c`` modulo ``threads`` too). A value ``t<t>-<n>`` was written by thread ``t``.

The read mode (``read=``) is the variable the workload exists to measure: ``"direct"`` (any replica),
``"read_your_writes"`` and ``"leader"``, as ``KeyValue.get(read=...)`` takes them. ``None`` leaves the argument
out, for clients without it.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from ..errors import InvalidArgumentError, JetStreamError, KeyNotFoundError, KeyWrongLastSequenceError
from ._checker import CheckResult, check_history
from ._history import History, PendingOperation
from ._nemesis import FAULTS, Nemesis

if TYPE_CHECKING:
    from ..client import Client
    from ..jetstream.kv import KeyValue
    from ._cluster import EmbeddedCluster

__all__ = ["KVWorkload", "KVWorkloadResult"]

logger = logging.getLogger("jetstream_sync.testing")

#: what setting up and healing may take: longer than an election (4-9 s), as the cluster tests use
_SETUP_TIMEOUT = 30.0
#: final reads: this many rounds per connection and key, this far apart (a replica catching up gets a chance)
_FINAL_ROUNDS = 3
_FINAL_PAUSE = 0.5


@attrs.frozen(kw_only=True)
class KVWorkloadResult:
    """What a :meth:`KVWorkload.run` did and found: the ``history``, the checker's ``check``, the ``read`` mode,
    the ``faults`` applied, how long the workload ran (``seconds``, without setup and the final reads)."""

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
    """Reads, writes and compare-and-sets on an R3 bucket of ``cluster`` under faults, then a check (see the
    module docstring).

    ``threads`` workers share ``connections`` clients and operate for ``duration`` seconds on ``keys`` keys
    (``read_share`` of their operations reads, ``cas_share`` compare-and-sets, the rest writes), each call
    bounded by ``op_timeout`` (the client's default, 5 s: a shorter one turns every compare-and-set refusal the
    client must confirm, which takes 2 s after a fault, into an unknown outcome, and the checker learns less
    from those). ``faults`` (names from ``FAULTS``; empty for none) are applied one at a time:
    a quiet spell of ``quiet`` seconds (a (low, high) range), the fault held for ``hold`` seconds, healed.
    ``seed`` makes the choices repeatable (the timing never is). ``check_time_limit`` is the checker's time
    budget per key.

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
    ) -> None:
        if not (keys >= 1 and threads >= 1 and connections >= 1 and duration > 0 and op_timeout > 0):
            raise InvalidArgumentError("workload", "keys, threads, connections, duration and op_timeout must be > 0")
        if not (0 <= read_share <= 1 and 0 <= cas_share <= 1 - read_share):
            raise InvalidArgumentError("read_share", "read_share and cas_share are shares that add up to 1 at most")
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
        self.history = History()
        self.nemesis = Nemesis(cluster, stream=f"KV_{bucket}", faults=self.faults, history=self.history, seed=self.seed)
        # Passed to get() only when a mode is set, so the workload runs on a client without read modes.
        self._read_options: dict[str, Any] = {} if read is None else {"read": read}
        self._errors: list[BaseException] = []

    # -- the run ----------------------------------------------------------------------------------------------
    def run(self) -> KVWorkloadResult:
        """Set up the bucket and the clients, run the workers and the nemesis for ``duration``, heal, read every
        key a last time, and check the history. Raises what a worker raised that is not a JetStream error (a bug
        in the workload or the client, not a fault)."""
        from ..client import connect  # the client is needed only by code that runs a workload

        clients: list[Client] = []
        try:
            for i in range(self.connections):
                clients.append(
                    connect(
                        self.cluster.urls,
                        name=f"kv-workload-{i}",
                        max_reconnect_attempts=-1,
                        reconnect_wait=0.5,
                        ping_interval=2.0,  # a paused node's clients notice within seconds and move on
                        timeout=self.op_timeout,
                    )
                )
            handles = self._set_up(clients)
            seconds = self._run_workers(handles)
            self._final_reads(handles)
        finally:
            self.nemesis.heal_all()
            for client in clients:
                client.close()
        if self._errors:
            raise self._errors[0]
        logger.info("KV workload: %d operations; checking", len(self.history))
        check = check_history(self.history, time_limit=self.check_time_limit)
        return KVWorkloadResult(
            history=self.history, check=check, read=self.read, faults=tuple(self.nemesis.applied), seconds=seconds
        )

    def _set_up(self, clients: list[Client]) -> list[KeyValue]:
        """Create the R3 bucket (waiting out an election if there is one), and one handle per client."""
        from ..models.kv import KeyValueConfig

        admin = clients[0].jetstream(timeout=_SETUP_TIMEOUT)
        admin.create_key_value(KeyValueConfig(bucket=self.bucket, replicas=3, history=5))
        return [client.jetstream(timeout=self.op_timeout).key_value(self.bucket) for client in clients]

    def _run_workers(self, handles: list[KeyValue]) -> float:
        stop = threading.Event()
        workers = [
            threading.Thread(
                target=self._guarded, args=(self._work, t, handles[t % len(handles)], stop), name=f"kv-workload-{t}"
            )
            for t in range(self.threads)
        ]
        nemesis = threading.Thread(
            target=self._guarded, args=(self._nemesis, 0, None, stop), name="kv-workload-nemesis"
        )
        started = time.monotonic()
        for thread in [*workers, nemesis]:
            thread.start()
        stop.wait(self.duration)
        stop.set()
        seconds = time.monotonic() - started
        for thread in workers:
            thread.join(self.op_timeout * 4 + 10)
            if thread.is_alive():  # its operation stays open in the history, as it should
                logger.warning("KV workload: %s did not end within its operation timeout", thread.name)
        nemesis.join(_SETUP_TIMEOUT * 3)
        return seconds

    def _guarded(self, body: Any, t: int, kv: KeyValue | None, stop: threading.Event) -> None:
        """Run a thread's body; what it raises is kept for run() to raise (a thread's exception is otherwise
        only printed), and ends the run early."""
        try:
            body(t, kv, stop)
        except BaseException as exc:
            logger.exception("KV workload: %s failed", threading.current_thread().name)
            self._errors.append(exc)
            stop.set()

    def _nemesis(self, _t: int, _kv: KeyValue | None, stop: threading.Event) -> None:
        if self.faults:
            self.nemesis.run(stop, quiet=self.quiet, hold=self.hold)

    def _work(self, t: int, kv: KeyValue, stop: threading.Event) -> None:
        """One worker: random operations on random keys until ``stop``."""
        rng = random.Random(self.seed * 1000 + t)
        process = t  # t, then t + threads, t + 2 * threads... after each unknown outcome (module docstring)
        count = 0
        while not stop.is_set():
            key = rng.choice(self.keys)
            dice = rng.random()
            count += 1
            if dice < self.read_share:
                sure, _value, _revision = self._get(process, kv, key)
            elif dice < self.read_share + self.cas_share:
                sure, value, revision = self._get(process, kv, key)
                if sure:
                    sure = self._cas(process, kv, key, f"t{t}-{count}", value, revision)
            else:
                sure = self._put(process, kv, key, f"t{t}-{count}")
            if not sure:
                process += self.threads  # the last call may still be going on (Jepsen's rule)

    def _final_reads(self, handles: list[KeyValue]) -> None:
        """After the heal: every connection reads every key a few times; a write lost in a failover shows here."""
        for _round in range(_FINAL_ROUNDS):
            time.sleep(_FINAL_PAUSE)  # gives a replica that is catching up its chance, as a client would
            base = -(-self.history.new_process() // self.threads) * self.threads  # a multiple of threads, unused
            for c, kv in enumerate(handles):
                process = base + c
                for key in self.keys:
                    sure, _value, _revision = self._get(process, kv, key)
                    if not sure:
                        process += self.threads

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
