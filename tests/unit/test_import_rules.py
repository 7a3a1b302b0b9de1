"""The import rules docs/ARCHITECTURE.md states ("Layers and imports"), checked by reading the sources (ast).

Each import of the package is classified where it stands: at module level (runs when the module is imported),
deferred (inside a function: runs when that is called) or typing (under ``if TYPE_CHECKING:``: never runs). The
rules say which kinds they forbid. Allow-lists name every exception and say why; an entry that no longer matches
anything fails too, so the lists (and the document) stay true.
"""

from __future__ import annotations

import ast
import textwrap
from collections import defaultdict
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Literal, NamedTuple

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "jetstream_sync"

Kind = Literal["module", "deferred", "typing"]

#: the nats-py adapter: the only modules that import nats-py (ARCHITECTURE.md, "Rules: one loop owner")
NATS_ADAPTER = frozenset(
    f"jetstream_sync._runtime.{name}" for name in ("_nats", "_parser", "_translate", "_transports", "_contract")
)
#: what `_runtime/` may import of the package besides itself: the foundation every layer shares
RUNTIME_FOUNDATION = frozenset(
    f"jetstream_sync.{name}" for name in ("errors", "headers", "options", "_protocol", "_validate", "_telemetry")
)
#: the modules below the JetStream layer, which must not need it to run (a prefix names a package)
BELOW_JETSTREAM = (
    "jetstream_sync._runtime",
    "jetstream_sync._delivery",
    "jetstream_sync._durations",
    "jetstream_sync._dispatch",
    "jetstream_sync.models",
    "jetstream_sync.services",
    "jetstream_sync.client",
    "jetstream_sync.message",
    "jetstream_sync.subscription",
    "jetstream_sync.replies",
    "jetstream_sync.headers",
    "jetstream_sync.errors",
    "jetstream_sync.options",
    "jetstream_sync._protocol",
    "jetstream_sync._validate",
    "jetstream_sync._telemetry",
    "jetstream_sync.codecs",
)
#: (importing module, imported module, kind) allowed although a rule forbids it, and why
ALLOWED: dict[tuple[str, str, Kind], str] = {
    ("jetstream_sync.jetstream.context", "jetstream_sync.client", "typing"): (
        "JetStream(client) is the public constructor and js.client hands the facade back: typed as Client, "
        "while the context itself uses only client.runtime"
    ),
    ("jetstream_sync.client", "jetstream_sync.jetstream", "deferred"): (
        "Client.jetstream() hands out the JetStream context: the facade sits above the layer it offers"
    ),
    ("jetstream_sync._delivery._acks", "jetstream_sync.jetstream.consumers.delivery", "deferred"): (
        "Msg.ack_next promises a MessageBatch (AckNextSender's public signature): the one handle the delivery "
        "layer builds itself, imported when an ack_next is sent, never when the layer is"
    ),
    ("jetstream_sync.jetstream.groups._cli", "jetstream_sync.client", "typing"): (
        "the entry of `python -m jetstream_sync group`: __main__ connects and hands it the Client, typed only"
    ),
}
#: modules of jetstream/ that read the client facade (``js.client.<attr>``), and why
ALLOWED_FACADE_READS: dict[str, str] = {
    "jetstream_sync.jetstream.groups.member": (
        "a group member answers and asks presence over core NATS (a subscription with a handler thread, a "
        "request) and flushes before it releases its partitions: the facade's core operations, which the port "
        "offers only at the IO-thread level; written before this rule, to move to the port with them"
    ),
}
#: groups of modules that import each other at module level on purpose, and why that is safe
ALLOWED_CYCLES: dict[frozenset[str], str] = {
    frozenset(
        f"jetstream_sync.{name}"
        for name in (
            "errors",
            "_api_errors",
            "_codec_errors",
            "_group_errors",
            "_not_found",
            "_subscribe_errors",
            "_usage_errors",
        )
    ): (
        "errors.py defines the bases, then re-exports at its end the classes kept in six modules for its size; "
        "they import the bases from it, which exist by then"
    ),
}
#: (importing module, private name as ``module.name``) imported across packages although private, and why
ALLOWED_PRIVATE_REACHES: dict[tuple[str, str], str] = {}


class Import(NamedTuple):
    module: str  # the importing module
    target: str  # the module imported (a submodule when ``from package import submodule``)
    name: str | None  # the name imported from it (``from target import name``), None for a module
    kind: Kind
    line: int


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@cache
def package_modules() -> dict[str, Path]:
    return {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def package_of(module: str, path: Path) -> str:
    return module if path.name == "__init__.py" else module.rpartition(".")[0]


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports_in(source: str, module: str, path: Path, known: dict[str, Path]) -> Iterator[Import]:
    """Every import statement of ``source``, resolved to the modules of ``known`` (or left as written)."""
    package = package_of(module, path)

    def resolve(node: ast.ImportFrom) -> str:
        if not node.level:
            return node.module or ""
        base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
        return ".".join([*base, *([node.module] if node.module else [])])

    def walk(body: list[ast.stmt], kind: Kind) -> Iterator[Import]:
        for node in body:
            if isinstance(node, ast.If) and _is_type_checking(node.test):
                yield from walk(node.body, "typing")
                yield from walk(node.orelse, kind)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield from walk(node.body, "deferred" if kind == "module" else kind)
            elif isinstance(node, ast.ImportFrom):
                target = resolve(node)
                for alias in node.names:
                    sub = f"{target}.{alias.name}"
                    if sub in known:
                        yield Import(module, sub, None, kind, node.lineno)
                    else:
                        yield Import(module, target, alias.name, kind, node.lineno)
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    yield Import(module, alias.name, None, kind, node.lineno)
            else:
                for field in ("body", "orelse", "finalbody", "handlers"):
                    inner = getattr(node, field, None)
                    if isinstance(inner, list) and inner and isinstance(inner[0], ast.stmt):
                        yield from walk(inner, kind)
                for handler in getattr(node, "handlers", ()):
                    yield from walk(handler.body, kind)
                for case in getattr(node, "cases", ()):
                    yield from walk(case.body, kind)

    yield from walk(ast.parse(source).body, "module")


@cache
def all_imports() -> tuple[Import, ...]:
    known = package_modules()
    return tuple(imp for name, path in known.items() for imp in imports_in(path.read_text(), name, path, known))


def _under(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def _where(imp: Import) -> str:
    return f"{imp.module}:{imp.line} imports {imp.target}{'.' + imp.name if imp.name else ''} ({imp.kind})"


def _check(found: list[Import]) -> list[str]:
    """The breaches of a rule that the allow-list does not excuse."""
    return [_where(imp) for imp in found if (imp.module, imp.target, imp.kind) not in ALLOWED]


# -- the rules --------------------------------------------------------------------------------------------------


def nats_py_outside_the_adapter(imports: tuple[Import, ...]) -> list[Import]:
    return [i for i in imports if _under(i.target, "nats") and i.module not in NATS_ADAPTER]


def jetstream_importing_the_client(imports: tuple[Import, ...]) -> list[Import]:
    return [i for i in imports if _under(i.module, "jetstream_sync.jetstream") and i.target == "jetstream_sync.client"]


def runtime_importing_above_it(imports: tuple[Import, ...]) -> list[Import]:
    return [
        i
        for i in imports
        if _under(i.module, "jetstream_sync._runtime")
        and _under(i.target, "jetstream_sync")
        and not _under(i.target, "jetstream_sync._runtime")
        and i.target not in RUNTIME_FOUNDATION
        and i.kind != "typing"
    ]


def below_importing_jetstream(imports: tuple[Import, ...]) -> list[Import]:
    return [
        i
        for i in imports
        if any(_under(i.module, below) for below in BELOW_JETSTREAM)
        and _under(i.target, "jetstream_sync.jetstream")
        and i.kind != "typing"
    ]


def delivery_internals_reached(imports: tuple[Import, ...]) -> list[Import]:
    """Imports of a module inside ``_delivery/`` from outside it: the layer is used through its package."""
    return [
        i
        for i in imports
        if i.target.startswith("jetstream_sync._delivery.") and not _under(i.module, "jetstream_sync._delivery")
    ]


def private_reaches(imports: tuple[Import, ...], known: dict[str, Path]) -> list[Import]:
    """Imports of a private name (``_x``, not a module) from a module of another package."""
    found = []
    for imp in imports:
        if imp.name is None or not imp.name.startswith("_") or imp.name.startswith("__") or imp.target not in known:
            continue
        if package_of(imp.target, known[imp.target]) != package_of(imp.module, known[imp.module]):
            found.append(imp)
    return found


def module_level_cycles(imports: tuple[Import, ...], known: dict[str, Path]) -> list[frozenset[str]]:
    """The groups of modules that import each other at module level (strongly connected, Tarjan's algorithm)."""
    edges: dict[str, set[str]] = defaultdict(set)
    for imp in imports:
        if imp.kind == "module" and imp.target in known and imp.target != imp.module:
            edges[imp.module].add(imp.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[frozenset[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(edges.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.add(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(frozenset(group))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return groups


def facade_reads(source: str) -> list[int]:
    """The lines of ``source`` that read something of a client facade reached as ``<x>.client``: ``js.client.runtime``,
    ``self.jetstream.client.server_info``. Passing ``js.client`` itself along (an identity to key on) is no read."""
    return sorted(
        node.lineno
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute) and node.value.attr == "client"
    )


# -- the package keeps them -------------------------------------------------------------------------------------


def test_only_the_adapter_imports_nats_py() -> None:
    assert _check(nats_py_outside_the_adapter(all_imports())) == []


def test_the_jetstream_layer_does_not_import_the_client_facade() -> None:
    assert _check(jetstream_importing_the_client(all_imports())) == []


def test_the_jetstream_layer_reads_nothing_of_the_client_facade() -> None:
    """It talks to the port (``js.runtime``): ``js.client.runtime`` would go through the facade to get it."""
    found = [
        f"{name}:{line}"
        for name, path in package_modules().items()
        if _under(name, "jetstream_sync.jetstream")
        if name not in ALLOWED_FACADE_READS
        for line in facade_reads(path.read_text())
    ]
    assert found == []


def test_the_runtime_imports_only_the_foundation_of_the_package() -> None:
    assert _check(runtime_importing_above_it(all_imports())) == []


def test_nothing_below_the_jetstream_layer_needs_it_to_run() -> None:
    assert _check(below_importing_jetstream(all_imports())) == []


def test_the_delivery_layer_is_used_through_its_package() -> None:
    assert [_where(i) for i in delivery_internals_reached(all_imports())] == []


def test_no_private_name_is_imported_across_packages() -> None:
    found = private_reaches(all_imports(), package_modules())
    assert [_where(i) for i in found if (i.module, f"{i.target}.{i.name}") not in ALLOWED_PRIVATE_REACHES] == []


def test_no_module_level_import_cycles() -> None:
    cycles = module_level_cycles(all_imports(), package_modules())
    assert [sorted(c) for c in cycles if c not in ALLOWED_CYCLES] == []


def test_every_allowance_is_still_needed() -> None:
    imports = all_imports()
    known = package_modules()
    breaches = {
        (i.module, i.target, i.kind)
        for rule in (
            nats_py_outside_the_adapter,
            jetstream_importing_the_client,
            runtime_importing_above_it,
            below_importing_jetstream,
        )
        for i in rule(imports)
    }
    assert [key for key in ALLOWED if key not in breaches] == []
    cycles = set(module_level_cycles(imports, known))
    assert [sorted(c) for c in ALLOWED_CYCLES if c not in cycles] == []
    reaches = {(i.module, f"{i.target}.{i.name}") for i in private_reaches(imports, known)}
    assert [key for key in ALLOWED_PRIVATE_REACHES if key not in reaches] == []
    assert [name for name in ALLOWED_FACADE_READS if not facade_reads(known[name].read_text())] == []


def test_the_architecture_documents_snippets_run() -> None:
    """docs/ARCHITECTURE.md shows the delivery layer's class order in a snippet: it must hold."""
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    blocks = [block.split("```", 1)[0] for block in text.split("```python\n")[1:]]
    assert blocks, "docs/ARCHITECTURE.md has no python snippet any more"
    for block in blocks:
        exec(compile(block, "docs/ARCHITECTURE.md", "exec"), {})


# -- the checks can fail ------------------------------------------------------------------------------------------


def _imports_of(sources: dict[str, str]) -> tuple[tuple[Import, ...], dict[str, Path]]:
    """The imports of made-up modules, as if they were files of the package."""
    known = {name: PACKAGE / (name.replace(".", "/").removeprefix("jetstream_sync/") + ".py") for name in sources}
    found = tuple(
        imp for name, source in sources.items() for imp in imports_in(textwrap.dedent(source), name, known[name], known)
    )
    return found, known


def test_the_checks_find_what_they_look_for() -> None:
    imports, known = _imports_of(
        {
            "jetstream_sync.jetstream.a": """
                from typing import TYPE_CHECKING
                import nats.aio.client
                from ..client import Client
                from .b import _helper
                if TYPE_CHECKING:
                    from .. import client
                def later():
                    from ..jetstream import b
            """,
            "jetstream_sync.jetstream.b": "from . import a\n",
            "jetstream_sync._runtime.c": "from ..message import Msg\nfrom ..errors import JetStreamError\n",
            "jetstream_sync.message": "def f():\n    from .jetstream.a import x\n",
            "jetstream_sync.client": "",
            "jetstream_sync.jetstream.kv.d": "from ..b import _helper\n",
            "jetstream_sync._delivery._e": "from ..jetstream.consumers import delivery\n",
            "jetstream_sync._delivery": "from ._e import Engine\n",
            "jetstream_sync.jetstream.f": "from .._delivery._e import Engine\nfrom .._delivery import Engine\n",
        }
    )
    assert [(i.module, i.line) for i in nats_py_outside_the_adapter(imports)] == [("jetstream_sync.jetstream.a", 3)]
    assert [(i.line, i.kind) for i in jetstream_importing_the_client(imports)] == [(4, "module"), (7, "typing")]
    assert [(i.module, i.target) for i in runtime_importing_above_it(imports)] == [
        ("jetstream_sync._runtime.c", "jetstream_sync.message")
    ]
    assert [(i.module, i.kind) for i in below_importing_jetstream(imports)] == [
        ("jetstream_sync.message", "deferred"),
        ("jetstream_sync._delivery._e", "module"),
    ]
    assert [(i.module, i.line) for i in delivery_internals_reached(imports)] == [("jetstream_sync.jetstream.f", 1)]
    assert [(i.module, i.name) for i in private_reaches(imports, known)] == [
        ("jetstream_sync.jetstream.kv.d", "_helper")
    ]
    assert facade_reads("x = js.client.runtime\nkey(js.client)\nself.jetstream.client.server_info\n") == [1, 3]
    assert module_level_cycles(imports, known) == [
        frozenset({"jetstream_sync.jetstream.a", "jetstream_sync.jetstream.b"})
    ]
