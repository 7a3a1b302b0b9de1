"""The service ``manage.py jetstream_service`` and ``flask jetstream service`` run in the command tests.

``context`` says which framework's context the handler runs in (the Flask app's name inside its app context,
"django" when Django is set up); ``slow`` touches ``<dir>/started`` and waits until ``<dir>/release`` exists
(``dir`` is the request's body), so a test can hold a request in flight while it stops the process.
"""

from __future__ import annotations

import time
from pathlib import Path

from jetstream_sync.services import Request, Service, ServiceError

service = Service("served", "1.0.0", description="the command tests' service", workers=2)


@service.endpoint()
def context(request: Request) -> str:
    try:
        from flask import current_app, has_app_context

        if has_app_context():
            return f"flask:{current_app.import_name}"
    except ImportError:
        pass
    from django.conf import settings

    return f"django:{settings.ROOT_URLCONF}" if settings.configured else "none"


@service.endpoint()
def slow(request: Request) -> str:
    folder = Path(request.text())
    (folder / "started").touch()
    deadline = time.monotonic() + 20
    while not (folder / "release").exists():
        if time.monotonic() > deadline:
            raise ServiceError(504, "the test never released the request")
        time.sleep(0.01)  # polls a file the test process creates: the only link between the two processes
    return "finished"


def make_service() -> Service:
    """A factory, as ``--service tests.server.services.served:make_service`` may name one."""
    return service


NOT_A_SERVICE = 42
