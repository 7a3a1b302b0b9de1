"""deploy_wsgi's app under eventlet's own WSGI server, monkey-patched first as eventlet requires (gunicorn 27 has
no eventlet worker). Serves on 127.0.0.1:<argv[1]> until SIGTERM, then returns normally (exit code 0).

The SIGTERM handler only sets a flag. Under eventlet every green thread, the client's IO thread included, runs on
the process's one OS thread, so an exception raised by a signal handler lands in whichever green thread is
running: a SystemExit raised there ended the client's read loop instead of the server (seen in this matrix).
"""

from __future__ import annotations

import eventlet

eventlet.monkey_patch()

import signal  # noqa: E402 - after monkey_patch, as eventlet asks
import sys  # noqa: E402

import deploy_wsgi  # noqa: E402
import eventlet.wsgi  # noqa: E402

stopping: list[int] = []
signal.signal(signal.SIGTERM, lambda signum, frame: stopping.append(signum))
server = eventlet.spawn(eventlet.wsgi.server, eventlet.listen(("127.0.0.1", int(sys.argv[1]))), deploy_wsgi.application)
while not stopping:
    eventlet.sleep(0.05)
server.kill()
