"""The documentation site's API reference (docs/reference/*.md) covers the public API, and the public API is documented.

A name is covered when a ``::: <path>`` directive renders it: the directive names the object itself, or a module
whose ``__all__`` holds it (mkdocstrings renders a module's ``__all__``). ``mkdocs build --strict`` (CI) checks that
every directive resolves and every link holds; this test checks that nothing public is left out of the reference.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import re
import types
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "docs" / "reference"
DIRECTIVE = re.compile(r"^:::\s+([\w.]+)\s*$", re.MULTILINE)

# The public modules: every name of their __all__ must be in the reference, with a docstring.
PUBLIC_MODULES = [
    "jetstream_sync",
    "jetstream_sync.errors",
    "jetstream_sync.testing",
    "jetstream_sync.testing.plugin",
    "jetstream_sync.models",
    "jetstream_sync.direct",
    "jetstream_sync.headers",
    "jetstream_sync.services",
    "jetstream_sync.plumbing",
]
HAVE_SPARK = importlib.util.find_spec("pyspark") is not None and importlib.util.find_spec("pyarrow") is not None
if HAVE_SPARK:
    PUBLIC_MODULES.append("jetstream_sync.spark")
# The integrations are public modules too (their framework is in the dev extra).
PUBLIC_MODULES += [
    "jetstream_sync.integrations.otel",
    "jetstream_sync.integrations.celery",
    "jetstream_sync.integrations.kombu",
    "jetstream_sync.integrations.flask",
    "jetstream_sync.integrations.django",
    "jetstream_sync.integrations.django.cache",
    "jetstream_sync.integrations.django.tasks",
]


def _is_class(obj: object) -> bool:
    """A class, not a parametrized alias such as ``Callable[[Frame], bool]`` (a class to inspect on 3.10)."""
    return inspect.isclass(obj) and not isinstance(obj, types.GenericAlias)


def _reference_text() -> str:
    return "\n".join(page.read_text(encoding="utf-8") for page in sorted(REFERENCE.glob("*.md")))


def _resolve(path: str) -> Any:
    """The object a directive's dotted path names: the longest importable module, then attributes."""
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        module_name = ".".join(parts[:cut])
        if module_name in ("jetstream_sync.spark", "jetstream_sync.integrations.spark") and not HAVE_SPARK:
            return None  # rendered when the spark extra is installed (as for the docs build in CI)
        try:
            obj: Any = importlib.import_module(module_name)
        except ImportError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        return obj
    raise AssertionError(f"::: {path} names nothing importable")


def _covered_ids() -> set[int]:
    ids: set[int] = set()
    for path in DIRECTIVE.findall(_reference_text()):
        obj = _resolve(path)
        if obj is None:
            continue
        ids.add(id(obj))
        if isinstance(obj, types.ModuleType):
            ids.update(id(getattr(obj, name)) for name in getattr(obj, "__all__", ()))
    return ids


def _public(module_name: str) -> list[tuple[str, Any]]:
    module = importlib.import_module(module_name)
    return [(f"{module_name}.{name}", getattr(module, name)) for name in module.__all__]


def _mentioned(name: str, text: str) -> bool:
    """Named in a reference page's text as code: `name` or `some.module.name`."""
    return re.search(rf"`(?:[\w.]+\.)?{re.escape(name)}`", text) is not None


def test_reference_pages_have_directives() -> None:
    assert DIRECTIVE.findall(_reference_text()), "no ::: directive in docs/reference"


@pytest.mark.parametrize("module_name", ["jetstream_sync", "jetstream_sync.errors", "jetstream_sync.testing"])
def test_every_public_name_is_in_the_reference(module_name: str) -> None:
    covered = _covered_ids()
    text = _reference_text()
    missing = [
        qualified
        for qualified, obj in _public(module_name)
        if id(obj) not in covered and not _mentioned(qualified.rsplit(".", 1)[1], text)
    ]
    assert not missing, f"not in docs/reference/*.md (add a ::: directive): {missing}"


@pytest.mark.parametrize("module_name", PUBLIC_MODULES)
def test_public_modules_are_rendered(module_name: str) -> None:
    covered = _covered_ids()
    missing = [
        qualified
        for qualified, obj in _public(module_name)
        if (_is_class(obj) or inspect.isfunction(obj)) and id(obj) not in covered
    ]
    assert not missing, f"classes and functions not rendered by any ::: directive: {missing}"


@pytest.mark.parametrize("module_name", PUBLIC_MODULES)
def test_public_classes_and_functions_have_docstrings(module_name: str) -> None:
    undocumented = []
    for qualified, obj in _public(module_name):
        if _is_class(obj):
            doc = vars(obj).get("__doc__")  # its own, not one inherited from a base class
        elif inspect.isfunction(obj):
            doc = obj.__doc__
        else:
            continue
        if not (doc or "").strip():
            undocumented.append(qualified)
    assert not undocumented, f"public names without a docstring: {undocumented}"


@pytest.mark.parametrize("module_name", PUBLIC_MODULES)
def test_public_methods_and_properties_have_docstrings(module_name: str) -> None:
    """What the reference renders of a class: every public method and property says what it does (a method
    that overrides a documented one of a base class may rely on it)."""
    undocumented = []
    for qualified, obj in _public(module_name):
        if not _is_class(obj):
            continue
        for attr, member in vars(obj).items():
            if attr.startswith("_"):
                continue
            function = member.fget if isinstance(member, property) else getattr(member, "__func__", member)
            if not (inspect.isfunction(function) or isinstance(member, property)):
                continue
            if (function.__doc__ or "").strip() or _documented_in_a_base(obj, attr):
                continue
            undocumented.append(f"{qualified}.{attr}")
    assert not undocumented, f"public methods and properties without a docstring: {undocumented}"


def _documented_in_a_base(cls: type, attr: str) -> bool:
    for base in cls.__mro__[1:]:
        member = vars(base).get(attr)
        if member is not None:
            function = member.fget if isinstance(member, property) else getattr(member, "__func__", member)
            return bool((getattr(function, "__doc__", None) or "").strip())
    return False
