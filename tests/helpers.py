"""Helpers shared by the tests: waiting on observable conditions, the client's threads, a raw pull.

Fixtures live in conftest.py; everything a test imports by name lives here.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path

import jetstream_sync

#: the repository's root (examples/, pyproject.toml), wherever a test file sits below tests/
REPO_ROOT = Path(__file__).resolve().parent.parent


def wait_until(predicate: Callable[[], object], timeout: float = 5.0, interval: float = 0.01) -> None:
    """Poll ``predicate`` until it is truthy; fail the test after ``timeout``."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        time.sleep(interval)  # the poll interval of this bounded wait on a condition


def our_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("jetstream-sync")]


def is_parked(thread: threading.Thread) -> bool:
    """True while ``thread`` is alive and waiting inside a blocking call.

    "Waiting" means its innermost Python frame is a function named ``wait``: threading's ``Condition.wait``
    (which ``Event.wait`` and the message buffers use) or the library's wait on a lock (a request's reply).
    Condition.wait is entered with the condition's lock held and registers the waiter before releasing it,
    so a notify cannot slip in between. A thread that is only about to make its call, or is running, does
    not count: a test that closes the client once this holds knows the call was woken, not refused at entry.
    """
    frame = sys._current_frames().get(thread.ident) if thread.ident is not None else None
    return thread.is_alive() and frame is not None and frame.f_code.co_name == "wait"


def _where(thread: threading.Thread) -> str:
    frame = sys._current_frames().get(thread.ident) if thread.ident is not None else None
    stack = []
    while frame is not None and len(stack) < 4:
        stack.append(f"{frame.f_code.co_filename.rsplit('/', 1)[-1]}:{frame.f_code.co_name}")
        frame = frame.f_back
    return f"{thread.name} ({'alive' if thread.is_alive() else 'ended'}) in {' < '.join(stack) or '-'}"


def wait_parked(threads: Iterable[threading.Thread], timeout: float = 5.0) -> None:
    """Wait until every thread is blocked in its call (see ``is_parked``); fail naming those that are not."""
    threads = list(threads)
    deadline = time.monotonic() + timeout
    while not all(is_parked(t) for t in threads):
        if time.monotonic() > deadline:
            stuck = [_where(t) for t in threads if not is_parked(t)]
            raise AssertionError(f"not blocked in a wait within {timeout}s: {stuck}")
        time.sleep(0.01)  # the poll interval of this bounded wait on a condition


def join_all(threads: Iterable[threading.Thread], timeout: float) -> list[threading.Thread]:
    """Join every thread within one shared ``timeout``; return those still alive."""
    threads = list(threads)
    deadline = time.monotonic() + timeout
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    return [t for t in threads if t.is_alive()]


def pull(client, stream: str, consumer: str, batch: int, expires: float = 1.0) -> list[jetstream_sync.Msg]:
    """A raw pull request, independent of the consumer API, for tests of messages and acks."""
    sub = client.subscribe(client.new_inbox())
    body = json.dumps({"batch": batch, "expires": int(expires * 1e9)}).encode()
    client.publish(f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{consumer}", body, reply=sub.subject)
    got: list[jetstream_sync.Msg] = []
    deadline = time.monotonic() + expires + 2
    while len(got) < batch and time.monotonic() < deadline:
        try:
            msg = sub.next_msg(timeout=max(0.01, deadline - time.monotonic()))
        except jetstream_sync.errors.TimeoutError:
            break
        if not msg.reply.startswith("$JS.ACK."):
            break  # a status (404, 408, 409) ends the pull
        got.append(msg)
    sub.unsubscribe()
    return got


def run_in_fork(child: Callable[[], bool], timeout: float = 20.0) -> int:
    """Run ``child()`` in a forked child process and return its exit code: 0 when it returned True, 1 when
    False, 2 when it raised. The child never returns into pytest (``os._exit``), whatever happens; a child
    still running after ``timeout`` is killed and the test fails."""
    import os
    import signal

    pid = os.fork()
    if pid == 0:
        status = 2
        try:
            status = 0 if child() else 1
        finally:
            os._exit(status)
    exited: list[int] = []

    def child_exited() -> bool:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            exited.append(os.waitstatus_to_exitcode(status))
        return bool(done)

    try:
        wait_until(child_exited, timeout=timeout)
    finally:
        if not exited:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
    return exited[0]


def children(pid: int) -> set[int]:
    """The processes whose parent is ``pid`` (a Celery worker's pool processes, a gunicorn master's workers)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.add(int(entry.name))
    return found


def core_round_trip(nc: jetstream_sync.Client, subject: str = "round.trip.echo", timeout: float = 3.0) -> bool:
    """A message published on ``subject`` comes back through the server: the connection's socket is read (a deaf
    connection, one nobody reads while it claims to be up, times out here)."""
    sub = nc.subscribe(subject)
    try:
        nc.publish(subject, b"ping")
        return sub.next_msg(timeout=timeout).data == b"ping"
    finally:
        sub.unsubscribe()


def run_pytest(directory: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run pytest on the test files in ``directory`` in a process of its own (a test of the pytest plugin itself),
    bounded to two minutes, with ``env`` added to the environment; its output is in ``stdout``."""
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(directory)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=directory,
        env=None if env is None else {**os.environ, **env},
    )


def first_python_block(text: str) -> str:
    """The first ```python block of a Markdown page: the program a guide opens with, run by its test."""
    found = re.search(r"^```python\n(.*?)^```$", text, re.MULTILINE | re.DOTALL)
    assert found, "the page has no python block"
    return found.group(1)


def run_opening_program(
    page: Path, tmp_path: Path, *, timeout: float, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the program the guide ``page`` opens with as a reader would: saved to a file of its own in
    ``tmp_path`` and run there by a fresh interpreter, bounded by ``timeout`` seconds. Fails the test unless it
    exits 0; its output is in ``stdout`` and ``stderr``."""
    program = tmp_path / f"{page.stem.replace('-', '_')}_guide.py"
    program.write_text(first_python_block(page.read_text(encoding="utf-8")))
    result = subprocess.run(
        [sys.executable, str(program)], capture_output=True, text=True, timeout=timeout, env=env, cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def create_partitioned_stream(js: jetstream_sync.JetStream, name: str, partitions: int) -> None:
    """A stream on ``<name>.*`` whose own subject transform puts the partition of the ``*`` in front, as a static
    partitioned consumer group reads (orbit.go's pcgroups/scripts/static_stream_setup.sh makes the same)."""
    js.create_stream(
        jetstream_sync.StreamConfig(
            name=name,
            subjects=[f"{name}.*"],
            subject_transform=jetstream_sync.SubjectTransform(
                src=f"{name}.*", dest=f"{{{{partition({partitions},1)}}}}.{name}.{{{{wildcard(1)}}}}"
            ),
        )
    )
