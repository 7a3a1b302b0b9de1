"""The WSGI app the uWSGI and gunicorn deployments serve (plain WSGI: no framework between the server and us).

- ``GET /work/<key>``: :func:`workload.work`, answered as JSON; ``GET /drain``: :func:`workload.drain`;
  ``GET /notify/<key>``: a core publish written after the response (:func:`workload.notify`).
- With ``DEPLOY_CONNECT_AT_IMPORT=1`` the module connects a client of its own at import and publishes with it:
  in uWSGI's master without ``--lazy-apps``, or gunicorn's with ``--preload``, so every worker is forked from a
  process holding a connected client. Each worker's first request then uses that inherited client once and
  reports what happened (``inherited``: the error's class name, and how long it took): the promise is
  ForkedClientError at once, however the worker was forked.
- A JetStreamError of the work (ThreadsDisabledError from connect, say) is answered with status 500 and its
  class name, so the test sees it without reading the server's log.

INFO logging goes to stderr, i.e. the server's log, where the test looks for the gevent/eventlet note.
"""

from __future__ import annotations

import faulthandler
import json
import logging
import os
import signal
import sys
import time
from collections.abc import Callable, Iterable

import workload

import jetstream_sync
from jetstream_sync import errors

logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(process)d %(levelname)s %(name)s: %(message)s")

faulthandler.register(signal.SIGUSR2, all_threads=True)  # a test that finds a process stuck asks its stacks

BOOT: jetstream_sync.Client | None = None
BOOT_PID = os.getpid()
if os.environ.get("DEPLOY_CONNECT_AT_IMPORT") == "1":
    BOOT = jetstream_sync.connect(os.environ["NATS_URL"], name="deploy-boot")
    BOOT.jetstream().publish("deploy.boot", str(BOOT_PID).encode(), msg_id=f"boot-{BOOT_PID}")

_inherited: dict[str, object] = {}  # this process's one try of the inherited client


def inherited_client_use() -> dict[str, object]:
    """In a process forked from the one that made BOOT: what one publish through BOOT did, tried once."""
    if BOOT is None or os.getpid() == BOOT_PID or _inherited:
        return _inherited
    start = time.monotonic()
    try:
        BOOT.jetstream().publish("deploy.inherited", str(os.getpid()).encode(), msg_id=f"inherited-{os.getpid()}")
        outcome = "published"
    except errors.JetStreamError as exc:
        outcome = type(exc).__name__
    _inherited.update(inherited=outcome, inherited_seconds=round(time.monotonic() - start, 3))
    return _inherited


def application(environ: dict[str, object], start_response: Callable[..., object]) -> Iterable[bytes]:
    faulthandler.register(signal.SIGUSR2, all_threads=True)  # a test that finds a worker stuck asks its stacks
    path = str(environ.get("PATH_INFO", ""))
    status = "200 OK"
    try:
        if path.startswith("/work/"):
            body: dict[str, object] = {**workload.work(path.removeprefix("/work/")), **inherited_client_use()}
        elif path == "/drain":
            body = {"pid": os.getpid(), "done": workload.drain()}
        elif path.startswith("/notify/"):
            workload.notify(path.removeprefix("/notify/"))
            body = {"pid": os.getpid()}
        else:
            status, body = "404 Not Found", {"error": path}
    except errors.JetStreamError as exc:
        status, body = "500 Internal Server Error", {"error": type(exc).__name__, "message": str(exc)}
    data = json.dumps(body).encode()
    start_response(status, [("Content-Type", "application/json"), ("Content-Length", str(len(data)))])
    return [data]
