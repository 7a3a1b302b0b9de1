"""An EmbeddedServer ends with the process that started it, however that process ends (testing/_lifetime.py).

Each test runs a small script in a subprocess that starts servers and prints their pids and temporary directories,
then ends it (a signal, SIGKILL) and checks what is left: the servers' processes, their directories, the exit status.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import wait_until

pytestmark = pytest.mark.skipif(os.name != "posix", reason="POSIX signals")
linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")

# What every script starts with: the default actions this module is about (whatever the test runner's were), and a
# ready() line for the test.
PRELUDE = """
import json, os, signal, socket, sys, threading, time
from jetstream_sync.testing import EmbeddedServer

for _sig in (signal.SIGTERM, signal.SIGHUP):
    signal.signal(_sig, signal.SIG_DFL)


def ready(*servers, **extra):
    info = {"pids": [s.pid for s in servers], "workdirs": [str(s.log_path.parent) for s in servers], **extra}
    print(json.dumps(info), flush=True)


def serves(server):
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        return sock.makefile("rb").readline().startswith(b"INFO ")
"""


class Script:
    """A running script; ``info`` is what it printed with ready()."""

    def __init__(self, body: str, *args: str) -> None:
        code = PRELUDE + textwrap.dedent(body)
        self.proc = subprocess.Popen(
            [sys.executable, "-c", code, *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            bufsize=0,  # unbuffered: reading the ready line must not take what follows from communicate()
        )
        self.info = self._ready(timeout=60)

    def _ready(self, timeout: float) -> dict[str, Any]:
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        readable = False
        while not readable and time.monotonic() < deadline:  # readable once it printed, or ended (EOF)
            readable = bool(select.select([self.proc.stdout], [], [], 0.1)[0])
        line = self.proc.stdout.readline() if readable else b""
        if not line:
            self.proc.kill()
            _out, err = self.proc.communicate()
            pytest.fail(f"the script did not get ready: {err.decode()}")
        info: dict[str, Any] = json.loads(line)
        return info

    def signal(self, signum: int) -> None:
        self.proc.send_signal(signum)

    def finish(self, timeout: float = 30) -> tuple[int, str, str]:
        """Wait for the script to end (it must, on its own or by what the test sent it)."""
        try:
            out, err = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, err = self.proc.communicate()
            pytest.fail(f"the script did not end within {timeout}s: {err.decode()}")
        return self.proc.returncode, out.decode(), err.decode()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.communicate()


@pytest.fixture
def scripts() -> Iterator[list[Script]]:
    """Scripts a test ran; killed, and any server or directory they left removed, whatever the test's outcome."""
    started: list[Script] = []
    yield started
    for script in started:
        script.kill()
        for pid in script.info["pids"]:
            if not gone(pid):
                os.kill(pid, signal.SIGKILL)
        for workdir in script.info["workdirs"]:
            shutil.rmtree(workdir, ignore_errors=True)


def run(scripts: list[Script], body: str, *args: str) -> Script:
    script = Script(body, *args)
    scripts.append(script)
    return script


def gone(pid: int) -> bool:
    """No such process, or only its zombie: a process re-parented to a PID 1 that does not reap keeps one."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    except OSError:  # no /proc
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        return False
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


def all_gone(pids: list[int], timeout: float = 15) -> None:
    wait_until(lambda: all(gone(pid) for pid in pids), timeout=timeout)


# -- a signal whose default action ends the process --------------------------------------------------------------------


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_a_signal_stops_the_servers_removes_their_directories_and_ends_the_process_by_it(
    scripts: list[Script], tmp_path: Path, signum: int
) -> None:
    store = tmp_path / "kept"
    script = run(
        scripts,
        """
        temporary = EmbeddedServer().start()
        given = EmbeddedServer(store_dir=sys.argv[1]).start()
        ready(temporary, given)
        time.sleep(60)  # the script waits to be signalled; the test ends it long before
        """,
        str(store),
    )
    pids, workdirs = script.info["pids"], script.info["workdirs"]
    assert not any(gone(pid) for pid in pids)
    script.signal(signum)
    code, _out, err = script.finish()
    assert code == -signum, err  # ended by the signal, as without EmbeddedServer
    all_gone(pids)
    assert not any(Path(workdir).exists() for workdir in workdirs)
    assert (store / "jetstream").is_dir()  # a store the user gave is kept, as by stop()


@pytest.mark.parametrize("installed", ["before", "after"])
def test_a_handler_the_program_installed_decides_and_its_server_keeps_serving(
    scripts: list[Script], installed: str
) -> None:
    script = run(
        scripts,
        """
        signalled = []

        def graceful(signum, frame):  # no Event.set() here: the main thread may hold the Event's lock
            signalled.append(signum)

        if sys.argv[1] == "before":
            signal.signal(signal.SIGTERM, graceful)
        with EmbeddedServer() as server:
            if sys.argv[1] == "after":
                signal.signal(signal.SIGTERM, graceful)
            ready(server)
            deadline = time.monotonic() + 60
            while not signalled and time.monotonic() < deadline:
                time.sleep(0.01)  # poll the handler's flag, bounded by the deadline above
            assert signalled
            assert server.is_running and serves(server), "the server went from under the program's shutdown"
            print("served after the signal", flush=True)
        """,
        installed,
    )
    script.signal(signal.SIGTERM)
    code, out, err = script.finish()
    assert code == 0, err
    assert "served after the signal" in out
    all_gone(script.info["pids"])
    assert not Path(script.info["workdirs"][0]).exists()  # stop() by the with block, as the program meant


def test_a_later_handler_that_calls_the_one_it_replaced_runs_then_the_servers_stop_and_the_process_ends(
    scripts: list[Script],
) -> None:
    script = run(
        scripts,
        """
        server = EmbeddedServer().start()

        def chained(signum, frame):
            print("the program's handler ran", flush=True)
            if callable(previous):
                previous(signum, frame)

        previous = signal.signal(signal.SIGTERM, chained)
        ready(server)
        time.sleep(60)  # the script waits to be signalled; the test ends it long before
        """,
    )
    script.signal(signal.SIGTERM)
    code, out, err = script.finish()
    assert "the program's handler ran" in out
    assert code == -signal.SIGTERM, err
    all_gone(script.info["pids"])
    assert not Path(script.info["workdirs"][0]).exists()


def test_an_ignored_sigterm_stays_ignored_and_the_server_keeps_running(scripts: list[Script]) -> None:
    script = run(
        scripts,
        """
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        with EmbeddedServer() as server:
            ready(server)
            os.kill(os.getpid(), signal.SIGTERM)  # discarded at once: the action is SIG_IGN
            assert signal.getsignal(signal.SIGTERM) == signal.SIG_IGN
            assert server.is_running and serves(server)
        print("still here", flush=True)
        """,
    )
    code, out, err = script.finish()
    assert code == 0, err
    assert "still here" in out
    all_gone(script.info["pids"])


def test_a_forked_child_ending_on_sigterm_leaves_its_parents_servers_alone(scripts: list[Script]) -> None:
    script = run(
        scripts,
        """
        with EmbeddedServer() as server:
            ready(server)
            child = os.fork()
            if child == 0:  # inherits the handler and the registry, owns no server
                time.sleep(60)  # the child waits to be signalled; the test ends it long before
                os._exit(0)
            os.kill(child, signal.SIGTERM)
            _pid, status = os.waitpid(child, 0)
            assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGTERM, status
            assert server.is_running and serves(server)
            assert os.path.exists(server.log_path)
        print("parent's server untouched", flush=True)
        """,
    )
    code, out, err = script.finish()
    assert code == 0, err
    assert "parent's server untouched" in out


# -- a death no code of ours sees -------------------------------------------------------------------------------------


@linux_only
@pytest.mark.parametrize(
    ("started_on", "signum"),
    [("main", signal.SIGKILL), ("a thread that ended", signal.SIGKILL), ("a thread that ended", signal.SIGTERM)],
    ids=["main-SIGKILL", "thread-SIGKILL", "thread-SIGTERM"],
)
def test_a_server_stops_when_its_process_dies_without_running_code(
    scripts: list[Script], started_on: str, signum: int
) -> None:
    """PR_SET_PDEATHSIG. From a thread the signal handlers cannot be installed, so SIGTERM ends the process at once
    there too. The server must outlive the thread that started it (the kernel's "parent" is a thread)."""
    script = run(
        scripts,
        """
        import jetstream_sync

        if sys.argv[1] == "main":
            server = EmbeddedServer().start()
        else:
            made = []
            starter = threading.Thread(target=lambda: made.append(EmbeddedServer().start()))
            starter.start()
            starter.join()
            (server,) = made
        with jetstream_sync.connect(server.url) as nc:  # a round trip after the starting thread ended
            nc.jetstream().account_info()
        ready(server)
        time.sleep(60)  # the script waits to be signalled; the test ends it long before
        """,
        started_on,
    )
    (pid,) = script.info["pids"]
    assert not gone(pid)
    script.signal(signum)
    code, _out, err = script.finish()
    assert code == -signum, err
    all_gone([pid])  # its temporary directory is left: nothing of ours ran (the fixture removes it)
