"""One trace, exported in memory, across processes: an HTTP request to the Flask example (a SERVER span), the
publish it makes, and the consume handler that fulfils the order in a worker process (``flask jetstream
consume`` with OpenTelemetry on, whose spans are written to a file when it exits)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Callable, Iterable
from typing import Any

import pytest
from opentelemetry import propagate, trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind
from werkzeug.serving import make_server

from jetstream_sync import errors
from jetstream_sync.integrations import otel
from tests.helpers import REPO_ROOT, wait_until

EXAMPLE = REPO_ROOT / "examples" / "flask_app"
SERVED = REPO_ROOT / "tests" / "server" / "integrations" / "served"
sys.path.insert(0, str(EXAMPLE))
import orders_app  # noqa: E402 - examples/flask_app/orders_app.py


class ServerSpans:
    """WSGI middleware: each request a SERVER span continuing the caller's trace (what opentelemetry's WSGI
    instrumentation does; kept minimal here so the test needs only the SDK)."""

    def __init__(self, app: Callable[..., Iterable[bytes]], tracer: trace.Tracer) -> None:
        self.app = app
        self.tracer = tracer

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        carrier = {"traceparent": environ.get("HTTP_TRACEPARENT", "")}
        name = f"{environ['REQUEST_METHOD']} {environ['PATH_INFO']}"
        with self.tracer.start_as_current_span(name, context=propagate.extract(carrier), kind=SpanKind.SERVER):
            return list(self.app(environ, start_response))


@pytest.fixture
def exported():
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    otel.instrument(tracer_provider=provider)
    yield exporter, provider.get_tracer("test")
    otel.uninstrument()


def test_one_trace_runs_from_an_http_request_through_jetstream_into_a_worker_process(
    exported, nats_server_function, tmp_path
):
    exporter, tracer = exported
    app = orders_app.create_app({"JETSTREAM_SERVERS": nats_server_function.url})
    with app.app_context():
        orders_app.create_streams()
    app.wsgi_app = ServerSpans(app.wsgi_app, tracer)  # type: ignore[method-assign]
    server = make_server("127.0.0.1", 0, app, threaded=True)
    serving = threading.Thread(target=server.serve_forever, name="flask-example", daemon=True)
    serving.start()
    try:
        request = urllib.request.Request(
            f"http://127.0.0.1:{server.server_port}/orders", data=b'{"item": "book"}', method="POST"
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            order_id = json.loads(response.read())["id"]
    finally:
        server.shutdown()

    spans_file = tmp_path / "worker-spans.json"
    env = {
        **os.environ,
        "FLASK_JETSTREAM_SERVERS": nats_server_function.url,
        "SPANS_FILE": str(spans_file),
        "PYTHONPATH": os.pathsep.join([str(EXAMPLE), str(SERVED)]),
    }
    worker = subprocess.Popen(
        [sys.executable, str(SERVED / "otel_worker.py"), "--app", "orders_app:create_app", "jetstream", "consume",
         "ORDERS", "fulfil", "--handler", "orders_app:fulfil"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        with app.app_context():
            bucket = orders_app.jetstream.js.key_value("fulfilled")
            wait_until(lambda: _fulfilled(bucket, order_id), timeout=20)
        worker.send_signal(signal.SIGTERM)
        output, _ = worker.communicate(timeout=30)
        assert worker.returncode == 0, output
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.communicate(timeout=10)

    (request_span,) = [s for s in exporter.get_finished_spans() if s.name == "POST /orders"]
    (publish,) = [s for s in exporter.get_finished_spans() if s.name == "publish orders.new"]
    worker_spans = json.loads(spans_file.read_text())
    (process,) = [s for s in worker_spans if s["name"] == "process orders.new"]
    trace_id = f"{request_span.context.trace_id:032x}"
    assert publish.parent.span_id == request_span.context.span_id
    assert process["kind"] == "CONSUMER" and process["trace_id"] == trace_id  # the same trace, another process
    assert process["parent_id"] == f"{publish.context.span_id:016x}"
    kv_writes = [s for s in worker_spans if s["name"].startswith("publish $KV.fulfilled.")]
    assert kv_writes and kv_writes[0]["trace_id"] == trace_id  # what the handler did is in the trace too
    assert kv_writes[0]["parent_id"] == process["span_id"]


def _fulfilled(bucket: Any, order_id: int) -> bool:
    try:
        bucket.get(str(order_id))
    except errors.KeyNotFoundError:
        return False
    return True
