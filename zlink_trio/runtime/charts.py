"""Stepping the compiled lifecycle charts: one state id per incarnation and per operation.

The runtime keeps no chart instances (``docs/architecture.md``): each chart class is compiled once
and wrapped with its typed names (:mod:`statecharts.names`), and every lifecycle
change goes through :func:`step` with those names -- ``step(COLD, job.state,
COLD.ev.reserve_won)`` -- so a misspelt event or an event of another chart fails
mypy, not a rare runtime path.  A transition the chart does not define is a runtime
bug surfaced, never silently ignored: it becomes :class:`InvalidOperation`.  The
questions the runtime asks of a state are the charts' tags (``INCARNATION.tags
.admission_sealed``), declared beside each chart.

:data:`TRACE` lets tests observe every transition taken (the race model checks them
against the tables); it is empty in production and costs one truthiness test per step.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, TypeVar

from statecharts import UndefinedTransition
from statecharts.names import (
    ACTOR_MEMBERSHIP,
    CLOSE_OPERATION,
    COLD_ACTIVATION,
    INCARNATION,
    NODE_LIFECYCLE,
    PLANNED_RELOCATION,
    USER_CREATE,
)
from zlink_trio.core.errors import InvalidOperation

if TYPE_CHECKING:
    from collections.abc import Callable

    from statecharts._typed import TypedChart

__all__ = ("CLOSE", "COLD", "CREATE", "INCARNATION", "MEMBERSHIP", "NODE", "RELOCATION", "TRACE",
           "step")

#: The compiled, typed charts the runtime steps.
COLD: Final = COLD_ACTIVATION
CREATE: Final = USER_CREATE
CLOSE: Final = CLOSE_OPERATION
NODE: Final = NODE_LIFECYCLE
RELOCATION: Final = PLANNED_RELOCATION
MEMBERSHIP: Final = ACTOR_MEMBERSHIP

#: Observers called with ``(chart name, state, event, target)`` after every step.
TRACE: list[Callable[[str, str, str, str], None]] = []

S = TypeVar("S", bound=str)
E = TypeVar("E", bound=str)


def step(chart: TypedChart[S, E], state: S, event: E) -> S:
    """Return the target of ``event`` from ``state``; InvalidOperation if the chart has none.

    One lookup in the compiled table (``TransitionTable.transitions``); only a miss
    asks the chart, for the error naming the events it does define.
    """
    target: S | None = chart.table.transitions.get((state, event))  # type: ignore[assignment]
    if target is None:
        try:
            target = chart.step(state, event)
        except UndefinedTransition as exc:
            raise InvalidOperation(
                f"internal lifecycle error: {exc}; this is a zlink_trio bug, please report it"
            ) from exc
    if TRACE:
        for observer in TRACE:
            observer(chart.name, state, event, target)
    return target
