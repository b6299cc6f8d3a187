"""Stepping the compiled lifecycle charts: one state id per incarnation and per operation.

The runtime keeps no chart instances (DESIGN.md §2): each chart class is compiled once
into a :class:`~statecharts.TransitionTable`, and every lifecycle change goes through
:func:`step`.  A transition the chart does not define is a runtime bug surfaced, never
silently ignored: it becomes :class:`InvalidOperation`.

:data:`TRACE` lets tests observe every transition taken (the race model checks them
against the tables); it is empty in production and costs one truthiness test per step.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import statecharts
from statecharts import TransitionTable, UndefinedTransition
from zlink_trio.core.errors import InvalidOperation

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ("CLOSE", "COLD", "CREATE", "INCARNATION", "NODE", "TRACE", "step")

#: The compiled tables the runtime steps.
INCARNATION: Final = statecharts.compile(statecharts.Incarnation)
COLD: Final = statecharts.compile(statecharts.ColdActivation)
CREATE: Final = statecharts.compile(statecharts.UserCreate)
CLOSE: Final = statecharts.compile(statecharts.CloseOperation)
NODE: Final = statecharts.compile(statecharts.NodeLifecycle)

#: Observers called with ``(table name, state, event, target)`` after every step.
TRACE: list[Callable[[str, str, str, str], None]] = []


def step(table: TransitionTable, state: str, event: str) -> str:
    """Return the target of ``event`` from ``state``; InvalidOperation if the chart has none."""
    try:
        target = table.step(state, event)
    except UndefinedTransition as exc:
        raise InvalidOperation(
            f"internal lifecycle error: {exc}; this is a zlink_trio bug, please report it"
        ) from exc
    if TRACE:
        for observer in TRACE:
            observer(table.name, state, event, target)
    return target
