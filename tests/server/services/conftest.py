"""Fixtures of the services tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from jetstream_sync.services import ServiceInstance


@pytest.fixture
def started(client) -> Iterator[list[ServiceInstance]]:
    """Instances a test starts (it appends them); stopped after it, on a client still open."""
    instances: list[ServiceInstance] = []
    yield instances
    for instance in instances:
        if instance.is_running:
            instance.stop(5)
