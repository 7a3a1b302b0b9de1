"""``TaskWorker``: a process's worker for one backend and some of its queues, run by
``manage.py jetstream_tasks_worker`` through the consume core the other commands share
(``integrations/_consume.run_until_signalled``: SIGTERM/SIGINT drain, a second signal stops at once).

``prepare()`` makes (or brings up to date) one durable pull consumer per queue and priority band, named
``run-<queue>-<band>`` and filtered on that band's subject, with the backend's ``ACK_WAIT`` and no delivery limit
on the server (the worker counts deliveries itself, so that the one past ``MAX_DELIVER`` is dead-lettered with its
result marked, rather than left unseen on the server). Any number of worker processes share them.

``consume(runner, workers=N)`` starts the client's own consume machinery (``ConsumeContext``) on a
`BandedPull` over those consumers, with in-progress acks for the tasks in hand, the same keeper
``consume(auto_in_progress=True)`` uses: a task running longer than ``ACK_WAIT`` is not handed to another worker.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from .... import errors
from ....jetstream import JetStream
from ....jetstream.consumers import ConsumeOptions, Consumer
from ....jetstream.consumers._progress import progress_keeper
from ....jetstream.consumers._reads import raised_by_user_code
from ....jetstream.consumers.delivery import ConsumeContext, ConsumeStats, ErrorHandler
from ....message import Msg
from ....models import AckPolicy, ConsumerConfig, DeliverPolicy
from ._options import QUEUE_NAME
from ._run import TaskRunner, default_worker_id
from ._source import Band, BandedPull
from .backend import JetStreamBackend

__all__ = ["TaskWorker", "WorkerContext", "check_queues"]

log = logging.getLogger("jetstream_sync.integrations.django")

_WAIT_SLICE = 0.05  # how often a wait on a stopped-or-ended worker looks at the stop


class _Closed:
    """``WorkerContext.closed``: set when the consume ended, or at once when it was stopped (the running tasks
    are abandoned then). Read as an Event by ``run_until_signalled`` (``is_set``, ``wait``)."""

    def __init__(self, ended: threading.Event) -> None:
        self._ended = ended
        self._stopped = threading.Event()

    def set(self) -> None:
        self._stopped.set()

    def is_set(self) -> bool:
        return self._stopped.is_set() or self._ended.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self.is_set():
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return False
            self._ended.wait(_WAIT_SLICE if left is None else min(left, _WAIT_SLICE))
        return True


class WorkerContext:
    """A running worker: the client's ``ConsumeContext`` over the bands, with a ``stop()`` that does not wait
    for the running tasks (their messages are nak'd for other workers: see `BandedPull.abandon`).
    ``drain()`` lets them finish."""

    def __init__(self, context: ConsumeContext, source: BandedPull) -> None:
        self.context = context
        self._source = source
        self.closed = _Closed(context.closed)
        #: stop() gave running tasks back: their threads may still be running (the process should leave)
        self.abandoned = 0

    @property
    def error(self) -> BaseException | None:
        """What ended the consume (a task's KeyboardInterrupt, the stream deleted, the client closed)."""
        return self.context.error

    def drain(self) -> None:
        """Start no new task; the running ones finish and are recorded, then the consume ends."""
        self.context.drain()

    def stop(self) -> None:
        """End now: the running tasks' messages go back to the server for other workers."""
        self.abandoned = self._source.abandon()
        if self.abandoned:
            log.warning("tasks worker: stopped with %d task(s) running; their messages were given back", self.abandoned)
        self.closed.set()

    def wait(self, timeout: float | None = None) -> None:
        """Until the consume ended (or was stopped); TimeoutError after ``timeout`` seconds."""
        if not self.closed.wait(timeout):
            raise errors.TimeoutError(f"tasks worker still running after {timeout:g}s")

    def stats(self) -> ConsumeStats:
        """The consume's counters: ``messages_delivered`` is how many task messages were handed to threads."""
        return self.context.stats()


def check_queues(backend: object, queues: Sequence[str]) -> None:
    """InvalidArgumentError (or InvalidTypeError) unless a worker can serve ``queues`` of ``backend``; nothing
    connects (the worker command checks before it forks its processes)."""
    if not isinstance(backend, JetStreamBackend):
        raise errors.InvalidTypeError("backend", f"must be a JetStreamBackend, got {type(backend).__name__}")
    if not queues:
        raise errors.InvalidArgumentError("queues", "name at least one queue")
    for queue in queues:
        if QUEUE_NAME.fullmatch(queue) is None:
            raise errors.InvalidArgumentError("queues", f"{queue!r} is not a queue name (letters, digits, _ -)")
        if backend.queues and queue not in backend.queues:
            raise errors.InvalidArgumentError(
                "queues", f"{queue!r} is not in TASKS[{backend.alias!r}]['QUEUES'] {sorted(backend.queues)}"
            )
    backend.task_options  # noqa: B018 -- ImproperlyConfigured now for wrong OPTIONS


class TaskWorker:
    """Runs the tasks of ``queues`` of ``backend`` in this process (see the module docstring).

    Looks like a consumer to ``run_until_signalled`` (``stream_name``, ``name``, ``jetstream``, ``consume``)."""

    def __init__(self, backend: JetStreamBackend, queues: Sequence[str], *, worker_id: str | None = None) -> None:
        check_queues(backend, queues)
        self.backend = backend
        self.queues = list(dict.fromkeys(queues))
        self.worker_id = worker_id or default_worker_id()
        self.store = backend.store()
        self.options = self.store.options
        self.runner = TaskRunner(backend, self.store, self.worker_id)
        self._bands: list[Band] = []
        #: the running consume, once `consume` started it
        self.context: WorkerContext | None = None

    # -- what run_until_signalled reads ---------------------------------------------------------------------
    @property
    def stream_name(self) -> str:
        """The backend's stream (for the command's messages)."""
        return self.options.stream

    @property
    def name(self) -> str:
        """The queues this worker runs, comma-separated (for the command's messages)."""
        return ",".join(self.queues)

    @property
    def jetstream(self) -> JetStream:
        """The JetStream context the worker uses (``run_until_signalled`` flushes its client on the way out)."""
        return self.store.js

    def prepare(self) -> None:
        """Make or update the band consumers of every queue (highest band first)."""
        options = self.options
        js = self.store.js
        bands = []
        for band in range(len(options.priority_bands)):
            for queue in self.queues:
                subject = options.run_subject(queue, band)
                config = ConsumerConfig(
                    durable_name=options.consumer_name(queue, band),
                    filter_subject=subject,
                    ack_policy=AckPolicy.EXPLICIT,
                    deliver_policy=DeliverPolicy.ALL,
                    ack_wait=options.ack_wait,
                    max_deliver=-1,
                    description=f"Django tasks of queue {queue}, priority band {band}",
                )
                bands.append(Band(subject, js.create_or_update_consumer(options.stream, config)))
        self._bands = bands

    def consume(
        self,
        handler: Callable[[Msg], object],
        *,
        options: ConsumeOptions | None = None,
        error_handler: ErrorHandler | None = None,
        workers: int = 1,
    ) -> WorkerContext:
        """Run ``handler`` (the [`runner`][jetstream_sync.integrations.django.tasks.TaskWorker.runner]) on the tasks, on
        ``workers`` threads, highest band first. ``options`` is ignored: nothing is pulled ahead of the free threads."""
        if not self._bands:
            self.prepare()
        client = self.store.client
        rings = (
            self.options.queue_subjects(self.queues[0])
            if len(self.queues) == 1
            else f"{self.options.subject_prefix}.run.>"
        )
        report: Callable[[BaseException], object]
        if error_handler is None:
            report = lambda exc: log.warning(  # noqa: E731
                "tasks worker %s: %s", self.name, exc, exc_info=raised_by_user_code(exc)
            )
        else:
            report = error_handler
        source = BandedPull(
            client,
            self._bands,
            capacity=workers,
            poll=self.options.poll_interval,
            rings=rings,
            label=f"{self.options.stream}/{self.name}",
            report=report,
        )

        def run(msg: Msg) -> None:
            try:
                handler(msg)
            finally:
                source.finished(msg)

        keeper = progress_keeper(client.runtime, self._bands[0].consumer.cached_info.config, True)
        context = ConsumeContext(source, run, keeper, workers=workers)
        context.start()
        self.context = WorkerContext(context, source)
        return self.context

    def bands(self) -> list[Consumer]:
        """The band consumers, in the order they are asked (after
        [`prepare`][jetstream_sync.integrations.django.tasks.TaskWorker.prepare])."""
        return [band.consumer for band in self._bands]

    def describe(self) -> dict[str, Any]:
        """For the command's start-up line: queues, bands and how deferred tasks are held back."""
        return {
            "queues": self.queues,
            "bands": list(self.options.priority_bands),
            "defer": "message schedules" if self.store.schedules else "redelivery at run_after",
            "worker_id": self.worker_id,
        }
