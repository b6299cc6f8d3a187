"""Layering: imports only point down (docs/architecture.md), and the sans-IO layers stay sans-IO.

The rule is the table ``LAYERS`` below, bottom layer first. Each row names a
package, the packages of ours it may import besides itself, and whether it
is sans-IO (then it may not import any module in ``IO_MODULES``). Add a row
when a new layer appears.

``zlink_trio`` in a row means the public API only: the package itself
(``import zlink_trio as zl``) and the names its ``__all__`` exports (``from
zlink_trio import open_node``), never a module below it. The row of the
public API (``zlink_trio/__init__.py``) is held to that too, so it cannot
import the tools above it, and ``zlink_trio/`` holds nothing else at top level.

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


_BELOW_THE_API = (
    "statecharts",
    "zlink_trio.core",
    "zlink_trio.wire",
    "zlink_trio.lowlevel",
    "zlink_trio.store",
    "zlink_trio.transport",
    "zlink_trio.runtime",
)

#: Bottom first. ``statecharts`` is the bottom layer: every layer but the samples may import it.
LAYERS: tuple[Layer, ...] = (
    Layer("statecharts", may_import=(), sans_io=True),
    Layer("zlink_trio.core", may_import=("statecharts",), sans_io=True),
    Layer("zlink_trio.wire", may_import=("statecharts", "zlink_trio.core"), sans_io=True),
    # Trio and system primitives with one home each (parking a task, pooled randomness).
    Layer("zlink_trio.lowlevel", may_import=(), sans_io=False),
    Layer(
        "zlink_trio.store",
        may_import=("statecharts", "zlink_trio.core", "zlink_trio.wire", "zlink_trio.lowlevel"),
        sans_io=False,
    ),
    Layer(
        "zlink_trio.transport",
        may_import=("statecharts", "zlink_trio.core", "zlink_trio.wire", "zlink_trio.lowlevel",
                    "zlink_trio.store"),
        sans_io=False,
    ),
    Layer(
        "zlink_trio.runtime",
        may_import=(
            "statecharts",
            "zlink_trio.core",
            "zlink_trio.wire",
            "zlink_trio.lowlevel",
            "zlink_trio.store",
            "zlink_trio.transport",
        ),
        sans_io=False,
    ),
    # The public API: zlink_trio/__init__.py alone (PUBLIC_API below).
    Layer("zlink_trio", may_import=_BELOW_THE_API, sans_io=False),
    # The tools that ship with the runtime: the public API and every layer below it.
    Layer("zlink_trio.cli", may_import=(*_BELOW_THE_API, "zlink_trio"), sans_io=False),
    Layer("zlink_trio.bench", may_import=(*_BELOW_THE_API, "zlink_trio"), sans_io=False),
    # The public test kit: the public API and the runtime's documented hooks; nothing of
    # ours imports it (only tests do).
    Layer("zlink_trio.testing", may_import=(*_BELOW_THE_API, "zlink_trio"), sans_io=False),
    # On top: the samples use the public API and nothing else of ours.
    Layer("zlink_trio.samples", may_import=("zlink_trio",), sans_io=False),
)

#: Layers that must exist now, so the scan cannot pass by finding nothing: every row.
REQUIRED = tuple(layer.package for layer in LAYERS)

#: What ``zlink_trio/`` holds at top level: the public API and the packages of LAYERS.
TOP_LEVEL = frozenset({"__init__.py", "py.typed"}) | {
    layer.package.split(".")[1] for layer in LAYERS if layer.package.startswith("zlink_trio.")
}

#: A row's "zlink_trio": the package itself and the names its ``__all__`` exports.
PUBLIC_API = "zlink_trio"


def _public_names() -> frozenset[str]:
    tree = ast.parse((ROOT / "zlink_trio" / "__init__.py").read_text("utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id == "__all__" for target in node.targets
        ):
            return frozenset(ast.literal_eval(node.value))
    raise AssertionError("zlink_trio/__init__.py has no __all__")


PUBLIC_NAMES = _public_names()


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def _permits(package: str, name: str) -> bool:
    """Whether importing ``name`` is importing ``package`` (the public API: only its names)."""
    if package == PUBLIC_API:
        return name == PUBLIC_API or name.removeprefix(PUBLIC_API + ".") in PUBLIC_NAMES
    return _within(name, package)


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
            if not any(_permits(package, name) for package in allowed):
                shown = tuple(f"{p} (its exports)" if p == PUBLIC_API else p for p in allowed)
                problems.append(
                    f"{where}: {layer.package} imports {name}; it may import only {shown}"
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


def test_top_level_holds_only_the_public_api_and_the_packages_of_layers():
    """``zlink_trio/``: ``__init__.py``, ``py.typed`` and one package per row, nothing else."""
    found = {p.name for p in (ROOT / "zlink_trio").iterdir() if p.name != "__pycache__"}
    assert found == TOP_LEVEL


def test_the_public_api_row_knows_the_exported_names():
    assert {"open_node", "SpotRef", "ZLinkError"} <= PUBLIC_NAMES


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
        ("from zlink_trio.runtime import _node\n", "zlink_trio.samples.x", "zlink_trio.runtime"),
        ("from zlink_trio import core\n", "zlink_trio.samples.x", "zlink_trio.core"),
        ("import zlink_trio.store\n", "zlink_trio.samples.x", "zlink_trio.store"),
        ("from zlink_trio.store import open_store\n", "zlink_trio.samples.x", "zlink_trio.store"),
        ("import statecharts\n", "zlink_trio.samples.x", "samples imports statecharts"),
        ("from zlink_trio import cli\n", "zlink_trio.samples.x", "zlink_trio.cli"),
        ("from zlink_trio.samples import demo\n", "zlink_trio.cli.x", "zlink_trio.samples"),
        ("from zlink_trio.cli import main\n", "zlink_trio.bench.x", "zlink_trio.cli"),
        ("from zlink_trio.bench import suite\n", "zlink_trio.cli.x", "zlink_trio.bench"),
        ("from zlink_trio.cli import main\n", "zlink_trio._x", "zlink_trio imports"),
        ("from zlink_trio import cli\n", "zlink_trio.runtime.x", "zlink_trio.cli"),
        ("from zlink_trio.testing import open_test_cluster\n", "zlink_trio.cli.x",
         "zlink_trio.testing"),
        ("import zlink_trio.testing\n", "zlink_trio.samples.x", "zlink_trio.testing"),
        ("from zlink_trio.testing import Recorder\n", "zlink_trio._x", "zlink_trio imports"),
        ("from zlink_trio.cli import main\n", "zlink_trio.testing.x", "zlink_trio.cli"),
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
        ("import zlink_trio as zl\nfrom zlink_trio import SpotRef, open_node\n",
         "zlink_trio.samples.x"),
        ("from zlink_trio.samples import spots\nfrom . import spots\n", "zlink_trio.samples.x"),
        ("import attrs\nimport trio\n", "zlink_trio.samples.x"),
        ("import zlink_trio as zl\nimport statecharts\nfrom zlink_trio.store import x\n",
         "zlink_trio.cli.x"),
        ("from zlink_trio import open_node\nfrom zlink_trio.runtime import x\n",
         "zlink_trio.bench.x"),
        ("from zlink_trio.core.errors import x\nfrom zlink_trio.runtime import y\n",
         "zlink_trio._x"),
        ("import zlink_trio as zl\nfrom zlink_trio.runtime import charts\n",
         "zlink_trio.testing.x"),
    ],
)
def test_checker_allows_downward_imports(source: str, module: str) -> None:
    assert check_source(source, module, "x.py", is_package=module == "statecharts") == []
