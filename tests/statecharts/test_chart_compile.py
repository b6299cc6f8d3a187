"""``statecharts.compile`` gives an immutable table equal to the chart it came from."""

from __future__ import annotations

import dataclasses

import pytest
from statemachine import State
from statemachine.exceptions import TransitionNotAllowed

from statecharts import (
    ALL_CHARTS,
    ChartNotCompilable,
    SpotAuthority,
    StrictChart,
    TransitionTable,
    UndefinedTransition,
    compile,
)


def _chart_transitions(chart) -> set[tuple[str, str, str]]:
    """(source, event, target) triples read from python-statemachine's own model."""
    triples = set()
    for state in chart.states:
        for transition in state.transitions:
            for event in transition.events:
                triples.add((state.id, event.id, transition.target.id))
    return triples


@pytest.mark.parametrize("chart", ALL_CHARTS, ids=lambda c: c.__name__)
def test_table_equals_chart_both_directions(chart):
    table = compile(chart)
    from_chart = _chart_transitions(chart)
    from_table = {(s, e, t) for (s, e), t in table.transitions.items()}
    assert from_table - from_chart == set(), "table has transitions the chart lacks"
    assert from_chart - from_table == set(), "chart has transitions the table lacks"
    assert table.name == chart.__name__
    assert table.states == {s.id for s in chart.states}
    assert table.state_order == tuple(s.id for s in chart.states)
    assert table.initial == chart.initial_state.id
    assert table.finals == {s.id for s in chart.final_states}
    assert table.events == {e.id for e in chart.events}
    for state in chart.states:
        expected = [e.id for t in state.transitions for e in t.events]
        assert list(table.events_from(state.id)) == expected


@pytest.mark.parametrize("chart", ALL_CHARTS, ids=lambda c: c.__name__)
def test_final_states_accept_nothing(chart):
    table = compile(chart)
    for final in table.finals:
        assert table.events_from(final) == ()


def test_compile_is_cached_per_class():
    assert compile(SpotAuthority) is compile(SpotAuthority)


def test_table_is_immutable():
    table = compile(SpotAuthority)
    assert isinstance(table, TransitionTable)
    with pytest.raises(dataclasses.FrozenInstanceError):
        table.initial = "ready"  # type: ignore[misc]
    with pytest.raises(TypeError):
        table.transitions[("ready", "reserve")] = "creating"  # type: ignore[index]


def test_step_and_allows():
    table = compile(SpotAuthority)
    assert table.step("missing", "reserve") == "creating"
    assert table.allows("missing", "reserve")
    assert not table.allows("ready", "reserve")
    assert not table.allows("nowhere", "reserve")
    assert table.events_from("creating") == ("commit_ready", "abort_creating")


def test_undefined_transition_names_state_event_and_what_is_allowed():
    table = compile(SpotAuthority)
    with pytest.raises(UndefinedTransition) as caught:
        table.step("creating", "begin_close")
    error = caught.value
    assert isinstance(error, ValueError)
    assert (error.chart, error.state, error.event) == ("SpotAuthority", "creating", "begin_close")
    assert error.allowed == ("commit_ready", "abort_creating")
    message = str(error)
    for word in (
        "SpotAuthority",
        "'creating'",
        "'begin_close'",
        "'commit_ready'",
        "'abort_creating'",
    ):
        assert word in message


def test_undefined_transition_from_an_unknown_state_or_event():
    table = compile(SpotAuthority)
    with pytest.raises(UndefinedTransition, match="allows no event"):
        table.step("vanished", "reserve")
    with pytest.raises(UndefinedTransition, match="no_such_event"):
        table.step("missing", "no_such_event")


def test_instance_refuses_the_same_transition_with_its_own_error():
    machine = SpotAuthority()
    machine.send("reserve")
    with pytest.raises(TransitionNotAllowed):
        machine.send("begin_close")
    assert set(machine.configuration_values) == {"creating"}


def test_compile_refuses_two_targets_for_one_state_and_event():
    class Forked(StrictChart):
        a = State(initial=True)
        b = State(final=True)
        c = State(final=True)
        go = a.to(b) | a.to(c)

    with pytest.raises(ChartNotCompilable, match="two targets"):
        compile(Forked)


def test_compile_refuses_guards():
    class Guarded(StrictChart):
        a = State(initial=True)
        b = State(final=True)
        go = a.to(b, cond="ok")

        def ok(self) -> bool:
            return True

    with pytest.raises(ChartNotCompilable, match="guard"):
        compile(Guarded)


def test_compile_refuses_eventless_transitions():
    class Automatic(StrictChart):
        a = State(initial=True)
        b = State(final=True)
        a.to(b)

    with pytest.raises(ChartNotCompilable, match="eventless"):
        compile(Automatic)


def test_compile_refuses_compound_states():
    class Nested(StrictChart):
        class outer(State.Compound):
            inner = State(initial=True)
            done = State(final=True)
            finish = inner.to(done)

        end = State(final=True)
        leave = outer.to(end)

    with pytest.raises(ChartNotCompilable, match="compound"):
        compile(Nested)


def test_compile_refuses_what_is_not_a_chart():
    with pytest.raises(TypeError):
        compile(int)  # type: ignore[arg-type]
