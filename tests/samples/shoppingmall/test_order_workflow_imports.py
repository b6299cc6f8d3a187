"""What the workflow's application and framework adapter may import.

The parts depend one way (docs/shoppingmall.md, "Where each part lives").

- ``application/``: the domain, the shared contracts, itself and the standard
  library (plus ``attrs``) -- no framework, no trio, no store, no codec.
- ``infrastructure/`` and ``process.py``: from the framework, only the
  package ``zlink_trio`` itself, and only names it exports (``zl.X`` with
  ``X`` in ``zlink_trio.__all__``); no ``zlink_trio.runtime`` / ``.core`` /
  ``.wire`` / ``.store`` module.

Read with :mod:`ast`, never imported; ``if TYPE_CHECKING:`` imports count.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

import zlink_trio as zl

ROOT = Path(__file__).resolve().parents[3]
WORKFLOW = ROOT / "zlink_trio/samples/shoppingmall/server/order_workflow"
SAMPLE = "zlink_trio.samples."
APPLICATION_MAY = ("zlink_trio.samples.shoppingmall.server.order_workflow.domain",
                   "zlink_trio.samples.shoppingmall.server.order_workflow.application",
                   "zlink_trio.samples.shoppingmall.shared.contracts")


def _modules(*parts: str) -> list[Path]:
    found: list[Path] = []
    for part in parts:
        path = WORKFLOW / part
        found.extend(sorted(path.rglob("*.py")) if path.is_dir() else [path])
    return found


def _name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> list[tuple[int, str]]:
    module = _name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text())):
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
    return found


@pytest.mark.parametrize("path", _modules("application"), ids=lambda p: p.name)
def test_the_application_imports_no_framework_and_no_io(path):
    bad = []
    for line, name in _imports(path):
        top = name.split(".")[0]
        if top == "zlink_trio":
            if not name.startswith(APPLICATION_MAY):
                bad.append((line, name))
        elif top not in sys.stdlib_module_names and top not in {"attrs", "attr"}:
            bad.append((line, name))
    assert not bad, f"{path.name} imports {bad}"


@pytest.mark.parametrize("path", _modules("infrastructure", "process.py"), ids=lambda p: p.name)
def test_the_adapter_uses_only_what_zlink_trio_exports(path):
    bad = [(line, name) for line, name in _imports(path)
           if name.startswith("zlink_trio.") and not name.startswith(SAMPLE)
           and name.rpartition(".")[0] != "zlink_trio"]
    bad += [(line, name) for line, name in _imports(path)
            if name.rpartition(".")[0] == "zlink_trio"
            and name.rpartition(".")[2] not in zl.__all__]
    tree = ast.parse(path.read_text())
    bad += [(node.lineno, f"zl.{node.attr}") for node in ast.walk(tree)
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
            and node.value.id == "zl" and node.attr not in zl.__all__]
    assert not bad, f"{path.name} reaches past the public API: {bad}"
