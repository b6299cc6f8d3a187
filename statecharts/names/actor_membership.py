"""Typed names of :class:`~statecharts.ActorMembership`.

Generated from the compiled charts: do not edit.
Regenerate with ``python -m statecharts render docs/statecharts``; CI's
``python -m statecharts check docs/statecharts`` fails when this module differs from
a fresh render.  See :mod:`statecharts._typed` for what the names are for.
"""

from __future__ import annotations

from typing import Final, NewType, final

from statecharts._compile import compile
from statecharts._typed import TypedChart
from statecharts.actor_membership import ActorMembership

__all__ = (
    "ACTOR_MEMBERSHIP",
    "ActorMembershipChart",
    "ActorMembershipEvent",
    "ActorMembershipEvents",
    "ActorMembershipState",
    "ActorMembershipStates",
    "ActorMembershipTags",
)


ActorMembershipState = NewType("ActorMembershipState", str)
ActorMembershipEvent = NewType("ActorMembershipEvent", str)


@final
class ActorMembershipStates:
    """The states of :class:`~statecharts.ActorMembership`, in declaration order."""

    __slots__ = ()

    missing: Final = ActorMembershipState("missing")
    joining: Final = ActorMembershipState("joining")
    member: Final = ActorMembershipState("member")
    moving: Final = ActorMembershipState("moving")
    relocating: Final = ActorMembershipState("relocating")
    leaving: Final = ActorMembershipState("leaving")
    closing: Final = ActorMembershipState("closing")
    closed: Final = ActorMembershipState("closed")
    lost: Final = ActorMembershipState("lost")


@final
class ActorMembershipEvents:
    """The events of :class:`~statecharts.ActorMembership`, in declaration order."""

    __slots__ = ()

    create: Final = ActorMembershipEvent("create")
    admitted: Final = ActorMembershipEvent("admitted")
    create_failed: Final = ActorMembershipEvent("create_failed")
    join: Final = ActorMembershipEvent("join")
    join_committed: Final = ActorMembershipEvent("join_committed")
    join_failed: Final = ActorMembershipEvent("join_failed")
    leave: Final = ActorMembershipEvent("leave")
    leave_committed: Final = ActorMembershipEvent("leave_committed")
    leave_failed: Final = ActorMembershipEvent("leave_failed")
    begin_relocation: Final = ActorMembershipEvent("begin_relocation")
    commit_relocation: Final = ActorMembershipEvent("commit_relocation")
    abort_relocation: Final = ActorMembershipEvent("abort_relocation")
    close: Final = ActorMembershipEvent("close")
    released: Final = ActorMembershipEvent("released")
    move_released: Final = ActorMembershipEvent("move_released")
    lease_lost: Final = ActorMembershipEvent("lease_lost")


@final
class ActorMembershipTags:
    """The tags of :class:`~statecharts.ActorMembership`: the states answering each question."""

    __slots__ = ()

    admits_controls: Final[frozenset[ActorMembershipState]] = frozenset((
        ActorMembershipStates.member,
    ))
    live: Final[frozenset[ActorMembershipState]] = frozenset((
        ActorMembershipStates.joining,
        ActorMembershipStates.member,
        ActorMembershipStates.moving,
        ActorMembershipStates.relocating,
        ActorMembershipStates.leaving,
        ActorMembershipStates.closing,
    ))


@final
class ActorMembershipChart(TypedChart[ActorMembershipState, ActorMembershipEvent]):
    """:class:`~statecharts.ActorMembership`, compiled, with its typed names."""

    __slots__ = ()

    st: Final = ActorMembershipStates()
    ev: Final = ActorMembershipEvents()
    tags: Final = ActorMembershipTags()


ACTOR_MEMBERSHIP: Final = ActorMembershipChart(compile(ActorMembership))
