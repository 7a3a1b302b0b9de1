"""Scenario ``flask-app``: a block that is a Flask app factory serves a request, as a WSGI server would pass it.

The block defines ``jetstream`` (the extension) and ``create_app()`` whose ``POST /orders`` publishes the body to
``orders.new`` and answers 201 with the PubAck's ``seq``: the driver imports it as a module, makes the app, makes
the stream ORDERS through the app's own client, and posts an order with Flask's test client.
"""

from __future__ import annotations

from jetstream_sync import StreamConfig
from jetstream_sync.testing import EmbeddedServer
from tests.server.doc_scenarios import block_files, module_of


def main() -> None:
    with EmbeddedServer() as server:
        for path in block_files():
            module = module_of(path, [server.url])
            app = module.create_app()
            with app.app_context():
                module.jetstream.js.create_or_update_stream(StreamConfig(name="ORDERS", subjects=["orders.>"]))
            response = app.test_client().post("/orders", data=b"lamp")
            assert (response.status_code, response.json) == (201, {"seq": 1}), (response.status_code, response.data)
            print(f"{path.name}: POST /orders -> {response.status_code} {response.json}")


if __name__ == "__main__":
    main()
