"""Typed names of :class:`~statecharts.UserCreate`.

Generated from the compiled charts: do not edit.
Regenerate with ``python -m statecharts render docs/statecharts``; CI's
``python -m statecharts check docs/statecharts`` fails when this module differs from
a fresh render.  See :mod:`statecharts._typed` for what the names are for.
"""

from __future__ import annotations

from typing import Final, NewType, final

from statecharts._compile import compile
from statecharts._typed import TypedChart
from statecharts.user_create import UserCreate

__all__ = (
    "USER_CREATE",
    "UserCreateChart",
    "UserCreateEvent",
    "UserCreateEvents",
    "UserCreateState",
    "UserCreateStates",
    "UserCreateTags",
)


UserCreateState = NewType("UserCreateState", str)
UserCreateEvent = NewType("UserCreateEvent", str)


@final
class UserCreateStates:
    """The states of :class:`~statecharts.UserCreate`, in declaration order."""

    __slots__ = ()

    validating: Final = UserCreateState("validating")
    resolving: Final = UserCreateState("resolving")
    waiting_on_creating: Final = UserCreateState("waiting_on_creating")
    selecting_placement: Final = UserCreateState("selecting_placement")
    reserving: Final = UserCreateState("reserving")
    running_factory: Final = UserCreateState("running_factory")
    committing_ready: Final = UserCreateState("committing_ready")
    cleaning_up_rejected: Final = UserCreateState("cleaning_up_rejected")
    aborting_failed_creation: Final = UserCreateState("aborting_failed_creation")
    aborting_expired_creation: Final = UserCreateState("aborting_expired_creation")
    existing: Final = UserCreateState("existing")
    created: Final = UserCreateState("created")
    rejected: Final = UserCreateState("rejected")
    type_mismatch: Final = UserCreateState("type_mismatch")
    already_exists: Final = UserCreateState("already_exists")
    not_configured: Final = UserCreateState("not_configured")
    invalid_operation: Final = UserCreateState("invalid_operation")
    not_found: Final = UserCreateState("not_found")
    capacity_exceeded: Final = UserCreateState("capacity_exceeded")
    unavailable: Final = UserCreateState("unavailable")
    creation_failed: Final = UserCreateState("creation_failed")
    deadline_exceeded: Final = UserCreateState("deadline_exceeded")


@final
class UserCreateEvents:
    """The events of :class:`~statecharts.UserCreate`, in declaration order."""

    __slots__ = ()

    input_invalid: Final = UserCreateEvent("input_invalid")
    spot_id_issued: Final = UserCreateEvent("spot_id_issued")
    spot_id_given: Final = UserCreateEvent("spot_id_given")
    found_ready: Final = UserCreateEvent("found_ready")
    found_type_mismatch: Final = UserCreateEvent("found_type_mismatch")
    found_creating: Final = UserCreateEvent("found_creating")
    found_closing: Final = UserCreateEvent("found_closing")
    found_missing: Final = UserCreateEvent("found_missing")
    other_attempt_ready: Final = UserCreateEvent("other_attempt_ready")
    other_attempt_missing: Final = UserCreateEvent("other_attempt_missing")
    placement_selected: Final = UserCreateEvent("placement_selected")
    no_mesh_candidate: Final = UserCreateEvent("no_mesh_candidate")
    ambiguous_mesh: Final = UserCreateEvent("ambiguous_mesh")
    mesh_not_found: Final = UserCreateEvent("mesh_not_found")
    no_capacity: Final = UserCreateEvent("no_capacity")
    hosts_closed: Final = UserCreateEvent("hosts_closed")
    reserve_won: Final = UserCreateEvent("reserve_won")
    reserve_lost_ready: Final = UserCreateEvent("reserve_lost_ready")
    reserve_lost_creating: Final = UserCreateEvent("reserve_lost_creating")
    reserve_lost_closing: Final = UserCreateEvent("reserve_lost_closing")
    reserve_lost_type_mismatch: Final = UserCreateEvent("reserve_lost_type_mismatch")
    reserve_refused_capacity: Final = UserCreateEvent("reserve_refused_capacity")
    reserve_conflict: Final = UserCreateEvent("reserve_conflict")
    create_accepted: Final = UserCreateEvent("create_accepted")
    create_rejected: Final = UserCreateEvent("create_rejected")
    factory_failed: Final = UserCreateEvent("factory_failed")
    commit_ready: Final = UserCreateEvent("commit_ready")
    abort_creating: Final = UserCreateEvent("abort_creating")
    deadline_expired: Final = UserCreateEvent("deadline_expired")


@final
class UserCreateTags:
    """The tags of :class:`~statecharts.UserCreate`: the states answering each question."""

    __slots__ = ()

    reads_authority: Final[frozenset[UserCreateState]] = frozenset((
        UserCreateStates.resolving,
        UserCreateStates.waiting_on_creating,
    ))
    waits_on_other_attempt: Final[frozenset[UserCreateState]] = frozenset((
        UserCreateStates.waiting_on_creating,
    ))


@final
class UserCreateChart(TypedChart[UserCreateState, UserCreateEvent]):
    """:class:`~statecharts.UserCreate`, compiled, with its typed names."""

    __slots__ = ()

    st: Final = UserCreateStates()
    ev: Final = UserCreateEvents()
    tags: Final = UserCreateTags()


USER_CREATE: Final = UserCreateChart(compile(UserCreate))
