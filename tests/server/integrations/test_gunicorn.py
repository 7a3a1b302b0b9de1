"""A real gunicorn (3 workers; sync and gthread; with and without --preload) serving a Flask app and a Django
app that publish and make a core request on every HTTP request, driven by real HTTP from several threads.

A worker is killed with SIGKILL and respawned by the master in the middle of the run. Every publish reaches the
stream (each request's msg_id stored once), no request fails or hangs, and the log has no ForkedClientError;
SIGTERM stops gunicorn with exit code 0. With --preload the app module publishes at import, so the master holds
a connected client when it forks: each worker must make its own.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import urllib.request

import pytest

import jetstream_sync
from jetstream_sync import StreamConfig, errors
from tests.helpers import REPO_ROOT, children, wait_until

# The apps' directory, on the workers' PYTHONPATH: not the test package itself, whose django/ would shadow Django.
HERE = REPO_ROOT / "tests" / "server" / "integrations" / "served"
REQUESTS = 60  # per half of the run, before and after the kill
THREADS = 6


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def service(nats_server_function):
    """The stream the apps publish to, and the responder of their core requests."""
    with jetstream_sync.connect(nats_server_function.url) as nc:
        for name in ("flask", "django", "boot"):
            nc.jetstream().create_stream(StreamConfig(name=f"WEB_{name.upper()}", subjects=[f"web.{name}"]))
        sub = nc.subscribe("web.echo")
        stop = threading.Event()

        def respond() -> None:
            while not stop.is_set():
                try:
                    msg = sub.next_msg(timeout=0.2)
                except errors.TimeoutError:
                    continue
                except errors.JetStreamError:
                    return
                nc.publish(msg.reply, msg.data)

        responder = threading.Thread(target=respond, name="echo-responder", daemon=True)
        responder.start()
        yield nc.jetstream(), nats_server_function.url
        stop.set()
        responder.join(5)


def get(port: int, key: str) -> dict[str, object]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/hit/{key}", timeout=20) as response:
        return json.loads(response.read())


@pytest.mark.parametrize(
    ("app", "worker_class", "preload"),
    [("flask", "sync", False), ("flask", "gthread", True), ("django", "sync", True), ("django", "gthread", False)],
)
def test_gunicorn_workers_publish_and_request_across_a_killed_worker(service, tmp_path, app, worker_class, preload):
    js, url = service
    port = free_port()
    env = {**os.environ, "NATS_URL": url, "TOUCH_AT_IMPORT": "1" if preload else "0", "PYTHONPATH": str(HERE)}
    command = [
        sys.executable, "-m", "gunicorn", f"wsgi_apps:{app}_app", "--bind", f"127.0.0.1:{port}", "--workers", "3",
        "--worker-class", worker_class, "--threads", "4" if worker_class == "gthread" else "1", "--timeout", "30",
        "--graceful-timeout", "10",
    ]  # fmt: skip
    if preload:
        command.append("--preload")
    log = tmp_path / "gunicorn.log"
    with log.open("w") as out:
        master = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT, cwd=HERE)
    try:
        wait_until(lambda: len(children(master.pid)) == 3 and _listening(port), timeout=30)
        with concurrent.futures.ThreadPoolExecutor(THREADS) as pool:
            first = list(pool.map(lambda i: get(port, f"a{i}"), range(REQUESTS)))
            victim = int(first[0]["pid"])
            os.kill(victim, signal.SIGKILL)  # a worker dies; the master starts another
            wait_until(lambda: victim not in children(master.pid) and len(children(master.pid)) == 3, timeout=30)
            second = list(pool.map(lambda i: get(port, f"b{i}"), range(REQUESTS)))
        stored = js.stream_info(f"WEB_{app.upper()}").state.messages
        assert stored == 2 * REQUESTS  # every request's publish, each stored once
        assert all(answer["echo"] == key for answer, key in zip(first, [f"a{i}" for i in range(REQUESTS)], strict=True))
        assert len({answer["pid"] for answer in first + second}) >= 2  # served by several workers
        if preload:
            assert js.stream_info("WEB_BOOT").state.messages == 2  # both apps published from the master
        master.send_signal(signal.SIGTERM)
        assert master.wait(30) == 0
    finally:
        if master.poll() is None:
            master.kill()
            master.wait(10)
    text = log.read_text()
    assert "ForkedClientError" not in text and "Traceback" not in text, text[-3000:]


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return False
    return True
