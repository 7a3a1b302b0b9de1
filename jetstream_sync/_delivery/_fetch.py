"""The one-off pull engines: `FetchPull` (``fetch``, and ``next`` when it cannot use ``_single.py``) and
`AckNextPull` (``msg.ack_next``). One pull request, a [`BatchSource`][jetstream_sync.BatchSource]; built on the common
`PullEngine` (``_pullbase.py``: its own inbox subscription, messages built on the IO thread). IO-thread state is
written only there (docs/ARCHITECTURE.md, "Rules: one writer per piece of state").
"""

from __future__ import annotations

import asyncio
import logging
import time

from .. import errors
from .._protocol import ACK_PREFIX, pull_request, status_of
from .._runtime import BufferFinished, Runtime, io_thread
from ..message import Msg
from ..models.reads import FetchOptions
from . import _giveback
from ._heartbeat import HeartbeatMonitor
from ._limits import read_limit_error, request_limit
from ._pullbase import PullEngine
from ._status import StatusKind, classify, oversized
from ._target import PullTarget, consumer_gone, pull_unanswered

__all__ = ["MIN_REPULL", "AckNextPull", "FetchPull"]

log = logging.getLogger("jetstream_sync")

#: a one-off pull (fetch, next) lost in a disconnect is asked again once reconnected only when at least this
#: much of its time is left
MIN_REPULL = 0.05
#: a pull that met no responders (the consumer's leader being elected) is asked again after this long, doubling
UNANSWERED_RETRY_FIRST = 0.1
UNANSWERED_RETRY_MAX = 1.0


class FetchPull(PullEngine):
    """One pull request: ends when the batch or byte limit is met, a status ends it, or the server goes quiet.

    A disconnect does not end it: the pull is asked again once reconnected, for what is left (on_reconnected).
    """

    BATCHED = True

    def __init__(self, runtime: Runtime, target: PullTarget, options: FetchOptions) -> None:
        super().__init__(runtime, target)
        self.options = options
        self.batch = options.batch
        self.max_bytes = options.max_bytes or 0
        self.received = 0
        self.received_bytes = 0
        self.done = False
        # IO thread only
        self.connected = True
        self._lost = False  # disconnected since the pull went out: asked again once reconnected
        self._expires_at = 0.0  # when the pull expires at the server, by this client's clock (set by start())
        self._unanswered = 0  # pulls in a row that met no responders (a consumer electing its leader)
        self._consumer_exists: bool | None = None  # what the consumer info asked at the first of them said
        self._info_error: errors.JetStreamError | None = None  # why that info could not be asked
        self._silent = False  # asked again after a missed heartbeat, and nothing came since
        self._expiry: asyncio.TimerHandle | None = None  # when that pull expires
        self._repull: asyncio.TimerHandle | None = None
        self.repulls = 0  # pulls asked again within the fetch's time (no responders, a missed heartbeat)
        self.heartbeat = HeartbeatMonitor(runtime, options.heartbeat, self._owes_us, self._on_missed_heartbeat)

    def start(self) -> None:
        """Fire and forget: the caller does not wait for the IO thread; a failure to start ends the batch.

        A pull needs its own subscription: JetStream delivers with the stored subject in the MSG line, so
        only the subscription id can route a message to its fetch.
        """
        self._expires_at = time.monotonic() + self.options.expires  # before the IO thread sees the pull
        self.runtime.track(self)
        self.runtime.post(self._begin)

    @io_thread
    def _begin(self) -> None:
        self.runtime.spawn(self._start())

    @io_thread
    async def _start(self) -> None:
        try:
            await self._subscribe()
        except Exception as exc:
            self._finish(errors.ConnectionClosedError() if self.runtime.is_closed else exc)
            return
        if self.done:  # cancelled while subscribing: no pull goes out
            self._retire()
            return
        self.runtime.add_listener(self)
        self.connected = self.runtime.is_connected  # not: the pull is queued and goes out with the reconnect
        opts = self.options
        self._send_pull(self._request_body(opts.pull_expires, opts.heartbeat))
        self.heartbeat.touch()
        self.heartbeat.start()
        log.debug(
            "fetch %s: pull batch=%d max_bytes=%d expires=%gs", self.label, self.batch, self.max_bytes, opts.expires
        )

    @io_thread
    def _request_body(self, expires: float, heartbeat: float) -> bytes:
        """IO thread: a pull for what is left of the batch and its bytes."""
        opts = self.options
        return pull_request(
            self.batch - self.received,
            expires,
            self.max_bytes - self.received_bytes if self.max_bytes else 0,
            heartbeat,
            opts.no_wait,
            self._priority_fields(opts.pull_priority),
        )

    def _owes_us(self) -> bool:
        """Read by the heartbeat monitor (watchdog and IO thread): the server owes this pull something, which it
        cannot while disconnected."""
        return not self.done and self.connected

    @io_thread
    def _on_messages(self, msgs: list[Msg], size: int) -> None:
        """IO thread: the `DeliverySink`'s batch (``_pullbase.py``): what `_on_message` does for each delivery,
        once for all of them; what arrives past the batch or byte limit is given back, as there."""
        if self.done:
            _giveback.give_back_all_now(self.runtime, msgs, self.target.ack_none)
            return
        self.heartbeat.touch()
        self._silent = False
        self._unanswered = 0
        cut = min(len(msgs), self.batch - self.received)
        if self.max_bytes:
            held = self.received_bytes
            for index in range(cut):
                held += msgs[index].size
                if held >= self.max_bytes:
                    cut = index + 1
                    break
        taken, extra = (msgs, []) if cut == len(msgs) else (msgs[:cut], msgs[cut:])
        self.received += len(taken)
        self.received_bytes += size if not extra else sum(msg.size for msg in taken)
        refused = self.buffer.put_many(taken)  # the client closed meanwhile
        _giveback.give_back_all_now(self.runtime, refused, self.target.ack_none)
        if self.received >= self.batch or (self.max_bytes and self.received_bytes >= self.max_bytes):
            self._finish(None)
        _giveback.give_back_all_now(self.runtime, extra, self.target.ack_none)

    @io_thread
    def _on_message(self, subject: bytes, reply: bytes, data: bytes, headers: bytes | None) -> None:
        if self.done:
            # a second pull's (the one from before a reconnect may live on), past the deadline, or for a batch its
            # reader left: given back now rather than after the consumer's ack wait
            _giveback.give_back_now(self.runtime, reply, self.target.ack_none)
            return
        self.heartbeat.touch()
        self._silent = False
        if reply.startswith(ACK_PREFIX):
            self._unanswered = 0
            msg = self._make_msg(subject, reply, data, headers)
            if headers is not None and self.target.pin is not None:
                self.target.pin.note(headers)
            self.received += 1
            self.received_bytes += msg.size
            if not self.buffer.put(msg):
                _giveback.give_back_now(self.runtime, reply, self.target.ack_none)  # the client closed meanwhile
            if self.received >= self.batch or (self.max_bytes and self.received_bytes >= self.max_bytes):
                self._finish(None)
            return
        status, description = status_of(headers)
        if status is None:
            return
        self.statuses[status] += 1
        kind, exc = classify(status, description)
        log.debug("fetch %s: status %d %s", self.label, status, description)
        if kind is not StatusKind.NO_RESPONDERS:
            self._unanswered = 0
        if kind is StatusKind.HEARTBEAT:
            return
        if kind is StatusKind.QUIET:
            self._finish(None)
        elif kind is StatusKind.RESET:
            # 409 Leadership Change / Server Shutdown: the pull is gone with its leader, the time is not
            self._pull_again(f"the pull ended by {status} {description}")
        elif kind is StatusKind.OVERSIZED:
            # after some messages the normal end of a pull sized by bytes; before any, the next message can never fit
            self._finish(None if self.received else oversized(status, description, self.label, self.max_bytes))
        elif kind is StatusKind.UNPINNED:
            if self.target.pin is not None:
                self.target.pin.id = ""
            self._finish(exc)
        elif kind is StatusKind.NO_RESPONDERS:
            self._on_unanswered()
        elif kind is StatusKind.LIMIT:
            # the consumer refuses every pull of this size: say which limit and which value of the call
            limit = request_limit(description)
            assert limit is not None  # classify() said LIMIT
            self._finish(read_limit_error(status, description, limit, self.label, self.options, "fetch"))
        else:
            self._finish(exc)

    def _time_left(self) -> float:
        return self._expires_at - time.monotonic()

    @io_thread
    def _pull_again(self, why: str) -> None:
        """IO thread: ask again, on the same inbox, for what is left of the batch, its bytes and its time."""
        if self.done:
            return
        left = self._time_left()
        opts = self.options
        if not opts.no_wait and left < MIN_REPULL:
            self._finish(None)  # its time is up: the batch ends as an expired pull does
            return
        self.repulls += 1
        log.debug("fetch %s: %s, pulling again for what is left (%.2fs)", self.label, why, left)
        heartbeat = opts.heartbeat if opts.heartbeat * 2 <= left else 0.0  # the server refuses more
        self._send_pull(self._request_body(0.0 if opts.no_wait else left, heartbeat))
        self.heartbeat.touch()

    @io_thread
    def _on_unanswered(self) -> None:
        """IO thread, 503 to the pull: nobody serves the consumer's pull subject. Between two leaders of a
        replicated consumer that is normal for a few seconds, so the fetch asks again within its time (backing
        off 0.1 s doubling to 1 s) rather than end at once saying the consumer does not exist, as it did: a loop
        that took that at its word (recreate the consumer, or stop) broke on an election. Whether the consumer
        exists is asked once, at the first 503: gone, the fetch ends with ConsumerNotFoundError. A ``no_wait``
        fetch, and one whose time runs out unanswered, end with the error of a pull nobody answered.
        """
        self._unanswered += 1
        if self.options.no_wait:
            self._finish(pull_unanswered(self.label))
            return
        if self._consumer_exists is None and self._unanswered == 1:
            self.runtime.spawn(self._ask_whether_the_consumer_exists())
        delay = min(UNANSWERED_RETRY_FIRST * 2 ** (self._unanswered - 1), UNANSWERED_RETRY_MAX)
        if self._time_left() < delay + MIN_REPULL:
            self._finish(self._unanswered_error())
            return
        if self._repull is None:
            self._repull = self.runtime.call_later(delay, self._pull_again_unanswered)

    @io_thread
    def _pull_again_unanswered(self) -> None:
        self._repull = None
        self._pull_again("no responders")

    def _unanswered_error(self) -> errors.JetStreamError:
        """The error of a fetch whose pulls met no responders until its time ran out.

        Never ConsumerNotFoundError: that comes only from the consumer's info saying so (then at once). A consumer
        whose info said it exists, or whose info could not be asked in the time (the API electing too), is one
        without a leader for now: ClusterUnavailableError, which a loop retries."""
        if self._consumer_exists:
            why = "the consumer exists, but its leader is being elected or its servers are restarting"
        elif self._info_error is not None:
            why = f"whether the consumer exists could not be asked either ({self._info_error})"
        else:
            why = "whether the consumer exists was not answered in that time either"
        return errors.ClusterUnavailableError(
            503,
            10008,
            f"no server answered a pull on {self.label} within the fetch's {self.options.expires:g}s: {why}; "
            "JetStream is electing a leader or restarting (retry), or is not enabled",
        )

    @io_thread
    async def _ask_whether_the_consumer_exists(self) -> None:
        try:
            gone = await consumer_gone(self.runtime, self.target)
        except errors.JetStreamError as exc:  # the API is electing or restarting too: the pulls go on
            log.debug("fetch %s: could not ask whether the consumer exists: %s", self.label, exc)
            self._info_error = exc
            return
        self._consumer_exists = gone is None
        if gone is not None and not self.done:
            log.debug("fetch %s: the consumer does not exist (%s)", self.label, gone)
            self._finish(gone)

    @io_thread
    def _on_missed_heartbeat(self) -> None:
        """IO thread, confirmed by the monitor: the server owes messages and sent nothing for 2x the heartbeat.

        Most often the server that held the pull is gone (the consumer's leader died; a new one is elected in
        seconds), so while the fetch's time allows another two heartbeats the pull is asked again; only then
        does it end with MissedHeartbeatError. A fetch whose pull reached a leader just before it died ended at
        once, with seconds left in which the new leader would have answered."""
        interval = self.heartbeat.interval
        left = self._time_left()
        if left >= interval + MIN_REPULL and not self._silent:
            self._pull_again(f"nothing from the server for {2 * interval:g}s")
            # the new pull may have to go without heartbeats (the server refuses one over half its expiry): if
            # it brings nothing either, the fetch ends with the alarm at its expiry, not as an empty batch
            self._silent = True
            self._expiry = self.runtime.call_later(left, self._at_expiry)
            return
        self._finish(
            errors.MissedHeartbeatError(
                f"fetch: nothing from the server for {2 * interval:g}s (twice the idle heartbeat)"
            )
        )

    @io_thread
    def _at_expiry(self) -> None:
        """IO thread, when a pull asked again after a missed heartbeat should have expired: silent since, the
        server holding it is gone too, and the fetch says so rather than end as an empty batch."""
        self._expiry = None
        interval = self.heartbeat.interval
        if self._silent:
            self._finish(
                errors.MissedHeartbeatError(
                    f"fetch: nothing from the server for {2 * interval:g}s, and nothing after the pull was asked again"
                )
            )
        else:
            self._finish(None)

    @io_thread
    def _finish(self, exc: BaseException | None) -> None:
        """IO thread: readers take what is buffered, then the batch ends (with ``exc`` when given)."""
        if self.done:
            return
        self.done = True
        for timer in (self._repull, self._expiry):
            if timer is not None:
                timer.cancel()
        self._repull = self._expiry = None
        self.heartbeat.stop()
        self.buffer.finish(exc)
        self.runtime.remove_listener(self)
        self._retire()  # the server drops the pull if it is still waiting; what it sent meanwhile is given back
        self.runtime.untrack(self)

    # -- connection events (IO thread) ------------------------------------------------------------------
    @io_thread
    def on_disconnected(self) -> None:
        """The request is most likely gone with the connection. The fetch goes on (its heartbeat clock paused)
        and asks again once reconnected. Ending it here gave a short or empty batch at once, which a fetch
        loop reads as "nothing there": a loop that stops on an empty batch stopped at any blip."""
        self.connected = False
        if not self.done:
            self._lost = True

    @io_thread
    def on_reconnected(self) -> None:
        """Ask again, on the same inbox, for what is left of the batch, its bytes and its time. The pull from
        before the disconnect may still be alive at the server (after a quick reconnect its reply subject has
        interest again), so more than the batch can come: what arrives after the fetch ended is nak'd."""
        self.connected = True
        self.heartbeat.touch()
        if self.done or not self._lost:
            return
        self._lost = False
        if self._repull is not None:
            self._repull.cancel()
        self._pull_again("reconnected")

    # -- BatchSource ------------------------------------------------------------------------------------
    def take(self, timeout: float) -> Msg:
        return self.buffer.get(timeout)

    def cancel(self) -> None:
        """Any thread: the reader is done with the batch (its deadline passed, it raised, it was closed, or it was
        dropped unread): end the pull at the server and give back whatever was received and not handed out.

        Before, a batch left early kept its pull waiting at the server, and the next messages of the consumer
        went to it: with ``max_deliver=2`` a message could be delivered twice to nobody and never to a reader.
        """
        if self.runtime.fork_guard.inherited:
            return  # the parent's batch: the parent owns its pull and its messages
        if self.done and not len(self.buffer):
            return
        sub = self._nats_sub
        try:
            if sub is not None and not self.done:
                self.runtime.send_unsub(sub)  # before whatever the user sends next (a publish to this consumer)
            self.runtime.post(self._abandon)
        except errors.JetStreamError:  # closed, forked or cut off: no pull of this client outlives the connection
            log.debug("fetch %s: could not end the pull of a batch left early", self.label, exc_info=True)

    @io_thread
    def _abandon(self) -> None:
        """IO thread (where nothing more is buffered once the pull is finished)."""
        self._finish(None)
        _giveback.give_back(self.runtime, self.buffer.abort(BufferFinished()), self.label)

    def on_client_closed(self, exc: BaseException) -> None:
        """The closing thread, before the connection closes: what is buffered is given back, behind the UNSUB of a
        pull still waiting (which would otherwise take a redelivery on this closing connection)."""
        if not self.done:
            self._unsubscribe_before_giving_back()
        self.done = True
        self.heartbeat.stop()
        _giveback.give_back(self.runtime, self.buffer.abort(exc), self.label)


class AckNextPull(FetchPull):
    """The deep dive's AckNext: ``+NXT`` on a message's ack subject acks it and asks the server for the next
    message(s) of the same consumer, delivered to this pull's inbox (JSON pull-request body after ``+NXT ``)."""

    #: send ``+NXT <batch>`` (no expiry, the server holds the request) instead of the JSON form
    plain = False

    @io_thread
    def _request_body(self, expires: float, heartbeat: float) -> bytes:
        if self.plain:
            return b"+NXT %d" % (self.batch - self.received)
        return b"+NXT " + super()._request_body(expires, heartbeat)
