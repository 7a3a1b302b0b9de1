"""What every integration test module shares."""

from __future__ import annotations

from collections.abc import Iterator

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
