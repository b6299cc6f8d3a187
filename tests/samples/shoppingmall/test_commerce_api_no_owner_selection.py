"""Item 9.3-4: CommerceApi's code names no owner NodeRid, physical endpoint or fixed node.

An AST walk over every module of ``commerce_api`` (docstrings and comments aside, so
the prose may say what the code does not do): no attribute or name that reads or
picks an owner (``node_rid``, ``NodeRid``, ``endpoint``, ``relocate``, ...), no string
that spells a node or an address, and the only Spot calls are ``.request`` with
``.instance_spot`` and ``.in_mesh``. It reads source; it imports nothing.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = (Path(__file__).resolve().parents[3]
           / "zlink_trio/samples/shoppingmall/server/commerce_api")
MODULES = sorted(PACKAGE.glob("*.py"))

FORBIDDEN_NAMES = frozenset({"node_rid", "NodeRid", "endpoint", "relocate", "drain",
                             "spots", "send"})
FORBIDDEN_TEXT = ("workflow-a", "workflow-b", "ws://", "wss://", "targetRid")


def _code_nodes(tree: ast.Module):
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef
                                | ast.AsyncFunctionDef)
                  and node.body and isinstance(node.body[0], ast.Expr)
                  and isinstance(node.body[0].value, ast.Constant)}
    return [node for node in ast.walk(tree) if id(node) not in docstrings]


def test_the_package_has_modules():
    assert {p.name for p in MODULES} >= {"app.py", "orders.py", "workflow_calls.py",
                                         "process.py"}


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.name)
def test_no_owner_selection(path):
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in _code_nodes(tree):
        if isinstance(node, ast.Attribute):
            assert node.attr not in FORBIDDEN_NAMES, (path.name, node.lineno, node.attr)
        elif isinstance(node, ast.Name):
            assert node.id not in FORBIDDEN_NAMES, (path.name, node.lineno, node.id)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            assert not any(t in node.value for t in FORBIDDEN_TEXT), (path.name, node.lineno)


def test_the_only_spot_calls_are_requests_with_instance_intent_in_the_mesh():
    tree = ast.parse((PACKAGE / "workflow_calls.py").read_text())
    calls = [node.func.attr for node in ast.walk(tree)
             if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)]
    assert calls.count("request") == 1
    assert calls.count("instance_spot") == 1
    assert calls.count("in_mesh") == 1
    assert calls.count("timeout") == 1
