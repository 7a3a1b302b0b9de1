"""``TaskRunner``: what a worker thread does with one task message, and how each outcome is settled.

Per delivery, in order:

1. A payload that is not a task document is copied to the dead-letter subject and termed.
2. A ``run_after`` still ahead (a task published without a schedule, or a worker clock behind the server's) is
   nak'd with that delay: the server hands it out again at its time. It never runs early.
3. A delivery past ``MAX_DELIVER`` (the workers that had it died or were killed each time, or it kept being
   retried) is not run: the result becomes FAILED with
   [`DeliveriesExhausted`][jetstream_sync.integrations.django.tasks.DeliveriesExhausted], the message is copied to
   ``<prefix>.dead.<queue>`` and termed.
4. A result already finished (a worker wrote it and died before its ack reached the server) is acked.
5. Otherwise the task runs: the result becomes RUNNING with this worker's id appended (``attempts`` counts them),
   ``task_started`` is sent, and the task function is called (an async one through ``async_to_sync``).
   - It returns: SUCCESSFUL with the return value (JSON-normalised as Django's backends do), acked.
   - It raises (SystemExit included, as Django's backends count it): the error (class path and traceback) is
     appended. With attempts left (``MAX_ATTEMPTS``) the result is READY again and the message nak'd with a
     delay of ``RETRY_DELAY * 2 ** (attempt - 1)``; otherwise FAILED, acked.
   - KeyboardInterrupt: the message is nak'd (another worker takes it) and the interrupt goes on: the consume
     ends and the worker exits, as Django's immediate backend lets it through.
   ``task_finished`` is sent for SUCCESSFUL and FAILED (inside the exception handler for a failure, where
   Django's logging of it reads the exception).

A result that cannot be written (the server unreachable) leaves the message nak'd after ``RETRY_DELAY``: the task
may then run again. Delivery is at least once; a task whose side effects must not repeat checks for them.
"""

from __future__ import annotations

import logging
import os
import socket
from datetime import datetime, timedelta
from traceback import format_exception
from typing import Any

from django.utils import timezone  # type: ignore[import-untyped]

from .... import errors
from ....message import Msg
from ._compat import TaskContext, TaskResultStatus, normalize_json, task_finished, task_started
from ._records import RecordError, decode, parse_time, task_of, to_result
from ._store import TaskStore

__all__ = ["DeliveriesExhausted", "TaskRunner", "default_worker_id"]

log = logging.getLogger("jetstream_sync.integrations.django")

_READY = str(TaskResultStatus.READY)
_RUNNING = str(TaskResultStatus.RUNNING)
_DONE = {str(TaskResultStatus.SUCCESSFUL), str(TaskResultStatus.FAILED)}


class DeliveriesExhausted(Exception):
    """Recorded as a result's error when its task was delivered ``MAX_DELIVER`` times without finishing (each
    worker that had it died, was killed, or could not record the outcome). Its message is in the dead letters."""


def default_worker_id() -> str:
    """``host:pid``, at most 64 characters (Django's limit for ids)."""
    return f"{socket.gethostname()}:{os.getpid()}"[-64:]


def _error_of(exc: BaseException) -> dict[str, str]:
    kind = type(exc)
    return {
        "exception_class_path": f"{kind.__module__}.{kind.__qualname__}",
        "traceback": "".join(format_exception(exc)),
    }


def _delivery(msg: Msg) -> int:
    try:
        delivered: int = msg.metadata.num_delivered
        return delivered
    except errors.InvalidAckSubjectError:
        return 1


class TaskRunner:
    """Runs task messages for one backend (any worker thread; see the module docstring)."""

    def __init__(self, backend: Any, store: TaskStore, worker_id: str) -> None:
        self.backend = backend
        self.store = store
        self.worker_id = worker_id
        self._sender = type(backend)

    def __call__(self, msg: Msg) -> None:
        """A worker thread: settle ``msg`` (ack, nak or term) as the module docstring says."""
        options = self.store.options
        try:
            record = decode(msg.data)
        except RecordError as exc:
            log.error("tasks: %s (stream sequence %s) is not a task: %s", msg.subject, _seq(msg), exc)
            self._dead_letter(msg, None, f"not a task: {exc}")
            return
        run_after = parse_time(record.get("run_after"))
        now = timezone.now()
        if run_after is not None and _ahead(run_after, now):
            msg.nak(delay=max(0.001, (run_after - now).total_seconds()))
            return
        delivery = _delivery(msg)
        if delivery > 1:
            record = self._latest(record)
        if delivery > options.max_deliver:
            self._exhausted(msg, record, delivery)
            return
        if record["status"] in _DONE:
            log.info("tasks: %s was already %s; acking its message again", record["id"], record["status"])
            msg.ack()
            return
        try:
            task = task_of(record)
        except Exception as exc:  # the task cannot be found in this worker's code
            log.exception("tasks: %s cannot run: %s cannot be imported as a task", record["id"], record["task"])
            record["errors"].append(_error_of(exc))
            self._finish(msg, record, str(TaskResultStatus.FAILED))
            return
        self._run(msg, record, task, delivery)

    # -- running --------------------------------------------------------------------------------------------
    def _run(self, msg: Msg, record: dict[str, Any], task: Any, delivery: int) -> None:
        options = self.store.options
        started = timezone.now()
        record["status"] = _RUNNING
        record["started_at"] = record.get("started_at") or started.isoformat()
        record["last_attempted_at"] = started.isoformat()
        record["worker_ids"].append(self.worker_id)
        if not self._write(msg, record):
            return
        result = to_result(record, task)
        task_started.send(sender=self._sender, task_result=result)
        try:
            if task.takes_context:
                value = task.call(TaskContext(task_result=result), *result.args, **result.kwargs)
            else:
                value = task.call(*result.args, **result.kwargs)
            record["return_value"] = normalize_json(value)
        except KeyboardInterrupt:
            msg.nak()
            raise
        except BaseException as exc:  # SystemExit too: Django's backends record it as the task's failure
            record["errors"].append(_error_of(exc))
            attempts = len(record["worker_ids"])
            if attempts < options.max_attempts and delivery < options.max_deliver:
                delay = options.retry_delay * 2 ** (attempts - 1)
                log.warning(
                    "tasks: %s (%s) failed on attempt %d of %d with %r; retrying in %g s",
                    record["id"],
                    record["task"],
                    attempts,
                    options.max_attempts,
                    exc,
                    delay,
                )
                record["status"] = _READY
                if self._write(msg, record):
                    msg.nak(delay=delay)
                return
            self._finish(msg, record, str(TaskResultStatus.FAILED), task)
            return
        self._finish(msg, record, str(TaskResultStatus.SUCCESSFUL), task)

    def _finish(self, msg: Msg, record: dict[str, Any], status: str, task: Any | None = None) -> None:
        """Record the final status, tell Django (``task_finished``), ack. Inside an exception handler for a
        failure, so Django's log of it has the exception."""
        record["status"] = status
        record["finished_at"] = timezone.now().isoformat()
        if not self._write(msg, record):
            return
        msg.ack()
        if task is not None:
            task_finished.send(sender=self._sender, task_result=to_result(record, task))

    # -- the bucket -----------------------------------------------------------------------------------------
    def _latest(self, record: dict[str, Any]) -> dict[str, Any]:
        """A redelivery: the bucket's copy (the earlier attempts), or the message's when the bucket has none."""
        try:
            return decode(self.store.results.get(record["id"]).value)
        except errors.KeyNotFoundError:
            return record  # expired, or removed by hand: run from the message
        except RecordError as exc:
            log.warning("tasks: the stored result of %s is unreadable (%s); using the message's", record["id"], exc)
            return record

    def _write(self, msg: Msg, record: dict[str, Any]) -> bool:
        """Store ``record``; when that fails, nak ``msg`` for a later attempt and say so (False)."""
        try:
            self.store.write(record)
        except errors.JetStreamError as exc:
            delay = self.store.options.retry_delay
            log.error(
                "tasks: the result of %s could not be stored (%s); its message comes back in %g s",
                record["id"],
                exc,
                delay,
            )
            msg.nak(delay=delay)
            return False
        return True

    # -- dead letters ---------------------------------------------------------------------------------------
    def _exhausted(self, msg: Msg, record: dict[str, Any], delivery: int) -> None:
        options = self.store.options
        reason = (
            f"delivered {delivery} times (MAX_DELIVER {options.max_deliver}) without finishing: the workers that "
            "had it stopped or could not record it"
        )
        log.error(
            "tasks: %s (%s) %s; moved to %s",
            record["id"],
            record["task"],
            reason,
            options.dead_subject(record["queue"]),
        )
        try:
            raise DeliveriesExhausted(f"task {record['id']} ({record['task']}) {reason}")
        except DeliveriesExhausted as exc:
            record["errors"].append(_error_of(exc))
        record["status"] = str(TaskResultStatus.FAILED)
        record["finished_at"] = timezone.now().isoformat()
        if self._copy_to_dead_letters(msg, record["queue"], reason) and self._write(msg, record):
            msg.term(reason[:200])

    def _dead_letter(self, msg: Msg, record: dict[str, Any] | None, reason: str) -> None:
        """Copy ``msg`` to its queue's dead letters and term it (or nak it for later when the copy failed)."""
        queue = record["queue"] if record is not None else _queue_of(msg.subject)
        if self._copy_to_dead_letters(msg, queue, reason):
            msg.term(reason[:200])

    def _copy_to_dead_letters(self, msg: Msg, queue: str, reason: str) -> bool:
        """Publish the copy first: whoever reads a FAILED result of exhausted deliveries finds its dead letter.
        Deduplicated by stream sequence, so a message that comes back (the result write failed) is copied once.
        False, with ``msg`` nak'd for a later attempt, when the copy could not be stored."""
        store = self.store
        headers = {"Django-Task-Dead-Reason": reason[:500], "Django-Task-Subject": msg.subject}
        try:
            store.js.publish(store.options.dead_subject(queue), msg.data, headers, msg_id=f"dead.{_seq(msg)}")
        except errors.JetStreamError as exc:
            log.error("tasks: dead letter of %s not stored (%s); it comes back later", msg.subject, exc)
            msg.nak(delay=store.options.retry_delay)
            return False
        return True


def _ahead(run_after: datetime, now: datetime) -> bool:
    if (run_after.tzinfo is None) != (now.tzinfo is None):  # USE_TZ changed since it was enqueued
        run_after = timezone.make_aware(run_after) if run_after.tzinfo is None else timezone.make_naive(run_after)
    return run_after - now > timedelta(milliseconds=1)


def _seq(msg: Msg) -> int:
    try:
        seq: int = msg.metadata.sequence.stream
        return seq
    except errors.InvalidAckSubjectError:
        return 0


def _queue_of(subject: str) -> str:
    """The queue token of ``<prefix>.run.<queue>.<band>``."""
    parts = subject.split(".")
    return parts[-2] if len(parts) >= 3 else "unknown"
