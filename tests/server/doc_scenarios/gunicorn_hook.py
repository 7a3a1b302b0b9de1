"""Scenario ``gunicorn-hook``: a block that is a ``gunicorn.conf.py`` whose ``post_fork`` hook gives the module
``myapp`` a client (``myapp.nc``) in each worker serves requests from a real gunicorn.

The driver writes the block as gunicorn.conf.py (its servers the embedded one) and a WSGI app ``myapp:app`` that
answers each request after a round trip on ``myapp.nc`` with the worker's pid, runs gunicorn with 2 workers on a
free loopback port, asks until both workers answered (each through its own client, made after the fork), stops it
with SIGTERM and expects exit code 0 and no traceback in its log.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from jetstream_sync.testing import EmbeddedServer
from tests.server.doc_scenarios import block_files, your_servers_to

MYAPP = """\
import os

nc = None  # set in each worker by gunicorn.conf.py's post_fork


def app(environ, start_response):
    nc.flush(timeout=5)  # a round trip: this worker's client is connected
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [f"{os.getpid()} {nc.connected_url}".encode()]
"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _get(url: str) -> str | None:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return str(response.read().decode())
    except (urllib.error.URLError, ConnectionError):
        return None  # not listening yet


def serve(path: Path, server_url: str) -> None:
    directory = path.parent
    (directory / "gunicorn.conf.py").write_text(your_servers_to(path.read_text(encoding="utf-8"), [server_url]))
    (directory / "myapp.py").write_text(MYAPP)
    port = _free_port()
    command = [sys.executable, "-m", "gunicorn", "-c", "gunicorn.conf.py", "-w", "2", "-b", f"127.0.0.1:{port}"]
    log = directory / "gunicorn.log"
    with log.open("w") as out:
        gunicorn = subprocess.Popen([*command, "myapp:app"], cwd=directory, stdout=out, stderr=subprocess.STDOUT)
    try:
        pids: set[str] = set()
        deadline = time.monotonic() + 30
        while len(pids) < 2:
            assert time.monotonic() < deadline, f"both workers did not answer in 30 s: {pids}\n{log.read_text()}"
            assert gunicorn.poll() is None, f"gunicorn exited with {gunicorn.returncode}\n{log.read_text()}"
            answer = _get(f"http://127.0.0.1:{port}/")
            if answer is None:
                time.sleep(0.1)  # the poll interval of this bounded wait for gunicorn to listen
                continue
            pid, connected = answer.split()
            assert connected.endswith(server_url.split("://")[1]), answer
            assert int(pid) != gunicorn.pid, "the master answered"
            pids.add(pid)
    finally:
        gunicorn.send_signal(signal.SIGTERM)
        code = gunicorn.wait(timeout=30)
    text = log.read_text()
    assert code == 0 and "Traceback" not in text, f"gunicorn exited with {code}:\n{text}"
    print(f"{path.name}: workers {sorted(pids)} each answered through their own client")


def main() -> None:
    os.environ.pop("GUNICORN_CMD_ARGS", None)
    with EmbeddedServer() as server:
        for path in block_files():
            serve(path, server.url)


if __name__ == "__main__":
    main()
