"""``manage.py jetstream_tasks_worker [--queue Q ...] [--threads N] [--processes N]``: run the tasks enqueued
through the JetStream task backend (``settings.TASKS``), until SIGTERM or Ctrl-C.

Each process takes tasks highest priority band first, only as many as it has threads free, runs them (keeping
their messages alive with in-progress acks however long they take), records the outcome in the results bucket,
and acks. SIGTERM or SIGINT drains: no new task starts, the running ones finish and are recorded, then the
command exits 0 (within ``--drain-timeout``; after that it exits 1 and what was still running is redelivered to
another worker); a second signal stops at once (the running tasks' messages are redelivered).

``--processes N`` forks N worker processes of ``--threads`` threads each (Unix), each with its own connection;
they run in their own process group, and this process passes SIGTERM and SIGINT on to them and exits 1 when any of
them failed. Run several replicas of the command as a deployment does: they share the queues' consumers.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import traceback
from types import FrameType
from typing import Any, cast

from django.core.management.base import BaseCommand, CommandError, CommandParser  # type: ignore[import-untyped]

from jetstream_sync import errors
from jetstream_sync.integrations._consume import CommandFailed, run_until_signalled
from jetstream_sync.integrations.django import close_clients
from jetstream_sync.integrations.django.tasks import TaskWorker
from jetstream_sync.integrations.django.tasks._compat import FRAMEWORK, task_backends
from jetstream_sync.integrations.django.tasks.worker import check_queues
from jetstream_sync.jetstream.consumers import Consumer

#: seconds a worker stopped at once gives its connection to write out what is queued (the naks of the tasks
#: given back) before it exits
_ABANDON_CLOSE = 0.5


class Command(BaseCommand):  # type: ignore[misc]
    help = (
        "Run the tasks of the JetStream task backend: highest priority first, on --threads threads in each of "
        "--processes processes, until SIGTERM or Ctrl-C, which drain (a second one stops at once)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--backend", default="default", help="the TASKS alias (default 'default')")
        parser.add_argument(
            "--queue", action="append", dest="queues", help="a queue to run (repeat for several; default 'default')"
        )
        parser.add_argument("--threads", type=int, default=1, help="tasks run at once in each process (default 1)")
        parser.add_argument("--processes", type=int, default=1, help="worker processes (default 1: this one)")
        parser.add_argument(
            "--drain-timeout", type=float, default=120.0, help="seconds the running tasks get to finish on stop"
        )
        parser.add_argument("--worker-id", default=None, help="the id recorded in results (default host:pid)")

    def handle(self, *args: Any, **options: Any) -> None:
        threads, processes = options["threads"], options["processes"]
        for name, value in (("--threads", threads), ("--processes", processes)):
            if value < 1:
                raise CommandError(f"{name} must be at least 1, got {value}")
        try:
            backend = task_backends[options["backend"]]
        except Exception as exc:  # InvalidTaskBackend(Error): an unknown alias or a backend that does not import
            raise CommandError(f"--backend {options['backend']!r}: {exc}") from exc
        queues = options["queues"] or ["default"]
        try:
            check_queues(backend, queues)
        except (errors.InvalidArgumentError, errors.InvalidTypeError) as exc:
            raise CommandError(f"{FRAMEWORK} backend {options['backend']!r}: {exc}") from exc
        if processes == 1:
            self._work(backend, queues, threads, options)
            return
        if not hasattr(os, "fork"):
            raise CommandError("--processes needs os.fork (Unix); run one command per process instead")
        self._supervise(backend, queues, threads, options)

    def _work(self, backend: Any, queues: list[str], threads: int, options: dict[str, Any]) -> None:
        try:
            worker = TaskWorker(backend, queues, worker_id=options["worker_id"])
            worker.prepare()
        except errors.JetStreamError as exc:
            raise CommandError(f"the tasks worker cannot start: {exc}") from exc
        about = worker.describe()
        self._say(
            f"tasks worker {about['worker_id']}: queues {', '.join(about['queues'])}, priority bands from "
            f"{about['bands']}, deferred tasks by {about['defer']}"
        )
        try:
            run_until_signalled(
                cast(Consumer, worker),  # run_until_signalled reads stream_name, name, jetstream and consume()
                worker.runner,
                workers=threads,
                max_messages=None,
                drain_timeout=options["drain_timeout"],
                say=self._say,
            )
        except CommandFailed as exc:
            raise CommandError(str(exc)) from exc
        if worker.context is not None and worker.context.abandoned:
            # stopped at once with tasks running: their threads are not waited for (closing would wait up to
            # its timeout for each); what they were doing was given back to the server
            worker.store.client.close(timeout=_ABANDON_CLOSE)

    def _supervise(self, backend: Any, queues: list[str], threads: int, options: dict[str, Any]) -> None:
        """Fork the worker processes (nothing is connected yet: each connects on its own), pass signals on."""
        children: list[int] = []
        sys.stdout.flush()
        sys.stderr.flush()
        for _ in range(options["processes"]):
            pid = os.fork()
            if pid == 0:  # pragma: no cover - measured through the command's subprocess tests
                self._child(backend, queues, threads, options)
            children.append(pid)
        self._say(f"started {len(children)} worker processes: {', '.join(map(str, children))}")

        def forward(signum: int, _frame: FrameType | None) -> None:
            for pid in children:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signum)

        previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGTERM, signal.SIGINT)}
        failed = 0
        try:
            for pid in children:
                _, status = os.waitpid(pid, 0)
                if os.waitstatus_to_exitcode(status) != 0:
                    failed += 1
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        if failed:
            raise CommandError(f"{failed} of {len(children)} worker processes failed")
        self._say(f"all {len(children)} worker processes stopped")

    def _child(self, backend: Any, queues: list[str], threads: int, options: dict[str, Any]) -> None:
        """A forked worker process: its own process group (a terminal's Ctrl-C reaches it once, through the
        parent), its own connection; leaves with os._exit so nothing of the parent's runs twice."""
        code = 0
        try:
            os.setpgid(0, 0)
            self._work(backend, queues, threads, options)
        except CommandError as exc:
            self.stderr.write(f"CommandError: {exc}")
            code = 1
        except BaseException:
            traceback.print_exc()
            code = 1
        finally:
            with contextlib.suppress(Exception):
                close_clients()
            with contextlib.suppress(Exception):
                self.stdout.flush()
                self.stderr.flush()
                sys.stdout.flush()
                sys.stderr.flush()
            os._exit(code)

    def _say(self, text: str) -> None:
        self.stdout.write(text)
        self.stdout.flush()
