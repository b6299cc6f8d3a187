"""Typed names of :class:`~statecharts.PlannedRelocation`.

Generated from the compiled charts: do not edit.
Regenerate with ``python -m statecharts render docs/statecharts``; CI's
``python -m statecharts check docs/statecharts`` fails when this module differs from
a fresh render.  See :mod:`statecharts._typed` for what the names are for.
"""

from __future__ import annotations

from typing import Final, NewType, final

from statecharts._compile import compile
from statecharts._typed import TypedChart
from statecharts.relocation import PlannedRelocation

__all__ = (
    "PLANNED_RELOCATION",
    "PlannedRelocationChart",
    "PlannedRelocationEvent",
    "PlannedRelocationEvents",
    "PlannedRelocationState",
    "PlannedRelocationStates",
    "PlannedRelocationTags",
)


PlannedRelocationState = NewType("PlannedRelocationState", str)
PlannedRelocationEvent = NewType("PlannedRelocationEvent", str)


@final
class PlannedRelocationStates:
    """The states of :class:`~statecharts.PlannedRelocation`, in declaration order."""

    __slots__ = ()

    requested: Final = PlannedRelocationState("requested")
    waiting_for_permit: Final = PlannedRelocationState("waiting_for_permit")
    sealed: Final = PlannedRelocationState("sealed")
    captured: Final = PlannedRelocationState("captured")
    restoring_target: Final = PlannedRelocationState("restoring_target")
    target_ready: Final = PlannedRelocationState("target_ready")
    relay_ready: Final = PlannedRelocationState("relay_ready")
    committed: Final = PlannedRelocationState("committed")
    aborted: Final = PlannedRelocationState("aborted")
    failed: Final = PlannedRelocationState("failed")
    refused: Final = PlannedRelocationState("refused")


@final
class PlannedRelocationEvents:
    """The events of :class:`~statecharts.PlannedRelocation`, in declaration order."""

    __slots__ = ()

    relocation_disabled: Final = PlannedRelocationEvent("relocation_disabled")
    already_moving: Final = PlannedRelocationEvent("already_moving")
    no_target: Final = PlannedRelocationEvent("no_target")
    begin_refused: Final = PlannedRelocationEvent("begin_refused")
    begin_relocation: Final = PlannedRelocationEvent("begin_relocation")
    seal: Final = PlannedRelocationEvent("seal")
    capture_done: Final = PlannedRelocationEvent("capture_done")
    target_reserved: Final = PlannedRelocationEvent("target_reserved")
    target_restored: Final = PlannedRelocationEvent("target_restored")
    accept_relay_ready: Final = PlannedRelocationEvent("accept_relay_ready")
    commit_relocation: Final = PlannedRelocationEvent("commit_relocation")
    abort_relocation: Final = PlannedRelocationEvent("abort_relocation")
    target_lost: Final = PlannedRelocationEvent("target_lost")


@final
class PlannedRelocationTags:
    """The tags of :class:`~statecharts.PlannedRelocation`: the states answering each question."""

    __slots__ = ()


@final
class PlannedRelocationChart(TypedChart[PlannedRelocationState, PlannedRelocationEvent]):
    """:class:`~statecharts.PlannedRelocation`, compiled, with its typed names."""

    __slots__ = ()

    st: Final = PlannedRelocationStates()
    ev: Final = PlannedRelocationEvents()
    tags: Final = PlannedRelocationTags()


PLANNED_RELOCATION: Final = PlannedRelocationChart(compile(PlannedRelocation))
