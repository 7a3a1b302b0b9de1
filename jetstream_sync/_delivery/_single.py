"""ADR-13's Pull(1) for ``next()``: one reusable inbox subscription per consumer handle, one hand-off per call.

A ``next()`` through `FetchPull` pays a subscription, an IO-thread wake-up to start the pull, a buffer
and an unsubscription for one message: 0.45 ms of client CPU against nats-py's 0.14 ms (benchmarks/run.py).
Here the subscription (on ``<inbox>.*``) lives as long as the handle keeps calling ``next()``, and each call

1. writes its pull request on the calling thread through the socket gate (``Runtime.send_waiting``: the
   direct write of a synchronous request, see docs/ARCHITECTURE.md, "The life of a request"), with
   ``<inbox>.<n>`` as the reply subject, and
2. sleeps on a pre-acquired lock that the IO thread releases when the message (or the status ending the pull)
   arrives: one thread wake-up per call, as for a ``kv.get``.

Routing: JetStream delivers a pulled message with its stored subject in the MSG line, so a message is the
current call's whatever its subject (only one call at a time uses the subscription); statuses (404/408
expired, 409, heartbeats) come on the pull's own reply subject, so one meant for an earlier call is
recognised by its token and ignored. A message that arrives when no call waits for it (its call gave up
at the same moment) is given back to the server with a nak rather than left to its ack wait. One that arrives
for a call that gave up while the next call waits goes to that next call (a valid, unacknowledged message of
the same consumer); the next call's own pull then stays open on the server until it expires, and what it
brings with no call waiting is nak'd as above. A call left by an exception (Ctrl-C during the wait) drops the
subscription, so the server forgets its pull rather than hand it the consumer's next message.

A disconnect does not end a call: its pull is most likely gone with the connection, so once reconnected the
IO thread sends it again (a new token, for what is left of the call's time) and the call waits out its time
as if nothing happened. A call whose time runs out while disconnected raises TimeoutError then, saying so.
Ending the call at the disconnect raised a TimeoutError at once that claimed nothing came within the whole
time, and a loop reading "TimeoutError means drained" stopped at any blip. The pull from before the
disconnect may still be alive at the server (it keeps a request whose reply subject has interest again after
a quick reconnect), so a second message can come: it goes to the next call or is nak'd, as above.

Only plain ``next()`` calls come here: with a priority group, or while another thread's ``next()`` on the same
handle is running, the call goes through `FetchPull` as before. The subscription is dropped after
``IDLE_UNSUBSCRIBE`` seconds without a call, so handles that are dropped leave nothing behind for long.
"""

from __future__ import annotations

import logging
import threading
import time

from .. import errors
from .._protocol import ACK_PREFIX, encode_pub, pull_request, status_of
from .._runtime import NatsSubscription, Runtime, io_thread, warn_if_in_event_loop
from ..message import Msg
from ..models.reads import FetchOptions
from . import _giveback
from ._acks import ConsumerAcks
from ._fetch import MIN_REPULL, UNANSWERED_RETRY_FIRST, UNANSWERED_RETRY_MAX
from ._limits import read_limit_error, request_limit
from ._status import StatusKind, classify
from ._target import PullTarget, consumer_gone, pull_unanswered, pulled_message, read_timed_out

__all__ = ["SinglePull"]

log = logging.getLogger("jetstream_sync")

#: seconds without a next() after which the subscription is dropped (the next call subscribes again)
IDLE_UNSUBSCRIBE = 30.0


class _Call:
    """One next(): its reply token, and the one-shot hand-off from the IO thread.

    ``token``, ``lost``, ``interrupted`` and ``activity`` change on the IO thread under ``_handoff`` (a pull
    asked again after a reconnect); the calling thread reads them under it.
    """

    __slots__ = (
        "activity",
        "done",
        "error",
        "expires_at",
        "interrupted",
        "lock",
        "lost",
        "msg",
        "options",
        "token",
        "unanswered",
    )

    def __init__(self, token: bytes, options: FetchOptions, expires_at: float) -> None:
        self.token = token
        self.options = options
        self.expires_at = expires_at  # when the pull expires at the server (the client waits a grace longer)
        self.msg: Msg | None = None
        self.error: BaseException | None = None
        self.done = False
        self.lost = False  # disconnected since the pull went out: it is asked again once reconnected
        self.interrupted = False  # disconnected at some point of the call
        self.activity = time.monotonic()  # last time anything of this pull arrived (heartbeats)
        self.unanswered = 0  # its pulls in a row that met no responders (the consumer electing its leader)
        self.lock = threading.Lock()
        self.lock.acquire()


class SinglePull:
    """The reusable Pull(1) of one consumer handle. ``next`` runs on the calling thread; the rest on the IO
    thread, but for ``_handoff``, the mutex that settles a message arriving as its call gives up."""

    def __init__(self, runtime: Runtime, target: PullTarget) -> None:
        self.runtime = runtime
        self.acks = ConsumerAcks(runtime)  # what the messages ack through (and ack_next pulls with)
        self.target = target
        self.busy = threading.Lock()  # one call at a time; a concurrent one goes through FetchPull
        self._handoff = threading.Lock()
        self._current: _Call | None = None
        self._sub: NatsSubscription | None = None
        self._prefix = b""
        self._counter = 0
        self._last_used = 0.0
        self._watching = False
        runtime.track(self)  # held weakly: told when the client closes

    @property
    def label(self) -> str:
        return self.target.label

    # -- the calling thread -------------------------------------------------------------------------------
    def next(self, options: FetchOptions) -> Msg:
        """Calling thread: one message, or TimeoutError when none came within the time (across reconnects: a
        disconnect does not end the call, see the module's docstring). Hold `busy` to call."""
        runtime = self.runtime
        if self._sub is None:
            self._subscribe()
        self._counter += 1
        started = time.monotonic()
        call = _Call(b"%x" % self._counter, options, started + options.expires)
        call.interrupted = not runtime.is_connected  # its pull waits in the queue for the reconnect
        body = pull_request(1, options.pull_expires, 0, options.heartbeat, options.no_wait)
        with self._handoff:
            self._current = call
        self._last_used = started
        wait = runtime.default_timeout if options.no_wait else options.expires + options.grace
        deadline = started + wait
        try:
            runtime.send_waiting(encode_pub(self.target.next_subject, self._prefix + call.token, None, body), wait)
            self._wait(call, deadline, options.heartbeat)
        except BaseException:
            self._abandon(call)  # Ctrl-C (or any exception) in the wait: its pull must not outlive it
            raise
        finally:
            with self._handoff:
                if self._current is call:
                    self._current = None
            self._last_used = time.monotonic()
        if call.msg is not None:
            return call.msg
        if call.error is not None:
            raise call.error
        raise read_timed_out(self.label, options.expires, call.interrupted, runtime.is_connected)

    def _wait(self, call: _Call, deadline: float, heartbeat: float) -> None:
        """Until the IO thread settles the call or the deadline passes. With heartbeats asked for, twice the
        heartbeat without a word from the server means the server holding the pull is most likely gone (the
        consumer's leader died): while the call's time allows two more heartbeats the pull is asked again (a new
        leader answers within seconds), then the call ends with MissedHeartbeatError."""
        warn_if_in_event_loop("next()")
        while True:
            left = deadline - time.monotonic()
            slice_ = min(left, 2 * heartbeat) if heartbeat else left
            if slice_ > 0 and call.lock.acquire(timeout=slice_):
                return
            with self._handoff:
                if call.done:  # settled while we stopped waiting: take it
                    return
                now = time.monotonic()
                if now >= deadline:
                    call.done = True
                    return
                if heartbeat and not call.lost and now - call.activity >= 2 * heartbeat:
                    if call.expires_at - now >= 2 * heartbeat + MIN_REPULL:
                        call.activity = now  # the new pull's silence is counted from now
                        self.runtime.post_if_open(lambda: self._pull_again(call, "a missed heartbeat"))
                        continue
                    call.done = True
                    call.error = errors.MissedHeartbeatError(
                        f"next: nothing from the server for {2 * heartbeat:g}s (twice the idle heartbeat)"
                    )
                    return

    def _abandon(self, call: _Call) -> None:
        """Calling thread, as an exception (Ctrl-C) leaves ``next()``: the call's pull may still wait at the server,
        which would give the consumer's next message to it. The subscription is dropped (the server forgets a
        pull whose reply subject has no interest) and what it still brings is given back; the next call
        subscribes anew. A message that settled the call as it was left is given back too."""
        with self._handoff:
            call.done = True
            msg, call.msg = call.msg, None
        if msg is not None:
            _giveback.give_back(self.runtime, [msg], self.label)
        sub, self._sub = self._sub, None
        if sub is None:
            return
        try:
            self.runtime.send_unsub(sub)  # before whatever the user sends next
            self.runtime.post(lambda: self._drop(sub))
        except errors.JetStreamError:  # closed, forked or cut off: no pull of this client outlives the connection
            log.debug("next %s: the left call's subscription could not be ended", self.label, exc_info=True)

    def _subscribe(self) -> None:
        """The first call (or the first after an idle drop): subscribe on the IO thread, where a drop posted
        earlier has run before, so the listener is added after that drop removed it."""
        inbox = self.runtime.new_inbox()
        self._prefix = (inbox + ".").encode()
        self._sub = self.runtime.call(self._subscribe_async(inbox + ".*"), self.runtime.default_timeout, "next")
        if not self._watching:
            self._watching = True
            self.runtime.watch(self._check_idle)

    @io_thread
    async def _subscribe_async(self, subject: str) -> NatsSubscription:
        sub = await self.runtime.subscribe_async(subject, self._on_message)
        self.runtime.add_listener(self)
        return sub

    # -- the watchdog (the shared watch tick) -------------------------------------------------------------
    def _check_idle(self, now: float) -> None:
        if self._sub is not None and now - self._last_used > IDLE_UNSUBSCRIBE and self.busy.acquire(blocking=False):
            try:
                sub, self._sub = self._sub, None
                self._watching = False
                self.runtime.unwatch(self._check_idle)
                if sub is not None:
                    self.runtime.post_if_open(lambda: self._drop(sub))
            finally:
                self.busy.release()

    # -- the IO thread ----------------------------------------------------------------------------------
    @io_thread
    def _drop(self, sub: NatsSubscription) -> None:
        self.runtime.remove_listener(self)
        self.runtime.unsubscribe_soon(sub, self.label, _giveback.late_giver(self.runtime, self.target.ack_none))

    @io_thread
    def _on_message(self, subject: bytes, reply: bytes, data: bytes, headers: bytes | None) -> None:
        if reply.startswith(ACK_PREFIX):
            self._on_delivery(subject, reply, data, headers)
            return
        status, description = status_of(headers)
        if status is None:
            return
        with self._handoff:
            call = self._current
            if call is None or call.done or subject[len(self._prefix) :] != call.token:
                return  # an earlier call's status
            call.activity = time.monotonic()
            kind, exc = classify(status, description)
            if kind is StatusKind.HEARTBEAT:
                return
            log.debug("next %s: status %d %s", self.label, status, description)
            if kind is StatusKind.NO_RESPONDERS:
                if self._unanswered_again(call):
                    return
                exc = self._unanswered_error(call)
            elif kind is StatusKind.LIMIT:  # its timeout is above the consumer's max_expires: name both
                limit = request_limit(description)
                assert limit is not None  # classify() said LIMIT
                exc = read_limit_error(status, description, limit, self.label, call.options, "next")
            elif kind is StatusKind.RESET and call.expires_at - time.monotonic() >= MIN_REPULL:
                # 409 Leadership Change / Server Shutdown: the pull is gone with its leader, the call's time is not
                self.runtime.call_later(0.0, lambda: self._pull_again(call, f"{status} {description}"))
                return
            elif kind is StatusKind.QUIET or kind is StatusKind.RESET:
                exc = None
            self._settle(call, None, exc)

    @io_thread
    def _unanswered_again(self, call: _Call) -> bool:
        """IO thread, ``_handoff`` held, the call's pull met no responders: nobody serves the consumer's pull
        subject, as for a few seconds while a replicated consumer elects a leader. True when the pull is asked
        again within the call's time (after 0.1 s doubling to 1 s; a ``no_wait`` call and one whose time is
        up end with the error instead). Whether the consumer exists is asked at the first 503: gone, the call
        ends with ConsumerNotFoundError. As ``FetchPull._on_unanswered``."""
        options = call.options
        call.unanswered += 1
        delay = min(UNANSWERED_RETRY_FIRST * 2 ** (call.unanswered - 1), UNANSWERED_RETRY_MAX)
        if options.no_wait or call.expires_at - time.monotonic() < delay + MIN_REPULL:
            return False
        if call.unanswered == 1:
            self.runtime.spawn(self._end_if_gone(call))
        self.runtime.call_later(delay, lambda: self._pull_again(call, "no responders"))
        return True

    def _unanswered_error(self, call: _Call) -> errors.JetStreamError:
        """The error of a call whose pulls met no responders until its time ran out: a ``no_wait`` call's is the
        plain no-responders one; otherwise never ConsumerNotFoundError, which only the consumer's info says (then
        at once), but ClusterUnavailableError: no leader for now, retry."""
        if call.options.no_wait:
            return pull_unanswered(self.label)
        return errors.ClusterUnavailableError(
            503,
            10008,
            f"no server answered a pull on {self.label} within next()'s {call.options.expires:g}s: JetStream is "
            "electing the consumer's leader or restarting (retry), or is not enabled",
        )

    @io_thread
    async def _end_if_gone(self, call: _Call) -> None:
        try:
            gone = await consumer_gone(self.runtime, self.target)
        except errors.JetStreamError as exc:  # the API is electing or restarting too: the pulls go on
            log.debug("next %s: could not ask whether the consumer exists: %s", self.label, exc)
            return
        if gone is not None:
            with self._handoff:
                if not call.done:
                    self._settle(call, None, gone)

    @io_thread
    def _pull_again(self, call: _Call, why: str) -> None:
        """IO thread: the call's pull once more, under a new token, for what is left of its time."""
        with self._handoff:
            if call.done or self._current is not call:
                return
            options = call.options
            left = call.expires_at - time.monotonic()
            if left < MIN_REPULL:
                return  # its time is up: the calling thread raises at its deadline
            call.token += b"u"  # unique: tokens of calls are hex numbers
            call.activity = time.monotonic()
            heartbeat = options.heartbeat if options.heartbeat * 2 <= left else 0.0
            body = pull_request(1, left, 0, heartbeat, False)
        log.debug("next %s: %s, pulling again for the %.2fs left", self.label, why, left)
        self.runtime.send_now(encode_pub(self.target.next_subject, self._prefix + call.token, None, body))

    @io_thread
    def _on_delivery(self, subject: bytes, reply: bytes, data: bytes, headers: bytes | None) -> None:
        msg = pulled_message(self.acks, self.target, subject, reply, data, headers)
        with self._handoff:
            call = self._current
            if call is not None and not call.done:
                self._settle(call, msg, None)
                return
        # its call gave up as it arrived: give it back now rather than after the consumer's ack wait
        log.debug("next %s: a message arrived after its call ended; nak", self.label)
        _giveback.give_back_now(self.runtime, reply, self.target.ack_none)

    @staticmethod
    def _settle(call: _Call, msg: Msg | None, error: BaseException | None) -> None:
        """``_handoff`` held: hand the call its outcome and wake it."""
        call.msg, call.error, call.done = msg, error, True
        call.lock.release()

    # -- connection events (IO thread) ----------------------------------------------------------------------
    @io_thread
    def on_disconnected(self) -> None:
        """The pull request is most likely gone with the connection: the call waits on (its heartbeat clock
        paused) and the pull is asked again once reconnected."""
        with self._handoff:
            call = self._current
            if call is not None and not call.done:
                call.lost = call.interrupted = True

    @io_thread
    def on_reconnected(self) -> None:
        """Ask again for the call that lost its pull, under a new token (a late status of the old pull is then
        ignored), expiring when the call's own pull would have. A call that started while disconnected is not
        lost: its pull was queued and goes out with the reconnect."""
        with self._handoff:
            call = self._current
            if call is None or call.done or not call.lost:
                return
            call.lost = False
            options = call.options
            left = call.expires_at - time.monotonic()
            if not options.no_wait and left < MIN_REPULL:
                return  # its time is up: the calling thread raises TimeoutError at its deadline
            call.token += b"r"  # unique: tokens of calls are hex numbers
            call.activity = time.monotonic()
            heartbeat = options.heartbeat if options.heartbeat * 2 <= left else 0.0
            body = pull_request(1, 0.0 if options.no_wait else left, 0, heartbeat, options.no_wait)
        log.debug("next %s: reconnected, pulling again for the %.2fs left", self.label, left)
        self.runtime.send_now(encode_pub(self.target.next_subject, self._prefix + call.token, None, body))

    def on_client_closed(self, exc: BaseException) -> None:
        with self._handoff:
            call = self._current
            if call is not None and not call.done:
                self._settle(call, None, exc)
