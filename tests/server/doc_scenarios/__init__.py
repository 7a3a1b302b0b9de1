"""Scenarios: what runs a documentation block that is a part of a framework's project rather than a program.

A block marked ``<!-- snippet: scenario (NAME) -->`` (a Django settings module, a Celery app, a gunicorn hook, a
Spark fragment on the reader's session) is run by the driver ``tests/server/doc_scenarios/<NAME with _>.py``:
``tests/server/test_docs_snippets.py`` saves each block of the page marked with that scenario to a file of its
own (``block_<line>.py``, in page order) in a temporary directory and runs ``python -m
tests.server.doc_scenarios.<name> FILE...`` there, bounded by the scenario's ``timeout``. The driver starts
what the block needs (an embedded nats-server or cluster, the framework) and uses the block the way the
framework does (``manage.py check`` and a request for a settings module, a worker for a Celery app); it must
exit 0 and log no traceback, as a page's program.

The reader's servers in a block (every ``HOST:4222``: ``127.0.0.1:4222``, ``nats:4222``, ``n1:4222``) become the
embedded servers' addresses by :func:`your_servers_to`, for ``given (url)`` / ``given (cluster)`` blocks too.
"""

from __future__ import annotations

import importlib
import re
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

#: a reader's server in a block: a host name or address on NATS's default port
_YOUR_SERVER = re.compile(r"(?<![\w.-])(?P<host>[A-Za-z0-9][\w.-]*):4222\b")


def your_servers_to(code: str, urls: Sequence[str]) -> str:
    """``code`` with the reader's servers (each ``HOST:4222``) replaced by the embedded ones' ``host:port``: the
    first distinct host becomes the first of ``urls``, the next the next (round robin), so the three nodes of a
    cluster fragment (``n1``, ``n2``, ``n3``) land on three nodes. The scheme (``nats://``, ``jetstream://``)
    stays as written."""
    hosts = list(dict.fromkeys(found.group("host") for found in _YOUR_SERVER.finditer(code)))
    addresses = {host: urls[index % len(urls)].split("://", 1)[-1] for index, host in enumerate(hosts)}
    return _YOUR_SERVER.sub(lambda found: addresses[found.group("host")], code)


@dataclass(frozen=True)
class Scenario:
    """What a scenario needs: the modules (an extra) without which it skips, the markers its run carries, and how
    long its whole run (every block of the page) may take, in seconds."""

    needs: tuple[str, ...]
    markers: tuple[str, ...]
    timeout: float


#: the scenarios, by the name a mark gives; docs/guides/testing.md, "The snippets of these docs", lists them
SCENARIOS = {
    "django-settings": Scenario(("django",), ("slow", "cluster"), 120),
    "django-view": Scenario(("django",), (), 30),
    "django-tasks": Scenario(("django",), ("slow",), 90),
    "celery-app": Scenario(("celery",), ("slow",), 90),
    "celery-settings": Scenario(("celery",), ("slow",), 90),
    "flask-app": Scenario(("flask",), (), 30),
    "gunicorn-hook": Scenario(("gunicorn", "flask"), ("slow",), 60),
    "spark-session": Scenario(("pyspark", "pyarrow"), ("spark", "slow"), 300),
    "advisories-loop": Scenario((), (), 30),
    "nats-py-side-by-side": Scenario((), (), 30),
}


def block_files() -> list[Path]:
    """The blocks a driver runs, in page order: the files named on its command line."""
    return [Path(arg) for arg in sys.argv[1:]]


def module_of(path: Path, urls: Sequence[str], name: str | None = None) -> ModuleType:
    """The block at ``path`` imported as a module (``name``, or the file's stem) after its servers became the
    embedded ones: written next to it as ``<name>.py`` and imported from there, as a project's module is."""
    name = name or path.stem
    target = path.parent / f"{name.replace('.', '/')}.py"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(your_servers_to(path.read_text(encoding="utf-8"), urls), encoding="utf-8")
    if str(path.parent) not in sys.path:
        sys.path.insert(0, str(path.parent))
    return importlib.import_module(name)


class LoopThread(threading.Thread):
    """A block whose loop runs until something outside stops it (a worker's), run on a thread of its own in the
    namespace ``names``; :meth:`join_ok` raises what it raised."""

    def __init__(self, path: Path, code: str, names: dict[str, Any]) -> None:
        super().__init__(name=f"block {path.name}", daemon=True)
        self.code = compile(code, str(path), "exec")
        self.names = names
        self.raised: BaseException | None = None

    def run(self) -> None:
        try:
            exec(self.code, self.names)
        except BaseException as exc:  # handed to the main thread by join_ok, which raises it
            self.raised = exc

    def join_ok(self, timeout: float) -> None:
        self.join(timeout)
        assert not self.is_alive(), f"{self.name} did not end within {timeout}s of being stopped"
        if self.raised is not None:
            raise self.raised
