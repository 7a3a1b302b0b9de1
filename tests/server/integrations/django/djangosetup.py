"""Django for the tests of the Django app: settings configured once per pytest process, and Django's own cache
tests (``tests/cache/`` of the installed Django's source distribution) for the cache backend to pass.

Django's test suite is not installed with Django and is not copied into this repository: :func:`django_cache_tests`
takes ``tests/cache/`` from the sdist of the installed version, fetched once with pip (the ordinary client of
the package index) into ``~/.cache/jetstream-sync/`` (or ``$XDG_CACHE_HOME``), or from ``$DJANGO_TESTS_DIR``
(a Django checkout's ``tests`` directory). Without either, the suite module is skipped, saying why.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import django
from django.conf import settings

#: the bucket the tests' caches use
BUCKET = "django_cache_tests"
#: Django's test app holding tests/cache (its Poll model needs it installed)
DJANGO_CACHE_APP = "cache"
_FILES = ("__init__.py", "models.py", "closeable_cache.py", "liberal_backend.py", "failing_cache.py", "tests.py")


#: Django's test app holding tests/tasks (Django 6.0+), and the files of it the task suite imports
DJANGO_TASKS_APP = "tasks"
_TASK_FILES = ("__init__.py", "tasks.py", "test_dummy_backend.py", "test_immediate_backend.py", "test_tasks.py")


def _cache_root(kind: str = "tests") -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "jetstream-sync" / f"django-{django.__version__}-{kind}"


def _fetch(root: Path, app: str, files: tuple[str, ...]) -> str | None:
    """Put tests/<app> of this Django version's sdist under ``root``; the reason when it cannot."""
    version = django.__version__
    with tempfile.TemporaryDirectory() as tmp:
        sdists = _cache_root("sdist")  # kept: the cache tests and the task tests come from one download
        archives = sorted(sdists.glob("*.tar.gz"))
        if not archives:
            command = [sys.executable, "-m", "pip", "download", f"django=={version}", "--no-deps"]
            command += ["--no-binary", ":all:"]
            try:
                done = subprocess.run([*command, "-d", tmp], capture_output=True, text=True, timeout=300)
            except (OSError, subprocess.TimeoutExpired) as exc:
                return f"pip download of Django {version}'s sdist failed: {exc}"
            archives = list(Path(tmp).glob("*.tar.gz"))
            if done.returncode != 0 or not archives:
                return f"pip download of Django {version}'s sdist failed: {done.stderr.strip()[-300:]}"
            sdists.mkdir(parents=True, exist_ok=True)
            shutil.copy(archives[0], sdists / f".{archives[0].name}.part")
            (sdists / f".{archives[0].name}.part").rename(sdists / archives[0].name)
        staging = Path(tmp) / "staging"
        (staging / app).mkdir(parents=True)
        with tarfile.open(archives[0]) as archive:
            top = archive.getnames()[0].split("/")[0]
            for name in (*(f"tests/{app}/{f}" for f in files), "LICENSE"):
                try:
                    member = archive.extractfile(f"{top}/{name}")
                except KeyError:
                    member = None
                if member is None:
                    return f"{archives[0].name} has no {name}"
                target = staging / (app + "/" + name.rsplit("/", 1)[-1] if "/" in name else name)
                target.write_bytes(member.read())
        (staging / "SOURCE").write_text(f"tests/{app}/ and LICENSE of {archives[0].name} (BSD-3-Clause), unmodified\n")
        root.parent.mkdir(parents=True, exist_ok=True)
        try:
            staging.rename(root)  # atomic: a concurrent run sees all of it or none
        except OSError:
            if not (root / app / files[-1]).exists():
                shutil.rmtree(root, ignore_errors=True)
                return f"could not place Django's {app} tests in {root}"
    return None


def _django_tests(app: str, files: tuple[str, ...], kind: str) -> tuple[Path | None, str]:
    """The directory holding Django's ``app`` test package (``files``, the last one the probe), from
    ``$DJANGO_TESTS_DIR`` or fetched once into a cache directory of its own; or None and the reason."""
    probe = files[-1]
    given = os.environ.get("DJANGO_TESTS_DIR")
    if given:
        path = Path(given)
        if (path / app / probe).exists():
            return path, ""
        return None, f"DJANGO_TESTS_DIR={given} has no {app}/{probe}"
    root = _cache_root(kind)
    if not (root / app / probe).exists():
        problem = _fetch(root, app, files)
        if problem is not None:
            return None, problem
    return root, ""


def django_cache_tests() -> tuple[Path | None, str]:
    """The directory holding Django's ``cache`` test package, or None and the reason."""
    return _django_tests(DJANGO_CACHE_APP, _FILES, "tests")


CACHE_TESTS_DIR, CACHE_TESTS_MISSING = django_cache_tests()


def django_task_tests() -> tuple[Path | None, str]:
    """The directory holding Django's ``tasks`` test package (Django 6.0+), or None and the reason."""
    if _tasks_framework() != "django.tasks":
        return None, f"Django {django.__version__} has no django.tasks (its tests came with Django 6.0)"
    return _django_tests(DJANGO_TASKS_APP, _TASK_FILES, "task-tests")


def _tasks_framework() -> str | None:
    """Django's task framework here: "django.tasks" (Django 6+), "django_tasks" (the backport) or None."""
    import importlib.util

    for module in ("django.tasks", "django_tasks"):
        try:
            if importlib.util.find_spec(module) is not None:
                return module
        except ImportError:
            continue
    return None


def configure() -> None:
    """Configure Django once for this process (the tests of the app and of the cache share it)."""
    if settings.configured:
        return
    apps = ["django.contrib.contenttypes", "jetstream_sync.integrations.django"]
    if _tasks_framework() == "django_tasks":
        apps.append("django_tasks")  # the backport's app: its system checks and signal receivers
    if CACHE_TESTS_DIR is not None:
        sys.path.append(str(CACHE_TESTS_DIR))
        apps.append(DJANGO_CACHE_APP)
    settings.configure(
        INSTALLED_APPS=apps,
        DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}},
        JETSTREAM={"SERVERS": ["nats://127.0.0.1:4222"]},  # the embedded server's URL replaces it (conftest)
        CACHES={"default": {"BACKEND": "jetstream_sync.integrations.django.cache.KeyValueCache", "LOCATION": BUCKET}},
        TASKS={"default": {"BACKEND": "jetstream_sync.integrations.django.tasks.JetStreamBackend", "QUEUES": []}},
        USE_TZ=True,
        SECRET_KEY="tests",
        DEFAULT_AUTO_FIELD="django.db.models.AutoField",
    )
    django.setup()
