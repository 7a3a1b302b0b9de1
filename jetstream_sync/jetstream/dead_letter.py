"""Dead letters: messages a consumer gave up on, moved where someone will look at them.

``js.dead_letter(stream, consumer, to=subject)`` listens for the consumer's max-deliveries and terminated
advisories. For each it reads the original message back by its stream sequence, republishes it to ``to`` with
headers that say where it came from and why, and (with ``delete=True``) removes it from the source stream.
The republish carries ``Nats-Msg-Id: dlq.<stream>.<consumer>.<sequence>``, so a message handled twice (two
helpers, or a retry after an error) is stored once inside the target stream's duplicate window.

The server's own ``Nats-*`` headers of the original are not carried over: they would act again on the
republish (a stale ``Nats-Expected-Last-Sequence`` would make it fail, a ``Nats-Msg-Id`` would collide).
Advisories are core NATS messages. The subscription is restored after a reconnect, but an advisory sent while
the client was disconnected is lost: for a guarantee across outages, keep advisories in a stream.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from types import TracebackType
from typing import TYPE_CHECKING

from .. import errors
from .._validate import check_name, check_subject
from ..models.advisory import AdvisoryKind, MaxDeliveriesExceeded, MessageTerminated

if TYPE_CHECKING:
    from .context import JetStream

__all__ = ["DeadLetters"]

log = logging.getLogger("jetstream_sync")


class DeadLetters:
    """A running dead-letter mover (see the module docstring). ``stop()`` ends it; a context manager."""

    def __init__(self, js: JetStream, stream: str, consumer: str, *, to: str, delete: bool = False) -> None:
        check_name("stream", stream)
        check_name("consumer", consumer)
        check_subject("to", to)
        if not isinstance(delete, bool):
            raise errors.InvalidTypeError("delete", f"must be a bool, got {type(delete).__name__}")
        self.stream_name = stream
        self.consumer = consumer
        self.to = to
        self.delete = delete
        #: how many messages were moved, and how many were already gone from the stream when asked for
        self.moved = 0
        self.missing = 0
        self._js = js
        self._stream = js.stream(stream)
        self._events = js.advisories(
            stream=stream, consumer=consumer, kinds=[AdvisoryKind.MAX_DELIVER, AdvisoryKind.TERMINATED]
        )
        self._stopped = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name=f"jetstream-sync-dead-letters-{stream}-{consumer}", daemon=True
        )
        js.client.runtime.track_thread(self._thread)
        self._thread.start()

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
        return self._thread.is_alive()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop listening; an event in hand is finished first."""
        self._stopped.set()
        self._events.close()
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout)

    def _run(self) -> None:
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
