"""Clients closed at the interpreter's exit: the runtimes of every connected client, and the two hooks that close
them (moved out of ``_port.py``, which holds the Runtime itself)."""

from __future__ import annotations

import atexit
import logging
import sys
import threading
import weakref
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._port import Runtime

__all__ = ["LIVE"]

log = logging.getLogger("jetstream_sync")

#: every connected client's runtime, closed at exit
LIVE: weakref.WeakSet[Runtime] = weakref.WeakSet()


def _close_all_at_exit() -> None:
    for runtime in list(LIVE):
        try:
            runtime.close(timeout=2.0)
        except Exception:
            log.debug("closing a client at exit failed", exc_info=True)


def _close_all_if_main_failed() -> None:
    """Runs when the main thread has ended, before Python waits for the non-daemon threads.

    If the main thread ended with an uncaught exception (Ctrl-C's KeyboardInterrupt: the interpreter keeps it
    in ``sys.last_value``), a non-daemon thread blocked in a client's call, a ``messages()`` loop or a
    subscription read, would keep the process alive for ever: every client is closed now, so those calls raise
    ConnectionClosedError and their threads can end. After a normal return Python's rule stands (non-daemon
    threads run on, with their clients), and atexit closes the clients once they are done.
    """
    if getattr(sys, "last_value", None) is not None:
        _close_all_at_exit()


atexit.register(_close_all_at_exit)
# CPython's hook that runs before non-daemon threads are joined (the one concurrent.futures uses); absent on
# other interpreters, where the atexit close above still runs once the threads have ended.
_register_before_thread_join = getattr(threading, "_register_atexit", None)
if _register_before_thread_join is not None:
    _register_before_thread_join(_close_all_if_main_failed)
