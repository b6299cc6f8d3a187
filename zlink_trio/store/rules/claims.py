"""Descriptor claims of the Location Store as pure transactions.

Theory of operation
-------------------
NewClaim, Renew, ClosePlacement / OpenPlacement, Remove and the claim listings (the live
ones, :func:`txn_descriptors`; the dead ones, :func:`txn_dead_claims`), over the same
:class:`LocationState` as the authority transactions. A claim and its Entry
Spot's authority record are created and deleted together; the link is the
descriptor's ``entry_spot_id`` plus the Entry record's owner fence, so a
stale lifecycle never touches a replacement's records. Like every ``txn_*``
function, each checks everything before its first write.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from zlink_trio.core._checks import check_finite, check_generation
from zlink_trio.core.descriptor import NodeClaim, NodeDescriptor
from zlink_trio.core.errors import AlreadyExists, InvalidOperation, StaleFence, Unavailable
from zlink_trio.core.identity import NodeRid, SpotKind
from zlink_trio.core.records import ENTRY_STABLE_TYPE, AuthorityRecord, AuthorityState
from zlink_trio.store.rules.location import LocationState, next_generation
from zlink_trio.store.values import NodeIdInUse

if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = ("check_node_id_free", "select_claims", "txn_close_placement", "txn_dead_claims",
           "txn_descriptors", "txn_new_claim", "txn_open_placement", "txn_remove", "txn_renew")


def _lease(now: float, lease: float) -> float:
    return check_finite(now, "now") + check_finite(lease, "lease", positive=True)


def _entry_of(state: LocationState, claim: NodeClaim) -> AuthorityRecord | None:
    """The Entry claim linked to ``claim``, if it still exists and is linked."""
    record = state.records.get(claim.descriptor.entry_spot_id)
    if record is not None and record.kind is SpotKind.ENTRY and record.owner == claim.owner():
        return record
    return None


def check_node_id_free(claims: Iterable[NodeClaim], descriptor: NodeDescriptor,
                       now: float) -> None:
    """NodeIdInUse if a live claim of another NodeRid holds ``descriptor.node_id``.

    ``claims`` must hold at least every live claim of that NodeId (in any Mesh: a NodeId
    is one process identity store-wide, its lifecycle generations are one sequence).
    """
    for claim in claims:
        if (claim.descriptor.node_id == descriptor.node_id and claim.is_live(now)
                and claim.descriptor.node_rid != descriptor.node_rid):
            raise NodeIdInUse(claim, now)


def txn_new_claim(state: LocationState, descriptor: NodeDescriptor, *, now: float,
                  lease: float, same_node_id: Iterable[NodeClaim] | None = None) -> NodeClaim:
    """NewClaim; see ``LocationStore.new_claim``.

    ``same_node_id``: the live claims of ``descriptor.node_id`` when ``state.claims``
    cannot be iterated (the SQLite view loads rows by key); default: ``state.claims``.
    """
    if not isinstance(descriptor, NodeDescriptor):
        raise InvalidOperation(f"new_claim takes a NodeDescriptor, got {type(descriptor)}")
    expires = _lease(now, lease)
    key = (descriptor.mesh, descriptor.node_rid)
    old = state.claims.get(key)
    if old is not None and old.is_live(now):
        raise AlreadyExists(
            f"a live claim already holds mesh {descriptor.mesh!r} node {descriptor.node_rid} "
            f"(NodeId {old.descriptor.node_id!r}, lifecycle {old.lifecycle_generation}); start "
            "this lifecycle with a fresh NodeRid"
        )
    check_node_id_free(state.claims.values() if same_node_id is None else same_node_id,
                       descriptor, now)
    old_entry = None if old is None else _entry_of(state, old)
    taken = state.records.get(descriptor.entry_spot_id)
    if taken is not None and taken is not old_entry:
        raise AlreadyExists(
            f"Entry Spot ID {descriptor.entry_spot_id!r} already has authority; issue a new "
            "Entry Spot ID and claim again"
        )
    generation = next_generation(state)
    lifecycle = check_generation(state.lifecycles.get(descriptor.node_id, 0) + 1,
                                 "lifecycle generation")
    claim = NodeClaim(descriptor=descriptor, lifecycle_generation=lifecycle,
                      lease_expires_at=expires)
    entry = AuthorityRecord(
        spot_id=descriptor.entry_spot_id, kind=SpotKind.ENTRY, stable_type=ENTRY_STABLE_TYPE,
        mesh=descriptor.mesh, state=AuthorityState.READY, object_generation=generation,
        owner_generation=1, store_version=1, owner=claim.owner(),
    )
    # -- writes --
    if old_entry is not None:
        del state.records[old_entry.spot_id]
    state.claims[key] = claim
    state.records[entry.spot_id] = entry
    state.lifecycles[descriptor.node_id] = lifecycle
    state.last_generation = generation
    return claim


def txn_renew(state: LocationState, mesh: str, node_rid: NodeRid, lifecycle_generation: int,
              *, now: float, lease: float) -> NodeClaim:
    """Renew; see ``LocationStore.renew``."""
    expires = _lease(now, lease)
    claim = state.claims.get((mesh, node_rid))
    if claim is None or claim.lifecycle_generation != lifecycle_generation:
        raise StaleFence(
            f"node {node_rid} lifecycle {lifecycle_generation} has no current claim in mesh "
            f"{mesh!r}; it was removed or replaced: make a new claim"
        )
    if not claim.is_live(now):
        raise Unavailable(
            f"the lease of node {node_rid} lifecycle {lifecycle_generation} expired at "
            f"{claim.lease_expires_at}; this lifecycle is over, start a new one with new_claim"
        )
    renewed = attrs.evolve(claim, lease_expires_at=max(claim.lease_expires_at, expires),
                           store_version=check_generation(claim.store_version + 1, "version"))
    state.claims[(mesh, node_rid)] = renewed
    return renewed


def _mark_placement(state: LocationState, mesh: str, node_rid: NodeRid,
                    lifecycle_generation: int, *, accepts: bool) -> bool:
    """Set the claim's ``accepts_placements`` to ``accepts``, fenced by lifecycle."""
    key = (mesh, node_rid)
    claim = state.claims.get(key)
    if claim is None or claim.lifecycle_generation != lifecycle_generation:
        return False
    if claim.accepts_placements is accepts:
        return True  # already marked so by this lifecycle: nothing to write
    state.claims[key] = attrs.evolve(
        claim, accepts_placements=accepts,
        store_version=check_generation(claim.store_version + 1, "version"))
    return True


def txn_close_placement(state: LocationState, mesh: str, node_rid: NodeRid,
                        lifecycle_generation: int) -> bool:
    """ClosePlacement; see ``LocationStore.close_placement``."""
    return _mark_placement(state, mesh, node_rid, lifecycle_generation, accepts=False)


def txn_open_placement(state: LocationState, mesh: str, node_rid: NodeRid,
                       lifecycle_generation: int) -> bool:
    """OpenPlacement; see ``LocationStore.open_placement``."""
    return _mark_placement(state, mesh, node_rid, lifecycle_generation, accepts=True)


def txn_remove(state: LocationState, mesh: str, node_rid: NodeRid,
               lifecycle_generation: int) -> bool:
    """Remove; see ``LocationStore.remove``."""
    key = (mesh, node_rid)
    claim = state.claims.get(key)
    if claim is None or claim.lifecycle_generation != lifecycle_generation:
        return False
    entry = _entry_of(state, claim)
    del state.claims[key]
    if entry is not None:
        del state.records[entry.spot_id]
    return True


def select_claims(claims: Iterable[NodeClaim], mesh: str | None, *, now: float,
                  live: bool) -> list[NodeClaim]:
    """The claims of ``mesh`` (or all) whose lease runs at ``now`` (``live``) or is over
    (not ``live``), by key order ``(MeshName, NodeRid)``: the one filter of
    ``LocationStore.descriptors`` and ``LocationStore.dead_claims`` on every backend."""
    check_finite(now, "now")
    return sorted((claim for claim in claims
                   if (mesh is None or claim.descriptor.mesh == mesh)
                   and claim.is_live(now) is live),
                  key=lambda c: (c.descriptor.mesh, c.descriptor.node_rid.value))


def txn_descriptors(state: LocationState, mesh: str | None, *, now: float) -> list[NodeClaim]:
    """Live claims; see ``LocationStore.descriptors``."""
    return select_claims(state.claims.values(), mesh, now=now, live=True)


def txn_dead_claims(state: LocationState, mesh: str | None, *, now: float) -> list[NodeClaim]:
    """Claims whose lease is over; see ``LocationStore.dead_claims``."""
    return select_claims(state.claims.values(), mesh, now=now, live=False)
