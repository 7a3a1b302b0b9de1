"""The Flask example in one command: an embedded nats-server, the app on a real HTTP server, orders posted over
HTTP, then the worker (``flask jetstream consume``) fulfils them and stops cleanly on SIGTERM.

python examples/flask_app/run.py                          # starts an embedded nats-server for the demo
python examples/flask_app/run.py nats://127.0.0.1:4222    # or use your own server (JetStream enabled)
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

try:
    import flask  # noqa: F401 - the flask extra (werkzeug comes with it)
except ModuleNotFoundError as exc:  # say which extra to install, not an ImportError traceback
    sys.exit(f"this example needs the flask extra: pip install -e '.[server,flask]' (no module {exc.name!r})")

from werkzeug.serving import make_server

from jetstream_sync.testing import ServerNotInstalledError

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # orders_app, whether this runs from the repository or from here

from orders_app import create_app, create_streams  # noqa: E402 - after the path is set


def call(url: str, order: dict[str, object] | None = None) -> dict[str, object]:
    data = None if order is None else json.dumps(order).encode()
    with urllib.request.urlopen(urllib.request.Request(url, data=data), timeout=10) as response:
        return json.loads(response.read())  # type: ignore[no-any-return]


def run(url: str) -> None:
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # no line per request
    app = create_app({"JETSTREAM_SERVERS": url})
    with app.app_context():
        create_streams()
    server = make_server("127.0.0.1", 0, app, threaded=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_port}"
    try:
        ids = [call(f"{base}/orders", {"item": item})["id"] for item in ("tea", "cake", "scones")]
        print(f"posted orders {ids}: {[call(f'{base}/orders/{i}')['status'] for i in ids]}")
        worker = subprocess.Popen(
            [sys.executable, "-m", "flask", "--app", "orders_app:create_app", "jetstream", "consume", "ORDERS",
             "fulfil", "--handler", "orders_app:fulfil"],
            cwd=HERE,
            env={**os.environ, "FLASK_JETSTREAM_SERVERS": url},
        )  # fmt: skip
        deadline = time.monotonic() + 30
        while any(call(f"{base}/orders/{i}")["status"] != "fulfilled" for i in ids):
            if time.monotonic() > deadline or worker.poll() is not None:
                worker.kill()
                raise SystemExit("the worker did not fulfil the orders")
            time.sleep(0.1)  # polling the app, as a client would
        print(f"fulfilled: {[call(f'{base}/orders/{i}')['by'] for i in ids]}")
        worker.send_signal(signal.SIGTERM)
        print(f"worker stopped with exit code {worker.wait(timeout=30)}")
    finally:
        server.shutdown()


def main() -> None:
    if len(sys.argv) > 1:
        run(sys.argv[1])
        return
    from jetstream_sync.testing import EmbeddedServer

    with EmbeddedServer() as server, contextlib.suppress(KeyboardInterrupt):
        print(f"started an embedded nats-server at {server.url}")
        run(server.url)


if __name__ == "__main__":
    try:
        main()
    except ServerNotInstalledError as exc:  # no nats-server to start: the message names the extra that has one
        sys.exit(f"{exc}; or give a running server: python examples/flask_app/run.py nats://127.0.0.1:4222")
