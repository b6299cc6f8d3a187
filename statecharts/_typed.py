"""A compiled chart with typed state and event names: what the runtime steps.

Theory of operation
-------------------
:func:`statecharts.compile` gives a :class:`TransitionTable` that speaks plain
``str`` ids, so a typo in an event name would only surface when that rare path runs.
:mod:`statecharts.names` (generated from the compiled charts, checked for drift in CI)
gives every chart a :class:`TypedChart` subclass whose ``st`` and ``ev`` namespaces
hold each state and event id as a constant of the chart's own ``NewType`` -- e.g.
``COLD_ACTIVATION.ev.reserve_won`` is a ``ColdActivationEvent`` -- and whose ``tags``
namespace holds the state sets the chart declares as the questions the runtime asks
of a state (does it admit messages? is the node serving?).  ``step(state, event)``
only accepts that chart's states and events, so mypy refuses a misspelt name, a
plain string, or an event of another chart.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Generic, TypeVar, cast

if TYPE_CHECKING:
    from statecharts._compile import TransitionTable

__all__ = ("TypedChart",)

S = TypeVar("S", bound=str)
E = TypeVar("E", bound=str)


class TypedChart(Generic[S, E]):
    """One compiled chart whose states are ``S`` and events ``E`` (both ``str`` NewTypes)."""

    __slots__ = ("table",)

    def __init__(self, table: TransitionTable) -> None:
        #: The compiled table (plain ``str`` ids).
        self.table = table

    @property
    def name(self) -> str:
        """The chart class's name."""
        return self.table.name

    @property
    def initial(self) -> S:
        """The initial state."""
        return cast("S", self.table.initial)

    def step(self, state: S, event: E) -> S:
        """The target of ``event`` from ``state``; :class:`UndefinedTransition` if none."""
        return cast("S", self.table.step(state, event))

    def allows(self, state: S, event: E) -> bool:
        """Whether the chart defines ``event`` from ``state``."""
        return self.table.allows(state, event)

    def is_final(self, state: S) -> bool:
        """Whether ``state`` is a final state of the chart."""
        return self.table.is_final(state)
