"""FrameRule: an armed ``FaultProxy.drop_next()`` or ``watch()``, which frames it matches and what it has done.

Apart from the proxy's sockets (``_proxy.py``) and the parser (``_frames.py``): a rule is the state a test and the
connections' threads share, so its locking is in one place. It knows its proxy only as something that disarms it
(`_RuleOwner`), so this module does not import ``_proxy.py``.
"""

from __future__ import annotations

import logging
import threading
from types import TracebackType
from typing import Protocol

from ..errors import InvalidArgumentError, InvalidTypeError
from ._frames import Frame, FramePredicate, _check_pattern, _subject_matches

__all__ = ["FrameRule"]

logger = logging.getLogger("jetstream_sync.testing")


class _RuleOwner(Protocol):
    """What a rule needs of its proxy: to be taken off the proxy's armed rules once it is done or cancelled."""

    def _disarm(self, rule: FrameRule) -> None: ...


class FrameRule:
    """An armed drop_next() or watch(): which frames it matches, and what it has done so far.

    Thread-safe: the connections' threads record into it, a test reads it and waits on it. A drop rule disarms
    itself once it has dropped its ``count``; cancel() (or leaving a ``with`` block) disarms either kind at once,
    after which its direction is forwarded unparsed again if no other rule is armed for it.
    """

    def __init__(
        self,
        proxy: _RuleOwner,
        directions: frozenset[str],
        match: str | FramePredicate | None,
        reply: str | None = None,
        *,
        drop: bool,
        count: int | None,
        skip: int,
    ) -> None:
        self._proxy = proxy
        #: the directions the rule applies to
        self.directions = directions
        #: True for drop_next(), False for watch()
        self.drops = drop
        self._limit = count
        self._skip = skip
        self._tokens: tuple[str, ...] | None = None
        self._predicate: FramePredicate | None = None
        self._reply: tuple[str, ...] | None = None
        if isinstance(match, str):
            self._tokens = _check_pattern("match", match)
            what = match
        elif callable(match):
            self._predicate = match
            what = getattr(match, "__name__", "predicate")
        elif match is None:
            if reply is None:
                raise InvalidArgumentError("match", "give a subject, a predicate or reply=, or any of them")
            what = "any"
        else:
            raise InvalidTypeError("match", f"must be a subject or a callable, got {type(match).__name__}")
        if reply is not None:
            if not isinstance(reply, str):
                raise InvalidTypeError("reply", f"must be a subject, got {type(reply).__name__}")
            self._reply = _check_pattern("reply", reply)
            what += f" reply={reply}"
        self._what = what
        self._cond = threading.Condition()
        self._frames: list[Frame] = []
        self._active = True
        self._predicate_failed = False

    @property
    def frames(self) -> list[Frame]:
        """The frames dropped (drop_next) or seen (watch) so far, in the order the proxy met them."""
        with self._cond:
            return list(self._frames)

    @property
    def count(self) -> int:
        """How many frames were dropped (drop_next) or seen (watch) so far."""
        with self._cond:
            return len(self._frames)

    @property
    def active(self) -> bool:
        """Still armed: a drop rule that has not dropped its count yet, or a watch not cancelled."""
        with self._cond:
            return self._active

    def wait(self, count: int | None = None, timeout: float | None = 5.0) -> bool:
        """Wait until ``count`` frames were dropped or seen (default: all of a drop rule's, or one for a watch);
        returns whether that happened within ``timeout`` seconds (None: no limit)."""
        want = count if count is not None else (self._limit or 1)
        with self._cond:
            return self._cond.wait_for(lambda: len(self._frames) >= want, timeout)

    def cancel(self) -> None:
        """Disarm now; what was recorded stays readable."""
        with self._cond:
            self._active = False
            self._cond.notify_all()
        self._proxy._disarm(self)

    def __enter__(self) -> FrameRule:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.cancel()

    def __repr__(self) -> str:
        kind = f"drop {self._limit} after {self._skip}" if self.drops else "watch"
        where = "+".join(sorted(self.directions))
        return f"<FrameRule {kind} {where} {self._what!r}: {self.count} so far{'' if self.active else ', done'}>"

    def _matches(self, frame: Frame) -> bool:
        """Connection thread: the patterns (message frames only) and the predicate, which must not break the proxy."""
        if self._reply is not None and (frame.reply is None or not _subject_matches(self._reply, frame.reply)):
            return False
        if self._tokens is not None:
            return frame.is_message and frame.subject is not None and _subject_matches(self._tokens, frame.subject)
        if self._predicate is None:
            return frame.is_message
        try:
            return bool(self._predicate(frame))
        except Exception:
            if not self._predicate_failed:  # once per rule: a broken predicate would otherwise log every frame
                self._predicate_failed = True
                logger.exception("fault proxy: the predicate of %r failed; it matches nothing then", self)
            return False

    def _take(self, frame: Frame) -> bool:
        """Connection thread, for a matching frame: whether the rule acts on it (drops it, or records a watch).

        Atomic, so over several connections exactly ``skip`` matches pass and ``count`` are dropped.
        """
        finished = False
        with self._cond:
            if not self._active:
                return False
            if self._skip:
                self._skip -= 1
                return False
            self._frames.append(frame)
            if self._limit is not None and len(self._frames) >= self._limit:
                self._active = False
                finished = True
            self._cond.notify_all()
        if finished:
            self._proxy._disarm(self)
        return True


def _check_count(name: str, value: int, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidTypeError(name, f"must be an int, got {type(value).__name__}")
    if value < minimum:
        raise InvalidArgumentError(name, f"{value!r} is less than {minimum}")
