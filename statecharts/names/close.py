"""Typed names of :class:`~statecharts.CloseOperation`.

Generated from the compiled charts: do not edit.
Regenerate with ``python -m statecharts render docs/statecharts``; CI's
``python -m statecharts check docs/statecharts`` fails when this module differs from
a fresh render.  See :mod:`statecharts._typed` for what the names are for.
"""

from __future__ import annotations

from typing import Final, NewType, final

from statecharts._compile import compile
from statecharts._typed import TypedChart
from statecharts.close import CloseOperation

__all__ = (
    "CLOSE_OPERATION",
    "CloseOperationChart",
    "CloseOperationEvent",
    "CloseOperationEvents",
    "CloseOperationState",
    "CloseOperationStates",
    "CloseOperationTags",
)


CloseOperationState = NewType("CloseOperationState", str)
CloseOperationEvent = NewType("CloseOperationEvent", str)


@final
class CloseOperationStates:
    """The states of :class:`~statecharts.CloseOperation`, in declaration order."""

    __slots__ = ()

    verifying: Final = CloseOperationState("verifying")
    beginning_close: Final = CloseOperationState("beginning_close")
    joining_close: Final = CloseOperationState("joining_close")
    sealing_admission: Final = CloseOperationState("sealing_admission")
    finishing_turns: Final = CloseOperationState("finishing_turns")
    cleaning_up: Final = CloseOperationState("cleaning_up")
    releasing: Final = CloseOperationState("releasing")
    closed: Final = CloseOperationState("closed")
    already_gone: Final = CloseOperationState("already_gone")
    kept_for_membership: Final = CloseOperationState("kept_for_membership")
    invalid_operation: Final = CloseOperationState("invalid_operation")
    unavailable: Final = CloseOperationState("unavailable")
    deadline_exceeded: Final = CloseOperationState("deadline_exceeded")


@final
class CloseOperationEvents:
    """The events of :class:`~statecharts.CloseOperation`, in declaration order."""

    __slots__ = ()

    incarnation_gone: Final = CloseOperationEvent("incarnation_gone")
    other_generation: Final = CloseOperationEvent("other_generation")
    active_membership: Final = CloseOperationEvent("active_membership")
    sealed_for_move: Final = CloseOperationEvent("sealed_for_move")
    owner_fence_mismatch: Final = CloseOperationEvent("owner_fence_mismatch")
    already_closing: Final = CloseOperationEvent("already_closing")
    verified: Final = CloseOperationEvent("verified")
    begin_close: Final = CloseOperationEvent("begin_close")
    cas_conflict: Final = CloseOperationEvent("cas_conflict")
    admission_sealed: Final = CloseOperationEvent("admission_sealed")
    turns_finished: Final = CloseOperationEvent("turns_finished")
    cleanup_done: Final = CloseOperationEvent("cleanup_done")
    release: Final = CloseOperationEvent("release")
    deadline_expired: Final = CloseOperationEvent("deadline_expired")


@final
class CloseOperationTags:
    """The tags of :class:`~statecharts.CloseOperation`: the states answering each question."""

    __slots__ = ()


@final
class CloseOperationChart(TypedChart[CloseOperationState, CloseOperationEvent]):
    """:class:`~statecharts.CloseOperation`, compiled, with its typed names."""

    __slots__ = ()

    st: Final = CloseOperationStates()
    ev: Final = CloseOperationEvents()
    tags: Final = CloseOperationTags()


CLOSE_OPERATION: Final = CloseOperationChart(compile(CloseOperation))
