"""The mutation gate's entries for the store:
the fence checks of the transaction rules (``store/rules/``, the
oracle) and of the backends that do not run them (the Redis Lua, SQLite's own SQL).

Each entry is a :class:`~mutation.Mutation`; see ``catalog.py``.

Each kind of fence has at least one entry: the owner check (lifecycle, lease), Reserve,
CommitReady, BeginClose / Release, the pointer CAS, the claim fences, each relocation
step, the chart's step, ReleaseExpired, AdoptOrphan and the dead lifecycles, roots and
inboxes, the combined transactions, SQLite's own SQL; and the Lua of the owner check,
Reserve, CommitReady, AbortCreating, BeginClose / Release, the pointer CAS, the
relocation steps, ReleaseExpired, the inbox cursor and NodeIdInUse. The rest of the
checks beside them are left out to keep the gate's time (each entry costs a pytest
start-up); so are the state checks that only pick the error class -- delete one and the
SpotAuthority chart's step still refuses (a Creating record's BeginClose,
AcceptRelayReady before Sealed, CommitRelocation before RelayReady) -- and
BeginRelocation's Entry check (no node serves the Entry type).

Guards are single parametrized conformance tests on one backend: ``[memory://]`` for a
rule of ``store/rules/`` (memory runs the rules as they are; SQLite runs the same
functions), ``[redis]`` for a Lua script (``ZLINK_TEST_REDIS``), ``[sqlite://...]`` for
SQLite's own SQL. One test on one backend keeps each entry's run to pytest's start-up
plus a fraction of a second, so the store's whole share of the gate stays short.
"""

from __future__ import annotations

from mutation import Mutation

__all__ = ("STORE_RULES",)

#: The rows of docs/architecture.md's "Where each rule lives" table.
_TXN = "Store transactions"
_STEPS = "Relocation steps in the store: begin, seal, accept relay-ready, commit, abort"
_CHARTS = "Lifecycles (every chart)"

_RULES = "zlink_trio/store/rules/"
_LUA = "zlink_trio/store/redis/lua/"


def _on(backend: str, test: str, *params: str) -> str:
    """The node ID of conformance test ``file::name`` on ``backend`` (and ``params``)."""
    return f"tests/store/{test}[{'-'.join((backend, *params))}]"


def _mem(test: str, *params: str) -> str:
    return _on("memory://", test, *params)


def _redis(test: str, *params: str) -> str:
    return _on("redis", test, *params)


def _sqlite(test: str, *params: str) -> str:
    return _on("sqlite://?dispatch=inline", test, *params)


_LOC = "test_location_conformance.py::"
_CLOSE = "test_location_close_conformance.py::"
_MOVE = "test_relocation_steps_conformance.py::"
_RELEASE = "test_location_release_conformance.py::"
_ADOPT = "test_location_recovery_conformance.py::"
_DEAD = "test_dead_lifecycle_conformance.py::"
_INBOX = "test_relocation_conformance.py::"
_COMBINED = "test_combined_conformance.py::"
_CHART = "test_authority_chart_conformance.py::"
_PAYLOAD = "test_relocation_release_conformance.py::"

STORE_RULES: tuple[Mutation, ...] = (
    # -- location.py: the owner check every authority change makes -------------------------
    Mutation(
        name="store.owner_lifecycle_fence",
        family=_TXN,
        rule="An owner fence whose lifecycle generation is not the claim's current one "
             "changes no authority (StaleFence).",
        path=_RULES + "location.py",
        find="if claim is None or claim.lifecycle_generation != owner.lifecycle_generation:",
        replace="if claim is None:",
        guards=[_mem(_LOC + "test_reserve_refuses_expired_or_stale_owner")],
    ),
    Mutation(
        name="store.owner_lease",
        family=_TXN,
        rule="An owner whose lease expired changes no authority (Unavailable).",
        path=_RULES + "location.py",
        find="    if not claim.is_live(now):\n        raise Unavailable(",
        replace="    if False:\n        raise Unavailable(",
        guards=[_mem(_LOC + "test_reserve_refuses_expired_or_stale_owner")],
    ),
    # -- location.py: Reserve ---------------------------------------------------------------
    Mutation(
        name="store.reserve_authority_exists",
        family=_TXN,
        rule="Reserve of an ID that has an authority record is refused with AuthorityExists "
             "carrying that record.",
        path=_RULES + "location.py",
        find="    if current is not None:\n        raise AuthorityExists(current)",
        replace="    if False:\n        raise AuthorityExists(current)",
        guards=[_mem(_LOC + "test_reserve_existing_authority_raises_with_current_record")],
    ),
    Mutation(
        name="store.reserve_capacity",
        family=_TXN,
        rule="Reserve counts active + pending units against the owner's capacity "
             "(CapacityExceeded at the bound).",
        path=_RULES + "location.py",
        find="    if load >= claim.descriptor.capacity:",
        replace="    if load > claim.descriptor.capacity:",
        guards=[_mem(_LOC + "test_capacity_counts_pending_and_active")],
    ),
    Mutation(
        name="store.reserve_serves",
        family=_TXN,
        rule="Reserve on a node whose descriptor does not serve the type as that kind is "
             "refused (InvalidOperation).",
        path=_RULES + "location.py",
        find="    if not claim.descriptor.serves(stable_type, kind):",
        replace="    if False:",
        guards=[_mem(_LOC + "test_reserve_refuses_entry_ids_and_kinds")],
    ),
    # -- location.py: CommitReady -----------------------------------------------------------
    Mutation(
        name="store.commit_ready_store_version",
        family=_TXN,
        rule="CommitReady needs the reservation's StoreVersion (StaleFence otherwise).",
        path=_RULES + "location.py",
        find="if record.state is AuthorityState.CREATING and record.store_version == "
             "fence.store_version:",
        replace="if record.state is AuthorityState.CREATING:",
        guards=[_mem(_LOC + "test_commit_ready_refuses_stale_fence_and_writes_nothing")],
    ),
    Mutation(
        name="store.commit_ready_object_generation",
        family=_TXN,
        rule="A reservation fence of another ObjectGeneration commits nothing (StaleFence).",
        path=_RULES + "location.py",
        find="    return (record.object_generation == fence.object_generation\n",
        replace="    return (True\n",
        guards=[_mem(_LOC + "test_commit_ready_refuses_stale_fence_and_writes_nothing")],
    ),
    Mutation(
        name="store.commit_ready_owner",
        family=_TXN,
        rule="A reservation fence of another owner or owner generation commits nothing "
             "(StaleFence).",
        path=_RULES + "location.py",
        find="            and record.owner_generation == fence.owner_generation\n"
             "            and (record.owner is fence.owner or record.owner == fence.owner))",
        replace="            and True)",
        guards=[_mem(_LOC + "test_commit_ready_refuses_stale_fence_and_writes_nothing")],
    ),
    Mutation(
        name="store.commit_ready_owner_live",
        family=_TXN,
        rule="CommitReady needs the owner's live claim (Unavailable / StaleFence).",
        path=_RULES + "location.py",
        find="            check_owner(state, record.mesh, record.owner, now)\n"
             "            # The stored record's fields",
        replace="            # The stored record's fields",
        guards=[_mem(_LOC + "test_commit_ready_refuses_expired_or_replaced_owner")],
    ),
    Mutation(
        name="store.commit_ready_retry_is_this_commit",
        family=_TXN,
        rule="A retried CommitReady returns the record only while it is that commit's "
             "result (StoreVersion one more); after a later change it is StaleFence.",
        path=_RULES + "location.py",
        find="                and record.store_version == fence.store_version + 1):",
        replace="                ):",
        guards=[_mem(_LOC + "test_commit_ready_retry_after_a_later_change_is_stale")],
    ),
    # -- location.py: BeginClose / Release / RemoveRecoveryPointer --------------------------
    Mutation(
        name="store.begin_close_owner",
        family=_TXN,
        rule="BeginClose by another owner than the record's is refused (StaleFence).",
        path=_RULES + "location.py",
        find="    stale = (record.owner != owner\n",
        replace="    stale = (False\n",
        guards=[_mem(_CLOSE + "test_begin_close_refuses_stale_fences")],
    ),
    Mutation(
        name="store.begin_close_owner_generation",
        family=_TXN,
        rule="BeginClose with an expected owner generation that is not the record's is "
             "refused (StaleFence).",
        path=_RULES + "location.py",
        find="             or expected_owner_generation not in (None, record.owner_generation))",
        replace="             or False)",
        guards=[_mem(_CLOSE + "test_begin_close_refuses_stale_fences")],
    ),
    Mutation(
        name="store.begin_close_store_version",
        family=_TXN,
        rule="BeginClose with an expected StoreVersion that is not the record's is refused "
             "(StaleFence).",
        path=_RULES + "location.py",
        find="    if stale or expected_store_version not in (None, record.store_version):",
        replace="    if stale:",
        guards=[_mem(_CLOSE + "test_begin_close_refuses_stale_fences")],
    ),
    Mutation(
        name="store.begin_close_owner_lease",
        family=_TXN,
        rule="BeginClose needs the owner's live lease (Unavailable).",
        path=_RULES + "location.py",
        find="    check_owner(state, record.mesh, owner, now)\n"
             "    members = state.members.get(spot_id)",
        replace="    members = state.members.get(spot_id)",
        guards=[_mem(_CLOSE + "test_begin_close_refuses_stale_fences")],
    ),
    Mutation(
        name="store.release_owner_fence",
        family=_TXN,
        rule="Only the Closing owner, at its owner generation, releases a record "
             "(StaleFence).",
        path=_RULES + "location.py",
        find="    if (record.state is not AuthorityState.CLOSING or record.owner != fence.owner\n"
             "            or record.owner_generation != fence.owner_generation):",
        replace="    if (record.state is not AuthorityState.CLOSING):",
        guards=[_mem(_CLOSE + "test_release_refuses_a_fence_that_does_not_hold_closing")],
    ),
    Mutation(
        name="store.release_object_generation",
        family=_TXN,
        rule="Release with another ObjectGeneration's fence touches nothing (False).",
        path=_RULES + "location.py",
        find="    if record is None or record.object_generation != fence.object_generation:\n"
             "        return False\n    if (record.state is not AuthorityState.CLOSING",
        replace="    if record is None:\n"
                "        return False\n    if (record.state is not AuthorityState.CLOSING",
        guards=[_mem(_CLOSE + "test_begin_close_other_generation_is_invalid_operation")],
    ),
    Mutation(
        name="store.recovery_pointer_cas",
        family=_TXN,
        rule="RemoveRecoveryPointer is a compare-and-set on the StoreVersion (StaleFence).",
        path=_RULES + "location.py",
        find="    if record.store_version != expected_version:",
        replace="    if False:",
        guards=[_mem(_CLOSE + "test_remove_recovery_pointer_is_an_expected_version_cas")],
    ),
    Mutation(
        name="store.recovery_pointer_object_generation",
        family=_TXN,
        rule="RemoveRecoveryPointer of another ObjectGeneration removes nothing (False), "
             "even at the record's StoreVersion.",
        path=_RULES + "location.py",
        find="    if record is None or record.object_generation != object_generation:\n"
             "        return False\n    if record.state is AuthorityState.CREATING:",
        replace="    if record is None:\n"
                "        return False\n    if record.state is AuthorityState.CREATING:",
        guards=[_mem(_CLOSE
                     + "test_remove_recovery_pointer_of_another_generation_removes_nothing")],
    ),
    # -- claims.py --------------------------------------------------------------------------
    Mutation(
        name="store.new_claim_live_claim",
        family=_TXN,
        rule="NewClaim never replaces a live claim of the same (mesh, NodeRid) "
             "(AlreadyExists).",
        path=_RULES + "claims.py",
        find="    if old is not None and old.is_live(now):",
        replace="    if False:",
        guards=[_mem(_LOC + "test_new_claim_descriptor_conflict_changes_nothing")],
    ),
    Mutation(
        name="store.node_id_in_use",
        family=_TXN,
        rule="A NodeId with a live claim of another NodeRid cannot be claimed again "
             "(NodeIdInUse).",
        path=_RULES + "claims.py",
        find="        if (claim.descriptor.node_id == descriptor.node_id and claim.is_live(now)",
        replace="        if (False and claim.is_live(now)",
        guards=[_mem(_DEAD + "test_new_claim_refuses_a_node_id_held_live_by_another_process")],
    ),
    Mutation(
        name="store.renew_lifecycle_fence",
        family=_TXN,
        rule="Renew of a lifecycle that is not the claim's current one is refused "
             "(StaleFence).",
        path=_RULES + "claims.py",
        find="    if claim is None or claim.lifecycle_generation != lifecycle_generation:\n"
             "        raise StaleFence(",
        replace="    if claim is None:\n        raise StaleFence(",
        guards=[_mem(_LOC + "test_renew_refuses_stale_lifecycle_and_missing_claim")],
    ),
    Mutation(
        name="store.remove_lifecycle_fence",
        family=_TXN,
        rule="Remove by a lifecycle that is not the claim's current one deletes nothing: a "
             "stale process never removes its replacement (False).",
        path=_RULES + "claims.py",
        find="    if claim is None or claim.lifecycle_generation != lifecycle_generation:\n"
             "        return False\n    entry = _entry_of(state, claim)",
        replace="    if claim is None:\n        return False\n    entry = _entry_of(state, claim)",
        guards=[_mem(_LOC + "test_stale_remove_cannot_delete_replacement")],
    ),
    # -- relocation_steps.py ----------------------------------------------------------------
    Mutation(
        name="store.move_fence_object_generation",
        family=_STEPS,
        rule="A relocation step with another ObjectGeneration's fence is refused "
             "(StaleFence).",
        path=_RULES + "relocation_steps.py",
        find="    return (record is not None and record.object_generation == "
             "fence.object_generation\n",
        replace="    return (record is not None\n",
        guards=[_mem(_MOVE + "test_accept_relay_ready_refuses_a_wrong_fence",
                     "object_generation")],
    ),
    Mutation(
        name="store.move_fence_owner_generation",
        family=_STEPS,
        rule="A relocation step with another owner generation's fence is refused "
             "(StaleFence).",
        path=_RULES + "relocation_steps.py",
        find="            and record.owner_generation == fence.owner_generation\n"
             "            and record.owner == fence.owner)",
        replace="            and record.owner == fence.owner)",
        guards=[_mem(_MOVE + "test_accept_relay_ready_refuses_a_wrong_fence",
                     "owner_generation")],
    ),
    Mutation(
        name="store.move_fence_owner",
        family=_STEPS,
        rule="A relocation step with another owner's fence is refused (StaleFence).",
        path=_RULES + "relocation_steps.py",
        find="            and record.owner == fence.owner)",
        replace="            and True)",
        guards=[_mem(_MOVE + "test_accept_relay_ready_refuses_a_wrong_fence", "owner")],
    ),
    Mutation(
        name="store.begin_relocation_target_claim",
        family=_STEPS,
        rule="BeginRelocation needs the target's live claim of the named lifecycle "
             "(StaleFence / Unavailable).",
        path=_RULES + "relocation_steps.py",
        find="    claim = check_owner(state, record.mesh, target, now)",
        replace="    claim = state.claims[(record.mesh, target.node_rid)]",
        guards=[_mem(_MOVE + "test_begin_relocation_needs_both_live_claims")],
    ),
    Mutation(
        name="store.begin_relocation_source_lease",
        family=_STEPS,
        rule="BeginRelocation needs the source owner's live lease (Unavailable).",
        path=_RULES + "relocation_steps.py",
        find="    check_owner(state, record.mesh, record.owner, now)\n"
             "    claim = check_owner(state, record.mesh, target, now)",
        replace="    claim = check_owner(state, record.mesh, target, now)",
        guards=[_mem(_MOVE + "test_begin_relocation_needs_both_live_claims")],
    ),
    Mutation(
        name="store.begin_relocation_capacity",
        family=_STEPS,
        rule="BeginRelocation counts the target's active + pending units against its "
             "capacity (CapacityExceeded).",
        path=_RULES + "relocation_steps.py",
        find="    if load + len(members) >= claim.descriptor.capacity:",
        replace="    if load + len(members) > claim.descriptor.capacity:",
        guards=[_mem(_MOVE + "test_begin_relocation_refuses_a_full_target")],
    ),
    Mutation(
        name="store.begin_relocation_retry_fence",
        family=_STEPS,
        rule="A retried BeginRelocation with a fence that does not match is refused "
             "(StaleFence), not answered with the record.",
        path=_RULES + "relocation_steps.py",
        find="        _fenced(state, fence, AuthorityState.RELOCATING)\n        return record",
        replace="        return record",
        guards=[_mem(_MOVE + "test_a_retried_step_still_checks_the_fence", "owner_generation")],
    ),
    Mutation(
        name="store.seal_source_lease",
        family=_STEPS,
        rule="Seal needs the source owner's live lease (Unavailable).",
        path=_RULES + "relocation_steps.py",
        find="    check_owner(state, record.mesh, record.owner, now)\n    sealed = attrs.evolve(",
        replace="    sealed = attrs.evolve(",
        guards=[_mem(_MOVE + "test_seal_needs_the_source_lease")],
    ),
    Mutation(
        name="store.accept_relay_ready_target",
        family=_STEPS,
        rule="Only the target the move names accepts relay-ready (StaleFence).",
        path=_RULES + "relocation_steps.py",
        find="    if record.relocation_target != target:\n        raise StaleFence(\n"
             "            f\"{record.spot_id!r} is sealed for a move to",
        replace="    if False:\n        raise StaleFence(\n"
                "            f\"{record.spot_id!r} is sealed for a move to",
        guards=[_mem(_MOVE + "test_accept_relay_ready_refuses_another_target")],
    ),
    Mutation(
        name="store.accept_relay_ready_target_lease",
        family=_STEPS,
        rule="AcceptRelayReady needs the target's live lease (Unavailable).",
        path=_RULES + "relocation_steps.py",
        find="    check_owner(state, record.mesh, target, now)\n    relay = attrs.evolve(",
        replace="    relay = attrs.evolve(",
        guards=[_mem(_MOVE + "test_accept_relay_ready_refuses_an_expired_target_lease")],
    ),
    Mutation(
        name="store.accept_relay_ready_retry_fence",
        family=_STEPS,
        rule="A retried AcceptRelayReady with a fence that does not match is refused "
             "(StaleFence), not answered with the record.",
        path=_RULES + "relocation_steps.py",
        find="            and record.relocation_target == target and _matches(record, fence)\n"
             "            and not is_carried(record)):",
        replace="            and record.relocation_target == target\n"
                "            and not is_carried(record)):",
        guards=[_mem(_MOVE + "test_a_retried_step_still_checks_the_fence", "owner_generation")],
    ),
    Mutation(
        name="store.commit_relocation_target_lease",
        family=_STEPS,
        rule="CommitRelocation needs the target's live lease (Unavailable).",
        path=_RULES + "relocation_steps.py",
        find="    check_owner(state, record.mesh, target, now)\n    moved = attrs.evolve(",
        replace="    moved = attrs.evolve(",
        guards=[_mem(_MOVE + "test_commit_needs_the_target_lease")],
    ),
    Mutation(
        name="store.abort_past_relay_ready",
        family=_STEPS,
        rule="AbortRelocation of a RelayReady record is refused with InvalidOperation naming "
             "commit_relocation: the source is never restored.",
        path=_RULES + "relocation_steps.py",
        find="    if record is not None and record.state is AuthorityState.RELAY_READY and "
             "_matches(",
        replace="    if False and record.state is AuthorityState.RELAY_READY and _matches(",
        guards=[_mem(_MOVE + "test_abort_after_relay_ready_is_refused")],
    ),
    Mutation(
        name="store.relocation_payload_sealed_only",
        family=_STEPS,
        rule="RecordRelocationPayload names a payload only on the Sealed record of the "
             "fence (StaleFence otherwise).",
        path=_RULES + "relocation_steps.py",
        find="    record = _fenced(state, fence, AuthorityState.SEALED)\n"
             "    if record.relocation_payload == payload:",
        replace="    record = _fenced(state, fence, *AuthorityState)\n"
                "    if record.relocation_payload == payload:",
        guards=[_mem(_PAYLOAD + "test_only_a_sealed_record_takes_a_payload", "relay_ready")],
    ),
    Mutation(
        name="store.relocation_payload_source_lease",
        family=_STEPS,
        rule="RecordRelocationPayload needs the source owner's live lease (Unavailable).",
        path=_RULES + "relocation_steps.py",
        find="    check_owner(state, record.mesh, record.owner, now)\n    named = attrs.evolve(",
        replace="    named = attrs.evolve(",
        guards=[_mem(_PAYLOAD + "test_record_relocation_payload_refusals_write_nothing")],
    ),
    # -- authority.py -----------------------------------------------------------------------
    Mutation(
        name="store.chart_step_undefined",
        family=_CHARTS,
        rule="A transition the SpotAuthority chart does not define is refused "
             "(InvalidOperation) and writes nothing.",
        path=_RULES + "authority.py",
        find="    target = _STEPS[state].get(event)",
        replace="    target = _STEPS[state].get(event, state)",
        guards=["tests/store/" + _CHART + "test_the_rules_step_is_the_compiled_chart"],
    ),
    Mutation(
        name="store.chart_step_to_missing",
        family=_CHARTS,
        rule="An event that deletes the record must take it to missing in the chart; a step "
             "to a stored state deletes nothing (InvalidOperation).",
        path=_RULES + "authority.py",
        find="    if target is not AuthorityState.MISSING:",
        replace="    if False:",
        guards=["tests/store/" + _CHART + "test_the_rules_step_to_missing_ends_only_the_record"],
    ),
    # -- operator.py: ReleaseExpired (zlink-trio release --generation --owner-generation) --
    Mutation(
        name="store.release_expired_object_generation",
        family=_TXN,
        rule="ReleaseExpired with another ObjectGeneration is refused (StaleFence).",
        path=_RULES + "operator.py",
        find="    if record.object_generation != object_generation:\n        return StaleFence(",
        replace="    if False:\n        return StaleFence(",
        guards=[_mem(_RELEASE + "test_refuses_stale_generations_and_writes_nothing")],
    ),
    Mutation(
        name="store.release_expired_owner_generation",
        family=_TXN,
        rule="ReleaseExpired with another owner generation is refused (StaleFence).",
        path=_RULES + "operator.py",
        find="    if record.owner_generation != owner_generation:\n        return StaleFence(",
        replace="    if False:\n        return StaleFence(",
        guards=[_mem(_RELEASE + "test_refuses_stale_owner_generation_after_a_move")],
    ),
    Mutation(
        name="store.release_expired_owner_alive",
        family=_TXN,
        rule="ReleaseExpired of a record whose owner's lease is live is refused "
             "(OwnerAlive).",
        path=_RULES + "operator.py",
        find="            and claim.is_live(now)):",
        replace="            and False):",
        guards=[_mem(_RELEASE + "test_refuses_a_live_lease_and_writes_nothing")],
    ),
    # -- recovery.py: AdoptOrphan and the dead lifecycles -----------------------------------
    Mutation(
        name="store.adopt_orphan_fence",
        family=_TXN,
        rule="AdoptOrphan needs the old owner and owner generation the record has "
             "(StaleFence).",
        path=_RULES + "recovery.py",
        find="    if record.owner != old_owner or record.owner_generation != owner_generation:",
        replace="    if False:",
        guards=[_mem(_ADOPT + "test_adopt_refusals_write_nothing")],
    ),
    Mutation(
        name="store.adopt_orphan_same_node_id",
        family=_TXN,
        rule="Only the same NodeId adopts an orphan: no takeover by another node "
             "(InvalidOperation).",
        path=_RULES + "recovery.py",
        find="    if new_claim.descriptor.node_id != old_claim.descriptor.node_id:",
        replace="    if False:",
        guards=[_mem(_ADOPT + "test_adopt_refusals_write_nothing")],
    ),
    Mutation(
        name="store.dead_owned_expired_only",
        family=_TXN,
        rule="Orphans and DeadOwned list only records of expired lifecycles: a live "
             "owner's records are never released as dead.",
        path=_RULES + "recovery.py",
        find="            if claim.descriptor.node_id == node_id and not claim.is_live(now)}",
        replace="            if claim.descriptor.node_id == node_id}",
        guards=[_mem(_DEAD + "test_dead_owned_lists_every_state_of_expired_lifecycles_only")],
    ),
    Mutation(
        name="store.remove_dead_claims_empty_only",
        family=_TXN,
        rule="RemoveDeadClaims deletes only expired claims that hold no capacity unit (a "
             "claim that owns records stays, as their proof).",
        path=_RULES + "recovery.py",
        find="        if not state.pending.get(key, 0) and not state.active.get(key, 0):",
        replace="        if True:",
        guards=[_mem(_DEAD + "test_remove_dead_claims_deletes_only_empty_expired_claims")],
    ),
    # -- relocation_store.py: roots and inboxes ---------------------------------------------
    Mutation(
        name="store.inbox_cursor_forward_only",
        family=_TXN,
        rule="An inbox cursor never moves back (InvalidOperation).",
        path=_RULES + "relocation_store.py",
        find="    if seq < cursor:",
        replace="    if False:",
        guards=[_mem(_INBOX + "test_inbox_cursor_is_monotonic")],
    ),
    Mutation(
        name="store.inbox_sequence_never_reused",
        family=_TXN,
        rule="An inbox append takes the next sequence after the last one ever issued, "
             "never a handled one.",
        path=_RULES + "relocation_store.py",
        find="    seq = (0 if inbox is None else inbox.last_seq) + 1",
        replace="    seq = (0 if inbox is None else len(inbox.records or ())) + 1",
        guards=[_mem(_INBOX + "test_inbox_cursor_is_monotonic")],
    ),
    Mutation(
        name="store.root_integrity",
        family=_TXN,
        rule="A root is returned only when its bytes' SHA-256 is the receipt's "
             "(RootIntegrityError).",
        path=_RULES + "relocation_store.py",
        find="    if len(raw) != receipt.size or hashlib.sha256(raw).hexdigest() != "
             "receipt.sha256:",
        replace="    if len(raw) != receipt.size:",
        guards=[_mem(_INBOX + "test_get_root_verifies_receipt")],
    ),
    Mutation(
        name="store.root_delete_verified",
        family=_TXN,
        rule="DeleteRoot deletes only the bytes the receipt names (RootIntegrityError "
             "otherwise).",
        path=_RULES + "relocation_store.py",
        find="    if verified_root(state, receipt) is None:\n        return False",
        replace="    if state.roots.get(receipt.ref) is None:\n        return False",
        guards=[_mem(_INBOX + "test_delete_root_is_idempotent_and_verified")],
    ),
    # -- combined.py: the merged transactions' checks, in the documented order --------------
    Mutation(
        name="store.combined_reserve_root_after_checks",
        family=_TXN,
        rule="ReserveWithRoot stores the root only when Reserve accepted: a refusal leaves "
             "no root.",
        path=_RULES + "combined.py",
        find="    fence = loc.txn_reserve(lstate, spot_id,",
        replace="    rel.store_root(rstate, raw, receipt)\n"
                "    fence = loc.txn_reserve(lstate, spot_id,",
        guards=[_mem(_COMBINED + "test_refused_reserve_with_root_writes_nothing", "built-in")],
    ),
    Mutation(
        name="store.combined_commit_retry_appends_nothing",
        family=_TXN,
        rule="A retried CommitReadyWithFirstRecord of a commit that happened appends no "
             "second record.",
        path=_RULES + "combined.py",
        find="    if ready is before:",
        replace="    if False:",
        guards=[_mem(_COMBINED + "test_commit_ready_with_first_record_retry_appends_nothing")],
    ),
    Mutation(
        name="store.combined_finish_root_first",
        family=_TXN,
        rule="FinishFirstRecord checks the root's integrity before the cursor and the "
             "record (the documented order).",
        path=_RULES + "combined.py",
        find="    delete = rel.verified_root(rstate, root) is not None"
             "  # RootIntegrityError first\n"
             "    key = (spot_id, object_generation)\n"
             "    inbox = rstate.inboxes.get(key)\n"
             "    last, cursor = (0, 0) if inbox is None else (inbox.last_seq, inbox.cursor)\n"
             "    rel.check_cursor_move(spot_id, object_generation, seq, last, cursor)\n"
             "    record = lstate.records.get(spot_id)\n"
             "    remove = loc.pointer_removal(record, object_generation, expected_version)\n",
        replace="    key = (spot_id, object_generation)\n"
                "    inbox = rstate.inboxes.get(key)\n"
                "    last, cursor = (0, 0) if inbox is None else (inbox.last_seq, inbox.cursor)\n"
                "    rel.check_cursor_move(spot_id, object_generation, seq, last, cursor)\n"
                "    record = lstate.records.get(spot_id)\n"
                "    remove = loc.pointer_removal(record, object_generation, expected_version)\n"
                "    delete = rel.verified_root(rstate, root) is not None\n",
        guards=[_mem(_COMBINED + "test_finish_first_record_checks_the_root_before_the_record")],
    ),
    Mutation(
        name="store.combined_finish_pointer_cas",
        family=_TXN,
        rule="FinishFirstRecord removes the recovery pointer only at the expected "
             "StoreVersion (StaleFence, nothing written).",
        path=_RULES + "combined.py",
        find="    remove = loc.pointer_removal(record, object_generation, expected_version)",
        replace="    remove = record is not None and record.recovery_pointer is not None",
        guards=[_mem(_COMBINED + "test_refused_finish_first_record_writes_nothing")],
    ),
    # -- SQLite's own SQL (the checks that do not go through store/rules) -------------------
    Mutation(
        name="store.sqlite.node_id_live_claims",
        family=_TXN,
        rule="SQLite's NewClaim reads every live claim of the NodeId for the NodeIdInUse "
             "check.",
        path="zlink_trio/store/sqlite/location.py",
        find='rows = conn.execute("SELECT body FROM loc_claims WHERE lease_expires_at > ?",',
        replace='rows = conn.execute("SELECT body FROM loc_claims WHERE lease_expires_at < ?",',
        guards=[_sqlite(_DEAD + "test_new_claim_refuses_a_node_id_held_live_by_another_process")],
    ),
    Mutation(
        name="store.sqlite.cursor_trims_handled",
        family=_TXN,
        rule="SQLite's cursor move deletes every record at or below the cursor: a reader "
             "never sees a handled record.",
        path="zlink_trio/store/sqlite/relocation.py",
        find='conn.execute(f"DELETE FROM rel_inbox_records WHERE {_KEY} AND seq <= ?", '
             "(*key, seq))",
        replace='conn.execute(f"DELETE FROM rel_inbox_records WHERE {_KEY} AND seq < ?", '
                "(*key, seq))",
        guards=[_sqlite(_INBOX + "test_inbox_cursor_is_monotonic")],
    ),
    # -- the Redis Lua (the backend that re-implements the rules) ---------------------------
    Mutation(
        name="store.lua.owner_lifecycle_fence",
        family=_TXN,
        rule="Lua: an owner fence whose lifecycle is not the claim's current one changes no "
             "authority (StaleFence).",
        path=_LUA + "prelude.py",
        find="  if c == nil or c.lc ~= lc then return nil, {'STALE_OWNER', rid, lc, mesh} end",
        replace="  if c == nil then return nil, {'STALE_OWNER', rid, lc, mesh} end",
        guards=[_redis(_LOC + "test_reserve_refuses_expired_or_stale_owner")],
    ),
    Mutation(
        name="store.lua.owner_lease",
        family=_TXN,
        rule="Lua: an owner whose lease expired changes no authority (Unavailable).",
        path=_LUA + "prelude.py",
        find="  if not (tonumber(now) < tonumber(c.exp)) then return nil, "
             "{'EXPIRED', rid, lc, c.exp} end",
        replace="",
        guards=[_redis(_LOC + "test_reserve_refuses_expired_or_stale_owner")],
    ),
    Mutation(
        name="store.lua.reserve_authority_exists",
        family=_TXN,
        rule="Lua: Reserve of an ID that has an authority record is refused "
             "(AuthorityExists).",
        path=_LUA + "prelude.py",
        find="  if #cur > 0 then return {'EXISTS', cur} end",
        replace="",
        guards=[_redis(_LOC + "test_reserve_existing_authority_raises_with_current_record")],
    ),
    Mutation(
        name="store.lua.commit_ready_fence",
        family=_TXN,
        rule="Lua: CommitReady needs the reservation's owner and generations "
             "(StaleFence).",
        path=_LUA + "prelude.py",
        find="  if fenced(r, ARGV[3], ARGV[4], ARGV[5], ARGV[6]) then\n"
             "    if r.state == ST_READY",
        replace="  if r ~= nil and r.gen == ARGV[3] then\n    if r.state == ST_READY",
        guards=[_redis(_LOC + "test_commit_ready_refuses_stale_fence_and_writes_nothing")],
    ),
    Mutation(
        name="store.lua.commit_ready_store_version",
        family=_TXN,
        rule="Lua: CommitReady needs the reservation's StoreVersion (StaleFence).",
        path=_LUA + "prelude.py",
        find="    if r.state == ST_CREATING and r.ver == ARGV[7] then",
        replace="    if r.state == ST_CREATING then",
        guards=[_redis(_LOC + "test_commit_ready_refuses_stale_fence_and_writes_nothing")],
    ),
    Mutation(
        name="store.lua.commit_ready_retry_is_this_commit",
        family=_TXN,
        rule="Lua: a retried CommitReady returns the record only while it is that commit's "
             "result; after a later change it is StaleFence.",
        path=_LUA + "prelude.py",
        find="    if r.state == ST_READY and r.ver == ARGV[8] then return nil, false end",
        replace="    if r.state == ST_READY then return nil, false end",
        guards=[_redis(_LOC + "test_commit_ready_retry_after_a_later_change_is_stale")],
    ),
    Mutation(
        name="store.lua.commit_ready_owner_live",
        family=_TXN,
        rule="Lua: CommitReady needs the owner's live claim (Unavailable / StaleFence).",
        path=_LUA + "prelude.py",
        find="      local _, err = owner_claim(r.mesh, r.orid, r.olc, ARGV[9])\n"
             "      if err then return err end\n",
        replace="",
        guards=[_redis(_LOC + "test_commit_ready_refuses_expired_or_replaced_owner")],
    ),
    Mutation(
        name="store.lua.abort_creating_fence",
        family=_TXN,
        rule="Lua: AbortCreating with a fence of another owner or owner generation is "
             "refused (StaleFence).",
        path=_LUA + "location.py",
        find="if r.state ~= ST_CREATING or not fenced(r, ARGV[3], ARGV[4], ARGV[5], ARGV[6])\n",
        replace="if r.state ~= ST_CREATING\n",
        guards=[_redis(_LOC + "test_abort_creating_with_fence")],
    ),
    Mutation(
        name="store.lua.move_fence_owner_generation",
        family=_STEPS,
        rule="Lua: a fenced step (relocation, abort, release) with another owner "
             "generation's fence is refused (StaleFence).",
        path=_LUA + "prelude.py",
        find="  return r ~= nil and r.gen == gen and r.ogen == ogen and r.orid == rid",
        replace="  return r ~= nil and r.gen == gen and r.orid == rid",
        guards=[_redis(_MOVE + "test_accept_relay_ready_refuses_a_wrong_fence",
                       "owner_generation")],
    ),
    Mutation(
        name="store.lua.begin_close_fence",
        family=_TXN,
        rule="Lua: BeginClose by another owner or expected owner generation is refused "
             "(StaleFence).",
        path=_LUA + "location.py",
        find="local is_stale = r.orid ~= ARGV[4] or r.olc ~= ARGV[5] or "
             "(ARGV[7] ~= '' and ARGV[7] ~= r.ogen)",
        replace="local is_stale = false",
        guards=[_redis(_CLOSE + "test_begin_close_refuses_stale_fences")],
    ),
    Mutation(
        name="store.lua.begin_close_store_version",
        family=_TXN,
        rule="Lua: BeginClose with an expected StoreVersion that is not the record's is "
             "refused (StaleFence).",
        path=_LUA + "location.py",
        find="if is_stale or (ARGV[8] ~= '' and ARGV[8] ~= r.ver) then return stale(KEYS[1]) end",
        replace="if is_stale then return stale(KEYS[1]) end",
        guards=[_redis(_CLOSE + "test_begin_close_refuses_stale_fences")],
    ),
    Mutation(
        name="store.lua.begin_close_owner_lease",
        family=_TXN,
        rule="Lua: BeginClose needs the owner's live lease (Unavailable).",
        path=_LUA + "location.py",
        find="local _, err = owner_claim(r.mesh, ARGV[4], ARGV[5], ARGV[6])\n"
             "if err then return err end\n",
        replace="",
        guards=[_redis(_CLOSE + "test_begin_close_refuses_stale_fences")],
    ),
    Mutation(
        name="store.lua.release_fence",
        family=_TXN,
        rule="Lua: only the Closing owner, at its owner generation, releases a record "
             "(StaleFence).",
        path=_LUA + "location.py",
        find="if r.state ~= ST_CLOSING or not fenced(r, ARGV[3], ARGV[4], ARGV[5], ARGV[6]) "
             "then",
        replace="if r.state ~= ST_CLOSING then",
        guards=[_redis(_CLOSE + "test_release_refuses_a_fence_that_does_not_hold_closing")],
    ),
    Mutation(
        name="store.lua.recovery_pointer_cas",
        family=_TXN,
        rule="Lua: RemoveRecoveryPointer is a compare-and-set on the StoreVersion "
             "(StaleFence).",
        path=_LUA + "prelude.py",
        find="  if r.ver ~= ver then return stale(sk) end",
        replace="",
        guards=[_redis(_CLOSE + "test_remove_recovery_pointer_is_an_expected_version_cas")],
    ),
    Mutation(
        name="store.lua.accept_relay_ready_target",
        family=_STEPS,
        rule="Lua: only the target the move names accepts relay-ready (StaleFence).",
        path=_LUA + "location.py",
        find="local toward = fence_ok and r.trid == trid and r.tlc == tlc",
        replace="local toward = fence_ok",
        guards=[_redis(_MOVE + "test_accept_relay_ready_refuses_another_target")],
    ),
    Mutation(
        name="store.lua.accept_relay_ready_target_lease",
        family=_STEPS,
        rule="Lua: AcceptRelayReady needs the target's live lease (Unavailable).",
        path=_LUA + "location.py",
        find="local _, err = owner_claim(r.mesh, trid, tlc, ARGV[9])\nif err then return err end\n",
        replace="",
        guards=[_redis(_MOVE + "test_accept_relay_ready_refuses_an_expired_target_lease")],
    ),
    Mutation(
        name="store.lua.commit_relocation_target_lease",
        family=_STEPS,
        rule="Lua: CommitRelocation needs the target's live lease (Unavailable).",
        path=_LUA + "location.py",
        find="local _, err = owner_claim(r.mesh, r.trid, r.tlc, ARGV[7])\n"
             "if err then return err end\n",
        replace="",
        guards=[_redis(_MOVE + "test_commit_needs_the_target_lease")],
    ),
    Mutation(
        name="store.lua.abort_past_relay_ready",
        family=_STEPS,
        rule="Lua: AbortRelocation of a RelayReady record is refused naming "
             "commit_relocation: the source is never restored.",
        path=_LUA + "location.py",
        find="if r.state == ST_RELAY_READY then\n  return {'PAST_RELAY_READY'",
        replace="if false then\n  return {'PAST_RELAY_READY'",
        guards=[_redis(_MOVE + "test_abort_after_relay_ready_is_refused")],
    ),
    Mutation(
        name="store.lua.release_relay_ready_fence",
        family=_STEPS,
        rule="Lua: ReleaseRelayReady with a fence of another owner generation is refused "
             "(StaleFence).",
        path=_LUA + "location.py",
        find="if not fenced(r, ARGV[3], ARGV[4], ARGV[5], ARGV[6]) or r.state ~= ST_RELAY_READY "
             "then\n",
        replace="if r.state ~= ST_RELAY_READY then\n",
        guards=[_redis(_PAYLOAD + "test_release_relay_ready_refusals_write_nothing")],
    ),
    Mutation(
        name="store.lua.begin_relocation_target_claim",
        family=_STEPS,
        rule="Lua: BeginRelocation needs the target's live claim of the named lifecycle "
             "(StaleFence / Unavailable).",
        path=_LUA + "location.py",
        find="local tc, terr = owner_claim(r.mesh, trid, tlc, now)\nif terr then return terr end",
        replace="local tc = rec(claim_key(r.mesh, trid))",
        guards=[_redis(_MOVE + "test_begin_relocation_needs_both_live_claims")],
    ),
    Mutation(
        name="store.lua.seal_source_lease",
        family=_STEPS,
        rule="Lua: Seal needs the source owner's live lease (Unavailable).",
        path=_LUA + "location.py",
        find="local _, err = owner_claim(r.mesh, r.orid, r.olc, ARGV[7])\nif err then return "
             "err end\nif r.ver == MAXGEN then return {'SPENT'} end\n"
             "local group = carried(r)",
        replace="if r.ver == MAXGEN then return {'SPENT'} end\n"
                "local group = carried(r)",
        guards=[_redis(_MOVE + "test_seal_needs_the_source_lease")],
    ),
    Mutation(
        name="store.lua.release_expired_owner_alive",
        family=_TXN,
        rule="Lua: ReleaseExpired of a record whose owner's lease is live is refused "
             "(OwnerAlive).",
        path=_LUA + "operator.py",
        find="if c ~= nil and c.lc == r.olc and tonumber(ARGV[5]) < tonumber(c.exp) then",
        replace="if false then",
        guards=[_redis(_RELEASE + "test_refuses_a_live_lease_and_writes_nothing")],
    ),
    Mutation(
        name="store.lua.release_expired_owner_generation",
        family=_TXN,
        rule="Lua: ReleaseExpired with another owner generation is refused (StaleFence).",
        path=_LUA + "operator.py",
        find="if r.gen ~= ARGV[3] or r.ogen ~= ARGV[4] or",
        replace="if r.gen ~= ARGV[3] or",
        guards=[_redis(_RELEASE + "test_refuses_stale_generations_and_writes_nothing")],
    ),
    Mutation(
        name="store.lua.inbox_cursor_forward_only",
        family=_TXN,
        rule="Lua: an inbox cursor never moves back (InvalidOperation).",
        path=_LUA + "prelude.py",
        find="  if n < cursor then return {'BACK', tostring(m[2] or '0')} end",
        replace="",
        guards=[_redis(_INBOX + "test_inbox_cursor_is_monotonic")],
    ),
    Mutation(
        name="store.lua.node_id_in_use",
        family=_TXN,
        rule="Lua: a NodeId with a live claim of another NodeRid cannot be claimed again "
             "(NodeIdInUse).",
        path=_LUA + "location.py",
        find="  if v[1] == node_id and v[3] ~= rid and tonumber(now) < tonumber(v[2]) then",
        replace="  if false then",
        guards=[_redis(_DEAD + "test_new_claim_refuses_a_node_id_held_live_by_another_process")],
    ),
    Mutation(
        name="store.postgres_writes_serialised",
        family=_TXN,
        rule="PostgreSQL: every write transaction holds the prefix's advisory lock, so two "
             "processes' transactions never interleave (no lost update: one Reserve wins).",
        path="zlink_trio/store/postgres/connection.py",
        find="session.execute(_LOCK, (self.options.lock_key,))",
        replace='session.execute("SELECT ?", (self.options.lock_key,))',
        guards=["tests/store/test_postgres_backend.py::"
                "test_two_processes_reserving_the_same_ids_at_once_never_both_win",
                "tests/store/test_postgres_backend.py::"
                "test_two_processes_reserving_at_once_never_issue_one_generation_twice"],
    ),
    Mutation(
        name="store.rowcache_sees_other_writers",
        family=_TXN,
        rule="SQL stores: a write transaction that finds another writer committed since "
             "this connection's last commit empties its row cache (a row another store "
             "wrote is never served from it).",
        path="zlink_trio/store/sqlite/rowcache.py",
        find="        if version != self.version:\n            self.clear()",
        replace="        if False:\n            self.clear()",
        guards=["tests/store/test_sqlite_fast_paths.py::"
                "test_another_connections_write_is_never_served_from_the_cache",
                "tests/store/test_postgres_backend.py::"
                "test_another_stores_write_is_never_served_from_the_cache"],
    ),
    Mutation(
        name="store.postgres_hand_writes_counted",
        family=_TXN,
        rule="PostgreSQL: a write by a session that is not a store's (an edit by hand) adds "
             "to the write counter, so no store serves the row it changed from its cache.",
        path="zlink_trio/store/postgres/schema.py",
        find="""UPDATE "{schema}".zlink_meta SET value = value + 1 WHERE key = 'writes';""",
        replace="""PERFORM 1;""",
        guards=["tests/store/test_postgres_backend.py::"
                "test_a_write_by_hand_is_never_served_from_the_cache"],
    ),
    Mutation(
        name="store.postgres_failed_group_runs_alone",
        family=_TXN,
        rule="PostgreSQL: a body of a pipelined group that fails after writing runs again "
             "in a transaction of its own: only it fails, and nothing of it is written.",
        path="zlink_trio/store/postgres/connection.py",
        find="                        raise _RunAlone from error",
        replace="                        raise",
        guards=["tests/store/test_postgres_backend.py::"
                "test_a_body_that_raises_after_writing_fails_alone_with_nothing_written"],
    ),
    Mutation(
        name="store.postgres_known_rows_checked",
        family=_TXN,
        rule="PostgreSQL: a pipelined update of a row the transaction knew that changed none "
             "fails the pipeline before the COMMIT, and the row is written whole.",
        path="zlink_trio/store/postgres/session.py",
        find="self._pipeline.send(one_row_or_fail(sql), parameters)",
        replace="self._pipeline.send(sql, parameters)",
        guards=["tests/store/test_postgres_backend.py::"
                "test_an_update_of_a_known_row_that_finds_none_is_answered_truly"],
    ),
    Mutation(
        name="store.postgres_inline_body_never_waits",
        family=_TXN,
        rule="PostgreSQL: a body of a group run in the Trio loop that asks for a row not "
             "prefetched sends the group, rolled back, to a worker thread: its outcome is "
             "the one it would have had, not an error.",
        path="zlink_trio/store/postgres/connection.py",
        find="                    if isinstance(error, WouldWait):\n                        raise",
        replace="                    if False:\n                        raise",
        guards=["tests/store/test_postgres_backend.py::"
                "test_a_body_of_an_inline_group_that_reads_a_row_not_named_runs_in_a_thread"],
    ),
    Mutation(
        name="store.postgres_inline_failure_rolled_back",
        family=_TXN,
        rule="PostgreSQL: a group that failed in the Trio loop is rolled back before anything "
             "else runs on its connection (nothing of it is written, nothing twice).",
        path="zlink_trio/store/postgres/session.py",
        find='self._pg.send_query_params(b"ROLLBACK", None)',
        replace='self._pg.send_query_params(b"SELECT 1", None)',
        guards=["tests/store/test_postgres_backend.py::"
                "test_a_body_of_an_inline_group_that_reads_a_row_not_named_runs_in_a_thread",
                "tests/store/test_postgres_backend.py::"
                "test_a_statement_the_server_refuses_fails_its_body_alone"],
    ),
    Mutation(
        name="store.postgres_chained_group_requeued",
        family=_TXN,
        rule="PostgreSQL: a group chained to the COMMIT of a group that failed never "
             "started (the server skipped it): it runs afterwards, nothing of it lost.",
        path="zlink_trio/store/postgres/connection.py",
        find="                            self._queue[:0] = chained.batch",
        replace="                            self._finished(chained.batch)",
        guards=["tests/store/test_postgres_backend.py::"
                "test_a_group_chained_to_a_group_that_failed_runs_after_it"],
    ),
    Mutation(
        name="store.postgres_refused_opening_fails_its_group",
        family=_TXN,
        rule="PostgreSQL: a group whose opening psycopg refused to send fails in its turn, "
             "rolled back, its writes run again alone -- never raising while the group "
             "before it awaits its COMMIT's answer (no caller left waiting, no commit "
             "reported as failed).",
        path="zlink_trio/store/postgres/connection.py",
        find="            running.broken = error",
        replace="            raise",
        guards=["tests/store/test_postgres_backend.py::"
                "test_a_write_whose_hint_psycopg_refuses_fails_alone"],
        timeout=15.0,  # deleted, the group's callers wait for good (passes in < 1 s)
    ),
    Mutation(
        name="store.postgres_lost_commit_may_have_run",
        family=_TXN,
        rule="PostgreSQL: a write whose connection failed with its COMMIT on its way (or its "
             "answer unread) is reported as may have been written, never as nothing "
             "written.",
        path="zlink_trio/store/postgres/connection.py",
        find="                raise _CommitUnanswered from error\n",
        replace="                raise\n",
        guards=["tests/store/test_postgres_backend.py::"
                "test_a_commit_whose_answer_is_lost_may_have_been_written[inline]"],
    ),
    Mutation(
        name="store.cluster_recent_claims_read_again",
        family=_TXN,
        rule="Redis Cluster: a script run on claims read recently that is refused for a "
             "reason the claims decide runs again on claims read then (a recent read never "
             "refuses what a fresh one accepts).",
        path="zlink_trio/store/redis_cluster/runner.py",
        find="            if recent and code in _FACT_REFUSALS:\n",
        replace="            if False:\n",
        guards=["tests/store/test_redis_cluster.py::"
                "test_a_claim_newer_than_the_claims_read_recently_is_read_again"],
    ),
    Mutation(
        name="store.cluster_calls_carry_their_deadline",
        family=_TXN,
        rule="Redis Cluster: every command of a Spot transaction carries the caller's "
             "deadline and the store timeout to the pipeline, so a paused master is given "
             "up within the timeout.",
        path="zlink_trio/store/redis_cluster/runner.py",
        find="        limits = self._limits(what)\n        facts = _Facts()\n",
        replace="        limits = self._limits(what) and None\n        facts = _Facts()\n",
        guards=["tests/store/test_redis_cluster.py::"
                "test_a_paused_cluster_is_given_up_within_the_store_timeout"],
    ),
    Mutation(
        name="store.cluster_dead_claims_read_bucket_counts",
        family=_TXN,
        rule="Redis Cluster: RemoveDeadClaims removes a dead lifecycle that owns nothing in "
             "any bucket, though the nodes slot still counts units its process took ahead.",
        path="zlink_trio/store/redis_cluster/location.py",
        find='"1" if counted else "0"',
        replace='"0"',
        guards=["tests/store/test_redis_cluster.py::"
                "test_units_a_dead_process_held_ahead_keep_no_dead_claim"],
    ),
    Mutation(
        name="store.cluster_dead_claim_owning_a_record_is_kept",
        family=_TXN,
        rule="Redis Cluster: RemoveDeadClaims keeps a dead lifecycle whose units some bucket"
             " still counts.",
        path="zlink_trio/store/redis_cluster/location.py",
        find='if units <= 0]',
        replace='if True]',
        guards=["tests/store/test_redis_cluster.py::"
                "test_units_a_dead_process_held_ahead_keep_no_dead_claim"],
    ),
    Mutation(
        name="store.cluster_buckets_count_units",
        family=_TXN,
        rule="Redis Cluster: a bucket script counts each lifecycle's units beside the "
             "records that hold them.",
        path="zlink_trio/store/redis_cluster/lua.py",
        find="    OWNED[f] = (OWNED[f] or 0) + delta",
        replace="    OWNED[f] = 0",
        guards=["tests/store/test_redis_cluster.py::"
                "test_units_a_dead_process_held_ahead_keep_no_dead_claim"],
    ),
    Mutation(
        name="store.cluster_dead_lifecycle_owns_nothing_new",
        family=_TXN,
        rule="Redis Cluster: a lifecycle RemoveDeadClaims marked dead in a bucket is refused"
             " there, even by a script on claims read before.",
        path="zlink_trio/store/redis_cluster/lua.py",
        find="  local w = redis.call('HGET', META .. 'dead', node .. '|' .. mesh)",
        replace='  local w = nil',
        guards=["tests/store/test_redis_cluster.py::"
                "test_a_lifecycle_removed_as_dead_owns_nothing_new_even_on_claims_read_before"],
    ),
    Mutation(
        name="store.cluster_unused_unit_back_in_hand",
        family=_TXN,
        rule="Redis Cluster: a unit from the hand that a refused Reserve did not use goes "
             "back in the hand (the nodes slot never counts it twice).",
        path="zlink_trio/store/redis_cluster/runner.py",
        find="            self._hand[own] = self._hand.get(own, 0) + 1  # not used: back",
        replace="            pass  # not used: back",
        guards=["tests/store/test_redis_cluster.py::"
                "test_units_taken_ahead_count_against_capacity_and_go_back_at_close"],
    ),
    Mutation(
        name="store.cluster_units_ahead_only_far_from_capacity",
        family=_TXN,
        rule="Redis Cluster: units are taken ahead only while twice as many are free; near "
             "capacity one at a time.",
        path="zlink_trio/store/redis_cluster/lua.py",
        find="  if ahead > 0 and free - took >= 2 * ahead then took = took + ahead end",
        replace="  if ahead > 0 and free - took >= ahead then took = took + ahead end",
        guards=["tests/store/test_redis_cluster.py::"
                "test_units_taken_ahead_count_against_capacity_and_go_back_at_close"],
    ),
    Mutation(
        name="store.cluster_uncounted_deployment_keeps_the_old_rule",
        family=_TXN,
        rule="Redis Cluster: a deployment created before the buckets counted units takes "
             "none ahead and removes only dead claims with no unit.",
        path="zlink_trio/store/redis_cluster/store.py",
        find='    runner.counted = text(counted) == "1"',
        replace='    runner.counted = True',
        guards=["tests/store/test_redis_cluster.py::"
                "test_a_deployment_created_before_the_buckets_counted_units_keeps_the_old_rule"],
    ),
    Mutation(
        name="store.cluster_refill_takes_all_or_none",
        family=_TXN,
        rule="Redis Cluster: a take for more units beside a script takes all it asks for or "
             "none, so near capacity the hand drains.",
        path="zlink_trio/store/redis_cluster/lua.py",
        find="tonumber(c.cap) - load, tonumber(ARGV[3]), tonumber(ARGV[4])",
        replace="tonumber(c.cap) - load, tonumber(ARGV[3]), 1",
        guards=["tests/store/test_redis_cluster.py::"
                "test_near_capacity_the_hand_drains_and_units_go_one_at_a_time"],
    ),
    Mutation(
        name="store.cluster_units_ahead_only_for_own_lifecycles",
        family=_TXN,
        rule="Redis Cluster: units are taken ahead only for lifecycles claimed through the "
             "store, never for another node's (a remote create).",
        path="zlink_trio/store/redis_cluster/runner.py",
        find="                if not self.counted or take not in self._owned:  # one unit",
        replace="                if not self.counted:  # one unit",
        guards=["tests/store/test_redis_cluster.py::"
                "test_units_are_taken_ahead_only_for_the_stores_own_lifecycles"],
    ),
    Mutation(
        name="store.cluster_removed_claim_gives_back_its_units",
        family=_TXN,
        rule="Redis Cluster: removing its own claim gives back the units the store held "
             "ahead for it.",
        path="zlink_trio/store/redis_cluster/location.py",
        find="        await self._run.disown(mesh, node_rid, lifecycle_generation)",
        replace="        pass  # disown",
        guards=["tests/store/test_redis_cluster.py::"
                "test_removing_its_own_claim_gives_back_the_units_in_hand"],
    ),
    Mutation(
        name="store.cluster_dead_marks_per_mesh",
        family=_TXN,
        rule="Redis Cluster: RemoveDeadClaims marks lifecycles dead per NodeId and Mesh, so "
             "a live claim of the same NodeRid in another Mesh keeps serving.",
        path="zlink_trio/store/redis_cluster/lua.py",
        find="redis.call('HSET', KEYS[1], node .. '|' .. ARGV[i], ARGV[i + 1])",
        replace="for _, m in ipairs({'world', 'other-mesh'}) do "
                "redis.call('HSET', KEYS[1], node .. '|' .. m, ARGV[i + 1]) end",
        guards=["tests/store/test_dead_lifecycle_conformance.py::"
                "test_remove_dead_claims_leaves_the_live_claim_of_the_same_node_rid_in_another_mesh"
                "[redis-cluster]"],
    ),
    Mutation(
        name="store.cluster_beside_failure_leaves_the_outcome",
        family=_TXN,
        rule="Redis Cluster: a take or read sent beside a script never raises: however it "
             "fails, the caller gets the script's own outcome.",
        path="zlink_trio/store/redis_cluster/runner.py",
        find="        except Exception:  # whatever failed, the script's outcome stands",
        replace="        except (StoreUnavailable, ReplyError):  # the script's outcome",
        guards=["tests/store/test_redis_cluster.py::"
                "test_a_take_beside_a_script_that_fails_leaves_the_scripts_outcome"],
    ),
    Mutation(
        name="store.cluster_waiting_shifts_written_at_close",
        family=_TXN,
        rule="Redis Cluster: the shifts within a lifecycle that wait in the store are "
             "written when the store closes.",
        path="zlink_trio/store/redis_cluster/store.py",
        find="            await runner.close()  # units in hand, shifts still waiting",
        replace="            pass  # units in hand, shifts still waiting",
        guards=["tests/store/test_redis_cluster.py::"
                "test_a_shift_within_a_lifecycle_is_written_by_the_close_of_the_store"],
    ),
    Mutation(
        name="store.redis_reserve_root_after_checks",
        family=_TXN,
        rule="Redis and Redis Cluster (where a cold activation's root is kept in its Spot's "
             "bucket): reserve_with_root's one script stores the root only after every "
             "Reserve check passed -- a refusal leaves no root.",
        path="zlink_trio/store/redis/lua/combined.py",
        find="local err, gen, exp = reserve_spot(3, 11, '')\nif err then return err end\n"
             "put_root(KEYS[2], ARGV[10])\n",
        replace="put_root(KEYS[2], ARGV[10])\nlocal err, gen, exp = reserve_spot(3, 11, '')\n"
                "if err then return err end\n",
        guards=["tests/store/test_combined_conformance.py::"
                "test_refused_reserve_with_root_writes_nothing[redis-cluster-built-in]",
                "tests/store/test_combined_conformance.py::"
                "test_refused_reserve_with_root_writes_nothing[redis-built-in]"],
    ),
    Mutation(
        name="store.separate_steps_keep_an_identical_root",
        family=_TXN,
        rule="Separate steps: a reserve_with_root refused because the record exists keeps "
             "the root that record names.",
        path="zlink_trio/store/separate.py",
        find="            if pointer is None or pointer.receipt() != receipt:\n",
        replace="            if True:\n",
        guards=["tests/store/test_combined_conformance.py::"
                "test_a_refused_reserve_with_root_keeps_an_identical_root_already_there"
                "[memory://-separate-steps]"],
    ),
    Mutation(
        name="store.relocation_store_apart",
        family="A Relocation Store apart (never the Location Store's keyspace)",
        rule="With relocation=URL the Relocation Store's roots and inboxes live only in "
             "that backend.",
        path="zlink_trio/store/open.py",
        find="yield SplitStore(located.location, relocated.relocation)",
        replace="yield SplitStore(located.location, located.relocation)",
        guards=["tests/store/test_split_store.py::"
                "test_each_half_keeps_its_data_in_its_own_backend"],
    ),
)
