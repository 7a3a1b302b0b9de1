"""A griffe extension (mkdocs.yml loads it) that makes the API reference show the API, not how it is built.

- An attrs field (``x: int = attrs.field(default=0, validator=_check)``) shows as ``x: int = 0``: its default,
  ``factory()`` for a factory, or no value when it is required; its private validator and converter are not API.
  It is an instance attribute (attrs keeps no class attribute for it), so it loses the class-attribute label.
- An attribute set in a method (``self.jetstream = js``) shows its name and type, not the expression that set
  it: ``jetstream = js`` reads as an alias of something the reader cannot see. A plain ``__init__`` parameter
  lends its annotation when the attribute has none.
- A method alias in a class body (``close = stop``) shows as one line that says it is an alias.
- What a public class inherits from a private base (``Consumer.fetch`` from ``_reads.FetchCalls``, a model's
  ``to_json`` from ``_base._Model``) is its API, so it renders on the class. What it inherits from a public base
  renders once, on that base, which the class's "Bases:" line links to (every error would otherwise repeat
  ``APIError``'s attributes). A private base is then left out of the "Bases:" line, which would name a class
  the reference has no page for.

mkdocstrings' griffe loads this file by path; tests/unit/test_docs_reference.py loads it the same way, so the
test sees what the site renders.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import griffe

ATTRS_DECORATORS = {"attrs.define", "attrs.frozen", "attrs.mutable", "attr.s", "attr.define", "attr.frozen"}
ATTRS_FIELDS = {"attrs.field", "attr.ib", "attr.field", "attr.attrib"}


def _decorator_name(decorator: griffe.Decorator) -> str:
    value = decorator.value
    if isinstance(value, griffe.ExprCall):
        value = value.function
    return str(value)


def _is_attrs_class(cls: griffe.Class) -> bool:
    return any(_decorator_name(decorator) in ATTRS_DECORATORS for decorator in cls.decorators)


def _field_value(call: griffe.ExprCall) -> str | griffe.Expr | None:
    """What an attrs field defaults to: its ``default``, ``factory()``, or nothing (a required field)."""
    for argument in call.arguments:
        if isinstance(argument, griffe.ExprKeyword) and argument.name == "default":
            return argument.value
        if isinstance(argument, griffe.ExprKeyword) and argument.name == "factory":
            return f"{argument.value}()"
    return None


def _is_private(cls: griffe.Class) -> bool:
    """Defined under a name or in a module that starts with an underscore: the reference renders no page for it."""
    return any(part.startswith("_") for part in cls.canonical_path.split("."))


def _names_private(base: str | griffe.Expr) -> bool:
    path = base.canonical_path if isinstance(base, (griffe.ExprName, griffe.ExprAttribute)) else str(base)
    return any(part.startswith("_") for part in path.split("."))


def _classes(obj: griffe.Module | griffe.Class) -> Iterator[griffe.Class]:
    """Every class defined in the package, nested ones too (not those a module imports)."""
    for member in obj.members.values():
        if member.is_alias:
            continue
        if isinstance(member, griffe.Class):
            yield member
        if isinstance(member, (griffe.Module, griffe.Class)):
            yield from _classes(member)


def _init_annotation(cls: griffe.Class, name: str) -> str | griffe.Expr | None:
    init = cls.members.get("__init__")
    if isinstance(init, griffe.Function) and name in init.parameters:
        return init.parameters[name].annotation
    return None


class ReferenceShowsTheAPI(griffe.Extension):
    """Rewrites attrs fields, attributes set in methods and method aliases as the module docstring says."""

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        classes = list(_classes(pkg))
        for cls in classes:
            self._adopt_private_inheritance(cls)
            attrs_class = _is_attrs_class(cls)
            for member in list(cls.members.values()):
                if isinstance(member, griffe.Attribute):
                    self._attribute(cls, member, attrs_class)
        # Only once every class has adopted its members: a subclass reaches a private base through its bases.
        for cls in classes:
            cls.bases = [base for base in cls.bases if not _names_private(base)]

    def _adopt_private_inheritance(self, cls: griffe.Class) -> None:
        try:
            mro = cls.mro()
        except (ValueError, griffe.AliasResolutionError, griffe.CyclicAliasError):
            return  # a base outside the package (kombu's, Celery's): nothing of ours to adopt
        seen = set(cls.members)
        for base in mro:
            for name, member in base.members.items():
                if name in seen:
                    continue
                seen.add(name)  # the first class of the MRO that has a name defines it, as in Python
                if _is_private(base) and not name.startswith("_"):
                    cls.set_member(name, griffe.Alias(name, member, parent=cls))

    def _attribute(self, cls: griffe.Class, attribute: griffe.Attribute, attrs_class: bool) -> None:
        value = attribute.value
        if attrs_class and isinstance(value, griffe.ExprCall) and str(value.function) in ATTRS_FIELDS:
            attribute.value = _field_value(value)
            attribute.labels.discard("class-attribute")
        elif attrs_class and attribute.annotation is not None and "class-attribute" in attribute.labels:
            if not str(attribute.annotation).startswith(("ClassVar", "typing.ClassVar")):
                attribute.labels.discard("class-attribute")
        elif "instance-attribute" in attribute.labels and "class-attribute" not in attribute.labels:
            if attribute.annotation is None and isinstance(value, griffe.ExprName):
                attribute.annotation = _init_annotation(cls, value.name)
            attribute.value = None
        elif isinstance(value, griffe.ExprName) and not attribute.docstring:
            target = cls.members.get(value.name)
            if isinstance(target, griffe.Function):
                attribute.value = None
                attribute.labels -= {"class-attribute", "instance-attribute"}
                attribute.docstring = griffe.Docstring(
                    f"Alias of [`{target.name}`][{cls.path}.{target.name}].", parent=attribute
                )
