"""Graph properties of the charts and the spec's paths, driven on real instances.

Each happy path is driven on a python-statemachine instance *and* on the compiled
table in lockstep; both must agree after every event and end where the spec says.
"""

from __future__ import annotations

import pytest

from statecharts import (
    ALL_CHARTS,
    ActorMembership,
    CloseOperation,
    ColdActivation,
    Incarnation,
    NodeLifecycle,
    PlannedRelocation,
    SpotAuthority,
    UndefinedTransition,
    UserCreate,
    compile,
)

#: Charts whose lifecycle is a cycle with no final state: every state must instead be
#: able to return to the initial state (the authority record goes back to Missing).
CYCLIC = {SpotAuthority}


def _reachable(table, start: str) -> set[str]:
    seen, todo = {start}, [start]
    while todo:
        state = todo.pop()
        for event in table.events_from(state):
            target = table.step(state, event)
            if target not in seen:
                seen.add(target)
                todo.append(target)
    return seen


@pytest.mark.parametrize("chart", ALL_CHARTS, ids=lambda c: c.__name__)
def test_every_state_is_reachable_from_the_initial_state(chart):
    table = compile(chart)
    assert _reachable(table, table.initial) == table.states


@pytest.mark.parametrize("chart", ALL_CHARTS, ids=lambda c: c.__name__)
def test_every_state_can_finish(chart):
    table = compile(chart)
    if chart in CYCLIC:
        assert not table.finals
        goals = {table.initial}
    else:
        assert table.finals
        goals = set(table.finals)
    for state in table.states - goals:
        assert _reachable(table, state) & goals, f"{state} can never finish"


CYCLE = ["reserve", "commit_ready", "begin_close", "release"]
COLD_FRONT = [
    "found_missing_with_intent",
    "mesh_selected",
    "type_selected",
    "capacity_available",
    "envelope_accepted",
    "owner_missing",
    "root_stored",
    "reserve_won",
]
COLD_BACK = [
    "factory_initialized",
    "first_record_durable",
    "commit_ready",
    "route_registered",
    "queue_head_restored",
    "first_completion_recorded",
    "pointer_removed",
    "root_deleted",
]
CREATE = ["placement_selected", "reserve_won", "create_accepted", "commit_ready"]

PATHS = [
    (SpotAuthority, CYCLE, "missing"),
    (SpotAuthority, ["reserve", "abort_creating"], "missing"),
    (SpotAuthority, ["reserve", "commit_ready", "begin_idle_eviction", "release"], "missing"),
    (
        SpotAuthority,
        [
            "reserve",
            "commit_ready",
            "begin_relocation",
            "seal",
            "accept_relay_ready",
            "commit_relocation",
            *CYCLE[2:],
        ],
        "missing",
    ),
    (SpotAuthority, ["reserve", "commit_ready", "begin_relocation", "abort_relocation"], "ready"),
    (
        SpotAuthority,
        ["reserve", "commit_ready", "begin_relocation", "seal", "abort_relocation"],
        "ready",
    ),
    (ColdActivation, COLD_FRONT + COLD_BACK, "activated"),
    (ColdActivation, ["found_ready"], "delivered_to_existing_owner"),
    (ColdActivation, ["found_creating"], "deferred_to_other_attempt"),
    (ColdActivation, ["found_missing_without_intent"], "not_found"),
    (ColdActivation, ["found_missing_with_intent", "no_mesh_candidate"], "not_configured"),
    (
        ColdActivation,
        ["found_missing_with_intent", "mesh_selected", "ambiguous_type"],
        "invalid_operation",
    ),
    (ColdActivation, [*COLD_FRONT[:4], "deadline_expired"], "deadline_exceeded"),
    (ColdActivation, [*COLD_FRONT[:3], "no_capacity"], "capacity_exceeded"),
    (ColdActivation, [*COLD_FRONT[:2], "type_hosts_closed"], "unavailable"),
    (ColdActivation, [*COLD_FRONT[:5], "over_ceiling"], "capacity_exceeded"),
    (ColdActivation, [*COLD_FRONT[:5], "owner_type_mismatch"], "type_mismatch"),
    (ColdActivation, [*COLD_FRONT[:5], "owner_ready"], "delivered_to_existing_owner"),
    (ColdActivation, [*COLD_FRONT[:-1], "reserve_lost_creating"], "deferred_to_other_attempt"),
    (ColdActivation, [*COLD_FRONT[:-1], "reserve_lost_ready"], "delivered_to_existing_owner"),
    (ColdActivation, [*COLD_FRONT, "factory_failed", "abort_creating"], "creation_failed"),
    (ColdActivation, [*COLD_FRONT, "deadline_expired", "abort_creating"], "deadline_exceeded"),
    # 06 §4.1.1: restart after Reserve resumes with the same reservation ...
    (
        ColdActivation,
        [*COLD_FRONT, "process_terminated", "resume_creation", *COLD_BACK],
        "activated",
    ),
    # ... or aborts with the same fence
    (ColdActivation, [*COLD_FRONT, "process_terminated", "abort_creating"], "creation_failed"),
    # restart after the Ready commit restores the first record before serving
    (
        ColdActivation,
        COLD_FRONT + COLD_BACK[:3] + ["process_terminated", *COLD_BACK[3:]],
        "activated",
    ),
    (UserCreate, ["spot_id_given", "found_missing", *CREATE], "created"),
    (UserCreate, ["spot_id_issued", *CREATE], "created"),
    (UserCreate, ["spot_id_given", "found_ready"], "existing"),
    (UserCreate, ["spot_id_issued", "hosts_closed"], "unavailable"),
    (UserCreate, ["spot_id_given", "found_type_mismatch"], "type_mismatch"),
    (UserCreate, ["spot_id_given", "found_creating", "other_attempt_ready"], "existing"),
    (UserCreate, ["spot_id_given", "found_creating", "other_attempt_missing", *CREATE], "created"),
    (UserCreate, ["spot_id_given", "found_creating", "deadline_expired"], "deadline_exceeded"),
    (
        UserCreate,
        [
            "spot_id_given",
            "found_missing",
            "placement_selected",
            "reserve_won",
            "create_rejected",
            "abort_creating",
        ],
        "rejected",
    ),
    (UserCreate, ["spot_id_issued", "placement_selected", "reserve_conflict"], "already_exists"),
    (UserCreate, ["input_invalid"], "invalid_operation"),
    (Incarnation, ["commit_ready", "open_barrier", "begin_close", "dispose"], "disposed"),
    (Incarnation, ["commit_ready", "open_barrier", "begin_idle_eviction", "dispose"], "disposed"),
    (
        Incarnation,
        ["commit_ready", "open_barrier", "seal_for_relocation", "abort_relocation"],
        "serving",
    ),
    (
        Incarnation,
        ["commit_ready", "open_barrier", "seal_for_relocation", "commit_relocation"],
        "disposed",
    ),
    (Incarnation, ["commit_relocation", "open_barrier"], "serving"),
    (Incarnation, ["activation_failed"], "disposed"),
    (
        CloseOperation,
        [
            "verified",
            "begin_close",
            "admission_sealed",
            "turns_finished",
            "cleanup_done",
            "release",
        ],
        "closed",
    ),
    (CloseOperation, ["incarnation_gone"], "already_gone"),
    (CloseOperation, ["active_membership"], "kept_for_membership"),
    (CloseOperation, ["other_generation"], "invalid_operation"),
    (CloseOperation, ["sealed_for_move"], "unavailable"),
    (CloseOperation, ["verified", "cas_conflict", "incarnation_gone"], "already_gone"),
    (CloseOperation, ["already_closing", "release"], "closed"),
    (
        PlannedRelocation,
        [
            "begin_relocation",
            "seal",
            "capture_done",
            "target_reserved",
            "target_restored",
            "accept_relay_ready",
            "commit_relocation",
        ],
        "committed",
    ),
    (PlannedRelocation, ["begin_relocation", "seal", "abort_relocation"], "aborted"),
    (
        PlannedRelocation,
        [
            "begin_relocation",
            "seal",
            "capture_done",
            "target_reserved",
            "target_restored",
            "accept_relay_ready",
            "target_lost",
        ],
        "failed",
    ),
    (PlannedRelocation, ["relocation_disabled"], "refused"),
    (
        NodeLifecycle,
        ["new_claim", "open_admission", "renew", "begin_drain", "renew", "remove"],
        "removed",
    ),
    (NodeLifecycle, ["claim_conflict"], "startup_failed"),
    (NodeLifecycle, ["new_claim", "open_admission", "lease_expired", "stop"], "stopped"),
    (
        ActorMembership,
        ["create", "admitted", "join", "join_committed", "leave", "leave_committed", "close",
         "released"],
        "closed",
    ),
    (ActorMembership, ["create", "create_failed", "create", "admitted"], "member"),
    (ActorMembership, ["create", "admitted", "join", "join_failed"], "member"),
    (ActorMembership, ["create", "admitted", "leave", "leave_failed"], "member"),
    (ActorMembership, ["create", "admitted", "begin_relocation", "commit_relocation"], "member"),
    (ActorMembership, ["create", "admitted", "begin_relocation", "abort_relocation"], "member"),
    (ActorMembership, ["create", "admitted", "join", "move_released"], "lost"),
    (ActorMembership, ["create", "admitted", "close", "lease_lost"], "lost"),
    (ActorMembership, ["create", "lease_lost"], "lost"),
]


@pytest.mark.parametrize(
    ("chart", "events", "end"),
    PATHS,
    ids=[f"{c.__name__}-{i}" for i, (c, _, _) in enumerate(PATHS)],
)
def test_spec_path_on_instance_matches_table(chart, events, end):
    table = compile(chart)
    machine = chart()
    state = table.initial
    assert set(machine.configuration_values) == {state}
    for event in events:
        state = table.step(state, event)
        machine.send(event)
        assert set(machine.configuration_values) == {state}, event
    assert state == end


def _predecessors(table, target: str) -> set[str]:
    return {s for (s, _), t in table.transitions.items() if t == target}


def test_authority_leaves_missing_only_by_reserve():
    assert compile(SpotAuthority).events_from("missing") == ("reserve",)


@pytest.mark.parametrize("state", ["relocating", "sealed", "relay_ready"])
def test_authority_refuses_close_and_idle_eviction_while_moving(state):
    table = compile(SpotAuthority)
    for event in ("begin_close", "begin_idle_eviction", "begin_relocation"):
        assert not table.allows(state, event)


@pytest.mark.parametrize("chart", [SpotAuthority, PlannedRelocation], ids=lambda c: c.__name__)
def test_no_abort_after_relay_ready(chart):
    table = compile(chart)
    with pytest.raises(UndefinedTransition):
        table.step("relay_ready", "abort_relocation")


def test_relocation_abort_is_allowed_everywhere_before_relay_ready():
    table = compile(PlannedRelocation)
    before = _reachable(table, "waiting_for_permit") - _reachable(table, "relay_ready")
    before -= table.finals
    assert before == {s for s in table.states if table.allows(s, "abort_relocation")}


def test_cold_activation_serves_first_message_only_after_restoring_queue_head():
    table = compile(ColdActivation)
    assert _predecessors(table, "serving_first_message") == {"restoring_queue_head"}
    assert _predecessors(table, "restoring_queue_head") == {"registering_route", "recovering_ready"}
    assert _predecessors(table, "committing_ready") == {"recording_first_record"}


def test_cold_activation_deadline_never_undoes_a_ready_commit():
    table = compile(ColdActivation)
    after_commit = _reachable(table, "registering_route")
    for state in after_commit:
        assert not table.allows(state, "deadline_expired"), state
        if table.allows(state, "process_terminated"):
            # a restart after the commit restores the first record, never re-creates
            assert table.step(state, "process_terminated") == "recovering_ready"


def test_every_cleanup_after_reserve_goes_through_abort_creating():
    for chart in (ColdActivation, UserCreate):
        table = compile(chart)
        for state in ("aborting_failed_creation", "aborting_expired_creation"):
            assert table.events_from(state)[0] == "abort_creating"


def test_incarnation_runs_no_handler_before_the_barrier_opens():
    table = compile(Incarnation)
    assert _predecessors(table, "serving") == {"barrier_closed", "sealed"}
    assert not table.allows("barrier_closed", "begin_close")
    assert not table.allows("sealed", "begin_close")


def test_actor_membership_changes_start_only_from_member_one_at_a_time():
    table = compile(ActorMembership)
    for event in ("join", "leave", "begin_relocation", "close"):
        assert {s for s in table.states if table.allows(s, event)} == {"member"}, event
    assert table.tags["admits_controls"] == frozenset({"member"})
    # a change in flight ends back in member (committed or not) or in lost, nowhere else
    for state in ("moving", "relocating", "leaving"):
        targets = {table.step(state, event) for event in table.events_from(state)}
        assert targets == {"member", "lost"}, state


def test_actor_membership_lease_lost_ends_every_live_state_and_nothing_else():
    table = compile(ActorMembership)
    live = {s for s in table.states if table.allows(s, "lease_lost")}
    assert live == table.tags["live"] == table.states - table.finals - {"missing"}
    assert {table.step(s, "lease_lost") for s in live} == {"lost"}
    # a move released past relay-ready also ends without a store write, only a move
    assert {s for s in table.states if table.allows(s, "move_released")} == {
        "moving", "relocating"}
