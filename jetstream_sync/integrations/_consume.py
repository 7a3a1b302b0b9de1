"""What the consume commands of the integrations share (``flask jetstream consume``, ``manage.py
jetstream_consume``): the acknowledgement rule around the user's handler, and running the consume until SIGTERM
or SIGINT, then draining it.

A worker command is the process: it must hand back the terminal's Ctrl-C and a deployment's SIGTERM as a clean
drain (no more pulls, the buffered messages handled, their acks flushed to the server, exit 0), a second signal
as "stop now", and a consume that ends by itself or a drain that outlasts its timeout as an error the framework
reports in its own way (click's ``ClickException``, Django's ``CommandError``): `CommandFailed`.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from types import FrameType

from .. import errors
from ..jetstream.consumers import ConsumeOptions, Consumer
from ..jetstream.consumers._reads import raised_by_user_code
from ..message import Msg

__all__ = ["CommandFailed", "run_until_signalled", "settling"]

log = logging.getLogger("jetstream_sync.integrations")

#: how often the waiting main thread looks at whether the consume ended by itself
_POLL = 0.25


class CommandFailed(Exception):
    """The command cannot go on; the message is for the person who ran it."""


def settling(
    handler: Callable[[Msg], object],
    *,
    nak_delay: float | None = None,
    around: Callable[[], AbstractContextManager[object]] | None = None,
    reraise: bool = False,
) -> Callable[[Msg], None]:
    """``handler`` with the commands' acknowledgement rule: a message it leaves unsettled is acked when it
    returns and nak'ed (redelivered, after ``nak_delay`` seconds when given) when it raises an Exception; one it
    acked, nak'ed or termed itself gets nothing more. The exception is then logged with its traceback, or, with
    ``reraise``, passed on to the consume's error handler. ``around`` (e.g. Flask's ``app.app_context``) is
    entered for each call."""

    def handle(msg: Msg) -> None:
        try:
            with around() if around is not None else contextlib.nullcontext():
                handler(msg)
        except Exception:
            if not msg.is_acked:
                msg.nak(nak_delay)
            if reraise:
                raise
            log.exception("handler failed on %s (delivery %d); nak", msg.subject, _delivery(msg))
            return
        if not msg.is_acked:
            msg.ack()

    return handle


def _delivery(msg: Msg) -> int:
    try:
        return msg.metadata.num_delivered
    except errors.InvalidAckSubjectError:
        return 0


@contextlib.contextmanager
def _signals_to(on_signal: Callable[[int], None]) -> Iterator[None]:
    """SIGTERM and SIGINT call ``on_signal`` (on the main thread) while the block runs; restored after."""

    def handle(signum: int, _frame: FrameType | None) -> None:
        on_signal(signum)

    previous = {sig: signal.signal(sig, handle) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def run_until_signalled(
    consumer: Consumer,
    handler: Callable[[Msg], object],
    *,
    workers: int,
    max_messages: int | None,
    drain_timeout: float,
    say: Callable[[str], None],
    error_handler: Callable[[BaseException], None] | None = None,
) -> int:
    """Run ``consumer.consume(handler, workers=)`` until SIGTERM or SIGINT, then drain it within
    ``drain_timeout`` seconds (a second signal stops at once) and flush the acks; returns how many messages were
    delivered. ``say`` tells the person running the command what happens. CommandFailed when the consume ends
    by itself, cannot start, or does not drain in time (what is left is redelivered later)."""
    label = f"{consumer.stream_name}/{consumer.name}"
    client = consumer.jetstream.client
    options = ConsumeOptions() if max_messages is None else ConsumeOptions(max_messages=max_messages)
    if error_handler is None:
        error_handler = lambda exc: log.warning(  # noqa: E731
            "consume %s: %s", label, exc, exc_info=raised_by_user_code(exc)
        )
    signals: list[int] = []
    signalled = threading.Event()

    def on_signal(signum: int) -> None:
        signals.append(signum)
        signalled.set()

    with _signals_to(on_signal):
        try:
            context = consumer.consume(handler, options=options, error_handler=error_handler, workers=workers)
        except errors.JetStreamError as exc:
            raise CommandFailed(f"cannot consume {label}: {exc}") from exc
        say(f"consuming {label} with {workers} worker(s); SIGTERM or Ctrl-C drains and stops")
        while not signalled.wait(_POLL):
            if context.closed.is_set():
                raise CommandFailed(f"the consume of {label} ended: {context.error!r}")
        log.info("consume %s: signal %d, draining", label, signals[0])
        say(f"draining {label}: handling the messages already received, pulling no more")
        context.drain()
        deadline = time.monotonic() + drain_timeout
        while not context.closed.wait(0.1):  # short slices: a second signal stops at once
            if len(signals) > 1:
                log.warning("consume %s: second signal, stopping without draining the rest", label)
                context.stop()
                context.closed.wait(drain_timeout)
                break
            if time.monotonic() > deadline:
                context.stop()
                client.flush(timeout=drain_timeout)  # what was acked so far
                client.close(timeout=1.0)  # a handler still running is left behind; the process is leaving
                raise CommandFailed(f"{label} not drained within {drain_timeout:g} s; the rest will be redelivered")
        if context.error is not None:  # the handler raised SystemExit or KeyboardInterrupt while draining
            raise CommandFailed(f"the consume of {label} ended: {context.error!r}")
    client.flush(timeout=drain_timeout)  # the acks reach the server before the process exits
    delivered = context.stats().messages_delivered
    say(f"drained {label} and stopped after {delivered} message(s)")
    return delivered
