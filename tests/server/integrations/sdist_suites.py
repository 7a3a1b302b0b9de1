"""kombu's and Celery's own integration tests (``t/integration`` of their source distributions), for the
transport and the result backend to pass.

Neither suite is installed with its package, and neither is copied into this repository: :func:`suite_dir`
takes ``t/integration`` from the sdist of the installed version, fetched once with pip (the ordinary client of
the package index) into ``~/.cache/jetstream-sync/`` (or ``$XDG_CACHE_HOME``), and puts it on ``sys.path``,
unmodified. Without network or pip, the suite's module is skipped, saying why (as
tests/server/integrations/django/djangosetup.py does for Django's).

Two layouts, because the suites import themselves differently:

- ``package="kombu_integration"``: ``t/integration/*`` as a package of that name (kombu's ``common.py``
  imports nothing of kombu's ``t``).
- ``package="t"``: the sdist's own ``t`` package, its top-level modules and ``t/integration/*``, as they are
  (Celery's suite imports ``t.integration.tasks`` and ``t.canvas_helpers`` by those names, and its worker
  imports the tasks module by that name).
"""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path


def _cache_root(project: str, version: str, package: str) -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    suffix = "t" if package == "t" else "integration"
    return Path(base) / "jetstream-sync" / f"{project}-{version}-{suffix}"


def _wanted(name: str, top: str, package: str) -> str | None:
    """Where the sdist's member ``name`` goes under the cache root, or None when it is not wanted."""
    inner = f"{top}/t/integration/"
    if package == "t":
        for folder in (f"{top}/t/", inner):
            rest = name[len(folder) :]
            if name.startswith(folder) and rest and "/" not in rest:
                return name[len(f"{top}/") :]
        return None
    rest = name[len(inner) :]
    if name.startswith(inner) and rest and "/" not in rest:
        return f"{package}/{rest}"
    return None


def _fetch(project: str, version: str, package: str, root: Path) -> str | None:
    """Put the suite under ``root`` (see the module docstring for the layouts); the reason when it cannot."""
    with tempfile.TemporaryDirectory() as tmp:
        command = [sys.executable, "-m", "pip", "download", f"{project}=={version}", "--no-deps", "--no-binary",
                   ":all:", "-d", tmp]  # fmt: skip
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=300)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"pip download of {project} {version}'s sdist failed: {exc}"
        archives = list(Path(tmp).glob("*.tar.gz"))
        if done.returncode != 0 or not archives:
            return f"pip download of {project} {version}'s sdist failed: {done.stderr.strip()[-300:]}"
        staging = Path(tmp) / "staging"
        staging.mkdir()
        with tarfile.open(archives[0]) as archive:
            top = archive.getnames()[0].split("/")[0]
            for member in archive.getmembers():
                target = _wanted(member.name, top, package) if member.isfile() else None
                data = archive.extractfile(member) if target is not None else None
                if target is not None and data is not None:
                    (staging / target).parent.mkdir(parents=True, exist_ok=True)
                    (staging / target).write_bytes(data.read())
            license_member = archive.extractfile(f"{top}/LICENSE")
            if license_member is not None:
                (staging / "LICENSE").write_bytes(license_member.read())
        marker = staging / ("t/integration" if package == "t" else package) / "__init__.py"
        if not marker.exists():
            return f"{archives[0].name} has no t/integration/__init__.py"
        (staging / "SOURCE").write_text(f"t/ and LICENSE of {archives[0].name} (BSD-3-Clause), unmodified\n")
        root.parent.mkdir(parents=True, exist_ok=True)
        try:
            staging.rename(root)  # atomic: a concurrent run sees all of it or none
        except OSError:
            if not (root / package / "__init__.py").exists():
                shutil.rmtree(root, ignore_errors=True)
                return f"could not place {project}'s integration tests in {root}"
    return None


def suite_dir(project: str, package: str) -> tuple[Path | None, str]:
    """The directory holding ``package`` (see the module docstring), put on sys.path; or None and why."""
    version = importlib.metadata.version(project)
    root = _cache_root(project, version, package)
    if not (root / package / "__init__.py").exists():
        problem = _fetch(project, version, package, root)
        if problem is not None:
            return None, problem
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    return root, ""
