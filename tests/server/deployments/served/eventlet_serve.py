"""deploy_wsgi's app under eventlet's own WSGI server, monkey-patched first as eventlet requires (gunicorn 27 has
no eventlet worker). Serves on 127.0.0.1:<argv[1]> until SIGTERM, then exits 0."""

from __future__ import annotations

import eventlet

eventlet.monkey_patch()

import signal  # noqa: E402 - after monkey_patch, as eventlet asks
import sys  # noqa: E402

import deploy_wsgi  # noqa: E402
import eventlet.wsgi  # noqa: E402


def stop(signum: int, frame: object) -> None:
    raise SystemExit(0)


signal.signal(signal.SIGTERM, stop)
listener = eventlet.listen(("127.0.0.1", int(sys.argv[1])))
eventlet.wsgi.server(listener, deploy_wsgi.application, log_output=False)
