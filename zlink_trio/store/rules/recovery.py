"""Startup recovery of incomplete activations as pure transactions (docs/stores.md).

Theory of operation
-------------------
A process that dies between Reserve and the removal of its recovery pointer leaves
an *orphan*: a Creating record, or a Ready record that still has a recovery
pointer, owned by a lifecycle whose claim has expired. When the same NodeId
starts again it has a fresh NodeRid and a new lifecycle generation, so the
ordinary fenced steps (CommitReady, RemoveRecoveryPointer, Close) would refuse
it. Two transactions bridge that gap, over the same :class:`LocationState` as
every other ``txn_*`` function:

- :func:`txn_orphans` lists the orphans of one NodeId: Creating records and
  Ready records with a recovery pointer whose owner's claim belongs to that
  NodeId and is expired at ``now``. Sorted by Spot ID, at most ``limit``
  (1..1000) per call, resumable with ``after`` (the last Spot ID returned).
- :func:`txn_adopt_orphan` moves one orphan to the new lifecycle of the *same*
  NodeId: fenced by ObjectGeneration, owner generation and the old owner; the
  old claim must still exist, be expired at ``now`` and name the same NodeId as
  the new owner's live claim. The record keeps its state, ObjectGeneration,
  creation intent and recovery pointer (the activation continues with the same
  reservation and generation); the owner generation and StoreVersion grow by
  one and the capacity unit moves (pending stays pending, active stays
  active). Adoption does not check the new owner's capacity: the unit was
  already counted against this NodeId before the crash, and refusing would
  leave the orphan stuck; the node's load may exceed its descriptor capacity
  by the adopted units until they finish.

Neither transaction takes over a *steady* Ready record (no pointer): stored
creation intent is never used for takeover after a steady Ready owner failure.
Those records are *released* instead, by the restarted node or an operator
(``zlink-trio release --node``), through the ordinary fenced transactions
(ReleaseExpired, Release, AbortRelocation, AbortCreating); two more functions
serve that:

- :func:`txn_dead_owned` lists every record (any state, Entry claims excluded)
  owned by an expired claim of one NodeId, and every RelayReady record whose move
  targets one (the target died past relay-ready: ``release_relay_ready`` ends it),
  paged like :func:`txn_orphans`.
- :func:`txn_remove_dead_claims` deletes the expired claims of one NodeId that
  hold no capacity unit (no record is owned by them, none is moving to them),
  each with its Entry claim, so dead lifecycles do not pile up.

Like every ``txn_*`` function, each checks everything before its first write.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import attrs

from zlink_trio.core._checks import MAX_GENERATION, check_finite, check_generation, check_int
from zlink_trio.core.errors import InvalidOperation, StaleFence, Unavailable
from zlink_trio.core.identity import SpotKind, validate_node_id, validate_spot_id
from zlink_trio.core.records import AuthorityRecord, AuthorityState, OwnerFence
from zlink_trio.store.rules.claims import txn_remove
from zlink_trio.store.rules.location import LocationState, capacity_key, check_owner, shift

if TYPE_CHECKING:
    from collections.abc import Iterable

    from zlink_trio.core.descriptor import NodeClaim

__all__ = (
    "MAX_ORPHANS",
    "check_adopt_args",
    "check_orphans_args",
    "empty_dead_claims",
    "is_dead_target_move",
    "is_orphan_state",
    "txn_adopt_orphan",
    "txn_dead_owned",
    "txn_orphans",
    "txn_remove_dead_claims",
)

#: The most orphans one ``orphans`` call returns.
MAX_ORPHANS: Final = 1000


def is_orphan_state(record: AuthorityRecord) -> bool:
    """Whether ``record`` is an incomplete activation: Creating, or Ready with a pointer."""
    return record.state is AuthorityState.CREATING or (
        record.state is AuthorityState.READY and record.recovery_pointer is not None)


def _expired_claims_of(state: LocationState, node_id: str, now: float) -> set[OwnerFence]:
    return {claim.owner() for claim in state.claims.values()
            if claim.descriptor.node_id == node_id and not claim.is_live(now)}


def txn_orphans(state: LocationState, node_id: str, *, now: float, after: str | None = None,
                limit: int = MAX_ORPHANS) -> list[AuthorityRecord]:
    """Orphans of ``node_id``; see ``LocationStore.orphans``.

    Scans every claim and record: fine for memory and for the bounded windows the
    SQLite backend feeds it; the Redis backend filters server-side instead.
    """
    check_orphans_args(node_id, now=now, after=after, limit=limit)
    owners = _expired_claims_of(state, node_id, now)
    if not owners:
        return []
    found = sorted((r for r in state.records.values()
                    if r.owner in owners and is_orphan_state(r)
                    and (after is None or r.spot_id > after)),
                   key=lambda r: r.spot_id)
    return found[:limit]


def txn_dead_owned(state: LocationState, node_id: str, *, now: float,
                   after: str | None = None, limit: int = MAX_ORPHANS) -> list[AuthorityRecord]:
    """Every record of a dead lifecycle of ``node_id``; see ``LocationStore.dead_owned``."""
    check_orphans_args(node_id, now=now, after=after, limit=limit)
    owners = _expired_claims_of(state, node_id, now)
    if not owners:
        return []
    found = sorted((r for r in state.records.values()
                    if (r.owner in owners or is_dead_target_move(r, owners))
                    and r.kind is not SpotKind.ENTRY and (after is None or r.spot_id > after)),
                   key=lambda r: r.spot_id)
    return found[:limit]


def is_dead_target_move(record: AuthorityRecord, dead: set[OwnerFence]) -> bool:
    """Whether ``record`` is a move past relay-ready toward one of the ``dead`` lifecycles."""
    return record.state is AuthorityState.RELAY_READY and record.relocation_target in dead


def empty_dead_claims(state: LocationState, claims: Iterable[NodeClaim], node_id: str,
                      now: float) -> list[NodeClaim]:
    """Of ``claims``, the expired claims of ``node_id`` that hold no capacity unit."""
    empty = []
    for claim in claims:
        if claim.descriptor.node_id != node_id or claim.is_live(now):
            continue
        key = capacity_key(claim.descriptor.mesh, claim.owner())
        if not state.pending.get(key, 0) and not state.active.get(key, 0):
            empty.append(claim)
    return empty


def txn_remove_dead_claims(state: LocationState, node_id: str, *, now: float,
                           claims: Iterable[NodeClaim] | None = None) -> int:
    """RemoveDeadClaims; see ``LocationStore.remove_dead_claims``.

    ``claims``: the claims of ``node_id`` when ``state.claims`` cannot be iterated
    (the SQLite view); default: ``state.claims``.
    """
    validate_node_id(node_id)
    check_finite(now, "now")
    found = empty_dead_claims(state, list(state.claims.values()) if claims is None
                              else claims, node_id, now)
    # -- writes --
    for claim in found:
        txn_remove(state, claim.descriptor.mesh, claim.descriptor.node_rid,
                   claim.lifecycle_generation)
    return len(found)


def _old_claim(state: LocationState, record: AuthorityRecord, old_owner: OwnerFence,
               now: float) -> NodeClaim:
    claim = state.claims.get((record.mesh, old_owner.node_rid))
    if claim is None or claim.lifecycle_generation != old_owner.lifecycle_generation:
        raise InvalidOperation(
            f"the claim of {old_owner.node_rid} lifecycle {old_owner.lifecycle_generation} "
            f"that owns {record.spot_id!r} is gone, so its NodeId cannot be proved; an "
            "operator must release the Spot"
        )
    if claim.is_live(now):
        raise Unavailable(
            f"the previous owner {old_owner.node_rid} lifecycle "
            f"{old_owner.lifecycle_generation} of {record.spot_id!r} still holds a live lease "
            f"(until {claim.lease_expires_at}); retry after it expires"
        )
    return claim


def check_adopt_args(spot_id: str, *, object_generation: int, owner_generation: int,
                     old_owner: OwnerFence, new_owner: OwnerFence, now: float) -> None:
    """AdoptOrphan's argument checks, shared by every backend (InvalidOperation, nothing read)."""
    validate_spot_id(spot_id)
    check_generation(object_generation, "object_generation")
    check_generation(owner_generation, "owner_generation")
    if not isinstance(old_owner, OwnerFence) or not isinstance(new_owner, OwnerFence):
        raise InvalidOperation("old_owner and new_owner must be OwnerFence values")
    check_finite(now, "now")


def check_orphans_args(node_id: str, *, now: float, after: str | None, limit: int) -> None:
    """Orphans' argument checks, shared by every backend (InvalidOperation, nothing read)."""
    validate_node_id(node_id)
    check_finite(now, "now")
    check_int(limit, "limit", 1, MAX_ORPHANS)
    if after is not None:
        validate_spot_id(after)


def txn_adopt_orphan(state: LocationState, spot_id: str, *, object_generation: int,
                     owner_generation: int, old_owner: OwnerFence, new_owner: OwnerFence,
                     now: float) -> AuthorityRecord:
    """AdoptOrphan; see ``LocationStore.adopt_orphan``."""
    check_adopt_args(spot_id, object_generation=object_generation,
                     owner_generation=owner_generation, old_owner=old_owner,
                     new_owner=new_owner, now=now)
    record = state.records.get(spot_id)
    if record is None or record.object_generation != object_generation:
        raise StaleFence(
            f"{spot_id!r} generation {object_generation} is gone (now "
            f"{'Missing' if record is None else record.object_generation}); nothing to adopt"
        )
    if (record.owner == new_owner and record.owner_generation == owner_generation + 1
            and is_orphan_state(record)):
        return record  # this very adoption already happened: idempotent retry
    if record.owner != old_owner or record.owner_generation != owner_generation:
        raise StaleFence(
            f"{spot_id!r} is owned by {record.owner} owner generation "
            f"{record.owner_generation}, not {old_owner} generation {owner_generation}; "
            "re-read the authority"
        )
    if not is_orphan_state(record):
        raise InvalidOperation(
            f"{spot_id!r} is {record.state.value} without a recovery pointer; only an "
            "incomplete activation is adopted (a steady Ready owner is released by an "
            "operator, never taken over)"
        )
    if old_owner == new_owner:
        raise InvalidOperation(f"{spot_id!r}: the new owner is the old owner")
    old_claim = _old_claim(state, record, old_owner, now)
    new_claim = check_owner(state, record.mesh, new_owner, now)
    if new_claim.descriptor.node_id != old_claim.descriptor.node_id:
        raise InvalidOperation(
            f"{spot_id!r} belongs to NodeId {old_claim.descriptor.node_id!r}; NodeId "
            f"{new_claim.descriptor.node_id!r} may not adopt it (no takeover by another node)"
        )
    if not new_claim.descriptor.serves(record.stable_type, record.kind):
        raise InvalidOperation(
            f"node {new_owner.node_rid} does not serve {record.stable_type!r} as "
            f"{record.kind.name}; it cannot resume {spot_id!r}"
        )
    if record.owner_generation >= MAX_GENERATION or record.store_version >= MAX_GENERATION:
        raise InvalidOperation(f"{spot_id!r}: a counter is exhausted (2**63-1)")
    adopted = attrs.evolve(record, owner=new_owner,
                           owner_generation=record.owner_generation + 1,
                           store_version=record.store_version + 1)
    counter = state.pending if record.state is AuthorityState.CREATING else state.active
    # -- writes --
    state.records[spot_id] = adopted
    shift(counter, capacity_key(record.mesh, old_owner), -1)
    shift(counter, capacity_key(record.mesh, new_owner), +1)
    return adopted
