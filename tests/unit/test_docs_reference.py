"""The API reference renders cleanly: no docstring markup the site shows as literal text, no public method left out.

The site (mkdocs.yml) renders docstrings as Markdown with mkdocstrings' Python handler: a reST role such as
``:class:`Client``` is not markup there and shows as the text ":class:`Client`"; a cross-reference is written
``[`Client`][jetstream_sync.Client]`` (mkdocs-autorefs, checked by ``mkdocs build --strict``) and a mere name as a
code span. What the reference renders of a class is asked of griffe, loaded as the handler loads it (the options
and extensions of mkdocs.yml, the options of each ``:::`` directive) and filtered by the handler's own
``do_filter_objects``, so this test sees what the site shows without building it.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import importlib.util
import inspect
import re
import textwrap
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import attrs
import pytest

griffe = pytest.importorskip("griffe", reason="the docs extra (mkdocstrings[python]) is not installed")
python_handler = pytest.importorskip("mkdocstrings_handlers.python", reason="the docs extra is not installed")
yaml = pytest.importorskip("yaml")

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "jetstream_sync"
REFERENCE = ROOT / "docs" / "reference"
# A reST role: ":class:`Client`", ":py:meth:`Client.close`", ":mod:`~jetstream_sync.errors`".
ROLE = re.compile(r"(?<![\w`]):(?:py:)?[a-z]+:`[^`]+`")
# A ::: directive and the indented options under it.
DIRECTIVE = re.compile(r"^:::[ \t]+([\w.]+)[ \t]*\n((?:[ \t]+\S.*\n?)*)", re.MULTILINE)
HAVE_SPARK = importlib.util.find_spec("pyspark") is not None and importlib.util.find_spec("pyarrow") is not None


def _docstring_lines(source: str) -> set[int]:
    """The lines of every docstring (module, class, function, attribute) and ``#:`` doc-comment of a module."""
    lines: set[int] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            lines.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    lines.update(n for n, line in enumerate(source.splitlines(), 1) if line.lstrip().startswith("#:"))
    return lines


def roles_in(source: str) -> list[tuple[int, str]]:
    """Each reST role in the docstrings of ``source``: its line and the role as written."""
    docstrings = _docstring_lines(source)
    return [
        (n, match.group(0))
        for n, line in enumerate(source.splitlines(), 1)
        if n in docstrings
        for match in ROLE.finditer(line)
    ]


def test_the_role_scan_finds_what_it_looks_for() -> None:
    source = textwrap.dedent(
        '''
        """See :class:`Client` and :py:meth:`~x.Client.close`."""
        #: the keys :data:`KEYS` names
        KEYS = ":class:`not a docstring`"


        def f() -> None:
            """A ``:class:`literal``` is a code span; [`Client`][jetstream_sync.Client] a link; a: `b` prose."""
        '''
    )
    assert roles_in(source) == [(2, ":class:`Client`"), (2, ":py:meth:`~x.Client.close`"), (3, ":data:`KEYS`")]


def test_no_docstring_uses_a_rest_role() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{line}: {role}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for line, role in roles_in(path.read_text(encoding="utf-8"))
    ]
    assert not found, (
        "reST roles show as literal text on the docs site; write a cross-reference [`Name`][jetstream_sync.Name] "
        f"(it must resolve under mkdocs build --strict) or a code span `Name` ({len(found)}):\n" + "\n".join(found)
    )


# What the reference renders.


@cache
def _handler_options() -> dict[str, Any]:
    # mkdocs.yml as data: a !!python/name: tag (a Markdown extension's function) is kept as its text.
    loader: Any = type("ConfigLoader", (yaml.SafeLoader,), {})
    loader.add_multi_constructor(
        "tag:yaml.org,2002:python/", lambda load, suffix, node: f"{suffix}{load.construct_scalar(node)}"
    )
    config = yaml.load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"), Loader=loader)
    for plugin in config["plugins"]:
        if isinstance(plugin, dict) and "mkdocstrings" in plugin:
            return dict(plugin["mkdocstrings"]["handlers"]["python"].get("options", {}))
    raise AssertionError("mkdocs.yml configures no mkdocstrings python handler")


def _options(local: dict[str, Any]) -> Any:
    return python_handler.PythonOptions.from_data(**{**_handler_options(), **local})


def _directives() -> Iterator[tuple[str, dict[str, Any]]]:
    for page in sorted(REFERENCE.glob("*.md")):
        for match in DIRECTIVE.finditer(page.read_text(encoding="utf-8")):
            block = yaml.safe_load(textwrap.dedent(match.group(2))) if match.group(2).strip() else None
            yield match.group(1), dict((block or {}).get("options", {}))


@cache
def _package() -> Any:
    options = _options({})
    extensions = [
        extension if not isinstance(extension, str) or not extension.endswith(".py") else str(ROOT / extension)
        for extension in options.extensions
    ]
    loader = griffe.GriffeLoader(
        extensions=griffe.load_extensions(*extensions),
        search_paths=[str(ROOT)],
        docstring_parser=griffe.Parser(options.docstring_style),
        allow_inspection=options.allow_inspection,
        force_inspection=options.force_inspection,
    )
    loader.load("jetstream_sync")
    loader.resolve_aliases(external=False, implicit=False)
    return loader.modules_collection


def _final(obj: Any) -> Any:
    try:
        while obj is not None and obj.is_alias:
            obj = obj.target
    except (griffe.AliasResolutionError, griffe.CyclicAliasError):
        return None
    return obj


def _shown(obj: Any, options: Any, members_list: Any) -> list[Any]:
    """The members the handler's templates render of ``obj`` (children.html.jinja, by category)."""
    try:
        members = obj.all_members
    except (griffe.AliasResolutionError, griffe.CyclicAliasError, ValueError):
        members = obj.members  # a base outside the package: the handler renders the class's own members
    kept = python_handler.do_filter_objects(
        members,
        filters=options.filters,
        members_list=members_list,
        inherited_members=options.inherited_members,
        keep_no_docstrings=options.show_if_no_docstring,
    )
    return [
        member
        for member in kept
        if options.filters == "public" or members_list is not None or not member.is_imported or member.is_public
    ]


@cache
def rendered_classes() -> dict[str, tuple[Any, frozenset[str]]]:
    """Each class the reference renders, by canonical path: the griffe class and the names rendered under it."""
    collection = _package()
    found: dict[str, tuple[Any, frozenset[str]]] = {}

    def visit(obj: Any, options: Any, members_list: Any) -> None:
        target = _final(obj)
        if target is None or not (target.is_class or target.is_module):
            return
        shown = _shown(target, options, members_list)
        if target.is_class:
            names = found.get(target.canonical_path, (target, frozenset()))[1]
            found[target.canonical_path] = (target, names | {member.name for member in shown})
        for member in shown:
            member_target = _final(member)
            if member_target is not None and member_target.is_class:
                visit(member_target, options, None)

    for path, local in _directives():
        if not HAVE_SPARK and path.startswith(("jetstream_sync.spark", "jetstream_sync.integrations.spark")):
            continue  # rendered with the spark extra installed, as for the docs build in CI
        options = _options(local)
        visit(collection.get_member(path), options, options.members)
    return found


def _runtime_class(cls: Any) -> type:
    module = importlib.import_module(cls.module.path)
    obj: Any = module
    for part in cls.path[len(cls.module.path) + 1 :].split("."):
        obj = getattr(obj, part)
    assert inspect.isclass(obj), cls.path
    return obj


def _public_methods_and_properties(cls: type) -> Iterator[tuple[str, type]]:
    """Each public method or property of ``cls`` that this package defines, and the class that defines it."""
    for name in dir(cls):
        if name.startswith("_"):
            continue
        owner = next((base for base in cls.__mro__ if name in vars(base)), None)
        if owner is None or not owner.__module__.startswith("jetstream_sync"):
            continue  # a name Python, attrs or a framework's base class provides is not this package's API
        member = inspect.getattr_static(cls, name)
        function = member.fget if isinstance(member, property) else getattr(member, "__func__", member)
        if inspect.isfunction(function) or isinstance(member, property):
            yield name, owner


def missing_from_reference(classes: dict[str, tuple[Any, frozenset[str]]]) -> list[str]:
    """Each public method or property of a rendered class that renders neither on the class nor on a base class
    the reference renders (which the class's "Bases:" line links to)."""
    missing = []
    for path, (cls, names) in sorted(classes.items()):
        runtime = _runtime_class(cls)
        for name, owner in _public_methods_and_properties(runtime):
            if name in names:
                continue
            base = classes.get(f"{owner.__module__}.{owner.__qualname__}")
            if base is not None and name in base[1]:
                continue
            missing.append(f"{path}.{name} (defined on {owner.__module__}.{owner.__qualname__})")
    return missing


def test_the_reference_renders_classes_as_the_site_does() -> None:
    """The walk sees what the site shows (checked against a build): a class, one of its methods, one from a
    private base, no private method; a private base itself renders no page."""
    classes = rendered_classes()
    client = classes["jetstream_sync.client.Client"][1]
    assert {"close", "publish", "jetstream"} <= client
    assert not any(name.startswith("_") for name in client)
    assert "fetch" in classes["jetstream_sync.jetstream.consumers.consumer.Consumer"][1]
    assert "jetstream_sync.jetstream.consumers._reads.FetchCalls" not in classes


def test_rendered_attributes_show_the_api_not_how_it_is_built() -> None:
    """An attrs field shows its default, not ``attrs.field(validator=_private, ...)``; an attribute set in a method
    shows no ``= js`` (the expression that set it); a method alias is one line that says so."""
    leaks = []
    for path, (cls, names) in sorted(rendered_classes().items()):
        runtime = _runtime_class(cls)
        fields = {field.name for field in attrs.fields(runtime)} if attrs.has(runtime) else set()
        if dataclasses.is_dataclass(runtime):
            fields |= {field.name for field in dataclasses.fields(runtime)}
        for name in names:
            member = _final(cls.all_members.get(name))
            if member is None or not member.is_attribute:
                continue
            value = str(member.value) if member.value is not None else ""
            attrs_field = value.startswith(("attrs.field(", "attr.ib(", "attr.field("))
            set_in_a_method = "instance-attribute" in member.labels and "class-attribute" not in member.labels
            if attrs_field or (set_in_a_method and value and name not in fields):
                leaks.append(f"{path}.{name} = {value:.60}")
    assert not leaks, "attributes rendered with how they are built:\n" + "\n".join(leaks)
    scripted_close = _final(rendered_classes()["jetstream_sync.testing._scripted.ScriptedServer"][0].members["close"])
    assert scripted_close.value is None
    assert str(scripted_close.docstring.value).startswith("Alias of")


def test_every_rendered_method_says_what_it_does() -> None:
    """A method the reference renders on a class, its own or one from a private base, has a docstring (or
    overrides a documented method of a base class: a framework's hook, documented by the framework)."""
    silent = []
    for path, (cls, names) in sorted(rendered_classes().items()):
        runtime = _runtime_class(cls)
        for name, owner in _public_methods_and_properties(runtime):
            if name not in names:
                continue
            member = inspect.getattr_static(runtime, name)
            function = member.fget if isinstance(member, property) else getattr(member, "__func__", member)
            documented = any(
                (getattr(vars(base)[name], "__doc__", None) or "").strip()
                for base in runtime.__mro__
                if name in vars(base)
            )
            if not (function.__doc__ or "").strip() and not documented:
                silent.append(f"{path}.{name} (defined on {owner.__module__}.{owner.__qualname__})")
    assert not silent, "methods the reference renders with no description:\n" + "\n".join(silent)


def test_every_public_method_and_property_is_in_the_reference() -> None:
    missing = missing_from_reference(rendered_classes())
    assert not missing, (
        "public methods and properties the API reference does not render (a private base's members need "
        f"docs/griffe_reference.py; a directive's members option may leave them out) ({len(missing)}):\n"
        + "\n".join(missing)
    )
