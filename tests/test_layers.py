"""Layering: imports only point down (DESIGN.md §1), and the sans-IO layers stay sans-IO.

The rule is the table ``LAYERS`` below, bottom layer first. Each row names a
package, the packages of ours it may import besides itself, and whether it
is sans-IO (then it may not import any module in ``IO_MODULES``). Add a row
when a new layer (transport, runtime, the public API, samples) appears.

The checker reads source with :mod:`ast`; it never imports the code. It sees
``import x``, ``from x import y`` (``from pkg import name`` counts as importing
``pkg.name``, so ``from zlink_trio import core`` is the core layer, while
``from zlink_trio import SpotRef`` is the public API), relative imports,
imports under ``if TYPE_CHECKING:`` (a type-level dependency is still a
dependency), and ``importlib.import_module("x")`` / ``__import__("x")`` with
a literal name.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import NamedTuple

import pytest

ROOT = Path(__file__).resolve().parent.parent

#: Top-level packages that are ours; imports of anything else are third-party.
OURS = ("statecharts", "zlink_trio")

#: Modules that do I/O or run an event loop: banned in sans-IO layers.
IO_MODULES = frozenset(
    {"trio", "trio_websocket", "coredis", "sqlite3", "anyio", "socket", "asyncio"}
)


class Layer(NamedTuple):
    package: str
    may_import: tuple[str, ...]
    sans_io: bool


#: Bottom first. ``statecharts`` is the bottom layer: every layer may import it.
LAYERS: tuple[Layer, ...] = (
    Layer("statecharts", may_import=(), sans_io=True),
    Layer("zlink_trio.core", may_import=("statecharts",), sans_io=True),
    Layer("zlink_trio.wire", may_import=("statecharts", "zlink_trio.core"), sans_io=True),
    Layer(
        "zlink_trio.store",
        may_import=("statecharts", "zlink_trio.core", "zlink_trio.wire"),
        sans_io=False,
    ),
    Layer(
        "zlink_trio.transport",
        may_import=("statecharts", "zlink_trio.core", "zlink_trio.wire", "zlink_trio.store"),
        sans_io=False,
    ),
    Layer(
        "zlink_trio.runtime",
        may_import=(
            "statecharts",
            "zlink_trio.core",
            "zlink_trio.wire",
            "zlink_trio.store",
            "zlink_trio.transport",
        ),
        sans_io=False,
    ),
    # The public API (zlink_trio/__init__.py) and the demo: the only importers of runtime.
    Layer(
        "zlink_trio",
        may_import=(
            "statecharts",
            "zlink_trio.core",
            "zlink_trio.wire",
            "zlink_trio.store",
            "zlink_trio.transport",
            "zlink_trio.runtime",
        ),
        sans_io=False,
    ),
    # Next: zlink_trio.samples — it may import the rows above it.
)

#: Layers that must exist now, so the scan cannot pass by finding nothing.
REQUIRED = (
    "statecharts",
    "zlink_trio.core",
    "zlink_trio.wire",
    "zlink_trio.transport",
    "zlink_trio.runtime",
)


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def _imported_modules(tree: ast.AST, module: str, is_package: bool) -> list[tuple[int, str]]:
    """Return ``(line, dotted name)`` for every import in ``tree``.

    ``module`` is the dotted name of the file being read (for relative imports).
    """
    package = module if is_package else module.rpartition(".")[0]
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1])
                target = f"{base}.{node.module}" if node.module else base
            else:
                target = node.module or ""
            found.extend((node.lineno, f"{target}.{alias.name}") for alias in node.names)
        elif (
            isinstance(node, ast.Call)
            and (
                (isinstance(node.func, ast.Name) and node.func.id == "__import__")
                or (isinstance(node.func, ast.Attribute) and node.func.attr == "import_module")
            )
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            found.append((node.lineno, node.args[0].value))
    return found


def _layer_of(module: str) -> Layer | None:
    owners = [layer for layer in LAYERS if _within(module, layer.package)]
    return max(owners, key=lambda layer: len(layer.package)) if owners else None


def check_source(source: str, module: str, filename: str, *, is_package: bool = False) -> list[str]:
    """Return one message per layering violation in ``source`` (the file ``filename``)."""
    layer = _layer_of(module)
    assert layer is not None, f"{module} is in no layer of LAYERS"
    problems: list[str] = []
    for line, name in _imported_modules(ast.parse(source, filename), module, is_package):
        top = name.partition(".")[0]
        where = f"{filename}:{line}"
        if layer.sans_io and top in IO_MODULES:
            problems.append(f"{where}: sans-IO layer {layer.package} imports {name}")
        elif top in OURS:
            allowed = (layer.package, *layer.may_import)
            if not any(_within(name, package) for package in allowed):
                problems.append(
                    f"{where}: {layer.package} imports {name}; it may import only {allowed}"
                )
    return problems


def _files(layer: Layer) -> list[tuple[Path, str, bool]]:
    directory = ROOT.joinpath(*layer.package.split("."))
    result = []
    for path in sorted(directory.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        is_package = parts[-1] == "__init__"
        module = ".".join(parts[:-1] if is_package else parts)
        # A subpackage with its own row is checked under that row.
        if _layer_of(module) == layer:
            result.append((path, module, is_package))
    return result


@pytest.mark.parametrize("layer", LAYERS, ids=lambda layer: layer.package)
def test_imports_point_down(layer: Layer) -> None:
    files = _files(layer)
    if layer.package in REQUIRED:
        assert files, f"no Python files found for {layer.package}"
    problems = [
        problem
        for path, module, is_package in files
        for problem in check_source(
            path.read_text("utf-8"),
            module,
            str(path.relative_to(ROOT)),
            is_package=is_package,
        )
    ]
    assert not problems, "\n".join(problems)


# --------------------------------------------------------------------------- self-tests


@pytest.mark.parametrize(
    ("source", "module", "needle"),
    [
        (
            "import trio\n",
            "zlink_trio.core.x",
            "x.py:1: sans-IO layer zlink_trio.core imports trio",
        ),
        ("import os\nfrom trio.lowlevel import current_task\n", "statecharts.x", "x.py:2"),
        ("if TYPE_CHECKING:\n    import trio_websocket\n", "zlink_trio.wire.x", "x.py:2"),
        ("def f():\n    import asyncio.tasks\n", "zlink_trio.wire.x", "asyncio.tasks"),
        ("import importlib\nimportlib.import_module('socket')\n", "zlink_trio.core.x", "socket"),
        ("__import__('sqlite3')\n", "zlink_trio.core.x", "sqlite3"),
        ("import zlink_trio\n", "statecharts.x", "statecharts imports zlink_trio"),
        ("from zlink_trio.core import errors\n", "statecharts.x", "zlink_trio.core.errors"),
        ("from zlink_trio.wire.codec import x\n", "zlink_trio.core.x", "zlink_trio.wire.codec"),
        ("from zlink_trio import SpotRef\n", "zlink_trio.core.x", "zlink_trio.SpotRef"),
        ("from zlink_trio.store import memory\n", "zlink_trio.wire.x", "zlink_trio.store"),
        ("from ..runtime import node\n", "zlink_trio.store.x", "zlink_trio.runtime.node"),
        ("from zlink_trio.runtime import node\n", "zlink_trio.transport.x", "zlink_trio.runtime"),
        ("import zlink_trio.transport\n", "zlink_trio.store.x", "zlink_trio.transport"),
        ("from .. import wire\n", "zlink_trio.core.x", "zlink_trio.wire"),
    ],
)
def test_checker_detects_violations(source: str, module: str, needle: str) -> None:
    problems = check_source(source, module, "x.py")
    assert len(problems) == 1
    assert needle in problems[0]


@pytest.mark.parametrize(
    ("source", "module"),
    [
        ("import attrs\nimport os\n", "zlink_trio.core.x"),
        ("from zlink_trio.core.errors import InvalidOperation\n", "zlink_trio.wire.x"),
        ("from zlink_trio import core\n", "zlink_trio.wire.x"),
        ("import statecharts\n", "zlink_trio.core.x"),
        ("from . import codec\nfrom .codec import x\n", "zlink_trio.wire.x"),
        ("from ..core import identity\n", "zlink_trio.wire.x"),
        ("import trio\nimport sqlite3\n", "zlink_trio.store.x"),
        ("from zlink_trio.wire import codec\n", "zlink_trio.store.x"),
        ("import trio_websocket\nfrom zlink_trio.store import x\n", "zlink_trio.transport.x"),
        ("from zlink_trio.transport import Link\n", "zlink_trio.runtime.x"),
        ("from . import _base\n", "statecharts"),
    ],
)
def test_checker_allows_downward_imports(source: str, module: str) -> None:
    assert check_source(source, module, "x.py", is_package=module == "statecharts") == []
