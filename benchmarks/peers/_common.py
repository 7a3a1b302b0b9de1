"""What every Python benchmark driver shares: the job it was given, the clock, and the one-line result.

Standard library only, so that a driver running in another interpreter (natsio's Python >= 3.13 virtualenv)
can import it too. The contract is ``benchmarks/peers/README.md``.
"""

from __future__ import annotations

import json
import math
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

#: Every wait in a driver gives up after this long: a benchmark must fail, never hang.
PATIENCE = 120.0


@dataclass(frozen=True)
class Job:
    """One measured run, as the orchestrator wrote it (the README's "job" table)."""

    url: str
    case: str
    size: int
    count: int
    warmup: int
    stream: str = ""
    subject: str = ""
    consumer: str = ""
    batch: int = 1000
    window: int = 4000
    bucket: str = ""

    @classmethod
    def parse(cls, text: str) -> Job:
        """The job from its JSON; ValueError naming what a job must have and lacks."""
        raw: dict[str, Any] = json.loads(text)
        known = {name: raw[name] for name in cls.__dataclass_fields__ if raw.get(name) is not None}
        missing = [name for name in ("url", "case", "size", "count", "warmup") if name not in known]
        if missing:
            raise ValueError(f"the job lacks {', '.join(missing)}")
        return cls(**known)

    def need(self, *names: str) -> None:
        """ValueError when a field this case needs is missing or empty."""
        missing = [name for name in names if not getattr(self, name)]
        if missing:
            raise ValueError(f"case {self.case} needs {', '.join(missing)} in the job")

    @property
    def payload(self) -> bytes:
        return b"x" * self.size

    @property
    def total(self) -> int:
        return self.warmup + self.count


@dataclass
class Measured:
    """Wall and CPU time of the timed part, and the latencies of the calls in it when they count."""

    seconds: float = 0.0
    cpu: float = 0.0
    latencies: list[float] = field(default_factory=list)

    def result(self, client: str, count: int) -> dict[str, Any]:
        out: dict[str, Any] = {"client": client, "seconds": self.seconds, "cpu": self.cpu, "count": count}
        if self.latencies:
            ordered = sorted(self.latencies)
            out["p50_ms"] = percentile(ordered, 0.50) * 1e3
            out["p99_ms"] = percentile(ordered, 0.99) * 1e3
        return out


class Stopwatch:
    """Starts and stops wall-clock and process-CPU time together (CPU of every thread of the process)."""

    def __init__(self) -> None:
        self.measured = Measured()
        self._wall = 0.0
        self._cpu = 0.0

    def start(self) -> None:
        self._wall, self._cpu = time.perf_counter(), time.process_time()

    def stop(self) -> Measured:
        self.measured.seconds = time.perf_counter() - self._wall
        self.measured.cpu = time.process_time() - self._cpu
        return self.measured

    @contextmanager
    def running(self) -> Iterator[Measured]:
        self.start()
        yield self.measured
        self.stop()


def percentile(ordered: list[float], p: float) -> float:
    """Nearest-rank percentile of an already sorted list."""
    return ordered[max(0, math.ceil(p * len(ordered)) - 1)]


def proc_status_kib(field: str) -> int:
    """A ``/proc/self/status`` figure in KiB (VmRSS: now, VmHWM: the peak so far; Linux)."""
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith(field + ":"))


def timed_calls(count: int, call: Callable[[], object], latencies: list[float]) -> None:
    """``count`` calls, the latency of each appended to ``latencies``."""
    perf = time.perf_counter
    for _ in range(count):
        t = perf()
        call()
        latencies.append(perf() - t)


def check(condition: bool, message: str) -> None:
    """Ends the driver with ``message`` on stderr and exit status 1 when ``condition`` is false."""
    if not condition:
        sys.stderr.write(f"benchmark driver: {message}\n")
        raise SystemExit(1)


def run_driver(cases: dict[str, Callable[[Job], dict[str, Any]]]) -> None:
    """Reads the job from argv[1], runs its case, prints the result as the last stdout line."""
    job = Job.parse(sys.argv[1])
    case = cases.get(job.case)
    result = case(job) if case is not None else {"skip": f"no {job.case} case in this driver"}
    sys.stdout.write(json.dumps(result) + "\n")
