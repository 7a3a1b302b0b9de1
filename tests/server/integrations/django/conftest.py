"""Django configured once, pointed at the session's embedded nats-server."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.conf import settings

from jetstream_sync.integrations.django import close_clients
from tests.server.integrations.django.djangosetup import configure

configure()


@pytest.fixture(autouse=True, scope="session")
def jetstream_setting(nats_server) -> Iterator[None]:
    """settings.JETSTREAM names the embedded server for every test here."""
    settings.JETSTREAM = {"SERVERS": [nats_server.url], "NAME": "django-tests"}
    yield
    close_clients()
