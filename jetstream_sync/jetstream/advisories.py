"""``js.advisories()``: the server's JetStream advisories and metrics as typed events, read like a subscription.

Subjects (nats-server): ``$JS.EVENT.ADVISORY.<AREA>.<KIND>.<stream>[.<consumer>]`` and
``$JS.EVENT.METRIC.CONSUMER.ACK.<stream>.<consumer>``. With no argument the reader takes both trees whole
(unknown kinds included). ``stream`` and ``consumer`` narrow by token; a consumer narrows to events about
consumers (stream-level events have no consumer token). ``kinds`` picks known kinds only (see ``KINDS``).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Iterator
from datetime import timedelta
from types import TracebackType
from typing import TYPE_CHECKING, Any

from .. import errors
from .._runtime import BufferFinished, MessageBuffer, NatsSubscription, Runtime
from .._validate import check_name, check_timeout
from ..models.advisory import Advisory, UnknownAdvisory, parse_advisory

if TYPE_CHECKING:
    from .context import JetStream

__all__ = ["KINDS", "Advisories", "open_advisories"]

log = logging.getLogger("jetstream_sync")

#: kind -> subject patterns, with {s} for the stream and {c} for the consumer
KINDS: dict[str, tuple[str, ...]] = {
    "consumer_ack": ("$JS.EVENT.METRIC.CONSUMER.ACK.{s}.{c}",),
    "max_deliver": ("$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.{s}.{c}",),
    "terminated": ("$JS.EVENT.ADVISORY.CONSUMER.MSG_TERMINATED.{s}.{c}",),
    "nak": ("$JS.EVENT.ADVISORY.CONSUMER.MSG_NAKED.{s}.{c}",),
    "stream_action": (
        "$JS.EVENT.ADVISORY.STREAM.CREATED.{s}",
        "$JS.EVENT.ADVISORY.STREAM.DELETED.{s}",
        "$JS.EVENT.ADVISORY.STREAM.UPDATED.{s}",
    ),
    "consumer_action": ("$JS.EVENT.ADVISORY.CONSUMER.CREATED.{s}.{c}", "$JS.EVENT.ADVISORY.CONSUMER.DELETED.{s}.{c}"),
    "stream_leader_elected": ("$JS.EVENT.ADVISORY.STREAM.LEADER_ELECTED.{s}",),
    "consumer_leader_elected": ("$JS.EVENT.ADVISORY.CONSUMER.LEADER_ELECTED.{s}.{c}",),
}

_MAX_PENDING = 65_536


def subjects_for(stream: str | None, consumer: str | None, kinds: Iterable[str] | None) -> list[str]:
    """The subjects to subscribe to for these arguments (validated by the caller)."""
    if kinds is None:
        if stream is None and consumer is None:
            return ["$JS.EVENT.ADVISORY.>", "$JS.EVENT.METRIC.>"]
        s, c = stream or "*", consumer or "*"
        out = [f"$JS.EVENT.ADVISORY.*.*.{s}.{c}", f"$JS.EVENT.METRIC.*.*.{s}.{c}"]
        if consumer is None:
            out.append(f"$JS.EVENT.ADVISORY.*.*.{s}")
        return out
    out = []
    for kind in kinds:
        for pattern in KINDS[kind]:
            if consumer is not None and "{c}" not in pattern:
                continue  # a stream-level event is about no consumer
            subject = pattern.format(s=stream or "*", c=consumer or "*")
            if subject not in out:
                out.append(subject)
    return out


class Advisories:
    """A live reader of advisories: iterate (``for ev in events``) or ``next(timeout)``; ``close()`` (or the
    ``with`` block) unsubscribes. At most 65,536 unread events are kept; past that new ones are dropped and a
    SlowConsumerError reaches the client's error callback."""

    def __init__(self, runtime: Runtime, subjects: list[str]) -> None:
        self.subjects = subjects
        self._runtime = runtime
        self._buffer: MessageBuffer[Advisory] = runtime.new_buffer()
        self._subs: list[NatsSubscription] = []
        self._slow = False
        self.dropped = 0

    def _open(self, timeout: float) -> None:
        self._runtime.track(self)
        try:
            for subject in self.subjects:
                self._subs.append(self._runtime.subscribe(subject, "", self._on_message, timeout))
            self._runtime.flush(timeout)  # the server has the interest before the caller acts
        except BaseException:
            self.close()
            raise

    def _on_message(self, subject: bytes, reply: bytes, data: bytes, headers: bytes | None) -> None:
        """IO thread: decode and queue one event."""
        if len(self._buffer) >= _MAX_PENDING:
            self.dropped += 1
            if not self._slow:
                self._slow = True
                self._runtime.report_error(errors.SlowConsumerError("advisories: 65,536 unread events; dropping"))
            return
        self._slow = False
        text = subject.decode()
        try:
            raw: Any = json.loads(data)
        except ValueError:
            log.debug("advisory on %s is not JSON: %r", text, data[:200])
            raw = None
        if not isinstance(raw, dict):
            event: Advisory = UnknownAdvisory(
                type="", id="", timestamp=None, subject=text, stream=None, consumer=None, raw={"payload": repr(data)}
            )
        else:
            event = parse_advisory(text, raw)
        self._buffer.put(event)

    def next(self, timeout: float | timedelta | None = 1.0) -> Advisory:
        """The next event within ``timeout`` seconds (None: until one comes); TimeoutError otherwise."""
        wait = None if timeout is None else check_timeout(timeout, 1.0)
        try:
            return self._buffer.get(wait)
        except BufferFinished:
            raise errors.SubscriptionClosedError("the advisories reader was closed") from None

    def __iter__(self) -> Iterator[Advisory]:
        while True:
            try:
                yield self._buffer.get(None)
            except BufferFinished:
                return

    def close(self) -> None:
        """Unsubscribe; events already received can still be read, then iteration ends."""
        subs, self._subs = self._subs, []
        for sub in subs:
            if not self._runtime.is_closed:
                self._runtime.unsubscribe(sub, self._runtime.default_timeout)
        self._buffer.finish()
        self._runtime.untrack(self)

    def __enter__(self) -> Advisories:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def on_client_closed(self, exc: BaseException) -> None:
        self._buffer.abort(exc)


def open_advisories(
    js: JetStream, *, stream: str | None = None, consumer: str | None = None, kinds: Iterable[str] | None = None
) -> Advisories:
    """See :meth:`JetStream.advisories`."""
    runtime = js.client.runtime
    runtime.check_usable()
    if stream is not None:
        check_name("stream", stream)
    if consumer is not None:
        check_name("consumer", consumer)
    chosen: list[str] | None = None
    if kinds is not None:
        if isinstance(kinds, str):
            raise errors.InvalidTypeError("kinds", "must be a list of kinds; wrap one kind: [kind]")
        chosen = list(kinds)
        unknown = [k for k in chosen if k not in KINDS]
        if unknown or not chosen:
            raise errors.InvalidArgumentError(
                "kinds", f"unknown kind(s) {unknown or chosen!r}; known: {', '.join(sorted(KINDS))}"
            )
    reader = Advisories(runtime, subjects_for(stream, consumer, chosen))
    reader._open(js.timeout)
    return reader
