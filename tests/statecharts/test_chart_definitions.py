"""Every lifecycle chart is strict, synchronous, pure, documented and exported."""

from __future__ import annotations

import ast
import importlib
import inspect
import re
from pathlib import Path

import pytest
from statemachine import State

import statecharts
from statecharts import ALL_CHARTS, StrictChart
from statecharts._base import async_callbacks

PACKAGE_DIR = Path(statecharts.__file__).parent
#: Every module of the package, subpackages included, as a path relative to it (no ``.py``).
MODULES = sorted(p.relative_to(PACKAGE_DIR).with_suffix("").as_posix()
                 for p in PACKAGE_DIR.rglob("*.py") if "__pycache__" not in p.parts)
SNAKE = re.compile(r"^[a-z][a-z0-9]*(_[a-z0-9]+)*$")


def _chart_classes_in_package() -> set[type]:
    found = set()
    for name in MODULES:
        module = importlib.import_module("statecharts." + name.replace("/", "."))
        for value in vars(module).values():
            if (
                inspect.isclass(value)
                and issubclass(value, StrictChart)
                and value is not StrictChart
                and value.__module__ == module.__name__
            ):
                found.add(value)
    return found


def test_all_charts_lists_every_chart_in_the_package_once():
    assert len(set(ALL_CHARTS)) == len(ALL_CHARTS)
    assert set(ALL_CHARTS) == _chart_classes_in_package()


def test_package_exports_are_listed_in_a_tuple_all():
    assert isinstance(statecharts.__all__, tuple)
    for name in ("compile", "TransitionTable", "UndefinedTransition", "StrictChart", "ALL_CHARTS"):
        assert name in statecharts.__all__
    for name in statecharts.__all__:
        assert hasattr(statecharts, name), name


@pytest.mark.parametrize("chart", ALL_CHARTS, ids=lambda c: c.__name__)
def test_chart_is_strict(chart):
    assert issubclass(chart, StrictChart)
    assert chart.allow_event_without_transition is False
    assert chart.catch_errors_as_events is False


@pytest.mark.parametrize("chart", ALL_CHARTS, ids=lambda c: c.__name__)
def test_chart_has_no_async_callbacks(chart):
    assert async_callbacks(chart) == ()


@pytest.mark.parametrize("chart", ALL_CHARTS, ids=lambda c: c.__name__)
def test_state_and_event_ids_are_snake_case(chart):
    for state in chart.states:
        assert SNAKE.match(state.id), state.id
    for event in chart.events:
        assert SNAKE.match(event.id), event.id


def test_async_callback_by_naming_convention_is_refused():
    with pytest.raises(TypeError, match="async callbacks are not allowed"):

        class Bad(StrictChart):
            a = State(initial=True)
            b = State(final=True)
            go = a.to(b)

            async def on_enter_b(self) -> None:
                pass


def test_async_callback_passed_inline_is_refused():
    async def guard() -> bool:
        return True

    with pytest.raises(TypeError, match="guard"):

        class Bad(StrictChart):
            a = State(initial=True)
            b = State(final=True)
            go = a.to(b, cond=guard)


def test_sync_callbacks_are_accepted():
    class Fine(StrictChart):
        a = State(initial=True)
        b = State(final=True)
        go = a.to(b)

        def on_enter_b(self) -> None:
            pass

    assert async_callbacks(Fine) == ()


@pytest.mark.parametrize("module", MODULES)
def test_module_is_pure(module):
    tree = ast.parse((PACKAGE_DIR / f"{module}.py").read_text(encoding="utf-8"))
    imported: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            imported.add(node.module.split(".")[0])
    assert not imported & {"trio", "zlink_trio", "asyncio", "anyio"}


@pytest.mark.parametrize("module", MODULES)
def test_module_is_small_and_has_a_docstring(module):
    text = (PACKAGE_DIR / f"{module}.py").read_text(encoding="utf-8")
    assert len(text.splitlines()) < 400
    assert ast.get_docstring(ast.parse(text)), module


@pytest.mark.parametrize("chart", ALL_CHARTS, ids=lambda c: c.__name__)
def test_chart_module_docstring_explains_theory_in_its_own_words(chart):
    doc = inspect.getmodule(chart).__doc__ or ""
    assert "Theory of operation" in doc
    # The rendered page is read by users, who have no specification to look sections up
    # in: the docstring states each rule (tests/test_references.py checks every page).
    assert not re.search(r"\b0\d §\d|§\d|spec 0\d", doc), "state the rule, not a section"
