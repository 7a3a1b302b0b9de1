"""``get_file``'s write: into a temporary file beside the target, renamed over it only when complete.

The rename is what makes the target all-or-nothing: a reader of ``path`` sees the old file or the whole new
one, never a partial or unverified object, and a failed read (a digest mismatch, a timeout, Ctrl-C) leaves
the old file untouched and no temporary file behind. The temporary file is created the way ``open(path,
"wb")`` would create the target (mode 0666 less the umask, or the mode of the file it replaces), not with
``mkstemp``'s 0600, so the result has the permissions a user expects.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from collections.abc import Callable
from pathlib import Path

__all__ = ["replace_atomically"]

_CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)


def replace_atomically(target: Path, fill: Callable[[int], None]) -> None:
    """Create a temporary file in ``target``'s directory, let ``fill(fd)`` write it, flush it to disk and rename
    it onto ``target``. Whatever ``fill`` raises propagates after the temporary file is removed."""
    fd, temp = _create_beside(target)
    try:
        try:
            fill(fd)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise


def _create_beside(target: Path) -> tuple[int, Path]:
    try:
        mode = stat.S_IMODE(os.stat(target).st_mode)
    except FileNotFoundError:
        mode = None
    for _ in range(100):
        temp = target.with_name(f".{target.name}.{secrets.token_hex(6)}.part")
        try:
            fd = os.open(temp, _CREATE_FLAGS, 0o666)
        except FileExistsError:
            continue
        if mode is not None:
            with contextlib.suppress(OSError):
                os.chmod(temp, mode)
        return fd, temp
    raise FileExistsError(f"could not create a temporary file beside {target}")
