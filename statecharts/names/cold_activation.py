"""Typed names of :class:`~statecharts.ColdActivation`.

Generated from the compiled charts: do not edit.
Regenerate with ``python -m statecharts render docs/statecharts``; CI's
``python -m statecharts check docs/statecharts`` fails when this module differs from
a fresh render.  See :mod:`statecharts._typed` for what the names are for.
"""

from __future__ import annotations

from typing import Final, NewType, final

from statecharts._compile import compile
from statecharts._typed import TypedChart
from statecharts.cold_activation import ColdActivation

__all__ = (
    "COLD_ACTIVATION",
    "ColdActivationChart",
    "ColdActivationEvent",
    "ColdActivationEvents",
    "ColdActivationState",
    "ColdActivationStates",
    "ColdActivationTags",
)


ColdActivationState = NewType("ColdActivationState", str)
ColdActivationEvent = NewType("ColdActivationEvent", str)


@final
class ColdActivationStates:
    """The states of :class:`~statecharts.ColdActivation`, in declaration order."""

    __slots__ = ()

    resolving: Final = ColdActivationState("resolving")
    selecting_mesh: Final = ColdActivationState("selecting_mesh")
    selecting_type: Final = ColdActivationState("selecting_type")
    checking_capacity: Final = ColdActivationState("checking_capacity")
    sending_envelope: Final = ColdActivationState("sending_envelope")
    checking_target_owner: Final = ColdActivationState("checking_target_owner")
    storing_recovery_root: Final = ColdActivationState("storing_recovery_root")
    reserving: Final = ColdActivationState("reserving")
    running_factory: Final = ColdActivationState("running_factory")
    recording_first_record: Final = ColdActivationState("recording_first_record")
    committing_ready: Final = ColdActivationState("committing_ready")
    registering_route: Final = ColdActivationState("registering_route")
    restoring_queue_head: Final = ColdActivationState("restoring_queue_head")
    serving_first_message: Final = ColdActivationState("serving_first_message")
    removing_pointer: Final = ColdActivationState("removing_pointer")
    deleting_root: Final = ColdActivationState("deleting_root")
    aborting_failed_creation: Final = ColdActivationState("aborting_failed_creation")
    aborting_expired_creation: Final = ColdActivationState("aborting_expired_creation")
    recovering_reservation: Final = ColdActivationState("recovering_reservation")
    recovering_ready: Final = ColdActivationState("recovering_ready")
    activated: Final = ColdActivationState("activated")
    delivered_to_existing_owner: Final = ColdActivationState("delivered_to_existing_owner")
    deferred_to_other_attempt: Final = ColdActivationState("deferred_to_other_attempt")
    not_found: Final = ColdActivationState("not_found")
    not_configured: Final = ColdActivationState("not_configured")
    invalid_operation: Final = ColdActivationState("invalid_operation")
    capacity_exceeded: Final = ColdActivationState("capacity_exceeded")
    type_mismatch: Final = ColdActivationState("type_mismatch")
    unavailable: Final = ColdActivationState("unavailable")
    creation_failed: Final = ColdActivationState("creation_failed")
    deadline_exceeded: Final = ColdActivationState("deadline_exceeded")


@final
class ColdActivationEvents:
    """The events of :class:`~statecharts.ColdActivation`, in declaration order."""

    __slots__ = ()

    found_ready: Final = ColdActivationEvent("found_ready")
    found_type_mismatch: Final = ColdActivationEvent("found_type_mismatch")
    found_creating: Final = ColdActivationEvent("found_creating")
    found_unavailable: Final = ColdActivationEvent("found_unavailable")
    found_missing_without_intent: Final = ColdActivationEvent("found_missing_without_intent")
    found_missing_with_intent: Final = ColdActivationEvent("found_missing_with_intent")
    mesh_selected: Final = ColdActivationEvent("mesh_selected")
    no_mesh_candidate: Final = ColdActivationEvent("no_mesh_candidate")
    ambiguous_mesh: Final = ColdActivationEvent("ambiguous_mesh")
    mesh_not_found: Final = ColdActivationEvent("mesh_not_found")
    type_selected: Final = ColdActivationEvent("type_selected")
    type_not_provided: Final = ColdActivationEvent("type_not_provided")
    type_hosts_closed: Final = ColdActivationEvent("type_hosts_closed")
    ambiguous_type: Final = ColdActivationEvent("ambiguous_type")
    capacity_available: Final = ColdActivationEvent("capacity_available")
    no_capacity: Final = ColdActivationEvent("no_capacity")
    envelope_accepted: Final = ColdActivationEvent("envelope_accepted")
    owner_ready: Final = ColdActivationEvent("owner_ready")
    owner_creating: Final = ColdActivationEvent("owner_creating")
    owner_type_mismatch: Final = ColdActivationEvent("owner_type_mismatch")
    over_ceiling: Final = ColdActivationEvent("over_ceiling")
    owner_missing: Final = ColdActivationEvent("owner_missing")
    root_stored: Final = ColdActivationEvent("root_stored")
    reserve_won: Final = ColdActivationEvent("reserve_won")
    reserve_lost_ready: Final = ColdActivationEvent("reserve_lost_ready")
    reserve_lost_creating: Final = ColdActivationEvent("reserve_lost_creating")
    reserve_refused_capacity: Final = ColdActivationEvent("reserve_refused_capacity")
    reserve_refused_type: Final = ColdActivationEvent("reserve_refused_type")
    factory_initialized: Final = ColdActivationEvent("factory_initialized")
    factory_failed: Final = ColdActivationEvent("factory_failed")
    first_record_durable: Final = ColdActivationEvent("first_record_durable")
    commit_ready: Final = ColdActivationEvent("commit_ready")
    route_registered: Final = ColdActivationEvent("route_registered")
    queue_head_restored: Final = ColdActivationEvent("queue_head_restored")
    first_completion_recorded: Final = ColdActivationEvent("first_completion_recorded")
    pointer_removed: Final = ColdActivationEvent("pointer_removed")
    root_deleted: Final = ColdActivationEvent("root_deleted")
    abort_creating: Final = ColdActivationEvent("abort_creating")
    deadline_expired: Final = ColdActivationEvent("deadline_expired")
    process_terminated: Final = ColdActivationEvent("process_terminated")
    resume_creation: Final = ColdActivationEvent("resume_creation")


@final
class ColdActivationTags:
    """The tags of :class:`~statecharts.ColdActivation`: the states answering each question."""

    __slots__ = ()


@final
class ColdActivationChart(TypedChart[ColdActivationState, ColdActivationEvent]):
    """:class:`~statecharts.ColdActivation`, compiled, with its typed names."""

    __slots__ = ()

    st: Final = ColdActivationStates()
    ev: Final = ColdActivationEvents()
    tags: Final = ColdActivationTags()


COLD_ACTIVATION: Final = ColdActivationChart(compile(ColdActivation))
