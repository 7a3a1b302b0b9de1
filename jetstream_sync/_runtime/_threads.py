"""Which thread may run a method, checked at run time in debug mode (the test suite, or an environment variable).

The IO-thread state machines (pull, fetch, Pull(1) and push engines, heartbeat monitors, subscriptions, the
asynchronous and fast publishers, services) write their state on the IO thread only (docs/ARCHITECTURE.md,
"Rules: one writer per piece of state"). ``@io_thread`` marks such a method. Off, the mark costs nothing: the
class holds the plain function, so a per-message handler pays no extra call. On (`check_io_threads`), each marked
method is replaced on its class by a wrapper that raises `WrongThreadError` when the calling thread is not a
jetstream-sync IO thread, or is the IO thread of another client than the object's own (an object that holds its
runtime as ``runtime`` or ``_runtime``, or its IO loop as ``_io``). Every violation is logged at ERROR the first
time per method (an asyncio callback or a fast handler could swallow the exception) and counted
(`IOThreadChecks.violations`), so the test suite's plugin can fail a test that met one even when nothing raised
to it.

The pytest plugin of ``jetstream_sync.testing`` turns the check on for the whole session when the ini setting
``jetstream_sync_check_threads = true`` asks (this project's suite sets it); ``JETSTREAM_SYNC_CHECK_THREADS=1``
turns it on when ``jetstream_sync`` is imported, for code that extends the client (``jetstream_sync.plumbing``).
The mark works on methods of ordinary classes only (a class re-created after its body ran, as attrs makes slotted
classes, would keep the unchecked copy).
"""

from __future__ import annotations

import functools
import inspect
import logging
import os
import threading
from collections.abc import Callable
from typing import Any, TypeVar, cast

from .. import errors

__all__ = [
    "CHECK_THREADS_ENV",
    "IOThreadChecks",
    "check_io_threads",
    "io_thread",
    "io_thread_checks",
    "mark_io_thread",
]

log = logging.getLogger("jetstream_sync")

#: the environment variable that turns the check on when jetstream_sync is imported ("1"; "" or "0": off)
CHECK_THREADS_ENV = "JETSTREAM_SYNC_CHECK_THREADS"

F = TypeVar("F", bound=Callable[..., Any])

_local = threading.local()  # ``io`` is True on every jetstream-sync IO thread (`mark_io_thread`)


def mark_io_thread() -> None:
    """The calling thread is a jetstream-sync IO thread (``IOLoop`` calls it first thing on its thread)."""
    _local.io = True


#: where an object of each class finds its client's ``in_io_thread``: itself (""), one of its attributes, or
#: nowhere (None); learnt from the first object checked, so a checked call pays no failed attribute lookups
_HOLDERS: dict[type, str | None] = {}
_HOLDER_NAMES = ("", "runtime", "_runtime", "_io")


def _own_io_thread(obj: object) -> bool | None:
    """Whether the calling thread is the IO thread of ``obj``'s own client: the answer of its ``in_io_thread``
    (a Runtime's or an IOLoop's), or of its ``runtime``'s, ``_runtime``'s or ``_io``'s; None when it holds none."""
    kind = type(obj)
    if kind in _HOLDERS:
        name = _HOLDERS[kind]
        if name is None:
            return None
        flag = getattr(getattr(obj, name, None) if name else obj, "in_io_thread", None)
        return flag if isinstance(flag, bool) else None
    for name in _HOLDER_NAMES:
        flag = getattr(getattr(obj, name, None) if name else obj, "in_io_thread", None)
        if isinstance(flag, bool):
            _HOLDERS[kind] = name
            return flag
    _HOLDERS[kind] = None
    return None


class _Marked:
    """What ``@io_thread`` leaves in a class body until the class exists: it then records the method and puts
    the plain function (or, with the check on, its wrapper) in its place."""

    __slots__ = ("checks", "fn")

    def __init__(self, checks: IOThreadChecks, fn: Callable[..., Any]) -> None:
        self.checks = checks
        self.fn = fn

    def __set_name__(self, owner: type, name: str) -> None:
        self.checks.record(owner, name, self.fn)


class IOThreadChecks:
    """One registry of methods marked IO-thread-only, and whether their checks are installed. The package uses
    one (`io_thread`, `check_io_threads`); a test of the mechanism makes its own."""

    def __init__(self, *, enabled: bool = False) -> None:
        self._enabled = enabled
        self._methods: list[tuple[type, str, Callable[..., Any], Callable[..., Any]]] = []
        self._lock = threading.Lock()
        self._logged: set[str] = set()
        #: how many calls ran on a wrong thread so far (each raised WrongThreadError)
        self.violations = 0
        #: the last of them
        self.last_violation: errors.WrongThreadError | None = None

    @property
    def enabled(self) -> bool:
        return self._enabled

    @property
    def methods(self) -> list[tuple[type, str]]:
        """Every marked method, as (class, name)."""
        return [(owner, name) for owner, name, _, _ in self._methods]

    def mark(self, fn: F) -> F:
        """Decorator: ``fn`` is a method that runs on the IO thread only. Refuses anything but a function
        defined in a class body (a module-level function is imported by name elsewhere, out of reach)."""
        qualname = getattr(fn, "__qualname__", "")
        parts = qualname.split(".")
        if not inspect.isfunction(fn) or len(parts) < 2 or parts[-2] == "<locals>":
            raise TypeError(f"io_thread marks methods (functions defined in a class body), not {fn!r}")
        return cast(F, _Marked(self, fn))

    def record(self, owner: type, name: str, fn: Callable[..., Any]) -> None:
        """The class ``owner`` was made with the marked method ``name``: keep it, and install its check if on."""
        checked = self._checked(fn)
        with self._lock:
            self._methods.append((owner, name, fn, checked))
            setattr(owner, name, checked if self._enabled else fn)

    def enable(self, enabled: bool = True) -> bool:
        """Install (or remove) the checks on every marked method; returns whether they were on before.

        Objects look their methods up on their class, so this takes effect at once for new lookups; a bound
        method taken before (a subscription's handler) keeps what it was bound to."""
        with self._lock:
            before, self._enabled = self._enabled, enabled
            for owner, name, fn, checked in self._methods:
                setattr(owner, name, checked if enabled else fn)
        return before

    def _checked(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """``fn`` wrapped in the check (a coroutine function: checked where it runs, not where it is created)."""
        what = f"{fn.__module__}.{fn.__qualname__}"
        verify = self.verify
        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def checked_coroutine(obj: object, *args: Any, **kwargs: Any) -> Any:
                verify(obj, what)
                return await fn(obj, *args, **kwargs)

            return checked_coroutine

        @functools.wraps(fn)
        def checked(obj: object, *args: Any, **kwargs: Any) -> Any:
            verify(obj, what)
            return fn(obj, *args, **kwargs)

        return checked

    def verify(self, obj: object, what: str) -> None:
        """Raise WrongThreadError unless the calling thread is ``obj``'s IO thread (any IO thread when ``obj``
        does not say which client it belongs to)."""
        if getattr(_local, "io", False):
            if _own_io_thread(obj) is not False:
                return
            where = f"the IO thread of another client ({threading.current_thread().name})"
        else:
            where = f"thread {threading.current_thread().name!r}"
        exc = errors.WrongThreadError(what, where)
        with self._lock:
            self.violations += 1
            self.last_violation = exc
            first = what not in self._logged
            self._logged.add(what)
        if first:
            log.error("%s", exc, stack_info=True)
        raise exc


_CHECKS = IOThreadChecks(enabled=os.environ.get(CHECK_THREADS_ENV, "") not in ("", "0"))

#: ``@io_thread``: the method runs on its client's IO thread only (checked when `check_io_threads` is on)
io_thread = _CHECKS.mark


def check_io_threads(enabled: bool = True) -> bool:
    """Turn the IO-thread checks on (or off) for every method marked ``@io_thread``; returns whether they were on.
    The pytest plugin calls it when a test session starts; ``JETSTREAM_SYNC_CHECK_THREADS=1`` does at import."""
    return _CHECKS.enable(enabled)


def io_thread_checks() -> IOThreadChecks:
    """The package's registry (its ``violations`` count is what the pytest plugin watches)."""
    return _CHECKS
