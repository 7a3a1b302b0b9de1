"""The WSGI apps the gunicorn tests serve: a Flask app and a Django app that, on every HTTP request, publish to
JetStream (with a msg_id from the URL) and make a core request to a responder the test runs.

Settings come from the environment: ``NATS_URL``; ``TOUCH_AT_IMPORT=1`` makes the module publish when it is
imported, so with ``gunicorn --preload`` the master process has a connected client when it forks its workers.
"""

from __future__ import annotations

import os

import django
from django.conf import settings
from django.http import HttpRequest, JsonResponse
from django.urls import path
from flask import Flask

from jetstream_sync.integrations.flask import JetStream

NATS_URL = os.environ.get("NATS_URL", "nats://127.0.0.1:4222")


def _answer(js_publish_seq: int, echoed: bytes) -> dict[str, object]:
    return {"pid": os.getpid(), "seq": js_publish_seq, "echo": echoed.decode()}


# -- Flask ----------------------------------------------------------------------------------------------------
flask_app = Flask(__name__)
flask_app.config.update(JETSTREAM_SERVERS=NATS_URL, JETSTREAM_NAME="gunicorn-flask")
jetstream = JetStream(flask_app)


@flask_app.get("/hit/<key>")
def flask_hit(key: str) -> dict[str, object]:
    ack = jetstream.js.publish("web.flask", key.encode(), msg_id=f"flask-{key}")
    reply = jetstream.client.request("web.echo", key.encode(), timeout=5)
    return _answer(ack.seq, reply.data)


# -- Django ---------------------------------------------------------------------------------------------------
def django_hit(request: HttpRequest, key: str) -> JsonResponse:
    from jetstream_sync.integrations.django import get_client, get_jetstream

    ack = get_jetstream().publish("web.django", key.encode(), msg_id=f"django-{key}")
    reply = get_client().request("web.echo", key.encode(), timeout=5)
    return JsonResponse(_answer(ack.seq, reply.data))


urlpatterns = [path("hit/<str:key>", django_hit)]

settings.configure(
    DEBUG=False,
    SECRET_KEY="gunicorn-test",
    ALLOWED_HOSTS=["127.0.0.1"],
    ROOT_URLCONF=__name__,
    INSTALLED_APPS=["jetstream_sync.integrations.django"],
    DATABASES={},
    JETSTREAM={"SERVERS": NATS_URL, "NAME": "gunicorn-django"},
)
django.setup()

from django.core.wsgi import get_wsgi_application  # noqa: E402 - after settings.configure

django_app = get_wsgi_application()

if os.environ.get("TOUCH_AT_IMPORT") == "1":
    from jetstream_sync.integrations.django import get_jetstream

    jetstream.js.publish("web.boot", b"flask")  # outside a request: the extension falls back to its app
    get_jetstream().publish("web.boot", b"django")
