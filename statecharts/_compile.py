"""Compile a chart class into an immutable ``(state, event) -> target`` table.

Theory of operation
-------------------

We measured one python-statemachine instance at ~0.7 ms / ~10 KB to create
and ~77 µs per transition.  The runtime keeps one lifecycle per Spot, so it cannot
afford an instance per Spot on hot paths.  Instead each chart *class* is compiled once
(:func:`compile` is cached per class) into a :class:`TransitionTable`, and the runtime
keeps only the current state id (a ``str``) beside its own data.  Its transition
function is ``table.step(state, event)``: a defined transition returns the target
state id, anything else raises :class:`UndefinedTransition`, which the runtime maps to
``InvalidOperation``.  One definition thus serves the runtime, the rendered docs and
the model tests, and the tests check that the table and a real chart instance agree.

Determinism rule
----------------

A table must give exactly one answer per ``(state, event)``, without evaluating
anything.  :func:`compile` therefore *refuses* (raises :class:`ChartNotCompilable`):

* two transitions for the same ``(state, event)`` (python-statemachine would pick the
  first whose guard passes);
* any guarded transition (``cond=`` / ``unless=``): the table has no model to evaluate
  the guard on, so even a single guarded transition would be reported as always taken;
* eventless (automatic) transitions, multi-target transitions, and compound,
  parallel or history states: the lifecycle charts are flat by design.

Put the distinction in the event name instead (``reserve_won`` / ``reserve_lost_ready``);
the runtime knows which case it observed from the store's answer.
"""

from __future__ import annotations

import functools
import keyword
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, cast

from statemachine import State, StateChart

__all__ = ("ChartNotCompilable", "TransitionTable", "UndefinedTransition", "compile")


class UndefinedTransition(ValueError):
    """Raised by :meth:`TransitionTable.step` when the chart defines no such transition.

    Carries ``chart``, ``state``, ``event`` and ``allowed`` (the events the chart accepts
    from ``state``, in declaration order) so callers can build their own error.
    """

    def __init__(self, chart: str, state: str, event: str, allowed: tuple[str, ...]) -> None:
        self.chart = chart
        self.state = state
        self.event = event
        self.allowed = allowed
        if allowed:
            allows = "allows " + ", ".join(repr(e) for e in allowed)
        else:
            allows = "allows no event (it is a final state or not a state of this chart)"
        super().__init__(
            f"{chart}: no transition for event {event!r} from state {state!r}; "
            f"from {state!r} the chart {allows}"
        )


class ChartNotCompilable(TypeError):
    """Raised by :func:`compile` when a chart cannot become a deterministic table."""


@dataclass(frozen=True, slots=True)
class TransitionTable:
    """An immutable, deterministic transition function compiled from one chart class.

    ``states`` and ``events`` are sets of ids; ``state_order``/``event_order`` keep the
    chart's declaration order for rendering.  ``transitions`` maps ``(state, event)`` to
    the target state id.  ``tags`` maps each tag the chart declares to its state ids
    (``StrictChart.tags``).  Instances are shared (compile is cached): never mutate them.
    """

    name: str
    states: frozenset[str]
    initial: str
    finals: frozenset[str]
    events: frozenset[str]
    transitions: Mapping[tuple[str, str], str]
    state_order: tuple[str, ...]
    event_order: tuple[str, ...]
    _events_by_state: Mapping[str, tuple[str, ...]] = field(repr=False, compare=False)
    tags: Mapping[str, frozenset[str]] = field(default_factory=lambda: MappingProxyType({}))

    def step(self, state: str, event: str) -> str:
        """Return the target of ``event`` from ``state``.

        Raises :class:`UndefinedTransition` when the chart defines no such transition
        (including unknown states and events, and any event from a final state).
        Pure: no side effects, safe to call from any thread or task.
        """
        try:
            return self.transitions[(state, event)]
        except KeyError:
            raise UndefinedTransition(self.name, state, event, self.events_from(state)) from None

    def allows(self, state: str, event: str) -> bool:
        """True when ``step(state, event)`` would return instead of raising."""
        return (state, event) in self.transitions

    def events_from(self, state: str) -> tuple[str, ...]:
        """Events accepted from ``state``, in declaration order (empty for finals/unknown)."""
        return self._events_by_state.get(state, ())

    def is_final(self, state: str) -> bool:
        """True when ``state`` is a final (terminal) state of the chart."""
        return state in self.finals


def _refuse(chart: str, why: str) -> ChartNotCompilable:
    return ChartNotCompilable(f"{chart} cannot be compiled into a transition table: {why}")


def compile(chart_cls: type[StateChart[Any]]) -> TransitionTable:
    """Compile ``chart_cls`` into its :class:`TransitionTable` (cached per class).

    Raises :class:`ChartNotCompilable` when the chart breaks the determinism rule in the
    module docstring, and :class:`TypeError` when given something that is not a chart
    class with states.  Calling it again with the same class returns the same table.
    """
    return _compile_cached(chart_cls)


@functools.cache
def _compile_cached(chart_cls: type[StateChart[Any]]) -> TransitionTable:
    if not (isinstance(chart_cls, type) and issubclass(chart_cls, StateChart)):
        raise TypeError(f"compile() needs a StateChart subclass, got {chart_cls!r}")
    name = chart_cls.__name__
    if not chart_cls.states:
        raise _refuse(name, "it declares no states")
    transitions: dict[tuple[str, str], str] = {}
    by_state: dict[str, list[str]] = {}
    state_order: list[str] = []
    for state in chart_cls.states:
        if state.is_compound or state.parallel or state.is_history:
            raise _refuse(name, f"state {state.id!r} is compound/parallel/history")
        state_order.append(state.id)
        by_state[state.id] = []
        for transition in state.transitions:
            _add(name, state.id, transition, transitions, by_state[state.id])
    # ``events`` is a metaclass property on the class (a method on instances).
    event_order = tuple(event.id for event in cast("list[Any]", chart_cls.events))
    used = {event for (_, event) in transitions}
    if used != set(event_order):
        raise _refuse(name, f"events without transitions: {sorted(set(event_order) - used)}")
    return TransitionTable(
        tags=_tags(chart_cls, name, frozenset(state_order)),
        name=name,
        states=frozenset(state_order),
        initial=chart_cls.initial_state.id,
        finals=frozenset(s.id for s in chart_cls.final_states),
        events=frozenset(event_order),
        transitions=MappingProxyType(transitions),
        state_order=tuple(state_order),
        event_order=event_order,
        _events_by_state=MappingProxyType({s: tuple(e) for s, e in by_state.items()}),
    )


def _tags(chart_cls: type[StateChart[Any]], name: str,
          states: frozenset[str]) -> Mapping[str, frozenset[str]]:
    """The chart's ``tags`` as state-id sets; refused unless each names its own states."""
    declared = getattr(chart_cls, "tags", {})
    if not isinstance(declared, Mapping):
        raise _refuse(name, f"tags must be a mapping of tag name to states, got {declared!r}")
    tags: dict[str, frozenset[str]] = {}
    for tag, members in declared.items():
        if not (isinstance(tag, str) and tag.isidentifier() and not keyword.iskeyword(tag)
                and not tag.startswith("_")):
            raise _refuse(name, f"tag {tag!r} is not a public Python identifier")
        ids = {state.id for state in members if isinstance(state, State)}
        if not ids or len(ids) != len(members) or not ids <= states:
            raise _refuse(name, f"tag {tag!r} must name one or more states of the chart, "
                                f"got {members!r}")
        tags[tag] = frozenset(ids)
    return MappingProxyType(tags)


def _add(
    chart: str,
    source: str,
    transition: Any,
    table: dict[tuple[str, str], str],
    events_here: list[str],
) -> None:
    """Add one python-statemachine ``Transition`` to ``table``, enforcing determinism."""
    where = f"transition {transition!r} from {source!r}"
    if list(transition.cond):
        raise _refuse(chart, f"{where} has a guard; encode the case in the event name")
    if len(transition.targets) != 1:
        raise _refuse(chart, f"{where} must have exactly one target")
    event_ids = [event.id for event in transition.events]
    if not event_ids:
        raise _refuse(chart, f"{where} is eventless (automatic)")
    target: str = transition.targets[0].id
    for event in event_ids:
        key = (source, event)
        if key in table:
            raise _refuse(
                chart,
                f"event {event!r} from {source!r} has two targets ({table[key]!r} and {target!r})",
            )
        table[key] = target
        events_here.append(event)
