"""Scenario ``django-settings``: a block that is (a part of) a Django ``settings.py`` passes ``manage.py check``
and works in a process of that project, against a 3-node embedded cluster (a settings fragment may ask for
``REPLICAS: 3``).

For each block the driver writes a project whose settings.py is :data:`BEFORE`, the block (its servers the
cluster's nodes) and :data:`AFTER`, then runs ``python -m django check`` (what ``manage.py check`` runs: it must
report no issue) and, in the project's shell, what the settings serve: a publish through ``get_jetstream()``, a
``set``/``get`` on each cache of this library's backend, a session when sessions live in the cache, and a task
enqueued and run by a ``TaskWorker`` when ``TASKS`` is set.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from jetstream_sync.testing import EmbeddedCluster
from tests.server.doc_scenarios import block_files, your_servers_to

#: what every settings module has that a fragment leaves out
BEFORE = """\
SECRET_KEY = "doc-scenario"
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": "db.sqlite3"}}
USE_TZ = True
"""
#: after the fragment: the reader's ``...`` entries dropped, this library's app (and the tasks backport on
#: Django < 6) installed, and the servers when the fragment leaves JETSTREAM to the rest of the file
AFTER = """\
import django as _django

INSTALLED_APPS = [app for app in globals().get("INSTALLED_APPS", []) if app is not ...]
_BACKPORT = ["django_tasks"] if "TASKS" in globals() and _django.VERSION < (6,) else []
for _app in ["jetstream_sync.integrations.django", *_BACKPORT]:
    if _app not in INSTALLED_APPS:
        INSTALLED_APPS.append(_app)
JETSTREAM = globals().get("JETSTREAM") or {{"SERVERS": {servers!r}, "TIMEOUT": 10}}
"""
TASKS_MODULE = """\
import django

if django.VERSION >= (6,):
    from django.tasks import task, task_backends
else:
    from django_tasks import task, task_backends


@task()
def double(n: int) -> int:
    return 2 * n
"""
#: what the shell runs: each thing the settings configure, used once
EXERCISE = """\
import time

from django.conf import settings
from django.core.cache import caches

from jetstream_sync import StreamConfig
from jetstream_sync.integrations.django import get_jetstream

js = get_jetstream()
js.create_or_update_stream(StreamConfig(name="SCENARIO", subjects=["scenario.>"]))
print("published as", js.publish("scenario.x", b"x").seq)
for alias, spec in getattr(settings, "CACHES", {}).items():
    if spec["BACKEND"].startswith("jetstream_sync."):
        caches[alias].set("scenario", alias, timeout=60)
        assert caches[alias].get("scenario") == alias, alias
        print("cache", alias, "set and read back")
if settings.SESSION_ENGINE == "django.contrib.sessions.backends.cache":
    from django.contrib.sessions.backends.cache import SessionStore

    session = SessionStore()
    session["cart"] = ["lamp"]
    session.save()
    assert SessionStore(session_key=session.session_key)["cart"] == ["lamp"]
    print("session saved in", settings.SESSION_CACHE_ALIAS, "and read back")
if getattr(settings, "TASKS", None):
    from scenario_tasks import double, task_backends

    from jetstream_sync.integrations.django.tasks import TaskWorker

    queues = settings.TASKS["default"].get("QUEUES") or ["default"]
    result = double.using(queue_name=queues[-1]).enqueue(21)
    worker = TaskWorker(task_backends["default"], queues)
    ctx = worker.consume(worker.runner)
    deadline = time.monotonic() + 20
    while double.get_result(result.id).status != "SUCCESSFUL":
        assert time.monotonic() < deadline, double.get_result(result.id).status
        time.sleep(0.05)  # the poll interval of this bounded wait for the worker
    ctx.drain()
    ctx.wait(timeout=10)
    print("task on", queues[-1], "returned", double.get_result(result.id).return_value)
"""


def _django(project: Path, *args: str) -> str:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(project), os.environ.get("PYTHONPATH", "")])}
    command = [sys.executable, "-m", "django", *args, "--settings", "settings"]
    result = subprocess.run(command, cwd=project, env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and "Traceback" not in result.stderr, (
        f"{' '.join(args[:1])} failed ({result.returncode}):\n{result.stdout}{result.stderr}"
    )
    return result.stdout


def main() -> None:
    with EmbeddedCluster(size=3) as cluster:
        for path in block_files():
            project = path.parent / path.stem
            project.mkdir()
            block = your_servers_to(path.read_text(encoding="utf-8"), cluster.urls)
            settings = f"{BEFORE}\n# {path.name}\n{block}\n{AFTER.format(servers=list(cluster.urls))}"
            (project / "settings.py").write_text(settings, encoding="utf-8")
            (project / "scenario_tasks.py").write_text(TASKS_MODULE, encoding="utf-8")
            checked = _django(project, "check")
            assert "System check identified no issues" in checked, checked
            print(f"{path.name}: manage.py check: no issues; {_django(project, 'shell', '-c', EXERCISE).strip()}")


if __name__ == "__main__":
    main()
