"""The whole ShoppingMall sample uses only what ``zlink_trio`` exports (issue #12).

Every module under ``zlink_trio/samples/shoppingmall/`` is read with :mod:`ast` (never
imported): it may import the sample's own modules and the package ``zlink_trio``
itself, never one of its inner modules (``zlink_trio.runtime``, ``.store``, ``.wire``,
...); ``from zlink_trio import X`` and every ``zl.X`` (the package bound to any name)
must name something in ``zlink_trio.__all__``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import zlink_trio

SAMPLE = Path(zlink_trio.__file__).parent / "samples" / "shoppingmall"
MODULES = sorted(SAMPLE.rglob("*.py"))
EXPORTED = set(zlink_trio.__all__)


def _violations(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    aliases: set[str] = set()
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "zlink_trio":
                    aliases.add(alias.asname or alias.name)
                elif alias.name.startswith("zlink_trio.") and \
                        not alias.name.startswith("zlink_trio.samples."):
                    found.append(f"line {node.lineno}: import {alias.name}")
        elif isinstance(node, ast.ImportFrom) and node.module is not None:
            if node.module == "zlink_trio":
                found += [f"line {node.lineno}: from zlink_trio import {a.name}"
                          for a in node.names if a.name not in EXPORTED]
            elif node.module.startswith("zlink_trio.") and \
                    not node.module.startswith("zlink_trio.samples."):
                found.append(f"line {node.lineno}: from {node.module} import ...")
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and \
                node.value.id in aliases and node.attr not in EXPORTED and \
                not node.attr.startswith("__"):  # a module attribute: __file__
            found.append(f"line {node.lineno}: {node.value.id}.{node.attr} is not exported")
    return found


def test_the_sample_has_modules_to_check():
    assert len(MODULES) > 30


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(SAMPLE)))
def test_the_sample_uses_only_names_zlink_trio_exports(path: Path):
    assert _violations(path) == []
