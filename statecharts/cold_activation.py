"""Cold activation attempt: building an Instance Spot from its first message.

Theory of operation
-------------------

One chart instance (in the runtime: one state id kept beside the attempt) follows a
direct call that carries Instance intent (docs/concepts.md, "Intent") from resolve to
the removal of its recovery root.  Every store answer or local outcome is its own
event, so the chart needs no guards: the runtime knows which case it observed.

The steps are numbered 1-12 below, and the code cites them by number ("cold
activation step 8", "the step 11 barrier"); the envelope's route kind, deadline and
operation identity belong to step 8.

Source side:

1. ``resolving`` -- query the Spot ID's current authority.  The resolver hands its
   closed result to exactly one component:
2. Ready -> ``found_ready`` -> ``delivered_to_existing_owner`` (final): sent to the
   current owner with the stored kind and stable type (route kind 1, generation
   fenced).  A Ready authority of another kind/type -> ``found_type_mismatch`` ->
   ``type_mismatch``.  Creating -> ``found_creating`` ->
   ``deferred_to_other_attempt`` (final): handed to the waiter for the same attempt,
   which delivers the first message once that attempt is Ready; it is never
   negative-cached.  Owner unusable -> ``found_unavailable`` -> ``unavailable``
   (terminal completion adapter: an unusable owner starts no new creation).
3. Missing without Instance intent -> ``not_found`` (no creation intent is written).
4. ``selecting_mesh`` -- InMesh or the single object-role Mesh; 0 candidates ->
   ``not_configured``, two or more -> ``invalid_operation``, unknown InMesh ->
   ``not_found``.
5. ``selecting_type`` -- a named stable type that no serving node provides ->
   ``type_not_provided`` -> ``not_found``; one that only nodes taking no new Spots
   (draining or stopping) provide -> ``type_hosts_closed`` -> ``unavailable`` (the
   caller may retry once one of them is undrained or restarted).
6. ``selecting_type`` with the type omitted -- auto-selected only when exactly one
   distinct Instance type is registered in the Mesh: 0 -> ``type_not_provided`` ->
   ``not_found`` (``type_hosts_closed`` when only draining or stopping nodes register
   one); two or more -> ``ambiguous_type`` -> ``invalid_operation``.
7. ``checking_capacity`` -- no node providing the type has capacity ->
   ``capacity_exceeded``.
8. ``sending_envelope`` -- one activation envelope (route kind 2) with the first
   message goes to the target.  The source registers no owner and reserves nothing.
   A one-way send completes for its caller at ``envelope_accepted`` (a send completes
   when its message is admitted, not when it has run).

Target side:

9. ``checking_target_owner`` -- the target reads the store's current owner together
   with its own Spot list: Ready (itself or another owner) -> ``owner_ready`` ->
   ``delivered_to_existing_owner``; Creating -> ``owner_creating`` ->
   ``deferred_to_other_attempt``; other kind/type -> ``type_mismatch``; over the
   local active-object ceiling -> ``over_ceiling`` -> ``capacity_exceeded``;
   Missing -> ``owner_missing``.  A stale local Spot is never run.
10. ``storing_recovery_root`` then ``reserving`` -- the complete envelope becomes an
    immutable recovery root; Reserve re-checks lifecycle, lease, type and capacity and
    moves authority Missing -> Creating (see ``SpotAuthority``).  Losing the race ends
    this attempt the same way as step 9 (``reserve_lost_ready`` /
    ``reserve_lost_creating``); the store's refusal for capacity or type ends it with
    ``capacity_exceeded`` / ``type_mismatch``.
11. ``running_factory`` (factory + initialize), ``recording_first_record`` (the
    first message becomes the durable activation inbox's first record; no handler
    runs before it), ``committing_ready`` (CommitReady keeps the recovery root and
    replay cursor), ``registering_route`` (the instance intent route, in the same
    synchronous continuation as the commit), ``restoring_queue_head`` (the first
    record goes to the head of the local queue; the barrier is still closed).
12. ``serving_first_message`` (barrier open; nothing can overtake the first record),
    ``removing_pointer`` (only after the first handler's completion and replay cursor
    are durable: expected-version CAS), ``deleting_root`` (idempotent) ->
    ``activated`` (final).

Failures after Reserve never leave the ID occupied (a creation that fails midway
makes the ID Missing again): ``factory_failed`` -> ``aborting_failed_creation`` and
``deadline_expired`` -> ``aborting_expired_creation``; both release the reservation
with ``abort_creating`` (same fence) and end in ``creation_failed`` /
``deadline_exceeded``.
Before Reserve, ``deadline_expired`` ends directly in ``deadline_exceeded``.  The
deadline is accepted only while the attempt waits on something it may abandon (store
reads, the envelope send, the application factory); a store write in flight (recovery
root, Reserve, first record, CommitReady, AbortCreating) is shielded and its answer
applied first, so a cancelled write never leaves an orphaned reservation.  After the
Ready commit the deadline no longer undoes anything: the caller's request ends with
DeadlineExceeded but the durable first record is still processed.

Restart resumption (docs/stores.md, "Crash recovery"): ``process_terminated`` after
Reserve and before the commit leads to ``recovering_reservation``, where the startup
authority scan re-reads the Pending creation and either ``resume_creation`` (same
reservation and generation, back to ``running_factory``) or ``abort_creating`` with the
same fence.  After the commit but before the first handler completion is durable it
leads to ``recovering_ready``: the route is registered again (idempotent) and the first
record is restored to the queue head *before* the serving gate opens -- the step 11
barrier applies again in the same order.  Once the pointer is removed the attempt is
done apart from an idempotent root deletion, which is not resumed from this chart.
"""

from __future__ import annotations

from statemachine import State

from statecharts._base import StrictChart

__all__ = ("ColdActivation",)


class ColdActivation(StrictChart):
    """One cold activation attempt of an Instance Spot, from resolve to root deletion."""

    # --- source side (steps 1-8) ---
    resolving = State(initial=True)
    selecting_mesh = State()
    selecting_type = State()
    checking_capacity = State()
    sending_envelope = State()
    # --- target side (steps 9-12) ---
    checking_target_owner = State()
    storing_recovery_root = State()
    reserving = State()
    running_factory = State()
    recording_first_record = State()
    committing_ready = State()
    registering_route = State()
    restoring_queue_head = State()
    serving_first_message = State()
    removing_pointer = State()
    deleting_root = State()
    # --- cleanup and restart resumption ---
    aborting_failed_creation = State()
    aborting_expired_creation = State()
    recovering_reservation = State()
    recovering_ready = State()
    # --- terminal outcomes ---
    activated = State(final=True)
    delivered_to_existing_owner = State(final=True)
    deferred_to_other_attempt = State(final=True)
    not_found = State(final=True)
    not_configured = State(final=True)
    invalid_operation = State(final=True)
    capacity_exceeded = State(final=True)
    type_mismatch = State(final=True)
    unavailable = State(final=True)
    creation_failed = State(final=True)
    deadline_exceeded = State(final=True)

    # step 1-3: resolve
    found_ready = resolving.to(delivered_to_existing_owner)
    found_type_mismatch = resolving.to(type_mismatch)
    found_creating = resolving.to(deferred_to_other_attempt)
    found_unavailable = resolving.to(unavailable)
    found_missing_without_intent = resolving.to(not_found)
    found_missing_with_intent = resolving.to(selecting_mesh)
    # step 4: mesh selection
    mesh_selected = selecting_mesh.to(selecting_type)
    no_mesh_candidate = selecting_mesh.to(not_configured)
    ambiguous_mesh = selecting_mesh.to(invalid_operation)
    mesh_not_found = selecting_mesh.to(not_found)
    # steps 5-6: stable type selection
    type_selected = selecting_type.to(checking_capacity)
    type_not_provided = selecting_type.to(not_found)
    type_hosts_closed = selecting_type.to(unavailable)
    ambiguous_type = selecting_type.to(invalid_operation)
    # step 7: capacity
    capacity_available = checking_capacity.to(sending_envelope)
    no_capacity = checking_capacity.to(capacity_exceeded)
    # step 8: activation envelope
    envelope_accepted = sending_envelope.to(checking_target_owner)
    # step 9: the target checks the store's owner and its own Spot list
    owner_ready = checking_target_owner.to(delivered_to_existing_owner)
    owner_creating = checking_target_owner.to(deferred_to_other_attempt)
    owner_type_mismatch = checking_target_owner.to(type_mismatch)
    over_ceiling = checking_target_owner.to(capacity_exceeded)
    owner_missing = checking_target_owner.to(storing_recovery_root)
    # step 10: recovery root, then Reserve
    root_stored = storing_recovery_root.to(reserving)
    reserve_won = reserving.to(running_factory)
    reserve_lost_ready = reserving.to(delivered_to_existing_owner)
    reserve_lost_creating = reserving.to(deferred_to_other_attempt)
    reserve_refused_capacity = reserving.to(capacity_exceeded)
    reserve_refused_type = reserving.to(type_mismatch)
    # step 11: factory, durable first record, commit, route, queue head
    factory_initialized = running_factory.to(recording_first_record)
    factory_failed = running_factory.to(aborting_failed_creation)
    first_record_durable = recording_first_record.to(committing_ready)
    commit_ready = committing_ready.to(registering_route)
    route_registered = registering_route.to(restoring_queue_head) | recovering_ready.to(
        restoring_queue_head
    )
    queue_head_restored = restoring_queue_head.to(serving_first_message)
    # step 12: first completion, pointer CAS, root deletion
    first_completion_recorded = serving_first_message.to(removing_pointer)
    pointer_removed = removing_pointer.to(deleting_root)
    root_deleted = deleting_root.to(activated)
    # cleanup of a failed creation (same fence)
    abort_creating = (
        aborting_failed_creation.to(creation_failed)
        | aborting_expired_creation.to(deadline_exceeded)
        | recovering_reservation.to(creation_failed)
    )
    # one end-to-end deadline: terminal before Reserve, cleanup after it
    deadline_expired = deadline_exceeded.from_(
        resolving,
        selecting_mesh,
        selecting_type,
        checking_capacity,
        sending_envelope,
        checking_target_owner,
    ) | running_factory.to(aborting_expired_creation)
    # restart resumption: the target process terminated during activation
    process_terminated = recovering_reservation.from_(
        reserving,
        running_factory,
        recording_first_record,
        committing_ready,
        aborting_failed_creation,
        aborting_expired_creation,
    ) | recovering_ready.from_(
        registering_route, restoring_queue_head, serving_first_message, removing_pointer
    )
    resume_creation = recovering_reservation.to(running_factory)
