"""Relocation steps of the Location Store as pure transactions.

Theory of operation
-------------------
A planned move takes a Ready record through Relocating (target chosen, one
pending capacity unit reserved on it; the source still serves) and Sealed
(the source stopped admission) to Ready at the target, with the owner
generation one higher; or back to Ready at the source on abort. The
procedure around these steps (payload capture, relay-ready, Message Follow)
belongs to the runtime; the store only keeps authority and capacity right.

Every step takes the :class:`AuthorityFence` the caller read: ObjectGeneration,
owner generation and owner must match the record, else :class:`StaleFence`.
Like ``location``, each function checks everything before its first
write.
"""

from __future__ import annotations

import attrs

from zlink_trio.core._checks import check_finite, check_generation
from zlink_trio.core.errors import CapacityExceeded, InvalidOperation, StaleFence
from zlink_trio.core.identity import SpotKind
from zlink_trio.core.records import AuthorityFence, AuthorityRecord, AuthorityState, OwnerFence
from zlink_trio.store.rules.location import LocationState, capacity_key, check_owner, shift

__all__ = (
    "txn_abort_relocation",
    "txn_begin_relocation",
    "txn_commit_relocation",
    "txn_seal_relocation",
)


def _fenced(state: LocationState, fence: AuthorityFence, *allowed: AuthorityState
            ) -> AuthorityRecord:
    record = state.records.get(fence.spot_id)
    if (record is None or record.object_generation != fence.object_generation
            or record.owner_generation != fence.owner_generation or record.owner != fence.owner
            or record.state not in allowed):
        found = "missing" if record is None else (
            f"{record.state.value}, generation {record.object_generation}, owner generation "
            f"{record.owner_generation}, owner {record.owner}")
        raise StaleFence(
            f"{fence.spot_id!r} is {found}; the relocation fence does not match (expected "
            f"{'/'.join(s.value for s in allowed)}); re-read the authority"
        )
    return record


def txn_begin_relocation(state: LocationState, fence: AuthorityFence, *, target: OwnerFence,
                         now: float) -> AuthorityRecord:
    """BeginRelocation; see ``LocationStore.begin_relocation``."""
    check_finite(now, "now")
    if not isinstance(target, OwnerFence):
        raise InvalidOperation(f"target must be an OwnerFence, got {type(target).__name__}")
    record = state.records.get(fence.spot_id)
    if (record is not None and record.state is AuthorityState.RELOCATING
            and record.relocation_target == target):
        _fenced(state, fence, AuthorityState.RELOCATING)
        return record  # idempotent retry
    record = _fenced(state, fence, AuthorityState.READY)
    if record.kind is SpotKind.ENTRY:
        raise InvalidOperation(f"{record.spot_id!r} is an Entry Spot; Entry Spots never move")
    if target.node_rid == record.owner.node_rid:
        raise InvalidOperation(f"{record.spot_id!r} already lives on node {target.node_rid}")
    check_owner(state, record.mesh, record.owner, now)
    claim = check_owner(state, record.mesh, target, now)
    if not claim.descriptor.serves(record.stable_type, record.kind):
        raise InvalidOperation(
            f"target {target.node_rid} does not serve {record.stable_type!r} as "
            f"{record.kind.name}; choose a node that serves it"
        )
    key = capacity_key(record.mesh, target)
    load = state.active.get(key, 0) + state.pending.get(key, 0)
    if load >= claim.descriptor.capacity:
        raise CapacityExceeded(f"target {target.node_rid} is at capacity ({load} of "
                               f"{claim.descriptor.capacity}); choose another target")
    moving = attrs.evolve(record, state=AuthorityState.RELOCATING, relocation_target=target,
                          store_version=record.store_version + 1)
    state.records[record.spot_id] = moving
    shift(state.pending, key, +1)
    return moving


def txn_seal_relocation(state: LocationState, fence: AuthorityFence, *,
                        now: float) -> AuthorityRecord:
    """Seal; see ``LocationStore.seal_relocation``."""
    check_finite(now, "now")
    record = _fenced(state, fence, AuthorityState.RELOCATING, AuthorityState.SEALED)
    if record.state is AuthorityState.SEALED:
        return record
    check_owner(state, record.mesh, record.owner, now)
    sealed = attrs.evolve(record, state=AuthorityState.SEALED,
                          store_version=record.store_version + 1)
    state.records[record.spot_id] = sealed
    return sealed


def txn_commit_relocation(state: LocationState, fence: AuthorityFence, *,
                          now: float) -> AuthorityRecord:
    """CommitRelocation; see ``LocationStore.commit_relocation``."""
    check_finite(now, "now")
    record = _fenced(state, fence, AuthorityState.SEALED)
    target = record.relocation_target
    assert target is not None
    check_owner(state, record.mesh, target, now)
    moved = attrs.evolve(
        record, state=AuthorityState.READY, owner=target, relocation_target=None,
        owner_generation=check_generation(record.owner_generation + 1, "owner generation"),
        store_version=record.store_version + 1,
    )
    state.records[record.spot_id] = moved
    shift(state.active, capacity_key(record.mesh, record.owner), -1)
    shift(state.pending, capacity_key(record.mesh, target), -1)
    shift(state.active, capacity_key(record.mesh, target), +1)
    return moved


def txn_abort_relocation(state: LocationState, fence: AuthorityFence) -> AuthorityRecord:
    """AbortRelocation; see ``LocationStore.abort_relocation``."""
    record = _fenced(state, fence, AuthorityState.RELOCATING, AuthorityState.SEALED)
    target = record.relocation_target
    assert target is not None
    kept = attrs.evolve(record, state=AuthorityState.READY, relocation_target=None,
                        store_version=record.store_version + 1)
    state.records[record.spot_id] = kept
    shift(state.pending, capacity_key(record.mesh, target), -1)
    return kept
