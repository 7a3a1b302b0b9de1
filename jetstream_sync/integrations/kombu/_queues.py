"""Queues as durable consumers: declare, bind, unbind, purge, delete, and the stream they all live in.

Every call here is idempotent, so that every process of an app can declare what it uses (kombu and Celery
do, on first use in each process) and a worker that starts again finds the consumers it left. A queue's
bindings are kept in its consumer's metadata (``kombu.bindings``), its filter subjects are made from them
(``_layout.binding_filters``), and a bind is a read-modify-write of the consumer's configuration that checks
its own result, since two processes may bind the same queue at once.
"""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import Sequence
from typing import Any

import attrs

from ... import errors
from ...jetstream import JetStream
from ...jetstream.consumers import Consumer
from ...message import Msg
from ...models import (
    AckPolicy,
    ConsumerConfig,
    DeliverPolicy,
    RetentionPolicy,
    StorageType,
    StreamConfig,
)
from . import _wire
from ._layout import Binding, binding_filters, consumer_name, prune_filters
from ._settings import Options

__all__ = ["QueueSpec", "Queues", "ensure_streams"]

log = logging.getLogger("jetstream_sync.integrations")

_VERSION = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)")
#: how many times a bind that lost a race with another process's bind is tried again
_BIND_TRIES = 5
#: the most one pull of a purge asks for
_PURGE_BATCH = 256
#: the metadata keys of a queue's consumer
META_QUEUE = "kombu.queue"
META_BINDINGS = "kombu.bindings"
META_TTL = "kombu.message_ttl"
META_BANDS = "kombu.bands"


def ttl_supported(server_info: dict[str, Any]) -> bool:
    """Per-message TTLs (``Nats-TTL``, ``allow_msg_ttl``) arrived in nats-server 2.11."""
    match = _VERSION.match(str(server_info.get("version", "")))
    return match is not None and (int(match[1]), int(match[2])) >= (2, 11)


def ensure_streams(js: JetStream, options: Options, *, allow_msg_ttl: bool) -> None:
    """Create the queues' stream when it does not exist; check that an existing one is fit for it (interest
    retention, capturing ``<prefix>.>``). Raises InvalidArgumentError naming the transport option when not."""
    try:
        info = js.stream_info(options.stream)
    except errors.StreamNotFoundError:
        config = StreamConfig(
            name=options.stream,
            description="kombu queues and exchanges (jetstream_sync.integrations.kombu)",
            subjects=[f"{options.prefix}.>"],
            retention=RetentionPolicy.INTEREST,
            storage=StorageType(options.storage),
            num_replicas=options.replicas,
            max_age=options.max_age,
            max_bytes=options.max_bytes,
            duplicate_window=options.duplicate_window,
            allow_msg_ttl=allow_msg_ttl,
        )
        try:
            js.create_stream(config)
            log.info("created stream %s for kombu's queues (subjects %s.>)", options.stream, options.prefix)
        except errors.StreamNameInUseError:
            pass  # another process created it meanwhile
        return
    config = info.config
    if config.retention != RetentionPolicy.INTEREST:
        raise errors.InvalidArgumentError(
            "transport_options['stream']",
            f"stream {options.stream!r} exists with {config.retention} retention; the transport needs a stream of "
            "its own (interest retention): name another one",
        )
    if f"{options.prefix}.>" not in config.subjects:
        raise errors.InvalidArgumentError(
            "transport_options['prefix']",
            f"stream {options.stream!r} captures {config.subjects}, not {options.prefix}.>; give the prefix it was "
            "created with, or another stream",
        )


def ensure_dead_stream(js: JetStream, options: Options) -> None:
    """The stream dead letters are moved to: limits retention, kept 14 days unless the operator says else."""
    try:
        js.stream_info(options.dead_stream)
    except errors.StreamNotFoundError:
        with contextlib.suppress(errors.StreamNameInUseError):
            js.create_stream(
                StreamConfig(
                    name=options.dead_stream,
                    description="kombu messages given up on after max_deliver deliveries, or rejected",
                    subjects=[f"{options.dead_prefix}.>"],
                    storage=StorageType(options.storage),
                    num_replicas=options.replicas,
                    max_age=14 * 24 * 3600.0,
                )
            )


@attrs.define
class QueueSpec:
    """A queue as its consumers say it is: the consumer of each band (highest first; one with band None for a
    queue without priorities), its bindings and its ``message_ttl`` (seconds)."""

    name: str
    consumers: list[tuple[int | None, Consumer]]
    bindings: list[Binding]
    message_ttl: float | None

    @property
    def durable(self) -> bool:
        return not any(c.cached_info.config.inactive_threshold for _, c in self.consumers)


def _bindings_of(config: ConsumerConfig) -> list[Binding]:
    raw = _wire.loads_bindings((config.metadata or {}).get(META_BINDINGS))
    return [Binding(*b) for b in raw]


def _filters(config: ConsumerConfig) -> list[str]:
    if config.filter_subjects:
        return list(config.filter_subjects)
    return [config.filter_subject] if config.filter_subject else []


class Queues:
    """The queue operations of one channel, on the JetStream context of its process's client."""

    def __init__(self, js: JetStream, options: Options) -> None:
        self.js = js
        self.options = options

    def _band_token(self, band: int | None) -> str:
        return "*" if band is None else str(band)

    def _config(
        self,
        queue: str,
        band: int | None,
        bindings: Sequence[Binding],
        *,
        expires: float | None,
        message_ttl: float | None,
        bands: Sequence[int] | None,
        durable: bool,
    ) -> ConsumerConfig:
        filters: list[str] = []
        for binding in bindings:
            filters.extend(binding_filters(self.options.prefix, binding, self._band_token(band)))
        metadata = {META_QUEUE: queue, META_BINDINGS: _wire.dumps_bindings([list(b) for b in bindings])}
        if message_ttl is not None:
            metadata[META_TTL] = repr(message_ttl)
        if bands:
            metadata[META_BANDS] = ",".join(map(str, bands))
        return ConsumerConfig(
            durable_name=consumer_name(queue, band),
            description=f"kombu queue {queue}" + ("" if band is None else f", priority band {band}"),
            deliver_policy=DeliverPolicy.NEW,
            ack_policy=AckPolicy.EXPLICIT,
            ack_wait=self.options.ack_wait,
            max_deliver=self.options.max_deliver,
            max_ack_pending=-1,
            filter_subjects=prune_filters(filters),
            inactive_threshold=expires if expires is not None else (None if durable else self.options.queue_expires),
            mem_storage=True if not durable else None,
            metadata=metadata,
        )

    def declare(
        self,
        queue: str,
        *,
        durable: bool,
        auto_delete: bool,
        arguments: dict[str, Any] | None,
    ) -> QueueSpec:
        """Create the queue's consumers, or find them; an existing queue keeps its bindings and settings."""
        arguments = arguments or {}
        expires_ms = arguments.get("x-expires")
        ttl_ms = arguments.get("x-message-ttl")
        expires = float(expires_ms) / 1000.0 if expires_ms else None
        message_ttl = float(ttl_ms) / 1000.0 if ttl_ms else None
        bands: list[int | None] = (
            list(reversed(self.options.priority_steps)) if arguments.get("x-max-priority") else [None]
        )
        base = [Binding("", queue, "direct")]
        consumers: list[tuple[int | None, Consumer]] = []
        for band in bands:
            config = self._config(
                queue,
                band,
                base,
                expires=expires,
                message_ttl=message_ttl,
                bands=[b for b in bands if b is not None],
                durable=durable and not auto_delete,
            )
            try:
                consumer = self.js.create_consumer(self.options.stream, config)
            except errors.ConsumerExistsError:  # declared before (maybe with more bindings): keep it as it is
                consumer = self.js.consumer(self.options.stream, config.durable_name or "")
            consumers.append((band, consumer))
        first = consumers[0][1].cached_info.config
        return QueueSpec(queue, consumers, _bindings_of(first), _ttl_of(first))

    def lookup(self, queue: str) -> QueueSpec | None:
        """The queue as declared (by any process), or None when it does not exist."""
        try:
            plain = self.js.consumer(self.options.stream, consumer_name(queue, None))
        except errors.ConsumerNotFoundError:
            plain = None
        if plain is not None:
            config = plain.cached_info.config
            return QueueSpec(queue, [(None, plain)], _bindings_of(config), _ttl_of(config))
        consumers: list[tuple[int | None, Consumer]] = []
        for band in reversed(self.options.priority_steps):
            try:
                consumers.append((band, self.js.consumer(self.options.stream, consumer_name(queue, band))))
            except errors.ConsumerNotFoundError:  # this band was never declared for the queue
                continue
        if not consumers:
            return None
        config = consumers[0][1].cached_info.config
        return QueueSpec(queue, consumers, _bindings_of(config), _ttl_of(config))

    def rebind(self, spec: QueueSpec, binding: Binding, *, add: bool) -> QueueSpec:
        """Add or remove one binding on every consumer of the queue; checked, and tried again if another
        process's bind overwrote it meanwhile."""
        consumers: list[tuple[int | None, Consumer]] = []
        for band, consumer in spec.consumers:
            for _ in range(_BIND_TRIES):
                config = self.js.consumer_info(self.options.stream, consumer.name).config
                bindings = _bindings_of(config)
                if (binding in bindings) == add:
                    break
                bindings = [*bindings, binding] if add else [b for b in bindings if b != binding]
                filters: list[str] = []
                for each in bindings:
                    filters.extend(binding_filters(self.options.prefix, each, self._band_token(band)))
                metadata = dict(config.metadata or {})
                metadata[META_BINDINGS] = _wire.dumps_bindings([list(b) for b in bindings])
                updated = attrs.evolve(
                    config, filter_subject=None, filter_subjects=prune_filters(filters), metadata=metadata
                )
                self.js.update_consumer(self.options.stream, updated)
            else:
                raise errors.ConsumerConfigError(
                    409,
                    0,
                    f"could not {'bind' if add else 'unbind'} {binding} on queue {spec.name!r}: other "
                    f"processes kept changing its bindings",
                )
            consumers.append((band, self.js.consumer(self.options.stream, consumer.name)))
        config = consumers[0][1].cached_info.config
        return QueueSpec(spec.name, consumers, _bindings_of(config), _ttl_of(config))

    def size(self, spec: QueueSpec) -> int:
        """Messages ready in the queue (not counting those delivered and unacked, as AMQP counts)."""
        return sum(self.js.consumer_info(self.options.stream, c.name).num_pending for _, c in spec.consumers)

    def delete(self, spec: QueueSpec) -> None:
        """Delete the queue's consumers: the messages no other queue holds leave the stream with them."""
        for _, consumer in spec.consumers:
            with contextlib.suppress(errors.ConsumerNotFoundError):
                self.js.delete_consumer(self.options.stream, consumer.name)

    def purge(self, spec: QueueSpec) -> int:
        """Remove the queue's ready messages (AMQP's ``queue.purge``) and return how many: each consumer of the
        queue is read with no-wait pulls and what they bring is acked, up to the last message the stream held
        when the purge began.

        The consumers stay as they are, so a worker consuming the queue meanwhile goes on (deleting and making
        them again would end its pulls, and lose what was published in between). Messages delivered and not
        yet acked are not ready and stay with their readers, as in AMQP; a message a worker pulls during the
        purge is its to run, as if it had been delivered just before. The purge cannot remove a message from
        the stream for the queue alone (other queues may hold it too): the ack removes it from this queue, and
        interest retention drops it from the stream once no other queue holds it."""
        last = self.js.stream_info(self.options.stream).state.last_seq
        purged = 0
        for _, consumer in spec.consumers:
            purged += self._drain(consumer, last)
        return purged

    def _drain(self, consumer: Consumer, last: int) -> int:
        count = 0
        final: Msg | None = None
        while True:
            taken = 0
            with consumer.fetch_no_wait(_PURGE_BATCH) as batch:
                for msg in batch:
                    if msg.metadata.sequence.stream > last:  # published after the purge began: not purged
                        msg.nak()
                        return count + self._confirm(final)
                    msg.ack()
                    final = msg
                    taken += 1
            count += taken
            if taken < _PURGE_BATCH:
                return count + self._confirm(final)

    @staticmethod
    def _confirm(final: Msg | None) -> int:
        """Wait for the server to confirm the last ack (it handles a consumer's acks in order, so the queue's
        size reads without the purged messages once this returns)."""
        if final is not None:
            final.ack_sync()
        return 0


def _ttl_of(config: ConsumerConfig) -> float | None:
    raw = (config.metadata or {}).get(META_TTL)
    try:
        return float(raw) if raw else None
    except ValueError:  # not written by this transport (edited by hand): the queue is read as having no TTL
        return None
