"""``js.advisories()``: the server's JetStream advisories and metrics as typed events, read like a subscription.

nats-server publishes them into the account, only when someone listens, on (``server/jetstream_api.go``)::

    $JS.EVENT.METRIC.CONSUMER.ACK.<stream>.<consumer>            consumer_ack
    $JS.EVENT.ADVISORY.CONSUMER.<KIND>.<stream>.<consumer>       max_deliver, terminated, nak, consumer_action,
                                                                 consumer_leader_elected, consumer_pause, ...
    $JS.EVENT.ADVISORY.STREAM.<KIND>.<stream>                    stream_action, stream_leader_elected, ...
    $JS.EVENT.ADVISORY.API                                       api_audit (and a few server-wide ones)

How the arguments narrow that (see `subjects_for`):

- nothing: both trees whole, ``$JS.EVENT.ADVISORY.>`` and ``$JS.EVENT.METRIC.>``, kinds this client does not
  model included (as [`UnknownAdvisory`][jetstream_sync.models.UnknownAdvisory]).
- ``stream``: the stream token of every stream and consumer event; account-wide events (the API audit) are left
  out, since their subject names no stream.
- ``consumer``: consumer events only. A stream event's subject has no consumer token, and an event about the
  stream is not an event about one of its consumers, so stream events are left out (read them with a second
  reader without ``consumer``).
- ``kinds``: only those kinds' subjects. A kind that the given ``stream`` / ``consumer`` cannot narrow
  (``stream_action`` with a consumer, ``api_audit`` with either) is refused with InvalidArgumentError rather
  than silently never arriving.

The subjects do not depend on the context's ``domain`` or ``api_prefix``: the server publishes events on
``$JS.EVENT`` in the account of the stream (the payload's ``domain`` field says which domain sent it). Seeing
another domain's or account's events takes an import of those subjects, which is server configuration.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Iterator
from datetime import timedelta
from types import TracebackType
from typing import TYPE_CHECKING, Literal, NamedTuple

from .. import errors
from .._runtime import BufferFinished, MessageBuffer, NatsSubscription, Runtime, io_thread
from .._validate import check_name, check_timeout
from ..models.advisory import Advisory, AdvisoryKind, parse_advisory

if TYPE_CHECKING:
    from .context import JetStream

__all__ = ["DEFAULT_MAX_PENDING", "KIND_SUBJECTS", "Advisories", "open_advisories", "subjects_for"]

log = logging.getLogger("jetstream_sync")

#: unread events kept per reader; past it new ones are dropped (and a SlowConsumerError reported)
DEFAULT_MAX_PENDING = 65_536

Scope = Literal["consumer", "stream", "account"]


class _Route(NamedTuple):
    subject: str  # the subject, or the prefix to which ".<stream>[.<consumer>]" is added
    scope: Scope  # which name tokens follow the prefix


#: where each kind is published (nats-server's JSMetric*/JSAdvisory* constants)
KIND_SUBJECTS: dict[AdvisoryKind, _Route] = {
    AdvisoryKind.CONSUMER_ACK: _Route("$JS.EVENT.METRIC.CONSUMER.ACK", "consumer"),
    AdvisoryKind.MAX_DELIVER: _Route("$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES", "consumer"),
    AdvisoryKind.TERMINATED: _Route("$JS.EVENT.ADVISORY.CONSUMER.MSG_TERMINATED", "consumer"),
    AdvisoryKind.NAK: _Route("$JS.EVENT.ADVISORY.CONSUMER.MSG_NAKED", "consumer"),
    # created, deleted and updated are sibling subjects with one payload type: one subscription each
    AdvisoryKind.STREAM_ACTION: _Route("$JS.EVENT.ADVISORY.STREAM.{CREATED,DELETED,UPDATED}", "stream"),
    AdvisoryKind.CONSUMER_ACTION: _Route("$JS.EVENT.ADVISORY.CONSUMER.{CREATED,DELETED}", "consumer"),
    AdvisoryKind.STREAM_LEADER_ELECTED: _Route("$JS.EVENT.ADVISORY.STREAM.LEADER_ELECTED", "stream"),
    AdvisoryKind.CONSUMER_LEADER_ELECTED: _Route("$JS.EVENT.ADVISORY.CONSUMER.LEADER_ELECTED", "consumer"),
    AdvisoryKind.CONSUMER_PAUSE: _Route("$JS.EVENT.ADVISORY.CONSUMER.PAUSE", "consumer"),
    AdvisoryKind.API_AUDIT: _Route("$JS.EVENT.ADVISORY.API", "account"),
}


def _expand(prefix: str) -> list[str]:
    """``A.{X,Y}`` -> ``[A.X, A.Y]``: a kind published on sibling subjects is one subscription per subject, so
    no other kind that shares the parent (STREAM.LEADER_ELECTED beside STREAM.CREATED) slips in."""
    head, brace, rest = prefix.partition("{")
    if not brace:
        return [prefix]
    return [head + token for token in rest.rstrip("}").split(",")]


def subjects_for(stream: str | None, consumer: str | None, kinds: Iterable[AdvisoryKind] | None) -> list[str]:
    """The subjects a reader subscribes to (arguments already validated; the module docstring has the rules).
    They never overlap, so no event arrives twice."""
    s, c = stream or "*", consumer or "*"
    if kinds is None:
        if stream is None and consumer is None:
            return ["$JS.EVENT.ADVISORY.>", "$JS.EVENT.METRIC.>"]
        out = [f"$JS.EVENT.ADVISORY.CONSUMER.*.{s}.{c}", f"$JS.EVENT.METRIC.CONSUMER.*.{s}.{c}"]
        if consumer is None:
            out.insert(0, f"$JS.EVENT.ADVISORY.STREAM.*.{s}")
        return out
    out = []
    for kind in kinds:
        route = KIND_SUBJECTS[kind]
        for prefix in _expand(route.subject):
            if route.scope == "consumer":
                subject = f"{prefix}.{s}.{c}"
            elif route.scope == "stream":
                subject = f"{prefix}.{s}"
            else:
                subject = prefix
            if subject not in out:
                out.append(subject)
    return out


def _check_kinds(kinds: object, stream: str | None, consumer: str | None) -> list[AdvisoryKind] | None:
    """The kinds as enum members, or InvalidArgumentError / InvalidTypeError before anything is sent."""
    if kinds is None:
        return None
    known = ", ".join(kind.value for kind in AdvisoryKind)
    if isinstance(kinds, (str, AdvisoryKind)) or not isinstance(kinds, Iterable):
        raise errors.InvalidTypeError("kinds", f"must be a list of kinds, got {type(kinds).__name__}; wrap one: [kind]")
    chosen: list[AdvisoryKind] = []
    for item in kinds:
        if isinstance(item, AdvisoryKind):
            kind = item
        else:
            try:
                kind = AdvisoryKind(item)
            except ValueError:
                raise errors.InvalidArgumentError("kinds", f"unknown kind {item!r}; known kinds: {known}") from None
        if kind not in chosen:
            chosen.append(kind)
    if not chosen:
        raise errors.InvalidArgumentError("kinds", f"is empty; pass None for every kind or some of: {known}")
    if consumer is not None:
        unfit = [k.value for k in chosen if KIND_SUBJECTS[k].scope != "consumer"]
        if unfit:
            raise errors.InvalidArgumentError(
                "kinds",
                f"{', '.join(unfit)} events name no consumer in their subject, so consumer={consumer!r} cannot "
                "narrow them; read them with a reader without consumer=",
            )
    if stream is not None:
        unfit = [k.value for k in chosen if KIND_SUBJECTS[k].scope == "account"]
        if unfit:
            raise errors.InvalidArgumentError(
                "kinds",
                f"{', '.join(unfit)} events name no stream in their subject, so stream={stream!r} cannot narrow "
                "them; read them with a reader without stream=",
            )
    return chosen


class Advisories:
    """A live reader of JetStream events: iterate (``for ev in events``) or call ``next(timeout)``; ``close()``
    (or leaving the ``with`` block) unsubscribes, after which what was already received can still be read.

    The IO thread only queues the raw message (one shared buffer for all of the reader's subscriptions); the
    JSON is decoded on the reading thread, so a burst of ack metrics costs the connection nothing. At most
    ``DEFAULT_MAX_PENDING`` unread events are kept: past that new ones are dropped (counted in ``dropped``)
    and a SlowConsumerError reaches the client's error callback once per episode.
    """

    def __init__(self, runtime: Runtime, subjects: list[str], max_pending: int = DEFAULT_MAX_PENDING) -> None:
        self.subjects: tuple[str, ...] = tuple(subjects)
        self.dropped = 0
        self._runtime = runtime
        self._max_pending = max_pending
        self._buffer: MessageBuffer[tuple[bytes, bytes]] = runtime.new_buffer()
        self._subs: list[NatsSubscription] = []
        self._close_lock = threading.Lock()
        # Set by close() on a user thread, read by _on_message on the IO thread: only ever set, never cleared.
        self._closed = False
        self._slow = False  # IO thread only

    def __repr__(self) -> str:
        return f"Advisories(subjects={list(self.subjects)!r}, pending={len(self._buffer)})"

    def _open(self, timeout: float) -> None:
        """Subscribe to every subject, then flush: once this returns the server knows of the interest, so an
        event caused right after (by this client or any other) is published to us."""
        self._runtime.track(self)
        try:
            for subject in self.subjects:
                self._subs.append(self._runtime.subscribe(subject, "", self._on_message, timeout))
            self._runtime.flush(timeout)
        except BaseException:
            self.close()
            raise

    # -- IO thread --------------------------------------------------------------------------------------
    @io_thread
    def _on_message(self, subject: bytes, reply: bytes, data: bytes, headers: bytes | None) -> None:
        if self._closed:
            return  # an event still in flight when close() unsubscribed
        if len(self._buffer) >= self._max_pending:
            self.dropped += 1
            if not self._slow:
                self._slow = True
                self._runtime.report_error(
                    errors.SlowConsumerError(
                        f"advisories on {', '.join(self.subjects)} hold {self._max_pending} unread events; "
                        "dropping new ones until they are read"
                    )
                )
            return
        self._slow = False
        self._buffer.put((subject, data))

    # -- user threads -----------------------------------------------------------------------------------
    @property
    def pending(self) -> int:
        """Events received and not yet read."""
        return len(self._buffer)

    @property
    def is_active(self) -> bool:
        """False once closed (events already received may still be waiting)."""
        return not self._buffer.ended

    def next(self, timeout: float | timedelta | None = 1.0) -> Advisory:
        """The next event within ``timeout`` seconds (None: until one comes). Raises TimeoutError when none
        came, SubscriptionClosedError once closed and read to the end, ConnectionClosedError when the client
        closed."""
        self._runtime.fork_guard.check()
        wait = None if timeout is None else check_timeout(timeout, 1.0)
        try:
            subject, data = self._buffer.get(wait)
        except BufferFinished:
            raise errors.SubscriptionClosedError("the advisories reader was closed and holds no more events") from None
        return parse_advisory(subject.decode("utf-8", "replace"), data)

    def __iter__(self) -> Iterator[Advisory]:
        """Events as they come; ends after close(), raises ConnectionClosedError when the client closes."""
        self._runtime.fork_guard.check()
        while True:
            try:
                subject, data = self._buffer.get(None)
            except BufferFinished:
                return
            yield parse_advisory(subject.decode("utf-8", "replace"), data)

    def close(self, timeout: float | timedelta | None = None) -> None:
        """Unsubscribe (idempotent, any thread). Never raises over a failed unsubscribe: the subscription is
        already dead for this reader, and the server forgets it with the connection."""
        self._runtime.fork_guard.check()
        with self._close_lock:
            self._closed = True
            subs, self._subs = self._subs, []
        runtime = self._runtime
        wait = check_timeout(timeout, runtime.default_timeout)
        try:
            for sub in subs:
                if runtime.is_closed:
                    break
                try:
                    runtime.unsubscribe(sub, wait)
                except errors.JetStreamError as exc:
                    log.debug("advisories: unsubscribe failed (%s); the server drops it with the connection", exc)
        finally:
            self._buffer.finish()
            runtime.untrack(self)

    def __enter__(self) -> Advisories:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def on_client_closed(self, exc: BaseException) -> None:
        """The client closed: readers wake with ``exc`` (ConnectionClosedError) at once."""
        if not self._buffer.ended:
            self._buffer.abort(exc)


def open_advisories(
    js: JetStream,
    *,
    stream: str | None = None,
    consumer: str | None = None,
    kinds: Iterable[AdvisoryKind | str] | None = None,
) -> Advisories:
    """Validate the arguments, then subscribe (see [`JetStream.advisories`][jetstream_sync.JetStream.advisories] and the
    module docstring)."""
    runtime = js.runtime
    if stream is not None:
        check_name("stream", stream)
    if consumer is not None:
        check_name("consumer", consumer)
    chosen = _check_kinds(kinds, stream, consumer)
    runtime.check_usable()
    reader = Advisories(runtime, subjects_for(stream, consumer, chosen))
    reader._open(js.timeout)
    return reader
