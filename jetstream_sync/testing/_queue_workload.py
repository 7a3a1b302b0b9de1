"""QueueWorkload: producers and every kind of reader on replicated streams, recorded for ``check_queue``.

A part of a [`ClusterWorkload`][jetstream_sync.testing.ClusterWorkload] (``_runner.py``). For each stream (by default
``HISTORY_R3`` with three replicas and ``HISTORY_R5`` with five):

- two producers, one publishing with a ``msg_id`` (the message's own name) and one without, each message a name
  never used before (``<stream>.<producer>.<n>``), at most ``rate`` messages a second. A publish that raised is
  an unknown outcome (``info``: it may be stored); the producer publishes the same message again, as a user
  would, until one is acknowledged (or the writers stop): the stream stores a ``msg_id`` message once, and one
  without perhaps twice, which the checker expects (``republished``).
- four readers, each expected to get every message: ``consume()`` and ``messages()`` on durable consumers of
  their own, a ``fetch`` loop on a third, all of them acking (an ack lost in a fault brings a redelivery after
  ``ack_wait``), and an ordered consumer (no acks: it must see the stream in order, without a gap).

Every publish and every delivery is recorded: the publish with its outcome, ``msg_id`` and the sequence its
PubAck named; the delivery with its reader, the way it read (``via``), the stream sequence and the delivery count.
After the heal [`QueueWorkload.settle`][jetstream_sync.testing.QueueWorkload.settle] waits (bounded) until every reader
has every acknowledged message; what one still lacks then is what the checker reports as lost.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from ..errors import InvalidArgumentError, JetStreamError
from ..errors import TimeoutError as JetStreamTimeoutError
from ._history import History
from ._runner import Crew

if TYPE_CHECKING:
    from ..client import Client
    from ..jetstream.consumers.delivery import ConsumeContext
    from ..jetstream.context import JetStream
    from ..message import Msg

__all__ = ["READERS", "QueueWorkload"]

logger = logging.getLogger("jetstream_sync.testing")

#: the ways of reading a stream the workload runs, one reader each
READERS: tuple[str, ...] = ("consume", "messages", "fetch", "ordered")
_SETUP_TIMEOUT = 30.0
_RETRY_PAUSE = 0.2  # between a publish that raised and the same one again, during a fault
_POLL = 0.5  # a reader thread looks at its stop flag this often while nothing comes
_PULL_EXPIRES = 2.0  # each pull of a continuous read: short, so a read moves off a node that went away soon
_FETCH_BATCH = 50


class QueueWorkload:
    """Producers with and without ``msg_id`` and the readers of `READERS` on ``streams`` (pairs of name and
    replicas), recorded into the run's history (see the module docstring). ``rate``: messages a second per
    producer, at most; ``publish_timeout``: each publish's timeout (longer than an election, 4-9 s); ``ack_wait``:
    the durable consumers' (seconds before an unacknowledged message is delivered again)."""

    def __init__(
        self,
        *,
        streams: Sequence[tuple[str, int]] = (("HISTORY_R3", 3), ("HISTORY_R5", 5)),
        rate: float = 50.0,
        publish_timeout: float = 10.0,
        ack_wait: float = 5.0,
        readers: Sequence[str] = READERS,
    ) -> None:
        unknown = [reader for reader in readers if reader not in READERS]
        if unknown or not streams or rate <= 0 or publish_timeout <= 0 or ack_wait <= 0:
            raise InvalidArgumentError(
                "queue workload", f"streams needed, rate/timeouts > 0, readers from {list(READERS)} (not {unknown})"
            )
        self.stream_replicas = [(name, replicas) for name, replicas in streams]
        self.rate = rate
        self.publish_timeout = publish_timeout
        self.ack_wait = ack_wait
        self.readers = tuple(readers)
        self.history = History()
        self._clients: list[Client] = []
        self._lock = threading.Lock()
        self._acked: dict[str, set[str]] = {name: set() for name, _ in self.stream_replicas}
        self._seen: dict[str, set[str]] = {}  # reader ("<stream>/<via>") -> messages it got
        self._contexts: list[ConsumeContext] = []
        self._errors: Counter[str] = Counter()  # "<reader>: <error class>" -> how many times (reported, retried)
        self._retries = 0

    @property
    def streams(self) -> tuple[str, ...]:
        """The streams it writes, for the nemesis to aim at their leaders."""
        return tuple(name for name, _ in self.stream_replicas)

    @property
    def kept(self) -> None:
        """Not a key-value part."""
        return None

    # -- set-up -----------------------------------------------------------------------------------------------
    def set_up(self, clients: Sequence[Client], history: History, crew: Crew) -> None:
        """Create the streams and the durable consumers, and start the readers, spread over the clients."""
        from ..models import ConsumerConfig, StorageType, StreamConfig

        self.history = history
        self._clients = list(clients)
        admin = clients[0].jetstream(timeout=_SETUP_TIMEOUT)
        turn = 0
        for name, replicas in self.stream_replicas:
            admin.create_stream(
                StreamConfig(name=name, subjects=[f"{name}.>"], num_replicas=replicas, storage=StorageType.FILE)
            )
            for via in self.readers:
                js = clients[turn % len(clients)].jetstream(timeout=_SETUP_TIMEOUT)
                turn += 1
                reader = f"{name}/{via}"
                self._seen[reader] = set()
                if via != "ordered":
                    admin.create_consumer(
                        name, ConsumerConfig(durable_name=via, ack_wait=self.ack_wait, max_deliver=-1)
                    )
                self._start_reader(js, name, via, reader, crew)

    def _start_reader(self, js: JetStream, stream: str, via: str, reader: str, crew: Crew) -> None:
        process = self.history.new_process()
        report = self._reporter(reader)
        if via in ("consume", "ordered"):
            consumer = js.ordered_consumer(stream) if via == "ordered" else js.consumer(stream, via)
            handler = self._handler(process, reader, via)
            self._contexts.append(
                consumer.consume(handler, expires=_PULL_EXPIRES, idle_heartbeat=1.0, error_handler=report)
            )
        elif via == "messages":
            crew.start(f"queue-{reader}", lambda: self._iterate(js, stream, process, reader, crew), reader=True)
        else:
            crew.start(f"queue-{reader}", lambda: self._fetch(js, stream, process, reader, crew), reader=True)

    # -- readers ----------------------------------------------------------------------------------------------
    def _reporter(self, reader: str) -> Callable[[BaseException], None]:
        def report(exc: BaseException) -> None:
            """A read's error or warning (a missed heartbeat, a reconnect...): counted, shown in the summary."""
            logger.debug("queue workload: %s: %s", reader, exc)
            with self._lock:
                self._errors[f"{reader}: {type(exc).__name__}"] += 1

        return report

    def _record(self, process: int, reader: str, via: str, msg: Msg) -> None:
        op = self.history.received(process, msg, reader=reader, via=via)
        with self._lock:
            self._seen[reader].add(op.result or "")
        if via != "ordered":
            try:
                msg.ack()
            except JetStreamError as exc:  # not acked: it comes again after the ack wait, as it should
                self._reporter(reader)(exc)

    def _handler(self, process: int, reader: str, via: str) -> Callable[[Msg], None]:
        def handle(msg: Msg) -> None:
            """Runs on the consume's own thread: record the delivery, ack it (not an ordered consumer's)."""
            self._record(process, reader, via, msg)

        return handle

    def _iterate(self, js: JetStream, stream: str, process: int, reader: str, crew: Crew) -> None:
        """The ``messages()`` reader: one iterator, read until the crew is finished."""
        consumer = js.consumer(stream, "messages")
        with consumer.messages(expires=_PULL_EXPIRES, idle_heartbeat=1.0, error_handler=self._reporter(reader)) as it:
            while not crew.finished.is_set():
                try:
                    msg = it.next(timeout=_POLL)
                except JetStreamTimeoutError:  # nothing new: look at crew.finished again
                    continue
                self._record(process, reader, "messages", msg)

    def _fetch(self, js: JetStream, stream: str, process: int, reader: str, crew: Crew) -> None:
        """The ``fetch`` reader: batches of up to 50, one pull after another, until the crew is finished. A pull
        that fails in a fault (no connection, a missed heartbeat) is counted and pulled again."""
        consumer = js.consumer(stream, "fetch")
        while not crew.finished.is_set():
            try:
                for msg in consumer.fetch(_FETCH_BATCH, expires=1.0):
                    self._record(process, reader, "fetch", msg)
            except JetStreamError as exc:
                self._reporter(reader)(exc)
                crew.finished.wait(_RETRY_PAUSE)  # back-off before the next pull during a fault

    # -- producers --------------------------------------------------------------------------------------------
    def writers(self) -> list[tuple[str, Callable[[threading.Event], None]]]:
        """Two producers per stream, with and without ``msg_id``, on different clients."""
        bodies: list[tuple[str, Callable[[threading.Event], None]]] = []
        for s, (name, _replicas) in enumerate(self.stream_replicas):
            for p, with_id in enumerate((True, False)):
                js = self._clients[(2 * s + p) % len(self._clients)].jetstream(timeout=self.publish_timeout)
                tag = "id" if with_id else "noid"
                bodies.append((f"queue-{name}-{tag}", self._producer(js, name, tag, with_id)))
        return bodies

    def _producer(self, js: JetStream, stream: str, tag: str, with_id: bool) -> Callable[[threading.Event], None]:
        def produce(stop: threading.Event) -> None:
            """Publish new messages until ``stop``, each until acknowledged (or ``stop``)."""
            process = self.history.new_process()
            pace = 1.0 / self.rate
            n = 0
            while not stop.is_set():
                value = f"{stream}.{tag}.{n}"
                n += 1
                process = self._publish(js, stream, value, with_id, process, stop)
                stop.wait(pace)  # the producer's pace: at most ``rate`` messages a second

        return produce

    def _publish(
        self, js: JetStream, stream: str, value: str, with_id: bool, process: int, stop: threading.Event
    ) -> int:
        """Publish ``value`` until acknowledged or ``stop``; returns the process to go on with (a new one after
        each unknown outcome, Jepsen's rule)."""
        subject = f"{stream}.{'id' if with_id else 'noid'}"
        while True:
            msg_id = value if with_id else None
            op = self.history.invoke(process, "publish", stream, value=value, msg_id=msg_id)
            try:
                ack = js.publish(subject, value.encode(), msg_id=msg_id, timeout=self.publish_timeout)
            except JetStreamError as exc:  # a timeout, no connection, no leader: it may be stored
                op.info(exc)
                process = self.history.new_process()
                if stop.wait(_RETRY_PAUSE):  # the back-off before the same message again; stopping leaves it open
                    return process
                with self._lock:
                    self._retries += 1
                continue
            op.ok(revision=ack.seq)
            with self._lock:
                self._acked[stream].add(value)
            return process

    # -- the end ----------------------------------------------------------------------------------------------
    def missing(self) -> dict[str, int]:
        """How many acknowledged messages each reader has not got yet."""
        with self._lock:
            return {
                reader: len(self._acked[reader.split("/")[0]] - seen)
                for reader, seen in self._seen.items()
                if not self._acked[reader.split("/")[0]] <= seen
            }

    def settle(self, deadline: float) -> None:
        """Wait until every reader has every acknowledged message (until ``deadline``, ``time.monotonic()``);
        what is still missing then is logged, and the checker reports it as lost."""
        while self.missing():
            if time.monotonic() >= deadline:
                logger.warning("queue workload: readers still missing messages at the deadline: %s", self.missing())
                return
            time.sleep(_POLL)  # the poll of this bounded wait on the readers

    def close(self) -> None:
        """Stop the consume contexts (the reader threads end with the crew's ``finished``)."""
        for context in self._contexts:
            context.stop()

    def describe(self) -> list[str]:
        """The publishes sent again, and the readers' errors and warnings (each retried or recovered from)."""
        errors = ", ".join(f"{what} {n}" for what, n in sorted(self._errors.items())) or "none"
        streams = ", ".join(f"{name} R{replicas}" for name, replicas in self.stream_replicas)
        return [
            f"queue: {streams}; readers {', '.join(self.readers)}; {self._retries} publishes sent again",
            f"queue reader errors (recovered): {errors}",
        ]
