"""Scenario ``django-view``: blocks of a Django project, modules and a view's lines, serve requests.

A block whose first line is ``# <path>.py`` (``# shop/tasks.py``) is that module of the project. Any other block
is the body of a view: the driver serves each as ``POST /view`` and sends it one request through Django's test
client, the body ``{"id": 42}``. The view's lines run with what a view module of the project would have
imported: the project's modules' public names, ``request``, ``payload`` (the request's body), ``transaction``,
``timezone``, ``timedelta``, ``partial`` and the model ``Order`` (``shop.models``: an ``item``; the reader's
own). The settings are :func:`settings_for` (this library's app, its task backend, the embedded server, a
SQLite database). With the tasks backport (Django < 6), a module's ``from django.tasks import`` reads ``from
django_tasks import``, as the block's comment tells the reader to write it. Afterwards every task a view
enqueued (without ``run_after``) must have been run by a ``TaskWorker`` and ended SUCCESSFUL.
"""

from __future__ import annotations

import importlib
import re
import sys
import time
from datetime import timedelta
from functools import partial
from pathlib import Path
from typing import Any

import django
from django.conf import settings
from django.urls import path as url_path

from jetstream_sync import StreamConfig
from jetstream_sync.testing import EmbeddedServer
from tests.server.doc_scenarios import block_files, your_servers_to

MODELS = """\
from django.db import models


class Order(models.Model):
    item = models.CharField(max_length=100)

    class Meta:
        app_label = "shop"
"""
urlpatterns: list[Any] = []  # this module is the project's ROOT_URLCONF: one view, the block being served


def settings_for(server_url: str) -> dict[str, Any]:
    backport = ["django_tasks"] if django.VERSION < (6,) else []
    return {
        "SECRET_KEY": "doc-scenario",
        "INSTALLED_APPS": ["jetstream_sync.integrations.django", "shop", *backport],
        "DATABASES": {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": "db.sqlite3"}},
        "ROOT_URLCONF": "__main__",
        "USE_TZ": True,
        "JETSTREAM": {"SERVERS": [server_url], "NAME": "shop", "TIMEOUT": 10},
        "TASKS": {"default": {"BACKEND": "jetstream_sync.integrations.django.tasks.JetStreamBackend", "QUEUES": []}},
    }


def project_of(blocks: list[Path], server_url: str) -> tuple[list[str], list[Path]]:
    """Write the project: its module blocks (the dotted names returned) and shop.models; the view blocks."""
    project = Path.cwd() / "project"
    (project / "shop").mkdir(parents=True)
    (project / "shop" / "__init__.py").write_text("")
    (project / "shop" / "models.py").write_text(MODELS)
    modules, views = [], []
    for block in blocks:
        code = your_servers_to(block.read_text(encoding="utf-8"), [server_url])
        named = re.fullmatch(r"# ([\w/]+)\.py", code.splitlines()[0])
        if named is None:
            views.append(block)
            continue
        if django.VERSION < (6,):
            code = code.replace("from django.tasks import", "from django_tasks import")
        (project / f"{named.group(1)}.py").write_text(code, encoding="utf-8")
        modules.append(named.group(1).replace("/", "."))
    sys.path.insert(0, str(project))
    return modules, views


def wait_for_the_tasks(server_url: str) -> None:
    """Run a worker until every task enqueued (to run now) ended SUCCESSFUL; there must be some when any view
    enqueued."""
    from jetstream_sync.integrations.django import get_jetstream
    from jetstream_sync.integrations.django.tasks import TaskWorker

    tasks = importlib.import_module("django.tasks" if django.VERSION >= (6,) else "django_tasks")
    backend = tasks.task_backends["default"]
    bucket = get_jetstream().key_value("django_tasks_results")
    ids = list(bucket.keys())
    due = [r for r in map(backend.get_result, ids) if r.task.run_after is None]
    assert due, "no task was enqueued"
    worker = TaskWorker(backend, sorted({r.task.queue_name for r in due}))
    ctx = worker.consume(worker.runner)
    deadline = time.monotonic() + 20
    while any(backend.get_result(r.id).status != "SUCCESSFUL" for r in due):
        assert time.monotonic() < deadline, [backend.get_result(r.id).status for r in due]
        time.sleep(0.05)  # the poll interval of this bounded wait for the worker
    ctx.drain()
    ctx.wait(timeout=10)
    print(f"{len(ids)} tasks enqueued; ran: {[backend.get_result(r.id).return_value for r in due]}")


def main() -> None:
    with EmbeddedServer() as server:
        modules, views = project_of(block_files(), server.url)
        settings.configure(**settings_for(server.url))
        django.setup()
        from django.core.management import call_command
        from django.db import transaction
        from django.http import HttpRequest, HttpResponse
        from django.test import Client
        from django.utils import timezone

        from jetstream_sync.integrations.django import close_clients, get_jetstream

        call_command("migrate", run_syncdb=True, verbosity=0)
        js = get_jetstream()
        js.create_or_update_stream(StreamConfig(name="ORDERS", subjects=["orders.>"]))
        imported: dict[str, Any] = {"transaction": transaction, "timezone": timezone, "timedelta": timedelta}
        imported.update(partial=partial, Order=importlib.import_module("shop.models").Order)
        for module in modules:
            loaded = importlib.import_module(module)
            imported.update({name: getattr(loaded, name) for name in vars(loaded) if not name.startswith("_")})
        for view in views:
            code = compile(view.read_text(encoding="utf-8"), str(view), "exec")

            def serve(request: HttpRequest, code: Any = code) -> HttpResponse:
                exec(code, {**imported, "request": request, "payload": request.body})
                return HttpResponse("done")

            urlpatterns[:] = [url_path("view", serve)]
            response = Client().post("/view", data=b'{"id": 42}', content_type="application/json")
            assert response.status_code == 200, response
            print(f"{view.name}: POST /view -> {response.status_code}")
        if modules:
            wait_for_the_tasks(server.url)
        print(f"ORDERS holds {js.stream_info('ORDERS').state.messages} messages")
        close_clients()  # before the server stops, or the client would log the lost connection


if __name__ == "__main__":
    main()
