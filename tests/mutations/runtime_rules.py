"""The mutation gate's entries for the runtime:
routing and delivery, admission and the lease, create and close
(and their 47/48 targets), the ceiling, idle eviction and the lanes.

Each entry is a :class:`~mutation.Mutation`; see ``catalog.py``.
"""

from __future__ import annotations

from typing import Final

from mutation import Mutation

__all__ = ("RUNTIME_RULES",)

#: The rows of docs/architecture.md's "Where each rule lives" table.
_CALLS: Final = "Direct calls: send / request, one deadline, no hidden retry"
_CREATE: Final = "User Spot Create / GetOrCreate"
_ROUTES: Final = "Route cache and Message Follow routes"
_CLOSE: Final = "Close"
_OWNER: Final = "Failure of an owner: lease, ownership lost, Unavailable"
_IDLE: Final = "Idle eviction"
_CEILING: Final = "Active-object ceiling"
_LANES: Final = "Execution lanes"
_CHARTS: Final = "Lifecycles (every chart)"
_COLLECTOR: Final = "Garbage collection against the lease: frozen generation, cycle-free ends"

RUNTIME_RULES: tuple[Mutation, ...] = (
    Mutation(
        name="M1",
        family=_CALLS,
        rule="A message is never delivered to a local instance whose generation the store "
             "no longer names.",
        path="zlink_trio/runtime/coordinators/routing.py",
        find="if host is None or host.generation != record.object_generation:",
        replace="if host is None:",
        guards=["tests/runtime/test_spec_06.py::"
                "test_message_not_delivered_to_instance_without_authority_local_generation"],
    ),
    Mutation(
        name="M2",
        family=_CREATE,
        rule="The target of a command 47 builds nothing unless the store's Creating record "
             "matches every field of the frame's reservation fence.",
        path="zlink_trio/runtime/coordinators/remote_create.py",
        find='    return next((why for ok, why in checks if not ok), "")',
        replace='    return ""',
        guards=["tests/runtime/test_remote_targets.py::"
                "test_command_47_target_builds_nothing_for_a_fence_the_store_no_longer_holds"],
    ),
    Mutation(
        name="M3",
        family=_CLOSE,
        rule="The target of a command 48 closes nothing when the Spot's owner generation or "
             "StoreVersion is not the one the closing node read.",
        path="zlink_trio/runtime/coordinators/close_operation.py",
        find="    if expected is not None and record.state is not AuthorityState.CLOSING and (",
        replace="    if False and (",
        guards=["tests/runtime/test_remote_targets.py::"
                "test_command_48_target_closes_nothing_when_owner_generation_or_version_moved"],
    ),
    Mutation(
        name="lease.owner_past_deadline_admits_nothing",
        family=_OWNER,
        rule="A node whose lease deadline passed on the store clock admits no message "
             "(StaleRoute), even before it noticed the loss.",
        path="zlink_trio/runtime/state.py",
        find="        if (self.clock() if now is None else now) >= self.lease_expires_at:",
        replace="        if False:",
        guards=["tests/runtime/test_execution.py::"
                "test_stale_owner_filtering_uses_lease_validity_not_generation"],
    ),
    Mutation(
        name="lease.lost_admits_nothing",
        family=_OWNER,
        rule="A node that lost its lease, or drains, admits no new work (Unavailable).",
        path="zlink_trio/runtime/state.py",
        find="        if self.state not in NODE.tags.admits_work:",
        replace="        if False:",
        guards=["tests/runtime/test_remote_targets.py::"
                "test_a_target_that_lost_its_lease_creates_and_closes_nothing"],
    ),
    Mutation(
        name="lease.lost_public_calls_refused",
        family=_OWNER,
        rule="Every public call of a node that lost its lease raises Unavailable.",
        path="zlink_trio/runtime/state.py",
        find="        if self.lease_lost:\n            raise self.lease_lost_error()\n"
             "        if self.state in _CLOSED:",
        replace="        if self.state in _CLOSED:",
        guards=["tests/runtime/test_ownership_lost.py::"
                "test_refused_renewal_stops_every_spot_once_without_store_writes"],
    ),
    Mutation(
        name="lease.no_turn_past_deadline",
        family=_OWNER,
        rule="An owner past its lease deadline starts no queued turn (Unavailable).",
        path="zlink_trio/runtime/incarnation/incarnation.py",
        find="            if (at if rt.clock is now else rt.clock()) >= rt.lease_expires_at:",
        replace="            if False:",
        guards=["tests/runtime/test_ownership_lost.py::"
                "test_a_paused_owner_runs_no_queued_turn_and_withholds_a_late_reply"],
    ),
    Mutation(
        name="lease.late_reply_withheld",
        family=_OWNER,
        rule="A turn that ended after the lease deadline gives no reply (Unavailable).",
        path="zlink_trio/runtime/incarnation/incarnation.py",
        find="        if (rt.clock() if ended is None else ended) >= rt.lease_expires_at:",
        replace="        if False:",
        guards=["tests/runtime/test_ownership_lost.py::"
                "test_a_paused_owner_runs_no_queued_turn_and_withholds_a_late_reply"],
    ),
    Mutation(
        name="lease.no_tick_past_deadline",
        family=_OWNER,
        rule="A timer tick queued while the lease was valid does not run once the owner's "
             "lease deadline has passed.",
        path="zlink_trio/runtime/incarnation/incarnation.py",
        find="                if not _lease_passed(self.rt):  # (queued before the deadline",
        replace="                if True:  # (queued before the deadline",
        guards=["tests/runtime/test_ownership_lost.py::"
                "test_a_tick_queued_before_the_lease_deadline_does_not_run_after_it"],
    ),
    Mutation(
        name="ceiling.refused_at_ceiling",
        family=_CEILING,
        rule="A new local activation is refused once active + activating reach the ceiling.",
        path="zlink_trio/core/placement.py",
        find="    if active + pending >= ceiling:",
        replace="    if active + pending > ceiling:",
        guards=["tests/core/test_placement.py::test_local_activation_is_refused_at_the_ceiling"],
    ),
    Mutation(
        name="idle.work_in_progress_not_idle",
        family=_IDLE,
        rule="A Spot with pending or running work is never idle.",
        path="zlink_trio/core/idle.py",
        find="    if pending or running or relocating:",
        replace="    if relocating:",
        guards=["tests/core/test_idle.py::test_idle_predicate_work_in_progress_never_idle"],
    ),
    Mutation(
        name="idle.instance_spots_only",
        family=_IDLE,
        rule="Only Instance Spots are idle-evicted; User and Entry Spots never are.",
        path="zlink_trio/core/idle.py",
        find="    if kind is not SpotKind.INSTANCE or timeout == 0:",
        replace="    if timeout == 0:",
        guards=["tests/core/test_idle.py::test_idle_predicate_only_instance_spots_qualify"],
    ),
    Mutation(
        name="idle.runtime_work_in_progress",
        family=_IDLE,
        rule="The idle sweep evicts no Spot whose turn is running or whose work is queued.",
        path="zlink_trio/runtime/incarnation/catalog.py",
        find="        return is_idle(host.spot_type.kind, pending=pending, running=running,",
        replace="        return is_idle(host.spot_type.kind, pending=0, running=0,",
        guards=["tests/runtime/test_spec_09.py::"
                "test_instance_spot_with_work_in_progress_is_not_idle_evicted[memory]"],
    ),
    Mutation(
        name="lanes.count_bound",
        family=_LANES,
        rule="A lane refuses the item that would exceed its count bound (CapacityExceeded).",
        path="zlink_trio/core/lanes.py",
        find="        count_hit = items + 1 > bounds.max_items",
        replace="        count_hit = items > bounds.max_items",
        guards=["tests/core/test_lanes.py::"
                "test_execution_queue_is_bounded_on_count_and_bytes_whichever_first"],
    ),
    Mutation(
        name="lanes.byte_bound",
        family=_LANES,
        rule="A lane refuses the item whose reservation would exceed its byte bound.",
        path="zlink_trio/core/lanes.py",
        find="        bytes_hit = self._bytes + reservation > bounds.max_bytes",
        replace="        bytes_hit = self._bytes > bounds.max_bytes",
        guards=["tests/core/test_lanes.py::"
                "test_large_messages_hit_byte_bound_before_count_bound"],
    ),
    Mutation(
        name="lanes.running_items_count",
        family=_LANES,
        rule="An item holds its lane slot until its turn completes, not only while queued.",
        path="zlink_trio/core/lanes.py",
        find="        items = ((len(queue) if queue is not None else 0)\n"
             "                 + (0 if running is None else 1 if type(running) is Ticket "
             "else len(running)))",
        replace="        items = (len(queue) if queue is not None else 0)",
        guards=["tests/core/test_lanes.py::"
                "test_reservation_is_held_until_completion_not_dequeue"],
    ),
    Mutation(
        name="create.type_mismatch",
        family=_CREATE,
        rule="GetOrCreate of an ID that exists as another kind or type is TypeMismatch, "
             "never EXISTING.",
        path="zlink_trio/runtime/coordinators/create_operation.py",
        find="    if not record.matches(SpotKind.USER, op.stable_type):\n"
             "        raise TypeMismatch(",
        replace="    if False:\n        raise TypeMismatch(",
        guards=["tests/runtime/test_create.py::"
                "test_type_errors_and_invalid_input_write_nothing[memory]"],
    ),
    Mutation(
        name="create.no_second_uuid",
        family=_CREATE,
        rule="Create() that meets an existing authority raises AlreadyExists: never EXISTING, "
             "never a second uuid.",
        path="zlink_trio/runtime/coordinators/create_operation.py",
        find="    if op.create_only:\n"
             "        op.state = step(CREATE, op.state, CREATE.ev.reserve_conflict)",
        replace="    if False:\n"
                "        op.state = step(CREATE, op.state, CREATE.ev.reserve_conflict)",
        guards=["tests/runtime/test_spec_06.py::"
                "test_create_issues_lowercase_uuid4_and_no_second_uuid_on_conflict"],
    ),
    Mutation(
        name="close.closer_drops_its_route",
        family=_CLOSE,
        rule="The node that closed a Spot drops its own route to it: its next call is "
             "NotFound, and a send is not dropped at the old owner.",
        path="zlink_trio/runtime/coordinators/close.py",
        find="            rt.route_cache.invalidate(ref.spot_id)\n",
        replace="",
        guards=["tests/runtime/test_remote_calls.py::"
                "test_after_closing_a_remote_spot_the_closers_next_calls_are_not_found"],
    ),
    Mutation(
        name="close.user_spots_only",
        family=_CLOSE,
        rule="spots.close() closes User Spots only (InvalidOperation for an Instance Spot).",
        path="zlink_trio/runtime/coordinators/close_operation.py",
        find="    if record.kind not in kinds:",
        replace="    if False:",
        guards=["tests/runtime/test_close.py::"
                "test_close_checks_the_generation_and_never_retargets[memory]"],
    ),
    Mutation(
        name="close.seals_admission",
        family=_CLOSE,
        rule="A closing incarnation admits no new message (StaleRoute, not run).",
        path="zlink_trio/runtime/incarnation/incarnation.py",
        find="        if state in _ADMISSION_SEALED:",
        replace="        if False:",
        guards=["tests/runtime/test_execution.py::test_message_to_a_closing_spot_is_stale_and_not_run"],
    ),
    Mutation(
        name="route_cache.invalidated_on_stale_answer",
        family=_ROUTES,
        rule="A StaleRoute or Unavailable answer from another node drops the cached route, "
             "so the next call resolves afresh.",
        path="zlink_trio/runtime/mesh/remote_calls.py",
        find="                rt.route_cache.invalidate(call.spot_id)\n"
             "                if isinstance(exc, StaleRoute):",
        replace="                if isinstance(exc, StaleRoute):",
        guards=["tests/runtime/test_remote_calls.py::"
                "test_message_to_a_node_that_no_longer_owns_the_spot_is_stale_and_not_retried"],
    ),
    Mutation(
        name="route_cache.invalidate",
        family=_ROUTES,
        rule="invalidate() drops the Spot's cached route.",
        path="zlink_trio/core/route_cache.py",
        find="        return self._remove(spot_id)",
        replace="        return spot_id in self._entries",
        guards=["tests/core/test_route_cache.py::test_invalidate_drops_one_spot_idempotently"],
    ),
    Mutation(
        name="charts.undefined_transition_refused",
        family=_CHARTS,
        rule="The runtime refuses a lifecycle step its chart does not define "
             "(InvalidOperation), never staying or jumping silently.",
        path="zlink_trio/runtime/charts.py",
        find="        except UndefinedTransition as exc:\n            raise InvalidOperation(",
        replace="        except UndefinedTransition as exc:\n            return state\n"
                "            raise InvalidOperation(",
        guards=["tests/runtime/test_charts.py"],
    ),
    Mutation(
        name="deadline.queued_past_deadline_not_run",
        family=_CALLS,
        rule="A request whose deadline passed while it was queued is not run (DeadlineExceeded).",
        path="zlink_trio/runtime/incarnation/incarnation.py",
        find="                if at >= item.deadline.at:",
        replace="                if False:",
        guards=["tests/runtime/test_remote_calls.py::"
                "test_a_request_whose_deadline_passed_in_the_owners_queue_is_not_run"],
    ),
    Mutation(
        name="deadline.no_hidden_retry_on_closing",
        family=_CALLS,
        rule="A call without Instance intent to a closing Spot ends StaleRoute; it is not held "
             "and resent to the next incarnation.",
        path="zlink_trio/runtime/coordinators/routing.py",
        find="    if call.intent is not None and host.admission_sealed:",
        replace="    if host.admission_sealed:",
        guards=["tests/runtime/test_spec_09.py::"
                "test_call_to_stale_owner_ends_in_error_without_retry[memory]"],
    ),
    Mutation(
        name="lease.ran_out_during_startup",
        family="Failure of an owner: lease, ownership lost, Unavailable",
        rule="A new lifecycle whose lease ran out before admission opened does not open: "
             "open_node raises Unavailable (never an internal lifecycle error).",
        path="zlink_trio/runtime/node.py",
        find="    if rt.lease_lost or rt.now() >= rt.lease_expires_at:",
        replace="    if False:",
        guards=["tests/runtime/test_node_startup.py::"
                "test_a_lease_that_ran_out_during_startup_is_a_typed_error"],
    ),
    Mutation(
        name="lease.rejoin",
        family="Failure of an owner: lease, ownership lost, Unavailable",
        rule="A node that lost its lease rejoins the Mesh by itself as a new lifecycle of "
             "the same NodeId as soon as the store answers (on_lease_lost='rejoin').",
        path="zlink_trio/runtime/node.py",
        find="        while lost is not None and not stop.requested.is_set():",
        replace="        while False:",
        guards=["tests/runtime/test_node_stop.py::"
                "test_a_node_whose_store_lost_its_data_rejoins_and_serves_again"],
    ),
    Mutation(
        name="lease.wait_after_vanished_claim",
        family="Failure of an owner: lease, ownership lost, Unavailable",
        rule="A lifecycle whose claim shows that the store lost its data (its NodeId's "
             "lifecycle count started over) scans and serves only once every lease the "
             "store granted before ran out.",
        path="zlink_trio/runtime/node.py",
        find="    if trio.current_time() < not_before:",
        replace="    if False:",
        guards=["tests/runtime/test_node_stop.py::"
                "test_after_the_store_lost_its_data_no_node_serves_before_the_old_leases_ran_out"],
    ),
    Mutation(
        name="lease.stop_cancels_a_starting_rejoin",
        family="Failure of an owner: lease, ownership lost, Unavailable",
        rule="A stop that comes while a rejoin is starting ends that start at once, not "
             "after the store's deadlines.",
        path="zlink_trio/runtime/stopping.py",
        find="                self.starting.cancel()",
        replace="                pass",
        guards=["tests/runtime/test_node_stop.py::"
                "test_leaving_the_block_while_a_rejoin_waits_on_the_store_returns_at_once"],
    ),
    # Timers (core/timers.py)
    Mutation(
        name="timers.bounded_per_spot",
        family="Timers",
        rule="A Spot registers at most max_timers timers (CapacityExceeded past it).",
        path="zlink_trio/core/timers.py",
        find="        if len(self._live) >= self._max_timers:",
        replace="        if False:",
        guards=["tests/core/test_timers.py::test_timers_per_spot_are_bounded"],
    ),
    Mutation(
        name="timers.cancelled_never_fires",
        family="Timers",
        rule="A cancelled timer never fires.",
        path="zlink_trio/core/timers.py",
        find="self._live.pop(timer_id.value, None) is None:",
        replace="self._live.get(timer_id.value) is None:",
        guards=["tests/core/test_timers.py::test_cancel_is_idempotent_and_reports_whether_it_removed_something"],
    ),
    # Operators (issue #14)
    Mutation(
        name="operators.client_only_hosts_nothing",
        family="Operators: client-only node, relocate / drain asked of another node "
               "(issue #14)",
        rule="A client-only node claims no server role, type or capacity, so placement "
             "never chooses it.",
        path="zlink_trio/runtime/node.py",
        find="roles={Role.OBJECT_CLIENT}, served_types={}, capacity=0,",
        replace="roles={Role.OBJECT_CLIENT, Role.OBJECT_SERVER}, served_types={}, capacity=0,",
        guards=["tests/runtime/test_operator_requests.py::"
                "test_the_client_only_claim_has_only_the_client_role_and_no_capacity"],
    ),
    Mutation(
        name="operators.undrain_clears_the_claims_mark",
        family="Operators: client-only node, relocate / drain asked of another node "
               "(issue #14)",
        rule="An undrain clears the draining mark on the node's claim in the store, so the "
             "other nodes place new Spots on it again (issue #27).",
        path="zlink_trio/runtime/coordinators/placement.py",
        find="        opened = await rt.store.location.open_placement(rt.mesh, rt.node_rid, "
             "lifecycle)",
        replace="        opened = True",
        guards=["tests/runtime/test_operator_requests.py::"
                "test_ask_undrain_reopens_a_drained_node_to_new_spots"],
    ),
    Mutation(
        name="operators.drained_claim_not_reused",
        family="Operators: client-only node, relocate / drain asked of another node "
               "(issue #14)",
        rule="Placement reuses another node's candidate only while its claim is unchanged, "
             "whether it accepts placements included: a node that drained is not chosen "
             "from the candidate built while it took new Spots (issue #32).",
        path="zlink_trio/runtime/coordinators/placement.py",
        find="        key = (descriptor.digest, claim.accepts_placements)",
        replace="        key = (descriptor.digest, True)",
        guards=["tests/runtime/test_drain_placement.py::"
                "test_after_drain_other_nodes_place_no_new_spot_on_the_drained_node"],
    ),
    Mutation(
        name="operators.draining_only_is_unavailable",
        family="Operators: client-only node, relocate / drain asked of another node "
               "(issue #14)",
        rule="A new Spot whose type only draining or stopping nodes serve is Unavailable "
             "(retryable), not NotFound (issue #27).",
        path="zlink_trio/core/placement.py",
        find="    _check_not_only_closed(candidates, mesh, stable_type, kind)\n"
             "    raise NotFound(\n        f\"no serving object server in Mesh {mesh!r} provides "
             "stable type",
        replace="    raise NotFound(\n        f\"no serving object server in Mesh {mesh!r} "
                "provides stable type",
        guards=["tests/core/test_placement.py::"
                "test_a_type_served_only_by_draining_nodes_is_unavailable_and_says_so",
                "tests/runtime/test_operator_requests.py::"
                "test_ask_undrain_reopens_a_drained_node_to_new_spots"],
    ),
    # Mesh-wide (several listening nodes)
    Mutation(
        name="M5",
        family="Route cache and Message Follow routes",
        rule="A node waiting for another node's Creating Spot polls the store with a "
             "backoff from 5 ms to 250 ms, so it sees Ready (and is routed there) at once.",
        path="zlink_trio/runtime/coordinators/routing.py",
        find="_FIRST_POLL: Final = 0.005\n_MAX_POLL: Final = 0.25\n",
        replace="_FIRST_POLL: Final = 15.0\n_MAX_POLL: Final = 15.0\n",
        guards=["tests/runtime/test_spec_06_cross_node.py::"
                "test_missing_creating_and_store_failure_are_not_negative_"
                "cached_creating_third_node"],
    ),
    Mutation(
        name="mesh.creating_poll_cap",
        family="Route cache and Message Follow routes",
        rule="The Creating poll's backoff stops growing at 250 ms, however long the Spot "
             "stays Creating.",
        path="zlink_trio/runtime/coordinators/routing.py",
        find="_MAX_POLL: Final = 0.25\n",
        replace="_MAX_POLL: Final = 15.0\n",
        guards=["tests/runtime/test_spec_06_cross_node.py::"
                "test_missing_creating_and_store_failure_are_not_negative_"
                "cached_creating_third_node"],
    ),
    Mutation(
        name="mesh.type_from_every_descriptor",
        family="Cold activation",
        rule="An omitted Instance type is auto-selected from the types every serving node "
             "of the Mesh registers, not from this node's own registry.",
        path="zlink_trio/runtime/coordinators/placement.py",
        find="        stable_type = select_instance_type(found, mesh, intent.stable_type)\n"
             "    except NotFound:\n",
        replace="        stable_type = select_instance_type(\n"
                "            [c for c in found if c.node_rid == rt.node_rid] or found, mesh,\n"
                "            intent.stable_type)\n"
                "    except NotFound:\n",
        guards=["tests/runtime/test_spec_06_cross_node.py::"
                "test_instance_type_auto_selected_only_when_mesh_has_exactly_one"],
    ),
    Mutation(
        name="mesh.user_type_from_every_descriptor",
        family="User Spot Create / GetOrCreate",
        rule="Create checks the stable type against every serving node of the Mesh, so a "
             "node that does not register it (a client) still creates it on one that does.",
        path="zlink_trio/runtime/coordinators/create.py",
        find="        select_user_type(found, mesh, op.stable_type)\n",
        replace="        select_user_type(\n"
                "            [c for c in found if c.node_rid == rt.node_rid] or found, mesh,\n"
                "            op.stable_type)\n",
        guards=["tests/runtime/test_spec_06_cross_node.py::"
                "test_instance_intent_cold_activates_only_missing_spot_with_"
                "optional_mesh_and_type"],
    ),
    Mutation(
        name="mesh.candidates_keep_their_mesh",
        family="Cold activation",
        rule="Placement sees each node in its own Mesh: with two object Meshes and no "
             "in_mesh, cold activation and create are InvalidOperation.",
        path="zlink_trio/runtime/coordinators/placement.py",
        find="        mesh=descriptor.mesh, node_rid=descriptor.node_rid,",
        replace="        mesh=rt.mesh, node_rid=descriptor.node_rid,",
        guards=["tests/runtime/test_spec_06_cross_node.py::"
                "test_instance_intent_cold_activates_only_missing_spot_with_"
                "optional_mesh_and_type"],
    ),
    Mutation(
        name="runtime.ended_incarnation_leaves_no_cycle",
        family=_COLLECTOR,
        rule="An ended incarnation forgets its instance, so nothing of the runtime's is left "
             "in a reference cycle: frozen or not, it is freed by reference counting.",
        path="zlink_trio/runtime/incarnation/incarnation.py",
        find="        instance, self.instance = self.instance, None",
        replace="        instance = self.instance",
        guards=["tests/runtime/test_collector.py::"
                "test_an_ended_incarnation_is_freed_without_the_garbage_collector"],
    ),
    Mutation(
        name="runtime.outlived_instances_collected",
        family=_COLLECTOR,
        rule="Once a quarter of the frozen Spots' instances outlived their incarnation "
             "(maybe cycles of the application's), the node collects everything: frozen "
             "garbage never grows without bound.",
        path="zlink_trio/runtime/collector.py",
        find="            everything = outlived >= max(after, sum(process.frozen_by.values()) "
             "// 4)",
        replace="            everything = False",
        guards=["tests/runtime/test_collector.py::"
                "test_instances_that_outlive_their_incarnation_make_the_node_collect_everything"],
    ),
)
