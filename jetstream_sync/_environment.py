"""Checks of the process a client is about to run in, made once per ``connect()`` before any thread starts.

The client needs its background threads to run while the application's own code does not: the IO thread sends
coalesced publishes and acks, answers the server's PINGs and reads heartbeats. Three deployments put it at risk:

- **uWSGI without Python threads.** Before uWSGI 2.0.27 (Debian 12 packages 2.0.21, pip's 2.0.26) the Python
  plugin runs without thread support unless ``--enable-threads`` (or ``--threads N``, or an option that needs
  threads such as ``--gevent``) is given. The worker then keeps the GIL while it waits for the next request,
  so the IO thread runs only while a request runs: the last ack of a request stays unsent while the worker
  idles, the server drops the connection as stale after a few minutes, and ``publish_async`` messages not
  waited for are lost. That half-works, so `check_environment` refuses it with
  [`ThreadsDisabledError`][jetstream_sync.errors.ThreadsDisabledError]. uWSGI says what it decided: its embedded
  ``uwsgi`` module (in ``sys.modules`` before the application is imported) has ``has_threads``, the value after every
  option that turns threads on, and 2.0.27 and later set it always. ``uwsgi.opt`` is not enough: it holds
  only the options written out (``--threads 2`` or ``--gevent 100`` turn threads on without an
  ``enable-threads`` key, and 2.0.27's default has none).
- **A client made in uWSGI's master.** Without ``--lazy-apps`` uWSGI imports the app in the master and forks
  the workers from it in C, with no regard for the GIL: a worker forked while one of the master's Python
  threads (the client's IO thread or watchdog) holds the GIL waits for it for ever in its first step
  (``take_gil`` under ``uwsgi_python_master_fixup``, seen with gdb; 2 workers in about 40 runs under load).
  ``--py-call-osafterfork`` does not prevent it, ``--py-call-uwsgi-fork-hooks`` does (the master takes the GIL
  before each fork). A client made there is otherwise legal (the workers get ForkedClientError from it), so
  that is a warning, logged once: ``uwsgi.worker_id()`` is 0 while the master imports the app.
- **gevent or eventlet monkey-patching.** Patched ``threading`` makes the client's threads greenlets of one OS
  thread, so code that blocks without yielding (a CPU-bound loop, a C library doing its own IO) also stops
  the client's heartbeats and PING replies. It works otherwise, so that is logged once at INFO, not refused.

The decisions (`uwsgi_threads_refusal`, `uwsgi_master_hazard`, `green_runtime`) take what
they look at as arguments, so tests make them without uWSGI, gevent or eventlet. Nothing here imports any of
those: a module that is not already imported is not in use.
"""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Mapping

from . import errors
from ._runtime import after_fork, check_process

__all__ = ["check_environment", "green_runtime", "uwsgi_master_hazard", "uwsgi_threads_refusal"]

log = logging.getLogger("jetstream_sync")

_noted: set[str] = set()  # what was logged in this process (each note once per process)
_noted_lock = threading.Lock()


def _new_process() -> None:
    """In a forked child: its own notes (it logs under its own process id) and a lock no parent thread holds."""
    global _noted, _noted_lock
    _noted = set()
    _noted_lock = threading.Lock()


after_fork(_new_process)


def check_environment() -> None:
    """Refuse a process the client cannot run in, and say once per process what a risky one means.

    Called by ``Client.__init__`` (on the connecting thread) before the runtime starts its threads.
    Raises ThreadsDisabledError under uWSGI without Python threads.
    """
    check_process()  # after a fork made in C (uWSGI's), _new_process runs now, before the lock is taken
    uwsgi = sys.modules.get("uwsgi")
    refusal = uwsgi_threads_refusal(uwsgi)
    if refusal is not None:
        raise errors.ThreadsDisabledError(refusal)
    hazard = uwsgi_master_hazard(uwsgi)
    if hazard is not None and _first("uwsgi-master"):
        log.warning("%s", hazard)
    runtime = green_runtime(sys.modules)
    if runtime is not None and _first("green"):
        log.info(
            "%s has monkey-patched threading: the client's threads are greenlets sharing one OS thread, so code "
            "that blocks without yielding to %s (a CPU-bound loop, a C library doing its own IO) also stops the "
            "client from answering the server's PINGs and reading heartbeats; run such work in a real thread (%s)",
            runtime,
            runtime,
            "gevent.get_hub().threadpool" if runtime == "gevent" else "eventlet.tpool",
        )


def _first(note: str) -> bool:
    """True the first time ``note`` is asked for in this process."""
    with _noted_lock:
        if note in _noted:
            return False
        _noted.add(note)
        return True


def uwsgi_threads_refusal(uwsgi: object | None) -> str | None:
    """Why the client cannot run under this uWSGI, or None when it can.

    ``uwsgi`` is uWSGI's embedded module (``sys.modules["uwsgi"]``), or None outside uWSGI. A module of that
    name without ``has_threads`` is not uWSGI's Python plugin (a file of the application's, say) and is left
    alone.
    """
    if uwsgi is None:
        return None
    has_threads = getattr(uwsgi, "has_threads", None)
    if has_threads is None or has_threads:
        return None
    version = getattr(uwsgi, "version", b"")
    if isinstance(version, bytes):
        version = version.decode("ascii", "replace")
    running = f"uWSGI {version}" if version else "uWSGI"
    return (
        f"{running} runs this process without Python threads, so the client's IO thread would run only while a "
        "request runs: acks and publishes would wait unsent while the worker is idle, the server would drop the "
        "connection as stale, and the next request would fail with NotConnectedError. Start uWSGI with "
        "--enable-threads (enable-threads = true in an ini file; --threads N turns them on too), or use "
        "uWSGI 2.0.27 or later, where threads are on by default"
    )


def uwsgi_master_hazard(uwsgi: object | None) -> str | None:
    """Why a client made here may hang uWSGI's workers, or None.

    The hazard is a client made while uWSGI imports the app in the process that forks the workers
    (``worker_id() == 0``, not a mule or the spooler, and a master or more than one process) without
    ``--py-call-uwsgi-fork-hooks``.
    """
    if uwsgi is None or not getattr(uwsgi, "has_threads", None):
        return None
    questions = [getattr(uwsgi, name, None) for name in ("worker_id", "mule_id", "i_am_the_spooler")]
    worker_id, mule_id, spooler = (q if callable(q) else None for q in questions)
    if worker_id is None or worker_id() != 0 or (mule_id is not None and mule_id()):
        return None
    if spooler is not None and spooler():
        return None
    options = getattr(uwsgi, "opt", None)
    if not isinstance(options, dict) or "py-call-uwsgi-fork-hooks" in options:
        return None
    if "master" not in options and getattr(uwsgi, "numproc", None) == 1:
        return None  # one process and no master: it becomes the only worker itself, nothing is forked
    return (
        "a client is being made in uWSGI's master process, which forks the workers in C: a worker forked while "
        "one of the client's threads holds the GIL waits for it for ever and never serves. Start uWSGI with "
        "--py-call-uwsgi-fork-hooks (the master then takes the GIL before each fork) or --lazy-apps (the app "
        "is imported in each worker), or make clients in the workers only (the integrations and process_client "
        "do); in a worker this client raises ForkedClientError"
    )


def green_runtime(modules: Mapping[str, object]) -> str | None:
    """``"gevent"`` or ``"eventlet"`` when that library has monkey-patched ``threading``, else None.

    ``modules`` is ``sys.modules``: only an imported ``gevent.monkey`` or ``eventlet.patcher`` is asked
    (gevent's ``is_module_patched("threading")``, eventlet's ``is_monkey_patched("thread")``).
    """
    gevent = modules.get("gevent.monkey")
    is_module_patched = getattr(gevent, "is_module_patched", None)
    if callable(is_module_patched) and is_module_patched("threading"):
        return "gevent"
    eventlet = modules.get("eventlet.patcher")
    is_monkey_patched = getattr(eventlet, "is_monkey_patched", None)
    if callable(is_monkey_patched) and is_monkey_patched("thread"):
        return "eventlet"
    return None
