"""Fork detection (``_runtime/_fork.py``) for forks made by Python and forks made in C, in real child processes.

uWSGI forks its workers in C, where ``os.register_at_fork`` hooks never run; libc's ``fork()`` called through
``ctypes.PyDLL`` (which keeps the GIL held, as a C extension would) makes the same kind of child here.
"""

from __future__ import annotations

import mmap
import subprocess
import sys

import pytest

FORKS = {"os.fork": "os.fork()", "libc fork": "ctypes.PyDLL(None).fork()"}

SCRIPT = """
import ctypes, os, sys
from jetstream_sync._runtime import _fork
from jetstream_sync import errors

resets = []
_fork.after_fork(lambda: resets.append(os.getpid()))
parents = _fork.ForkGuard()


def report(*facts):
    os.write(1, (" ".join(str(fact) for fact in facts) + "\\n").encode())


def fork():
    return {fork}


if fork() == 0:
    _fork.check_process()
    _fork.check_process()  # the resets run once per process, not per check
    own = _fork.ForkGuard()
    try:
        parents.check()
        refused = False
    except errors.ForkedClientError:
        refused = True
    report("child", parents.inherited, refused, own.inherited, len(resets) == 1 and resets[0] == os.getpid())
    if fork() == 0:
        _fork.check_process()
        report("grandchild", parents.inherited, own.inherited, _fork.ForkGuard().inherited, len(resets))
        os._exit(0)
    os.wait()
    os._exit(0)
os.wait()
report("parent", parents.inherited, resets)
"""


@pytest.mark.parametrize("fork", FORKS.values(), ids=FORKS.keys())
def test_a_forked_child_is_recognised_however_it_was_forked(fork: str) -> None:
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT.format(fork=fork)], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    # the parent's guard is inherited in the child and refuses; the child's own works; the resets ran once
    assert "child True True False True" in lines, result.stdout
    # in the grandchild both earlier guards are inherited, a new one is not, and the resets ran once more
    assert "grandchild True True False 2" in lines, result.stdout
    assert "parent False []" in lines, result.stdout


def test_the_process_mark_is_a_page_the_kernel_wipes_on_linux() -> None:
    from jetstream_sync._runtime import _fork

    mark = _fork._new_mark()
    if sys.platform.startswith("linux"):
        assert isinstance(mark, mmap.mmap)
    assert mark[0]
    assert _fork._ProcessId()[0]  # the fallback
