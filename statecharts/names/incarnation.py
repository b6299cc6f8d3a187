"""Typed names of :class:`~statecharts.Incarnation`.

Generated from the compiled charts: do not edit.
Regenerate with ``python -m statecharts render docs/statecharts``; CI's
``python -m statecharts check docs/statecharts`` fails when this module differs from
a fresh render.  See :mod:`statecharts._typed` for what the names are for.
"""

from __future__ import annotations

from typing import Final, NewType, final

from statecharts._compile import compile
from statecharts._typed import TypedChart
from statecharts.incarnation import Incarnation

__all__ = (
    "INCARNATION",
    "IncarnationChart",
    "IncarnationEvent",
    "IncarnationEvents",
    "IncarnationState",
    "IncarnationStates",
    "IncarnationTags",
)


IncarnationState = NewType("IncarnationState", str)
IncarnationEvent = NewType("IncarnationEvent", str)


@final
class IncarnationStates:
    """The states of :class:`~statecharts.Incarnation`, in declaration order."""

    __slots__ = ()

    activating: Final = IncarnationState("activating")
    barrier_closed: Final = IncarnationState("barrier_closed")
    serving: Final = IncarnationState("serving")
    sealed: Final = IncarnationState("sealed")
    closing: Final = IncarnationState("closing")
    disposed: Final = IncarnationState("disposed")


@final
class IncarnationEvents:
    """The events of :class:`~statecharts.Incarnation`, in declaration order."""

    __slots__ = ()

    commit_ready: Final = IncarnationEvent("commit_ready")
    commit_relocation: Final = IncarnationEvent("commit_relocation")
    activation_failed: Final = IncarnationEvent("activation_failed")
    open_barrier: Final = IncarnationEvent("open_barrier")
    seal_for_relocation: Final = IncarnationEvent("seal_for_relocation")
    abort_relocation: Final = IncarnationEvent("abort_relocation")
    begin_close: Final = IncarnationEvent("begin_close")
    begin_idle_eviction: Final = IncarnationEvent("begin_idle_eviction")
    dispose: Final = IncarnationEvent("dispose")


@final
class IncarnationTags:
    """The tags of :class:`~statecharts.Incarnation`: the states answering each question."""

    __slots__ = ()

    admission_sealed: Final[frozenset[IncarnationState]] = frozenset((
        IncarnationStates.closing,
        IncarnationStates.disposed,
    ))
    closes_when_drained: Final[frozenset[IncarnationState]] = frozenset((
        IncarnationStates.closing,
    ))
    fires_timers: Final[frozenset[IncarnationState]] = frozenset((
        IncarnationStates.serving,
    ))
    holds_ingress: Final[frozenset[IncarnationState]] = frozenset((
        IncarnationStates.sealed,
    ))
    runs_turns: Final[frozenset[IncarnationState]] = frozenset((
        IncarnationStates.serving,
        IncarnationStates.closing,
    ))
    task_running: Final[frozenset[IncarnationState]] = frozenset((
        IncarnationStates.serving,
        IncarnationStates.sealed,
        IncarnationStates.closing,
    ))


@final
class IncarnationChart(TypedChart[IncarnationState, IncarnationEvent]):
    """:class:`~statecharts.Incarnation`, compiled, with its typed names."""

    __slots__ = ()

    st: Final = IncarnationStates()
    ev: Final = IncarnationEvents()
    tags: Final = IncarnationTags()


INCARNATION: Final = IncarnationChart(compile(Incarnation))
