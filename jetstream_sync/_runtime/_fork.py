"""Fork detection for everything a client makes, however the fork was made.

A forked child inherits copies of its parent's clients and of all they made (subscriptions, iterators, consume
contexts, watchers) but none of their threads: an inherited iterator would hand out copies of messages the
parent also gets, then wait for ever; a request written on the inherited socket reaches the server but its
reply goes to the parent (a publish that was stored times out); and a lock a parent thread held at fork time
stays held. So each such object keeps a `ForkGuard` made when it was, and every public entry point
checks it first: in a child it raises ForkedClientError before touching a lock, a buffer or the socket. Objects
made in the child (a new client) belong to the child and work normally.

``os.register_at_fork`` alone is not enough: it runs only for forks made through Python's ``os.fork()``.
uWSGI forks its workers from C (unless ``--py-call-osafterfork``), and so does any C extension or a ``ctypes``
call of libc's ``fork()``; after such a fork every hook is skipped and ``threading`` still believes the
parent's threads run. So the process is recognised by a mark the kernel itself resets on fork:

- On Linux, one private anonymous page advised ``MADV_WIPEONFORK`` (Linux 4.14): a byte set to 1 in the
  process that made the page reads 0 in any child, whoever forked it. Reading it costs about 30 ns, no system
  call, so every entry point can afford the check.
- Elsewhere (or where the kernel refuses the advice), the process id the mark was made in, compared with
  ``os.getpid()`` (a system call: about 0.2 us on a virtual machine).

Module state that a fork must reset (a lock a parent thread may hold at the moment of the fork) registers with
`after_fork`. Those functions run in the child at once for ``os.fork()``, and otherwise the first time
the child's code calls `check_process`, which every new client does before it starts a thread: a
C-forked child has one thread at that point, so the reset cannot race another thread of ours.
"""

from __future__ import annotations

import logging
import mmap
import os
import sys
from collections.abc import Callable
from typing import NoReturn, SupportsIndex

from .. import errors

__all__ = ["ForkGuard", "Mark", "ProcessLocal", "after_fork", "check_process"]

log = logging.getLogger("jetstream_sync")

#: ``MADV_WIPEONFORK`` from linux/mman.h (Python's mmap module does not name it)
_MADV_WIPEONFORK = 18


class _ProcessId:
    """The fallback mark: the id of the process that made it; ``mark[0]`` is True in that process only."""

    __slots__ = ("_pid",)

    def __init__(self) -> None:
        self._pid = os.getpid()

    def __getitem__(self, index: int) -> bool:
        return os.getpid() == self._pid


#: A process mark: ``mark[0]`` is truthy in the process that made it and falsy in any process forked from it
#: since. An index rather than a method, so that hot paths (every ack, every publish) check it with one
#: subscript of a page the kernel wiped, with no Python-level call: six such calls a message had cost 5% of a
#: consume's CPU (callgrind, 128 B messages).
Mark = mmap.mmap | _ProcessId


def _new_mark() -> Mark:
    """A mark of the current process: a wiped-on-fork page where the kernel offers one, else the process id."""
    if sys.platform.startswith("linux"):
        try:
            page = mmap.mmap(-1, mmap.PAGESIZE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
            page.madvise(_MADV_WIPEONFORK)
        except (OSError, ValueError, AttributeError):
            # a kernel before 4.14 (EINVAL), or a sandbox that refuses the advice: the process id still works
            log.debug("MADV_WIPEONFORK is not available; fork detection compares process ids", exc_info=True)
        else:
            page[0] = 1
            return page
    return _ProcessId()


_mark: Mark = _new_mark()
_hooks: list[Callable[[], None]] = []


def _enter_new_process() -> None:
    """In a forked child, once: a mark of its own, then every `after_fork` function."""
    global _mark
    _mark = _new_mark()
    for hook in list(_hooks):
        try:
            hook()
        except Exception:  # one module's reset must not keep the others from theirs
            log.exception("an after-fork reset failed: %r", hook)


def _after_python_fork() -> None:
    if not _mark[0]:  # always true here; a second call for the same fork finds the new mark alive
        _enter_new_process()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_python_fork)


def check_process() -> None:
    """Any thread: notice a fork that Python's hooks did not see (uWSGI, a C extension, libc through ctypes),
    and run the `after_fork` functions in this process if they have not run yet.

    Called by each new client before it starts a thread, and by module code that takes a lock a fork may have
    left held, before taking it.
    """
    if not _mark[0]:
        _enter_new_process()


def after_fork(fn: Callable[[], None]) -> None:
    """Run ``fn`` in every forked child, before the child's code uses what ``fn`` resets: at once after
    ``os.fork()``, and at the first `check_process` after a fork made in C. ``fn`` must be cheap and must
    not block (it typically replaces a module lock with a new one)."""
    _hooks.append(fn)


class ForkGuard:
    """Remembers the process an object was made in, so the object can refuse to work in a forked child.

    Hot paths keep `mark` and test ``mark[0]`` themselves (falsy: forked); the rest call `check`.
    """

    __slots__ = ("mark",)

    def __init__(self) -> None:
        check_process()  # made in a child the Python hooks did not see: take the child's own mark
        self.mark: Mark = _mark

    @property
    def inherited(self) -> bool:
        """True in a process forked after the object was made (by any means)."""
        return not self.mark[0]

    def check(self) -> None:
        """Raise ForkedClientError in a process forked after the object was made (by any means)."""
        if not self.mark[0]:
            raise errors.ForkedClientError()


class ProcessLocal:
    """A mixin for the client and every handle that holds it: pickling one (a ``spawn`` process's argument, a
    ``multiprocessing`` queue, a Spark task's closure) raises ClientNotPicklableError, which says to create one
    client per process and how, instead of pickle's "cannot pickle 'mmap.mmap' object" about some part of it."""

    __slots__ = ()

    def __reduce_ex__(self, protocol: SupportsIndex) -> NoReturn:
        raise errors.ClientNotPicklableError(f"a jetstream_sync {type(self).__name__}")
