"""A task as JSON: the message a worker runs and the result record ``get_result()`` reads are one document.

At enqueue the document (status ``READY``) is both the result bucket's entry under the result id and the task
message's payload, so a worker that takes the message's first delivery has everything it needs without reading
the bucket. The worker writes the document back at each change (``RUNNING``; then ``SUCCESSFUL``, ``FAILED``,
or ``READY`` again before a retry); a redelivered message is resumed from the bucket's copy, which holds the
earlier attempts' worker ids and errors.

Fields: ``v`` (the format, 1), ``id``, ``task`` (the task function's module path), ``priority``, ``queue``,
``run_after``, ``takes_context``, ``backend`` (the alias), ``args``, ``kwargs``, ``status``, ``enqueued_at``,
``started_at``, ``finished_at``, ``last_attempted_at`` (ISO 8601), ``errors`` (a list of
``{"exception_class_path", "traceback"}``), ``worker_ids`` and ``return_value``.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from django.utils.module_loading import import_string  # type: ignore[import-untyped]

from ._compat import Task, TaskError, TaskResult, TaskResultStatus

__all__ = ["FORMAT", "RecordError", "decode", "encode", "new_record", "to_result"]

#: the document format written in ``v``
FORMAT = 1
_TIMES = ("run_after", "enqueued_at", "started_at", "finished_at", "last_attempted_at")


class RecordError(ValueError):
    """A message or bucket entry that is not a task document this backend wrote (or a newer format)."""


def _time(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def new_record(result: Any) -> dict[str, Any]:
    """The document of a just-enqueued `TaskResult`."""
    task = result.task
    return {
        "v": FORMAT,
        "id": result.id,
        "task": task.module_path,
        "priority": task.priority,
        "queue": task.queue_name,
        "run_after": _time(task.run_after),
        "takes_context": task.takes_context,
        "backend": result.backend,
        "args": result.args,
        "kwargs": result.kwargs,
        "status": str(result.status),
        "enqueued_at": _time(result.enqueued_at),
        "started_at": None,
        "finished_at": None,
        "last_attempted_at": None,
        "errors": [],
        "worker_ids": [],
        "return_value": None,
    }


def encode(record: dict[str, Any]) -> bytes:
    """The document as stored and sent (compact JSON, UTF-8)."""
    return json.dumps(record, separators=(",", ":")).encode()


def decode(data: bytes) -> dict[str, Any]:
    """A stored or received document, checked for the fields every reader uses; RecordError otherwise."""
    try:
        record = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise RecordError(f"not a task document (invalid JSON: {exc})") from None
    if not isinstance(record, dict) or record.get("v") != FORMAT:
        version = record.get("v") if isinstance(record, dict) else None
        raise RecordError(f"not a task document of format {FORMAT} (format {version!r})")
    for key, kind in (("id", str), ("task", str), ("queue", str), ("backend", str), ("priority", int)):
        if not isinstance(record.get(key), kind):
            raise RecordError(f"task document without a valid {key!r}")
    for key in ("args", "errors", "worker_ids"):
        if not isinstance(record.get(key), list):
            raise RecordError(f"task document without a valid {key!r}")
    if not isinstance(record.get("kwargs"), dict):
        raise RecordError("task document without a valid 'kwargs'")
    for key in _TIMES:
        value = record.get(key)
        if value is not None and not isinstance(value, str):
            raise RecordError(f"task document with a {key!r} that is not a time")
    return record


def parse_time(value: str | None) -> datetime | None:
    """A time written by `new_record` or the worker, back as the datetime it was."""
    return None if value is None else datetime.fromisoformat(value)


def task_of(record: dict[str, Any]) -> Any:
    """The `Task` a document was enqueued for: the module-level task imported by its path, with the
    priority, queue, run_after and backend it was enqueued with. ImportError when it cannot be imported now;
    TypeError when the path names something that is not a task."""
    found = import_string(record["task"])
    if not isinstance(found, Task):
        raise TypeError(f"{record['task']!r} is a {type(found).__name__}, not a task (decorate it with @task)")
    return found.using(
        priority=record["priority"],
        queue_name=record["queue"],
        run_after=parse_time(record.get("run_after")),
        backend=record["backend"],
    )


def to_result(record: dict[str, Any], task: Any | None = None) -> Any:
    """The `TaskResult` a document describes (``task``: the document's task, when already imported)."""
    result = TaskResult(
        task=task if task is not None else task_of(record),
        id=record["id"],
        status=TaskResultStatus(record["status"]),
        enqueued_at=parse_time(record.get("enqueued_at")),
        started_at=parse_time(record.get("started_at")),
        finished_at=parse_time(record.get("finished_at")),
        last_attempted_at=parse_time(record.get("last_attempted_at")),
        args=record["args"],
        kwargs=record["kwargs"],
        backend=record["backend"],
        errors=[
            TaskError(exception_class_path=e["exception_class_path"], traceback=e["traceback"])
            for e in record["errors"]
        ],
        worker_ids=list(record["worker_ids"]),
    )
    object.__setattr__(result, "_return_value", record.get("return_value"))  # frozen, as Django's backends set it
    return result
