"""Fixtures for Celery's own integration suite (``t/integration`` of the installed Celery's sdist, see
test_celery_suite.py): Celery's conftest, with the broker and the result backend on a real nats-server.

Celery's conftest (``t.integration.conftest``) is used as it is, except for what points it at servers:
``celery_config`` names our broker (``jetstream://``, the kombu transport) and our result backend
(``jetstream://``, the KV bucket) on the session's nats-server, with a stream and a bucket of their own; and the
session app and worker live for this directory's module rather than the whole pytest session, so that the
worker (Celery's embedded ``TestWorkController`` with a prefork pool, as Celery's suite runs it) stops when the
module ends instead of idling under the rest of the run.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.server.integrations.sdist_suites import suite_dir

ROOT, MISSING = suite_dir("celery", "t")
if ROOT is not None:
    try:
        import pydantic  # noqa: F401 - Celery's t/integration/tasks.py imports it
    except ImportError:
        ROOT, MISSING = None, "Celery's t/integration/tasks.py needs pydantic (the dev extra installs it)"


# Celery's suite marks cases flaky(reruns=...) for pytest-rerunfailures, which is not installed here: setup.cfg
# registers the mark (Celery's conftest applies it while this module imports it, before any hook of this module
# could), and each case runs once (a rerun would hide a bug).


#: the least time a case of Celery's suite gets: some carry their own ``timeout`` mark, sized for Celery's CI
#: (``test_revoked_by_headers_complex_canvas``: 20 s for 22 canvases of sleeping tasks and the manager's
#: teardown, which on 2 shared cores takes 20-25 s); the mark is raised to this, the case itself unchanged
MIN_TIMEOUT = 120.0
HERE = Path(__file__).resolve().parent


@pytest.hookimpl(tryfirst=True)  # before ``-m`` deselects by the marks added here
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Raise short ``timeout`` marks to MIN_TIMEOUT, and mark ``celery_full`` every case of Celery's suite
    that is not in its module's ``DEFAULT_CASES`` (the default run takes those few; ``-m celery_full`` the
    rest)."""
    for item in items:
        if HERE not in Path(item.path).parents:
            continue
        default = getattr(item.module, "DEFAULT_CASES", None)
        name = f"{item.cls.__name__}::{item.originalname}" if item.cls is not None else item.name  # type: ignore[attr-defined]
        if default is not None and name not in default:
            item.add_marker(pytest.mark.celery_full)
        mark = item.get_closest_marker("timeout")
        if mark is not None:
            limit = mark.kwargs.get("timeout", mark.args[0] if mark.args else None)
            if limit is not None and float(limit) < MIN_TIMEOUT:
                item.add_marker(pytest.mark.timeout(MIN_TIMEOUT), append=False)


if ROOT is not None:
    from celery.contrib.pytest import celery_parameters, use_celery_app_trap
    from celery.contrib.testing import worker as testing_worker
    from celery.contrib.testing.app import TestApp, setup_default_app
    from t.integration.conftest import (
        ZZZZ_set_app_current,
        app,
        celery_app,
        celery_class_tasks,
        celery_enable_logging,
        celery_includes,
        celery_worker,
        celery_worker_pool,
        manager,
    )

    import jetstream_sync.integrations.celery  # noqa: F401 - registers jetstream:// (broker and backend)

    __all__ = [
        "ZZZZ_set_app_current",
        "app",
        "celery_app",
        "celery_class_tasks",
        "celery_config",
        "celery_enable_logging",
        "celery_includes",
        "celery_parameters",
        "celery_session_app",
        "celery_session_worker",
        "celery_worker",
        "celery_worker_parameters",
        "celery_worker_pool",
        "manager",
        "use_celery_app_trap",
    ]

    @pytest.fixture(scope="module")
    def celery_config(nats_server: Any) -> dict[str, Any]:
        """Celery's ``celery_config`` with our broker and backend on the session's server (the rest as
        Celery's: extended results, no queues made on the fly)."""
        url = f"jetstream://127.0.0.1:{nats_server.port}"
        name = f"CELERYSUITE{os.getpid()}"
        return {
            "broker_url": url,
            "result_backend": url,
            "broker_transport_options": {"stream": name, "prefix": name.lower()},
            "result_backend_transport_options": {"bucket": f"{name.lower()}_results"},
            "result_extended": True,
            "task_create_missing_queues": False,
        }

    @pytest.fixture(scope="session")
    def celery_worker_parameters() -> dict[str, Any]:
        """Two pool processes where Celery's suite has one. A key-value backend's chord (Celery's
        ``BaseKeyValueStoreBackend.on_chord_part_return``, which ResultBackend inherits) joins the header's
        results inside the worker that finishes the last part, and a nested group's results with no timeout:
        with one pool process the group's tasks wait behind the join for good (``test_nested_group_chain``).
        Celery's Redis backend keeps the parts' results in a list instead and never waits there."""
        return {"concurrency": 2}

    @pytest.fixture(scope="module")
    def celery_session_app(
        celery_config: dict[str, Any],
        celery_parameters: dict[str, Any],
        celery_enable_logging: bool,
        use_celery_app_trap: bool,
    ) -> Iterator[Any]:
        """Celery's session app, for this module."""
        made = TestApp(set_as_current=False, enable_logging=celery_enable_logging, config=celery_config,
                       **celery_parameters)  # fmt: skip
        with setup_default_app(made, use_trap=use_celery_app_trap):
            yield made

    @pytest.fixture(scope="module")
    def celery_session_worker(
        celery_session_app: Any,
        celery_includes: Any,
        celery_class_tasks: Any,
        celery_worker_pool: str,
        celery_worker_parameters: dict[str, Any],
    ) -> Iterator[Any]:
        """Celery's session worker (the embedded worker, prefork pool), for this module. Starting it sets the
        root logger's level to the worker's (ERROR) and leaves it so; the level is put back when the module ends,
        or every later test of the run would see no WARNING (caplog included)."""
        root_level = logging.getLogger().level
        try:
            yield from _started_worker(
                celery_session_app, celery_includes, celery_class_tasks, celery_worker_pool, celery_worker_parameters
            )
        finally:
            logging.getLogger().setLevel(root_level)

    def _started_worker(
        celery_session_app: Any,
        celery_includes: Any,
        celery_class_tasks: Any,
        celery_worker_pool: str,
        celery_worker_parameters: dict[str, Any],
    ) -> Iterator[Any]:
        for module in celery_includes:
            celery_session_app.loader.import_task_module(module)
        for class_task in celery_class_tasks:
            celery_session_app.register_task(class_task)
        with testing_worker.start_worker(celery_session_app, pool=celery_worker_pool,
                                         **celery_worker_parameters) as started:  # fmt: skip
            yield started
