"""A concurrent.futures.Future that builds its Condition only when a thread actually has to wait.

publish_async returns one future per message. A stock Future builds a Condition (and an RLock) in
``__init__``, which profiling showed to be the largest single cost of a pipelined publish. Most of these
futures are resolved once and read after the fact, so the Condition is created lazily; every public and
private use of ``_condition`` (result with a timeout, add_done_callback, concurrent.futures.wait,
as_completed, cancel) goes through the property and gets the real thing, so semantics are unchanged.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future, InvalidStateError, _base
from typing import Any, TypeVar

from ._fork import after_fork

T = TypeVar("T")

# Guards creating a Condition against settling without one: whoever comes first decides the path.
_SETTLE = threading.Lock()


def _fresh_lock_after_fork() -> None:
    """In a forked child: a new lock. The parent's IO thread takes _SETTLE for every future it settles; a fork
    at that moment would leave the child's copy held for ever, and the child's own client (a Celery or gunicorn
    worker connecting after the fork) would hang on its first publish ack. The child's first client runs this
    before it makes a future, however the fork was made (``_fork.check_process``)."""
    global _SETTLE
    _SETTLE = threading.Lock()


after_fork(_fresh_lock_after_fork)
_LAZY = "_lazy_condition"
_DONE = frozenset({_base.CANCELLED, _base.CANCELLED_AND_NOTIFIED, _base.FINISHED})


class LightFuture(Future[T]):
    def __init__(self) -> None:  # deliberately not Future.__init__, which builds the Condition eagerly
        self._state = _base.PENDING
        self._result: Any = None
        self._exception: BaseException | None = None

    # The two lists are built on first use too (wait(), as_completed(), add_done_callback()): a pipeline keeps
    # thousands of futures alive, and fewer small objects mean less work for the garbage collector.
    @property
    def _waiters(self) -> list[Any]:  # type: ignore[override]
        return self._lazy_list("_lazy_waiters")

    @property
    def _done_callbacks(self) -> list[Any]:
        return self._lazy_list("_lazy_done_callbacks")

    def _lazy_list(self, key: str) -> list[Any]:
        items: list[Any] | None = self.__dict__.get(key)
        if items is None:
            with _SETTLE:
                items = self.__dict__.setdefault(key, [])
        return items

    @property
    def _condition(self) -> threading.Condition:  # type: ignore[override]
        cond: threading.Condition | None = self.__dict__.get(_LAZY)
        if cond is None:
            with _SETTLE:
                cond = self.__dict__.get(_LAZY)
                if cond is None:
                    cond = self.__dict__[_LAZY] = threading.Condition()
        return cond

    def _settle(self, result: Any, exception: BaseException | None) -> bool:
        """Finish without a Condition when nobody ever touched it (so nobody waits and no callback is set)."""
        with _SETTLE:
            if _LAZY in self.__dict__:
                return False
            if self._state not in (_base.PENDING, _base.RUNNING):
                raise InvalidStateError(f"{self._state}: {self!r}")
            self._result = result
            self._exception = exception
            self._state = _base.FINISHED
            return True

    def set_result(self, result: T) -> None:
        if not self._settle(result, None):
            super().set_result(result)

    def set_exception(self, exception: BaseException | None) -> None:
        if not self._settle(None, exception):
            super().set_exception(exception)

    # A finished future's state never changes again, so reading it needs no lock.
    def done(self) -> bool:
        return self._state in _DONE

    def result(self, timeout: float | None = None) -> T:
        if self._state == _base.FINISHED:
            if self._exception is not None:
                raise self._exception
            return self._result  # type: ignore[no-any-return]
        return super().result(timeout)

    def exception(self, timeout: float | None = None) -> BaseException | None:
        if self._state == _base.FINISHED:
            return self._exception
        return super().exception(timeout)

    def __repr__(self) -> str:
        return f"<LightFuture state={self._state.lower()}>"
