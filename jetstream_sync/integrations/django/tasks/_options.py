"""``settings.TASKS[alias]["OPTIONS"]`` of a
[`JetStreamBackend`][jetstream_sync.integrations.django.tasks.JetStreamBackend], read and checked once, and the names
(stream, subjects, consumers, bucket) that follow from them.

Everything the backend and the worker agree on is derived here from the options alone, so a web process that
enqueues and a worker that runs agree without talking to each other: a task of queue ``emails`` and priority
band 1 is published to ``<prefix>.run.emails.1`` and read through the durable consumer ``run-emails-1``.

A wrong option raises [`InvalidArgumentError`][jetstream_sync.errors.InvalidArgumentError] or
[`InvalidTypeError`][jetstream_sync.errors.InvalidTypeError] naming ``TASKS['alias']['OPTIONS']['KEY']``; the backend
turns that into the system check's error and into ImproperlyConfigured on use.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping, Sequence
from typing import Literal

import attrs

from .... import errors
from ...._validate import check_int, check_name, check_subject, to_seconds
from ....models import StorageType
from ._compat import TASK_MAX_PRIORITY, TASK_MIN_PRIORITY

__all__ = ["DEFAULT_BANDS", "OPTION_KEYS", "QUEUE_NAME", "TaskOptions"]

#: the keys OPTIONS may have
OPTION_KEYS = (
    "STREAM",
    "SUBJECT_PREFIX",
    "RESULTS_BUCKET",
    "RESULT_TTL",
    "REPLICAS",
    "STORAGE",
    "PRIORITY_BANDS",
    "ACK_WAIT",
    "MAX_ATTEMPTS",
    "RETRY_DELAY",
    "MAX_DELIVER",
    "DEFER",
    "POLL_INTERVAL",
)
#: the lowest priority of each band, highest band first: 50..100, 1..49, 0 (the default), -49..-1, -100..-50
DEFAULT_BANDS = (50, 1, 0, -49, -100)
#: what a queue name may be: one subject token, also usable in a consumer name
QUEUE_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
_DAY = 24 * 3600.0
Defer = Literal["auto", "schedule", "redelivery"]


def _bands(field: str, value: object) -> tuple[int, ...]:
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise errors.InvalidTypeError(field, f"must be a list of priorities, got {type(value).__name__}")
    bands = tuple(check_int(field, v) for v in value)
    if not bands:
        raise errors.InvalidArgumentError(field, f"must list at least one band, ending with {TASK_MIN_PRIORITY}")
    if any(a <= b for a, b in itertools.pairwise(bands)):
        raise errors.InvalidArgumentError(field, f"must be the bands' lowest priorities, highest first: {bands}")
    if bands[0] > TASK_MAX_PRIORITY or bands[-1] != TASK_MIN_PRIORITY:
        raise errors.InvalidArgumentError(
            field,
            f"must lie in {TASK_MIN_PRIORITY}..{TASK_MAX_PRIORITY} and end with {TASK_MIN_PRIORITY} (the lowest "
            f"priority Django allows, so every priority has a band), got {list(bands)}",
        )
    return bands


@attrs.frozen(kw_only=True)
class TaskOptions:
    """The options of one backend (see the Django tasks guide for each one's meaning and default)."""

    stream: str = "DJANGO_TASKS"
    subject_prefix: str = "django_tasks"
    results_bucket: str = "django_tasks_results"
    #: seconds a result is kept after its last change; None keeps results until deleted
    result_ttl: float | None = 7 * _DAY
    replicas: int = 1
    storage: StorageType = StorageType.FILE
    priority_bands: tuple[int, ...] = DEFAULT_BANDS
    ack_wait: float = 30.0
    max_attempts: int = 1
    retry_delay: float = 10.0
    max_deliver: int = 5
    defer: Defer = "auto"
    poll_interval: float = 0.5

    @classmethod
    def from_mapping(cls, options: object, *, source: str) -> TaskOptions:
        """Read OPTIONS (``source`` names it in errors, e.g. ``TASKS['default']['OPTIONS']``)."""
        if options is None:
            options = {}
        if not isinstance(options, Mapping):
            raise errors.InvalidTypeError(source, f"must be a dict, got {type(options).__name__}")
        unknown = sorted(str(k) for k in options if k not in OPTION_KEYS)
        if unknown:
            raise errors.InvalidArgumentError(
                f"{source}[{unknown[0]!r}]", f"is not an option of this backend (known: {', '.join(OPTION_KEYS)})"
            )

        def label(key: str) -> str:
            return f"{source}[{key!r}]"

        values: dict[str, object] = {}
        stream = check_name(label("STREAM"), options.get("STREAM", "DJANGO_TASKS"))
        values["stream"] = stream
        prefix = options.get("SUBJECT_PREFIX", stream.lower())
        check_subject(label("SUBJECT_PREFIX"), prefix)
        values["subject_prefix"] = prefix
        bucket = options.get("RESULTS_BUCKET", f"{stream.lower()}_results")
        if not isinstance(bucket, str) or re.fullmatch(r"[A-Za-z0-9_-]+", bucket) is None:
            raise errors.InvalidArgumentError(
                label("RESULTS_BUCKET"), f"must be letters, digits, _ and -, got {bucket!r}"
            )
        values["results_bucket"] = bucket
        if "RESULT_TTL" in options:
            ttl = options["RESULT_TTL"]
            values["result_ttl"] = None if ttl is None else to_seconds(label("RESULT_TTL"), ttl)
        if "REPLICAS" in options:
            replicas = check_int(label("REPLICAS"), options["REPLICAS"], minimum=1)
            if replicas > 5:
                raise errors.InvalidArgumentError(label("REPLICAS"), f"must be 1 to 5, got {replicas}")
            values["replicas"] = replicas
        if "STORAGE" in options:
            storage = options["STORAGE"]
            if storage not in ("file", "memory"):
                raise errors.InvalidArgumentError(label("STORAGE"), f"must be 'file' or 'memory', got {storage!r}")
            values["storage"] = StorageType(storage)
        if "PRIORITY_BANDS" in options:
            values["priority_bands"] = _bands(label("PRIORITY_BANDS"), options["PRIORITY_BANDS"])
        for key in ("ACK_WAIT", "RETRY_DELAY", "POLL_INTERVAL"):
            if key in options:
                values[key.lower()] = to_seconds(label(key), options[key])
        for key in ("MAX_ATTEMPTS", "MAX_DELIVER"):
            if key in options:
                values[key.lower()] = check_int(label(key), options[key], minimum=1)
        if "DEFER" in options:
            defer = options["DEFER"]
            if defer not in ("auto", "schedule", "redelivery"):
                raise errors.InvalidArgumentError(
                    label("DEFER"), f"must be 'auto', 'schedule' or 'redelivery', got {defer!r}"
                )
            values["defer"] = defer
        parsed = cls(**values)  # type: ignore[arg-type]
        if parsed.max_deliver < parsed.max_attempts:
            raise errors.InvalidArgumentError(
                label("MAX_DELIVER"),
                f"must be at least MAX_ATTEMPTS ({parsed.max_attempts}): every attempt is one delivery",
            )
        if parsed.poll_interval >= parsed.ack_wait:
            raise errors.InvalidArgumentError(
                label("POLL_INTERVAL"), f"must be shorter than ACK_WAIT ({parsed.ack_wait:g} s)"
            )
        return parsed

    # -- the names both sides derive -------------------------------------------------------------------
    def band_of(self, priority: int) -> int:
        """The index of the band ``priority`` falls in (0 is the highest band)."""
        for index, lowest in enumerate(self.priority_bands):
            if priority >= lowest:
                return index
        return len(self.priority_bands) - 1

    def run_subject(self, queue: str, band: int) -> str:
        """Where a task of ``queue`` in ``band`` waits to be run."""
        return f"{self.subject_prefix}.run.{queue}.{band}"

    def queue_subjects(self, queue: str) -> str:
        """Every band of ``queue`` (the worker's wake-up subscription)."""
        return f"{self.subject_prefix}.run.{queue}.*"

    def schedule_subject(self, result_id: str) -> str:
        """The subject of the schedule message that publishes a deferred task at its ``run_after``."""
        return f"{self.subject_prefix}.at.{result_id}"

    def dead_subject(self, queue: str) -> str:
        """Where a task that used up its deliveries is copied to (the dead-letter place)."""
        return f"{self.subject_prefix}.dead.{queue}"

    def consumer_name(self, queue: str, band: int) -> str:
        """The durable consumer the workers read ``queue``'s ``band`` through."""
        return f"run-{queue}-{band}"
