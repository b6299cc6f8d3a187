"""The order domain is pure: standard library and ``attrs`` only.

The domain does not reference the framework, the HTTP host, Redis, a database
client or codec types (docs/shoppingmall.md, "Where each part lives"). The check
is stricter than that list, so it needs no list of forbidden names: every import
in every module of ``server/order_workflow/domain/`` must be a standard-library module, ``attrs``
/ ``attr``, or a relative import that stays inside the domain package. An
absolute ``zlink_trio...`` import is refused even when it names the sample's
own ``shared.contracts``: the domain owns its types (``domain/values.py`` says
why). Read with :mod:`ast`, never imported; ``if TYPE_CHECKING:`` imports
count, and so do ``importlib.import_module("x")`` / ``__import__("x")`` with a
literal name.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
DOMAIN = ROOT / "zlink_trio/samples/shoppingmall/server/order_workflow/domain"
PACKAGE = "zlink_trio.samples.shoppingmall.server.order_workflow.domain"

#: Third-party packages the domain may use.
ALLOWED_THIRD_PARTY = frozenset({"attrs", "attr"})


def _imports(source: str, module: str, is_package: bool) -> list[tuple[int, str]]:
    """``(line, absolute dotted name)`` of every import in ``source``."""
    package = module if is_package else module.rpartition(".")[0]
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            # ``from pkg import name`` imports ``pkg.name`` (a module or a name in pkg).
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


def check(source: str, module: str, filename: str, *, is_package: bool = False) -> list[str]:
    """One message per import of ``source`` the domain may not make."""
    problems = []
    for line, name in _imports(source, module, is_package):
        top = name.partition(".")[0]
        inside = name == PACKAGE or name.startswith(PACKAGE + ".")
        if inside or top in ALLOWED_THIRD_PARTY or (top and top in sys.stdlib_module_names):
            continue
        problems.append(
            f"{filename}:{line}: the order domain imports {name}; it may import only the "
            "standard library, attrs and its own modules"
        )
    return problems


def _modules() -> list[tuple[Path, str, bool]]:
    result = []
    for path in sorted(DOMAIN.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        is_package = parts[-1] == "__init__"
        result.append((path, ".".join(parts[:-1] if is_package else parts), is_package))
    return result


def test_the_domain_imports_only_the_standard_library_and_attrs():
    modules = _modules()
    assert len(modules) >= 7, "the domain package was not found"
    problems = [
        problem
        for path, module, is_package in modules
        for problem in check(path.read_text("utf-8"), module, path.name, is_package=is_package)
    ]
    assert not problems, "\n".join(problems)


# --------------------------------------------------------------------------- self-tests


@pytest.mark.parametrize(
    ("source", "needle"),
    [
        ("import zlink_trio\n", "imports zlink_trio"),
        ("import zlink_trio as zl\n", "imports zlink_trio"),
        ("from zlink_trio.wire.codec import MessageCodec\n", "zlink_trio.wire.codec"),
        ("from zlink_trio.samples.shoppingmall.shared import contracts\n", "shared"),
        ("from ....shared.contracts import OrderState\n", "shoppingmall.shared.contracts"),
        ("from .. import infrastructure\n", "order_workflow.infrastructure"),
        ("from ...commerce_api import state_store\n", "server.commerce_api.state_store"),
        ("import trio\n", "imports trio"),
        ("import cattrs\n", "imports cattrs"),
        ("import coredis\n", "imports coredis"),
        ("from wsproto import events\n", "imports wsproto"),
        ("if TYPE_CHECKING:\n    import trio_websocket\n", ":2:"),
        ("def f():\n    import h11\n", "imports h11"),
        ("import importlib\nimportlib.import_module('redis')\n", "imports redis"),
        ("__import__('httpx')\n", "imports httpx"),
    ],
)
def test_the_checker_refuses(source: str, needle: str) -> None:
    problems = check(source, f"{PACKAGE}.x", "x.py")
    assert len(problems) == 1
    assert needle in problems[0]


@pytest.mark.parametrize(
    "source",
    [
        "import attrs\nimport enum\nfrom typing import ClassVar\n",
        "from attr import define\nimport math\nimport collections.abc\n",
        "from .values import OrderLine\nfrom . import fold\n",
        f"from {PACKAGE}.ids import reservation_id\n",
        "from __future__ import annotations\n",
    ],
)
def test_the_checker_allows(source: str) -> None:
    assert check(source, f"{PACKAGE}.x", "x.py") == []
