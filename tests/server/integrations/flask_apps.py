"""The Flask app the Flask tests serve and run ``flask jetstream consume`` against (``--app`` imports it).

Settings come from ``create_app(config)`` in-process, or from ``FLASK_JETSTREAM_*`` environment variables
(``app.config.from_prefixed_env()``) when the flask command runs it in a subprocess.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping

from flask import Flask, current_app, request

from jetstream_sync import Msg
from jetstream_sync.integrations.flask import JetStream

jetstream = JetStream()

#: not a function: ``--handler tests.server.integrations.flask_apps:NOT_A_HANDLER`` is refused
NOT_A_HANDLER = 42


def create_app(config: Mapping[str, object] | None = None) -> Flask:
    app = Flask(__name__)
    app.config.from_prefixed_env()
    app.config.update(config or {})
    jetstream.init_app(app)

    @app.post("/publish/<subject>")
    def publish(subject: str) -> dict[str, object]:
        ack = jetstream.js.publish(subject, request.get_data())
        return {"stream": ack.stream, "seq": ack.seq, "client": id(jetstream.client)}

    @app.get("/last/<stream>/<subject>")
    def last(stream: str, subject: str) -> dict[str, object]:
        stored = jetstream.js.stream(stream).get_last_msg(subject)
        return {"seq": stored.seq, "data": stored.data.decode()}

    return app


def forward(msg: Msg) -> None:
    """The consume handler: ``<stream>.in.<x>`` is published again as ``<stream>.out.<x>`` through the extension
    (so it needs the app context); ``fail-once`` raises on its first delivery, to be nak'ed and redelivered."""
    if msg.data == b"fail-once" and msg.metadata.num_delivered == 1:
        raise RuntimeError("failing once on purpose")
    assert current_app.import_name == __name__
    jetstream.js.publish(msg.subject.replace(".in.", ".out.", 1), msg.data)


_never = threading.Event()


def stuck(msg: Msg) -> None:
    """A handler that does not finish within the drain timeout of the test (and ends with the process)."""
    _never.wait(60)
