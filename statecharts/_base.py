"""The strict base class every zlink_trio lifecycle chart derives from.

Theory of operation
-------------------

python-statemachine's ``StateChart`` follows SCXML defaults that are wrong for a
runtime that must *refuse* every transition its chart does not define:

* ``allow_event_without_transition = True`` silently ignores an event that has no
  transition from the current state.  A lifecycle event that the chart does not
  define is a bug or a stale/duplicated store mutation; it must raise
  ``TransitionNotAllowed`` so the caller learns about it.
* ``catch_errors_as_events = True`` turns exceptions raised inside callbacks into
  ``error.execution`` events.  We want exceptions to propagate.

:class:`StrictChart` flips both flags.  Its metaclass additionally refuses, at
class-creation time, any ``async`` callback: python-statemachine's async engine is
bound to asyncio (``asyncio.get_running_loop``), and zlink_trio runs on Trio, so a
coroutine callback would either fail or silently pull asyncio into a Trio program.
The charts in this package declare no callbacks at all -- they are pure data that
:func:`statecharts.compile` turns into a transition table -- but the check keeps a
future edit from sneaking one in.
"""

from __future__ import annotations

import inspect
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar

from statemachine import State, StateChart
from statemachine.callbacks import SpecReference
from statemachine.factory import StateMachineMetaclass

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ("StrictChart", "async_callbacks", "state_tags")

_LIBRARY = frozenset({"statemachine", "typing", "builtins"})


def _is_async(obj: Any) -> bool:
    """True when ``obj`` (or the function it wraps) is a coroutine or async generator."""
    if isinstance(obj, (staticmethod, classmethod)):
        obj = obj.__func__
    if isinstance(obj, property):
        obj = obj.fget
    obj = inspect.unwrap(obj) if callable(obj) else obj
    return inspect.iscoroutinefunction(obj) or inspect.isasyncgenfunction(obj)


def async_callbacks(chart_cls: type[StateChart[Any]]) -> tuple[str, ...]:
    """Name every async callable a chart class could run as a callback.

    Looks at the class bodies below :class:`StrictChart` in the MRO (callbacks found by
    naming convention or by name in ``cond=``/``on=``...), at callables passed inline to
    states and transitions, and at class-level listeners.  Returns a sorted tuple of
    descriptions; empty means the chart is safe to drive from Trio code.
    """
    found: set[str] = set()
    for klass in chart_cls.__mro__:
        if klass.__module__ == __name__ or klass.__module__.split(".")[0] in _LIBRARY:
            continue  # StrictChart itself, python-statemachine's bases, typing, object
        for name, value in vars(klass).items():
            if _is_async(value):
                found.add(f"{klass.__name__}.{name}")
    for state in chart_cls.states:
        specs = list(state._specs)
        for transition in state.transitions:
            specs.extend(transition._specs)
        for spec in specs:
            if spec.reference == SpecReference.CALLABLE and _is_async(spec.func):
                found.add(f"{state.id}: {spec.attr_name}")
    for listener in getattr(chart_cls, "_class_listeners", ()):
        for name in dir(listener):
            if not name.startswith("__") and _is_async(getattr(listener, name, None)):
                found.add(f"listener {type(listener).__name__}.{name}")
    return tuple(sorted(found))


def state_tags(**tags: tuple[State, ...]) -> Mapping[str, tuple[State, ...]]:
    """A chart's ``tags``: tag name -> the states that answer it (read-only)."""
    return MappingProxyType(tags)


class _StrictChartMeta(StateMachineMetaclass):
    """Metaclass that refuses async callbacks once python-statemachine built the class."""

    def __init__(cls, name: str, bases: tuple[type], attrs: dict[str, Any]) -> None:
        super().__init__(name, bases, attrs)
        offenders = async_callbacks(cls)  # type: ignore[arg-type]
        if offenders:
            raise TypeError(
                f"{name}: async callbacks are not allowed in a StrictChart "
                f"(python-statemachine's async engine is asyncio-bound; zlink_trio runs on "
                f"Trio): {', '.join(offenders)}. Make them synchronous and side-effect free."
            )


class StrictChart(StateChart[Any], metaclass=_StrictChartMeta):
    """Base for every lifecycle chart: unknown/undefined events raise, errors propagate.

    Subclasses declare flat states and event transitions only.  Guards are allowed by
    python-statemachine but refused by :func:`statecharts.compile`, which needs one
    target per ``(state, event)``; encode the distinction in the event name instead
    (``reserve_won`` / ``reserve_lost_creating``).

    ``tags`` names the questions the runtime asks of a state, each answered by a set
    of the chart's states (``tags = state_tags(admission_sealed=(closing, disposed))``):
    declared once here, compiled into the table, generated into ``statecharts.names``
    and rendered on the chart's page, so no runtime module compares state ids itself.

    ``state_enum`` names a ``StrEnum`` of the chart's states that ``statecharts.names``
    generates beside the typed names (members ``READY = "ready"``, in declaration
    order), for a chart whose state is *stored* and so needs a value type of its own:
    ``SpotAuthority`` sets it to ``AuthorityState``, the state an authority record keeps.
    ``None`` (the default): no enum.
    """

    allow_event_without_transition = False
    catch_errors_as_events = False
    #: Tag name -> the states that answer it (see the class docstring).
    tags: ClassVar[Mapping[str, tuple[State, ...]]] = MappingProxyType({})
    #: The name of the generated enum of the chart's states, or ``None`` (see above).
    state_enum: ClassVar[str | None] = None
