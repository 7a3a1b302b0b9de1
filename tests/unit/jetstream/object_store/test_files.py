"""get_file's write (``_files``): a temporary file beside the target, renamed over it only when complete."""

from __future__ import annotations

import os
import stat

import pytest

from jetstream_sync.jetstream.object_store._files import replace_atomically


def test_the_target_is_replaced_whole(tmp_path):
    target = tmp_path / "t.bin"
    target.write_bytes(b"old")
    target.chmod(0o640)
    replace_atomically(target, lambda fd: os.write(fd, b"new content"))
    assert target.read_bytes() == b"new content"
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert [p.name for p in tmp_path.iterdir()] == ["t.bin"]


def test_a_new_file_gets_the_mode_open_would_give(tmp_path):
    umask = os.umask(0o027)
    try:
        replace_atomically(tmp_path / "n.bin", lambda fd: os.write(fd, b"x"))
    finally:
        os.umask(umask)
    assert stat.S_IMODE((tmp_path / "n.bin").stat().st_mode) == 0o640


def test_a_failure_leaves_the_old_file_and_no_temporary_one(tmp_path):
    target = tmp_path / "t.bin"
    target.write_bytes(b"old")

    def fail(fd: int) -> None:
        os.write(fd, b"partial")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        replace_atomically(target, fail)
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["t.bin"]


def test_a_missing_directory_raises_what_open_would(tmp_path):
    with pytest.raises(FileNotFoundError):
        replace_atomically(tmp_path / "no" / "t.bin", lambda fd: None)
