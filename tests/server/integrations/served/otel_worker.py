"""``flask ... jetstream consume ...`` with OpenTelemetry on: the spans of this worker process are exported in
memory and written to ``$SPANS_FILE`` (JSON) when the process exits, for the test to read.

    python otel_worker.py --app orders_app:create_app jetstream consume ORDERS fulfil --handler orders_app:fulfil
"""

from __future__ import annotations

import atexit
import json
import os
import sys

from flask.cli import main
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from jetstream_sync.integrations import otel

exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
otel.instrument(tracer_provider=provider)


def write_spans() -> None:
    spans = [
        {
            "name": span.name,
            "kind": span.kind.name,
            "trace_id": f"{span.context.trace_id:032x}",
            "span_id": f"{span.context.span_id:016x}",
            "parent_id": f"{span.parent.span_id:016x}" if span.parent else None,
        }
        for span in exporter.get_finished_spans()
    ]
    with open(os.environ["SPANS_FILE"], "w", encoding="utf-8") as out:
        json.dump(spans, out)


atexit.register(write_spans)
sys.argv = ["flask", *sys.argv[1:]]
sys.exit(main())
