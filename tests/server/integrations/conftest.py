"""What every integration test module shares."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from jetstream_sync.integrations._clients import close_process_clients


@pytest.fixture(autouse=True, scope="module")
def _close_process_clients_after_the_module() -> Iterator[None]:
    """The integrations share one client per process and settings (``process_client``), which lives until
    the process exits, as it should in a worker. In the test process it would outlive its module and keep
    its threads running into the suites that check no client thread is left (tests/server/test_client.py),
    so each module closes what it made."""
    yield
    close_process_clients()


class Exported:
    """The OpenTelemetry SDK with in-memory exporters: the spans finished and the metrics collected on demand
    (imported here, not at the top: the modules that use it need the otel extra, the others do not)."""

    def __init__(self) -> None:
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        self.spans = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.spans))
        self.metrics = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.metrics])

    def named(self, name: str) -> list[Any]:
        return [span for span in self.spans.get_finished_spans() if span.name == name]

    def metric(self, name: str) -> list[Any]:
        data = self.metrics.get_metrics_data()
        points = []
        for resource in data.resource_metrics if data else []:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    if metric.name == name:
                        points.extend(metric.data.data_points)
        return points


@pytest.fixture
def exported() -> Iterator[Exported]:
    """Every client of the process instrumented into the in-memory SDK for one test (test_otel*.py)."""
    from jetstream_sync.integrations import otel

    found = Exported()
    otel.instrument(tracer_provider=found.tracer_provider, meter_provider=found.meter_provider)
    yield found
    otel.uninstrument()
