"""How an EmbeddedServer ends with the process that started it, however that process ends.

A normal exit and Ctrl-C (KeyboardInterrupt unwinds the program) already stop every server and remove its temporary
directory: ``stop()`` from a ``with`` block or a fixture, and the exit-time finalizers of ``_server.py``. The
endings that skip both would leave a nats-server running, re-parented to PID 1, and its store on disk:

- **A signal whose default action ends the process**: SIGTERM (a supervisor, ``kill``, a CI runner cancelling a
  job), SIGHUP (the terminal closed; nats-server itself only reloads its config on it), and SIGINT where a program
  set it back to the default action. `arm_exit_signals` installs `_on_exit_signal` for each of them
  whose action is the default one; it stops this process's servers, removes their temporary directories, restores
  the default action and raises the signal again, so the process ends as it would have without us (a parent sees
  "killed by SIGTERM", ``returncode == -15``).

  A signal the program handles itself is left to it: a handler installed before (or after) ours decides what the
  signal means, typically a graceful shutdown that still needs the server (``examples/worker.py`` drains its
  consumer, the consume commands of the integrations drain and ack) and ends in ``stop()`` or a normal exit.
  Stopping the server before calling such a handler would pull the server from under that shutdown, and once it
  has returned the program has chosen to keep running. So we do not wrap it: ours is installed only over the
  default action, and a handler installed later that chains to the one it replaced (calls it) gets ours, which
  cleans up and ends the process. A signal the program ignores (SIG_IGN, e.g. under ``nohup``) stays ignored:
  the process does not end, so nothing is orphaned. Python can install handlers only from the main thread; a
  process whose servers were all made on other threads gets none, and relies on the next point.

- **A death no code of ours sees**: SIGKILL, a crash, a signal the process did not handle or a supervisor's
  ``os._exit`` (pytest-timeout's thread method, a killed pytest-xdist or gunicorn worker). On Linux every server is
  spawned with ``PR_SET_PDEATHSIG``: the kernel sends it SIGTERM when its parent dies. The kernel means the parent
  *thread*, so the servers are spawned from one daemon thread that lives as long as the process
  (`_Spawner`); spawned from the thread that asked, the servers of an EmbeddedCluster (started from threads
  that end once the nodes are ready) would be stopped at once. The temporary directory is left behind then
  (``jetstream-sync-*`` in the system temp dir): nothing of ours runs to remove it. Elsewhere no such request
  exists, and the server is spawned directly.

Everything here runs in the process that owns the servers. A forked child (a multiprocessing worker) owns none of
its parent's servers: the default actions are put back in it (and the registry names its parent, so even a handler
kept by a fork the hooks missed stops nothing).
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import itertools
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from pathlib import Path
from queue import SimpleQueue
from types import FrameType
from typing import Protocol

__all__ = ["arm_exit_signals", "own", "spawn", "stop_owned"]

_EXIT_SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP", "SIGINT") if hasattr(signal, name))
_GRACE = 5.0  # how long the servers get to stop after SIGTERM when the process is ending on a signal
_KILL_WAIT = 1.0  # after SIGKILL, before their directories are removed (a dying server may still write there)
_POLL_INTERVAL = 0.02
_SPAWN_TIMEOUT = 30.0  # spawning takes milliseconds; this only turns a stuck spawner thread into an error
_PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>


class Owned(Protocol):
    """What the exit-signal handler needs of a server: its process and its temporary directory, as they are now."""

    def _held_at_exit(self) -> tuple[subprocess.Popen[bytes] | None, Path | None]: ...


# Every server made in this process, by a key of its own: (the pid that owns it, a weak reference). No lock: the
# signal handler reads it on the main thread, which may have been interrupted while holding one; a store, a pop and
# copy() are each one step under the GIL. A forked child's copy names its parent's pid and is skipped.
_owned: dict[int, tuple[int, weakref.ref[Owned]]] = {}
_keys = itertools.count()


def own(server: Owned, key: int | None = None) -> int:
    """Count ``server`` among this process's servers, which a signal that ends the process stops first; returns the
    key to pass again (after a fork, or to re-arm). Any thread; arms the handlers when called on the main thread."""
    if key is None:
        key = next(_keys)
    _owned[key] = (os.getpid(), weakref.ref(server, lambda _ref: _owned.pop(key, None)))
    arm_exit_signals()
    return key


def arm_exit_signals() -> None:
    """Install `_on_exit_signal` for SIGTERM, SIGHUP and SIGINT where their action is the default one.

    Called whenever a server is made or started, so a program that put a default action back is covered again.
    Only the main thread may install signal handlers; elsewhere this does nothing (see the module docstring)."""
    if threading.current_thread() is not threading.main_thread():
        return
    for signum in _EXIT_SIGNALS:
        try:
            if signal.getsignal(signum) == signal.SIG_DFL:
                signal.signal(signum, _on_exit_signal)
        except (ValueError, OSError):  # not the main interpreter, or a signal this platform does not let us catch
            continue


def _on_exit_signal(signum: int, _frame: FrameType | None) -> None:
    """The process is ending by ``signum``: stop its servers, then end it by the same signal and default action.

    Runs on the main thread, between two bytecodes of whatever it was doing. The default action comes back first, so
    a second signal ends the process at once (the servers still get PDEATHSIG). Logs nothing: the main thread may have
    been interrupted inside a logging handler."""
    signal.signal(signum, signal.SIG_DFL)
    try:
        stop_owned(_GRACE)
    finally:
        signal.raise_signal(signum)  # delivered to this thread at once; its default action ends the process
        os._exit(128 + signum)  # only if this thread blocks the signal: the status a shell reports for it


def stop_owned(grace: float) -> int:
    """SIGTERM every server this process owns, SIGKILL those still running after ``grace`` seconds, then remove their
    temporary directories; returns how many servers were running.

    Written for the signal handler: it takes no lock and waits on no process without a timeout (``Popen.wait()``
    holds a lock while it blocks, and the main thread may have been interrupted there). It leaves the servers'
    objects as they are: the process is about to end."""
    pid = os.getpid()
    servers = [ref() for owner, ref in _owned.copy().values() if owner == pid]
    held = [server._held_at_exit() for server in servers if server is not None]
    procs = [proc for proc, _ in held if proc is not None and proc.poll() is None]
    for proc in procs:
        _send(proc, signal.SIGTERM)
    if not _wait_exited(procs, grace):
        for proc in procs:
            _send(proc, getattr(signal, "SIGKILL", signal.SIGTERM))
        _wait_exited(procs, _KILL_WAIT)
    for _, workdir in held:
        if workdir is not None:
            shutil.rmtree(workdir, ignore_errors=True)
    return len(procs)


def _send(proc: subprocess.Popen[bytes], signum: int) -> None:
    with contextlib.suppress(OSError):  # exited meanwhile
        proc.send_signal(signum)


def _wait_exited(procs: Sequence[subprocess.Popen[bytes]], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while any(proc.poll() is None for proc in procs):
        if time.monotonic() >= deadline:
            return False
        time.sleep(_POLL_INTERVAL)  # the poll interval of this bounded wait for the servers to exit
    return True


# -- spawning -------------------------------------------------------------------------------------------------------


def spawn(command: Sequence[str], log_path: Path) -> tuple[subprocess.Popen[bytes], int]:
    """Start ``command`` with stdin closed and stdout and stderr appended to ``log_path``; returns the process and the
    log's size before it (where this run's output starts). Any thread.

    On Linux the process is asked to receive SIGTERM when this process dies, and is spawned from the spawner thread
    for it (module docstring); TimeoutError if that thread does not answer within 30 s."""
    prctl = _prctl()
    if prctl is None:
        return _popen(command, log_path, None)
    job = _Job(command, log_path, functools.partial(_die_with_parent, prctl, os.getpid()))
    _the_spawner().jobs.put(job)
    return job.result(_SPAWN_TIMEOUT)


def _popen(
    command: Sequence[str], log_path: Path, preexec: Callable[[], None] | None
) -> tuple[subprocess.Popen[bytes], int]:
    with open(log_path, "ab") as log:
        offset = log.seek(0, os.SEEK_END)
        # preexec_fn is unsafe where the child could need a lock another thread held at fork: _die_with_parent
        # takes none (one prepared ctypes call, getppid, _exit).
        proc = subprocess.Popen(
            list(command),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            preexec_fn=preexec,  # noqa: PLW1509
        )
    return proc, offset


def _die_with_parent(prctl: Callable[..., int], parent: int) -> None:
    """In the forked child, before exec: ask for SIGTERM when the spawner thread (this process) ends; the request
    survives exec. If the parent died between fork and this call the signal will never come, so leave now.
    Nothing here takes a lock or imports: the child has only the thread that forked it."""
    prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    if os.getppid() != parent:
        os._exit(1)


@functools.cache
def _prctl() -> Callable[..., int] | None:
    """libc's prctl on Linux, else None."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        function = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    function.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    function.restype = ctypes.c_int
    return function


class _Job:
    """One spawn handed to the spawner thread; the asking thread waits for its result."""

    def __init__(self, command: Sequence[str], log_path: Path, preexec: Callable[[], None]) -> None:
        self.command = command
        self.log_path = log_path
        self.preexec = preexec
        self._done = threading.Event()
        self._lock = threading.Lock()  # between the spawner's result and an asker that gave up
        self._abandoned = False
        self._value: tuple[subprocess.Popen[bytes], int] | None = None
        self._error: Exception | None = None

    def run(self) -> None:
        """On the spawner thread."""
        try:
            value = _popen(self.command, self.log_path, self.preexec)
        except Exception as exc:  # handed to the asking thread
            self._error = exc
            self._done.set()
            return
        with self._lock:
            abandoned = self._abandoned
            self._value = value
        if abandoned:  # nobody will stop it
            value[0].kill()
            value[0].wait()
        self._done.set()

    def result(self, timeout: float) -> tuple[subprocess.Popen[bytes], int]:
        """On the asking thread."""
        self._done.wait(timeout)
        with self._lock:
            if self._value is None and self._error is None:
                self._abandoned = True
                raise TimeoutError(f"the nats-server spawner thread did not answer within {timeout:g}s")
        if self._error is not None:
            raise self._error
        assert self._value is not None
        return self._value


class _Spawner:
    """A daemon thread that spawns every nats-server of this process, so that PDEATHSIG means "when this process
    ends": the kernel sends it when the thread that forked the server ends, and this one ends only with the process.
    Not named ``jetstream-sync-*``: it is no client's thread."""

    def __init__(self) -> None:
        self.jobs: SimpleQueue[_Job] = SimpleQueue()
        thread = threading.Thread(target=self._run, name="embedded-server-spawner", daemon=True)
        thread.start()

    def _run(self) -> None:
        while True:
            self.jobs.get().run()  # run() hands every error to the asking thread: this loop never ends


_spawner: _Spawner | None = None
_spawner_lock = threading.Lock()


def _the_spawner() -> _Spawner:
    global _spawner
    with _spawner_lock:
        if _spawner is None:
            _spawner = _Spawner()
        return _spawner


# -- forks ----------------------------------------------------------------------------------------------------------

_held_signals = threading.local()  # the forking thread's signal mask, saved while our signals are held back


def _hold_signals_before_fork() -> None:
    """On the forking thread, before os.fork (multiprocessing, a spawn with preexec_fn): hold back the signals our
    handler has, so that one sent to the child early is not lost. CPython clears the signals a child caught before it
    re-initialised its signal state, so without this a child killed right after the fork would keep running where the
    default action would have ended it; held back, the signal waits until the child has the default action again."""
    armed = [signum for signum in _EXIT_SIGNALS if signal.getsignal(signum) is _on_exit_signal]
    _held_signals.mask = signal.pthread_sigmask(signal.SIG_BLOCK, armed) if armed else None


def _release_held_signals() -> None:
    mask = getattr(_held_signals, "mask", None)
    if mask is not None:
        _held_signals.mask = None
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)


def _reset_in_child() -> None:
    """In a forked child: it owns none of its parent's servers, so the default actions come back (a server it starts
    arms them again); the parent's spawner thread does not exist here, and its lock may have been held at the fork."""
    global _spawner, _spawner_lock
    _spawner = None
    _spawner_lock = threading.Lock()
    for signum in _EXIT_SIGNALS:
        if signal.getsignal(signum) is _on_exit_signal:
            with contextlib.suppress(ValueError):  # not the main interpreter
                signal.signal(signum, signal.SIG_DFL)
    _release_held_signals()  # now a held signal meets the default action


if hasattr(os, "register_at_fork") and hasattr(signal, "pthread_sigmask"):
    os.register_at_fork(
        before=_hold_signals_before_fork, after_in_parent=_release_held_signals, after_in_child=_reset_in_child
    )
