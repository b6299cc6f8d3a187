"""The typed chart names: generated from the charts, complete, and the only way the runtime
steps a chart or asks a question of a state."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest
from mypy import api as mypy_api
from statemachine import State

import statecharts
from statecharts import ALL_CHARTS, ChartNotCompilable, StrictChart, compile, names
from statecharts._base import state_tags
from statecharts.codegen import NAMES_PACKAGE, check_names, constant_name, render_names

ROOT = Path(__file__).resolve().parents[2]
RUNTIME = ROOT / "zlink_trio" / "runtime"


def test_committed_names_module_matches_a_fresh_render():
    assert check_names() == [], (
        "statecharts/names/ is out of date; run `python -m statecharts render docs/statecharts`"
    )
    files = render_names()
    assert {p.name for p in NAMES_PACKAGE.glob("*.py")} == set(files)
    for name, text in files.items():
        assert (NAMES_PACKAGE / name).read_text(encoding="utf-8") == text


@pytest.mark.parametrize("chart", ALL_CHARTS, ids=lambda c: c.__name__)
def test_every_state_event_and_tag_of_a_chart_has_its_typed_name(chart):
    table = compile(chart)
    typed = getattr(names, constant_name(chart))
    assert typed.table is table
    assert typed.initial == table.initial
    states = {k: v for k, v in vars(type(typed.st)).items() if not k.startswith("_")}
    events = {k: v for k, v in vars(type(typed.ev)).items() if not k.startswith("_")}
    tags = {k: v for k, v in vars(type(typed.tags)).items() if not k.startswith("_")}
    assert states == {s: s for s in table.state_order}
    assert events == {e: e for e in table.event_order}
    assert tags == dict(table.tags)


def test_a_typed_chart_steps_like_its_table():
    chart = names.INCARNATION
    assert chart.step(chart.st.serving, chart.ev.begin_close) == chart.st.closing
    assert chart.allows(chart.st.serving, chart.ev.begin_idle_eviction)
    assert not chart.allows(chart.st.closing, chart.ev.begin_close)
    assert chart.is_final(chart.st.disposed)
    with pytest.raises(statecharts.UndefinedTransition):
        chart.step(chart.st.disposed, chart.ev.dispose)


def test_tags_must_name_states_of_their_own_chart():
    class Other(StrictChart):
        x = State(initial=True)
        y = State(final=True)
        go = x.to(y)

    class Tagged(StrictChart):
        a = State(initial=True)
        b = State(final=True)
        go = a.to(b)
        tags = state_tags(elsewhere=(Other.x,))

    with pytest.raises(ChartNotCompilable, match="tag 'elsewhere'"):
        compile(Tagged)


def test_a_misspelt_event_fails_the_type_check(tmp_path):
    # The promise of the generated names: a typo is a mypy error, not a rare runtime path.
    snippet = tmp_path / "typo.py"
    snippet.write_text(textwrap.dedent("""
        from statecharts.names import COLD_ACTIVATION as COLD, INCARNATION

        ok = COLD.step(COLD.initial, COLD.ev.found_missing_with_intent)
        typo = COLD.step(COLD.initial, COLD.ev.found_mising_with_intent)
        plain = COLD.step(COLD.initial, "found_missing_with_intent")
        other_chart = COLD.step(COLD.initial, INCARNATION.ev.dispose)
    """))
    out, _, status = mypy_api.run([
        "--strict", "--no-incremental", "--follow-imports=silent",
        "--cache-dir", str(tmp_path / "cache"), str(snippet)])
    assert status == 1, out
    errors = [line for line in out.splitlines() if ": error:" in line]
    assert [line.split(":")[1] for line in errors] == ["5", "6", "7"], out
    assert '"ColdActivationEvents" has no attribute "found_mising_with_intent"' in out


def _runtime_trees():
    for path in sorted(RUNTIME.rglob("*.py")):
        yield path.relative_to(ROOT), ast.parse(path.read_text(encoding="utf-8"))


def _is_chart_name(node: ast.expr, namespace: str) -> bool:
    """``CHART.<namespace>.name``: a generated constant (``COLD.ev.reserve_won``)."""
    return (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute)
            and node.value.attr == namespace and isinstance(node.value.value, ast.Name)
            and node.value.value.id.isupper())


def _event_is_typed(node: ast.expr) -> bool:
    if isinstance(node, ast.IfExp):
        return _event_is_typed(node.body) and _event_is_typed(node.orelse)
    # A variable holds a name chosen from typed constants above it (mypy checks its type).
    return isinstance(node, ast.Name) or _is_chart_name(node, "ev")


def test_every_step_in_the_runtime_uses_a_generated_event_name():
    untyped = []
    steps = 0
    for path, tree in _runtime_trees():
        for node in ast.walk(tree):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                    and node.func.id == "step" and len(node.args) == 3):
                steps += 1
                if not _event_is_typed(node.args[2]):
                    untyped.append(f"{path}:{node.lineno}: {ast.unparse(node)}")
    assert steps > 50  # the scan sees the runtime's transitions
    assert not untyped, "step() with an event that is not a generated name:\n" + "\n".join(untyped)


def _strings(node: ast.expr) -> bool:
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str)
    return isinstance(node, ast.Tuple | ast.List | ast.Set) and any(
        _strings(e) for e in node.elts)


def _is_state(node: ast.expr) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "state") or (
        isinstance(node, ast.Name) and node.id == "state")


def test_the_runtime_asks_states_through_the_charts_not_by_string():
    compared = []
    for path, tree in _runtime_trees():
        for node in ast.walk(tree):
            if isinstance(node, ast.Compare):
                sides = [node.left, *node.comparators]
                if any(_is_state(s) for s in sides) and any(_strings(s) for s in sides):
                    compared.append(f"{path}:{node.lineno}: {ast.unparse(node)}")
    assert not compared, "state compared with a string:\n" + "\n".join(compared)
