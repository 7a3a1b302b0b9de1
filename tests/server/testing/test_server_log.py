"""A test that fails on a server error shows what the server logged (the pytest plugin's makereport hook).

The 500 is real: a file where the stream's store directory must go makes nats-server answer a create with
500 / 10049 "error creating store for stream" and log the cause, as a failing disk would.
"""

from __future__ import annotations

import inspect
import textwrap
from pathlib import Path

import pytest

import jetstream_sync
from jetstream_sync import StreamConfig, errors
from jetstream_sync.testing import EmbeddedServer
from tests.helpers import run_pytest


def block(server: EmbeddedServer, name: str) -> None:
    """Put a file where the stream's directory must go (a regular file: root cannot write through it either)."""
    streams = server.store_dir / "jetstream" / "$G" / "streams"
    streams.mkdir(parents=True, exist_ok=True)
    (streams / name).write_text("in the way of the stream's directory")


def sections(output: str) -> dict[str, str]:
    """The "nats-server log" sections of a pytest report, by the stream named in them: header line and content, up to
    the next block of the report."""
    found = {}
    for chunk in output.split("nats-server log nats://127.0.0.1:")[1:]:
        lines = [chunk.splitlines()[0]]
        for line in chunk.splitlines()[1:]:
            if line.startswith(("_", "=")):
                break
            lines.append(line)
        text = "\n".join(lines)
        found[next(name for name in ("INCALL", "INSETUP", "FINE", "MISSING") if name in text)] = text
    return found


def test_log_tail_since_a_size_has_only_what_was_logged_after_it(nats_server_function: EmbeddedServer) -> None:
    server = nats_server_function
    assert "Server is ready" in server.log_tail()
    size = server.log_size
    assert size > 0 and server.log_tail(since=size) == ""
    block(server, "BLOCKED")
    with jetstream_sync.connect(server.url) as nc, pytest.raises(errors.APIError) as refused:
        nc.jetstream().create_stream(StreamConfig(name="BLOCKED", subjects=["blocked.>"]))
    assert (refused.value.code, refused.value.err_code) == (500, 10049)
    logged = server.log_tail(since=size)
    assert "Stream create failed for '$G > BLOCKED'" in logged
    assert "Server is ready" not in logged


def test_a_test_failing_on_a_server_error_reports_what_the_server_logged(tmp_path: Path) -> None:
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "conftest.py").write_text('pytest_plugins = ["jetstream_sync.testing"]\n')
    tests = """
        import pytest
        import jetstream_sync
        from jetstream_sync import StreamConfig


        def create(server, name):
            with jetstream_sync.connect(server.url) as nc:
                nc.jetstream().create_stream(StreamConfig(name=name, subjects=[name + ".>"]))


        @pytest.fixture
        def blocked_in_setup(nats_server_function):
            block(nats_server_function, "INSETUP")
            create(nats_server_function, "INSETUP")


        def test_passes(nats_server):  # first: the session server starts here
            create(nats_server, "FINE")


        def test_fails_on_a_500(nats_server):
            block(nats_server, "INCALL")
            create(nats_server, "INCALL")


        def test_fails_on_a_500_in_setup(blocked_in_setup):
            pass


        def test_fails_on_a_404(nats_server):
            with jetstream_sync.connect(nats_server.url) as nc:
                nc.jetstream().stream_info("MISSING")


        def test_fails_on_an_assert(nats_server):
            assert False


        """
    source = "from __future__ import annotations\n\n" + inspect.getsource(block) + textwrap.dedent(tests)
    (tmp_path / "test_it.py").write_text(source)
    done = run_pytest(tmp_path)
    out = done.stdout
    assert "3 failed, 1 passed, 1 error" in out, out + done.stderr
    found = sections(out)
    assert sorted(found) == ["INCALL", "INSETUP"], out  # only the two 500s
    assert "Stream create failed for '$G > INCALL'" in found["INCALL"]
    assert "Server is ready" not in found["INCALL"]  # the session server's log since this test began, no more
    assert "Stream create failed for '$G > INSETUP'" in found["INSETUP"]
    assert "Server is ready" in found["INSETUP"]  # a server the failed setup started: its whole log
