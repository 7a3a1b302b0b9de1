"""Dead letters: messages a consumer gave up on, moved where someone will look at them.

``js.dead_letter(stream, consumer, to=subject)`` listens for the consumer's max-deliveries and terminated
advisories. For each it reads the original message back by its stream sequence, republishes it to ``to`` with
headers that say where it came from and why, and (with ``delete=True``) removes it from the source stream.
The republish carries ``Nats-Msg-Id: dlq.<stream>.<consumer>.<sequence>``, so a message handled twice (two
helpers, or a retry after an error) is stored once inside the target stream's duplicate window.

The server's own ``Nats-*`` headers of the original are not carried over: they would act again on the
republish (a stale ``Nats-Expected-Last-Sequence`` would make it fail, a ``Nats-Msg-Id`` would collide).

The server sends advisories as core NATS messages, to whoever listens at that moment. So that none is lost
while no mover runs (a deploy, a crash, a network outage), the mover by default keeps them in a stream of its
own (``durable=True``): a work-queue stream named ``DLQ_EVENTS_<stream>_<consumer>`` captures the consumer's
two advisory subjects, and the mover reads it through a durable pull consumer. An advisory is acked only once
its message was moved, so a mover that dies midway leaves it to the next one; a move that fails (the target
stream gone, a timeout) is retried after a delay. Movers sharing one events stream share the work.
``durable=False`` listens on the core subjects instead: nothing is created, and what is advised while the mover
is away is not moved.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from types import TracebackType
from typing import TYPE_CHECKING

from .. import errors
from .._validate import check_name, check_subject
from ..models.advisory import AdvisoryKind, MaxDeliveriesExceeded, MessageTerminated, parse_advisory
from ..models.consumer import AckPolicy, ConsumerConfig
from ..models.stream import RetentionPolicy, StreamConfig
from .advisories import subjects_for

if TYPE_CHECKING:
    from ..message import Msg
    from .advisories import Advisories
    from .consumers.delivery import ConsumeContext
    from .context import JetStream

__all__ = ["DeadLetters"]

log = logging.getLogger("jetstream_sync")

#: the kinds a mover acts on
_KINDS = [AdvisoryKind.MAX_DELIVER, AdvisoryKind.TERMINATED]
#: the durable consumer movers read the events stream through
EVENTS_CONSUMER = "dead-letter-mover"
#: how long a failed move waits before it is tried again
RETRY_DELAY = 2.0


class DeadLetters:
    """A running dead-letter mover (see the module docstring). ``stop()`` ends it; a context manager."""

    def __init__(
        self,
        js: JetStream,
        stream: str,
        consumer: str,
        *,
        to: str,
        delete: bool = False,
        durable: bool = True,
        events_stream: str | None = None,
    ) -> None:
        check_name("stream", stream)
        check_name("consumer", consumer)
        check_subject("to", to)
        for flag, value in (("delete", delete), ("durable", durable)):
            if not isinstance(value, bool):
                raise errors.InvalidTypeError(flag, f"must be a bool, got {type(value).__name__}")
        if events_stream is not None and not durable:
            raise errors.InvalidArgumentError("events_stream", "is only used with durable=True")
        self.stream_name = stream
        self.consumer = consumer
        self.to = to
        self.delete = delete
        #: the stream that keeps the advisories (None with ``durable=False``)
        self.events_stream = (
            check_name("events_stream", events_stream or f"DLQ_EVENTS_{stream}_{consumer}") if durable else None
        )
        #: how many messages this mover moved, and how many were already gone from the stream when asked for
        self.moved = 0
        self.missing = 0
        self._warned_terminated_gone = False  # the WARNING below is said once per mover
        self._js = js
        self._stream = js.stream(stream)  # StreamNotFoundError now, not on the first advisory
        self._stopped = threading.Event()
        self._events: Advisories | None = None
        self._consume: ConsumeContext | None = None
        self._thread: threading.Thread | None = None
        if self.events_stream is None:
            self._events = js.advisories(stream=stream, consumer=consumer, kinds=_KINDS)
            self._thread = threading.Thread(
                target=self._listen, name=f"jetstream-sync-dead-letters-{stream}-{consumer}", daemon=True
            )
            js.runtime.track_thread(self._thread)
            self._thread.start()
        else:
            self._consume = self._open_events(self.events_stream)

    def _open_events(self, name: str) -> ConsumeContext:
        """Create (or find) the events stream and its consumer, and consume it."""
        events = self._js.create_or_update_stream(
            StreamConfig(
                name=name,
                subjects=subjects_for(self.stream_name, self.consumer, _KINDS),
                retention=RetentionPolicy.WORK_QUEUE,
                # as many replicas as the stream it watches: in a cluster, an advisory kept on one node only
                # would be lost with that node
                num_replicas=self._stream.cached_info.config.num_replicas,
                description=f"dead-letter advisories of {self.stream_name}/{self.consumer}",
            )
        )
        reader = events.create_or_update_consumer(
            ConsumerConfig(durable_name=EVENTS_CONSUMER, ack_policy=AckPolicy.EXPLICIT, ack_wait=30)
        )
        return reader.consume(self._on_event, error_handler=self._report)

    def __repr__(self) -> str:
        return f"<DeadLetters {self.stream_name}/{self.consumer} -> {self.to!r} moved={self.moved}>"

    def __enter__(self) -> DeadLetters:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        """The mover is moving: started and neither stopped nor ended by an error."""
        if self._consume is not None:
            return not self._consume.closed.is_set()
        return self._thread is not None and self._thread.is_alive()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop listening; an event in hand is finished first. The events stream stays (and keeps collecting
        advisories for the next mover); delete it with ``js.delete_stream(mover.events_stream)``."""
        self._stopped.set()
        if self._consume is not None:
            self._consume.stop()
            with contextlib.suppress(errors.TimeoutError, RuntimeError):  # RuntimeError: stop() from a handler
                self._consume.wait(timeout)
            return
        assert self._events is not None and self._thread is not None
        self._events.close()
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout)

    def _report(self, exc: BaseException) -> None:
        if not isinstance(exc, errors.ConnectionClosedError):
            log.warning("dead letters %s/%s: %s", self.stream_name, self.consumer, exc)

    def _on_event(self, msg: Msg) -> None:
        """The durable path: move, then ack the advisory; on failure leave it for a retry."""
        event = parse_advisory(msg.subject, msg.data)
        if isinstance(event, (MaxDeliveriesExceeded, MessageTerminated)):
            try:
                self._move(event)
            except errors.ConnectionClosedError:
                return  # the client is closing: the advisory stays for the next mover
            except errors.JetStreamError as exc:
                log.warning(
                    "dead letters %s/%s: moving sequence %d failed (%s); retrying in %gs",
                    self.stream_name,
                    self.consumer,
                    event.stream_seq,
                    exc,
                    RETRY_DELAY,
                )
                msg.nak(delay=RETRY_DELAY)
                return
        msg.ack_sync()

    def _listen(self) -> None:
        """The core path: the advisories as they come."""
        assert self._events is not None
        try:
            for event in self._events:
                if self._stopped.is_set():
                    return
                if isinstance(event, (MaxDeliveriesExceeded, MessageTerminated)):
                    self._move(event)
        except errors.ConnectionClosedError:
            return
        except Exception:  # never silently: the mover ends, and says why
            log.exception("dead letters %s/%s: stopped", self.stream_name, self.consumer)

    def _move(self, event: MaxDeliveriesExceeded | MessageTerminated) -> None:
        seq = event.stream_seq
        try:
            original = self._stream.get_msg(seq)
        except errors.MessageNotFoundError:
            self.missing += 1  # acked meanwhile, removed by limits, or already moved and deleted
            if isinstance(event, MessageTerminated) and not self._warned_terminated_gone:
                # A work-queue or interest stream removes a message at term(): the mover can never read it back,
                # and counting it in ``missing`` alone would lose the job without a word.
                self._warned_terminated_gone = True
                log.warning(
                    "dead letters %s/%s: message %d was terminated and is gone from the stream (a work-queue or "
                    "interest stream removes a message at term()), so it cannot be dead-lettered; publish it to "
                    "%r yourself before term() on such a stream (said once; see dlq.missing)",
                    self.stream_name,
                    self.consumer,
                    seq,
                    self.to,
                )
            else:
                log.debug(
                    "dead letters %s/%s: message %d is gone from the stream", self.stream_name, self.consumer, seq
                )
            return
        if isinstance(event, MaxDeliveriesExceeded):
            reason = "max_deliveries"
        else:
            reason = f"terminated: {event.reason}" if event.reason else "terminated"
        headers: dict[str, list[str]] = {}
        for key, value in original.headers.multi_items():
            if not key.lower().startswith("nats-"):
                headers.setdefault(key, []).append(value)
        headers.update(
            {
                "Dead-Letter-Stream": [self.stream_name],
                "Dead-Letter-Consumer": [self.consumer],
                "Dead-Letter-Sequence": [str(seq)],
                "Dead-Letter-Subject": [original.subject],
                "Dead-Letter-Deliveries": [str(event.deliveries)],
                "Dead-Letter-Reason": [reason],
            }
        )
        self._js.publish(self.to, original.data, headers, msg_id=f"dlq.{self.stream_name}.{self.consumer}.{seq}")
        self.moved += 1
        if self.delete:
            with contextlib.suppress(errors.MessageNotFoundError):  # deleted by someone else meanwhile
                self._stream.delete_msg(seq)
