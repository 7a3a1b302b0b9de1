"""Where a backend's tasks live on the server: the stream the task messages wait in and the bucket of results.

Made on first use in each process (`TaskStore.open`), never at import or in ``AppConfig.ready()``: a
process forked after that (gunicorn, the worker's ``--processes``) opens its own on its own client.

- **The stream** (``OPTIONS["STREAM"]``, subjects ``<prefix>.>``) has work-queue retention: a task message is
  removed when a worker acks it. A task waits on ``<prefix>.run.<queue>.<band>``; a deferred one waits as a
  schedule message on ``<prefix>.at.<result id>`` that the server copies to its run subject at ``run_after``
  (message schedules, nats-server 2.12+); a task that used up its deliveries is copied to
  ``<prefix>.dead.<queue>``, which no worker reads.
- **The bucket** (``OPTIONS["RESULTS_BUCKET"]``) holds one entry per result id, the task document of
  ``_records.py``, kept ``RESULT_TTL`` after its last change.

An existing stream or bucket is used as it is (a deployment may have made it with more replicas, other limits);
the stream must be a work queue over the prefix's subjects.
"""

from __future__ import annotations

import logging
from datetime import datetime, timezone
from typing import Any

import attrs

from .... import errors
from ....client import Client
from ....jetstream import JetStream
from ....jetstream._features import server_version
from ....jetstream.kv import KeyValue
from ....jetstream.schedule import Schedule
from ....models import KeyValueConfig, RetentionPolicy, StreamConfig
from ._options import TaskOptions
from ._records import encode

__all__ = ["SCHEDULES_FROM", "TaskStore"]

log = logging.getLogger("jetstream_sync.integrations.django")

#: the first nats-server with message schedules (ADR-51, ``Schedule.at``)
SCHEDULES_FROM = (2, 12, 0)


@attrs.define
class TaskStore:
    """One process's handles on a backend's stream and result bucket (see the module docstring)."""

    client: Client
    js: JetStream
    options: TaskOptions
    results: KeyValue
    #: deferred tasks go through message schedules (else they are redelivered at their time)
    schedules: bool

    @classmethod
    def open(cls, client: Client, options: TaskOptions) -> TaskStore:
        """Find or make the stream and the bucket on ``client``'s server."""
        js = client.jetstream()
        schedules = _use_schedules(client, options)
        schedules = _ensure_stream(js, options, schedules)
        return cls(client=client, js=js, options=options, results=_ensure_bucket(js, options), schedules=schedules)

    @property
    def usable(self) -> bool:
        """The client is still open (a closed one is replaced by the process cache, and so is this store)."""
        return not self.client.is_closed

    def publish_task(self, record: dict[str, Any], data: bytes, run_after: datetime | None) -> None:
        """Put a task on its run subject, or schedule it there for ``run_after`` (a time in the past runs now)."""
        options = self.options
        subject = options.run_subject(record["queue"], options.band_of(record["priority"]))
        if run_after is not None and self.schedules:
            when = run_after if run_after.tzinfo is not None else run_after.astimezone()
            if when > datetime.now(timezone.utc):
                self.js.publish(
                    options.schedule_subject(record["id"]),
                    data,
                    schedule=Schedule.at(when, target=subject),
                    msg_id=record["id"],
                )
                return
        self.js.publish(subject, data, msg_id=record["id"])

    def write(self, record: dict[str, Any]) -> None:
        """Store a result document (any thread)."""
        self.results.put(record["id"], encode(record))


def _use_schedules(client: Client, options: TaskOptions) -> bool:
    if options.defer == "redelivery":
        return False
    version = server_version(client.server_info)
    able = version is None or version >= SCHEDULES_FROM
    if options.defer == "schedule" and not able:
        raise errors.FeatureNotSupportedError(
            "DEFER='schedule' (message schedules)", ".".join(map(str, SCHEDULES_FROM)), str(version)
        )
    return able


def _ensure_stream(js: JetStream, options: TaskOptions, schedules: bool) -> bool:
    """Make the stream if missing; returns whether deferred tasks can use schedules on it."""
    config = StreamConfig(
        name=options.stream,
        subjects=[f"{options.subject_prefix}.>"],
        retention=RetentionPolicy.WORK_QUEUE,
        storage=options.storage,
        num_replicas=options.replicas,
        allow_msg_schedules=schedules,
        description="Django tasks (jetstream_sync.integrations.django.tasks)",
    )
    try:
        info = js.stream_info(options.stream)
    except errors.StreamNotFoundError:
        try:
            js.create_stream(config)
        except errors.StreamNameInUseError:
            info = js.stream_info(options.stream)  # another process made it meanwhile
        else:
            return schedules
    if info.config.retention != RetentionPolicy.WORK_QUEUE or config.subjects[0] not in info.config.subjects:
        raise errors.InvalidArgumentError(
            "STREAM",
            f"stream {options.stream!r} exists but is not a work queue over {config.subjects[0]!r} "
            f"(retention {info.config.retention}, subjects {info.config.subjects}); name another STREAM",
        )
    if schedules and not info.config.allow_msg_schedules:
        try:  # made before the server had schedules, or by hand: schedules can be switched on
            js.update_stream(attrs.evolve(info.config, allow_msg_schedules=True))
        except errors.JetStreamError as exc:
            if options.defer == "schedule":
                raise
            log.warning(
                "tasks: stream %s does not allow message schedules and could not be changed (%s); deferred "
                "tasks are held back by redelivery instead",
                options.stream,
                exc,
            )
            return False
    return schedules


def _ensure_bucket(js: JetStream, options: TaskOptions) -> KeyValue:
    try:
        return js.key_value(options.results_bucket)
    except errors.BucketNotFoundError:  # the first worker or enqueue of this deployment: created below
        pass
    config = KeyValueConfig(
        bucket=options.results_bucket,
        history=1,
        ttl=options.result_ttl,
        storage=options.storage,
        replicas=options.replicas,
        description="Django task results (jetstream_sync.integrations.django.tasks)",
    )
    try:
        return js.create_key_value(config)
    except errors.BucketExistsError:
        return js.key_value(options.results_bucket)
