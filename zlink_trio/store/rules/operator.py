"""Operator transactions of the Location Store, as pure functions (the oracle).

Theory of operation
-------------------
An owner whose lease expired cannot perform a location update (docs/concepts.md,
"Fences"), so a Ready Spot whose owner died and never restarts (its NodeId is
gone for good, or came back under a new NodeRid that does not resume it)
would hold its ID forever. :func:`txn_release_expired` is the one way out: an
explicit, fenced release of that Ready record, taken by a node restarted under the
*same* NodeId (its NewClaim proved every earlier lifecycle over) or by an operator
(``zlink-trio release``) -- never by another node on its own: a lease that merely
looks expired to one process may be a clock or network problem
(``store.dead_lifecycle``).

Like every ``txn_*`` function it checks everything before its first write,
so a refusal writes nothing. :func:`release_expired_refusal` holds the checks
that depend on the record alone; the Redis backend runs the same checks in
Lua and calls it to build the very same error from the record its script
returns, so every backend says the same thing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from zlink_trio.core._checks import check_finite, check_generation
from zlink_trio.core.errors import InvalidOperation, NotFound, StaleFence
from zlink_trio.core.identity import SpotKind, validate_spot_id
from zlink_trio.core.records import AuthorityState
from zlink_trio.store.rules.authority import EV, step_to_missing
from zlink_trio.store.rules.location import capacity_key, forget, shift
from zlink_trio.store.values import OwnerAlive

if TYPE_CHECKING:
    from zlink_trio.core.errors import ZLinkError
    from zlink_trio.core.records import AuthorityRecord
    from zlink_trio.store.rules.location import LocationState

__all__ = ("release_expired_refusal", "txn_release_expired")

_NOT_READY = {
    AuthorityState.CREATING: (
        "is still Creating; an unfinished creation ends with abort_creating and its "
        "reservation fence (the owner's restart recovery does that), not with release_expired"),
    AuthorityState.CLOSING: (
        "is Closing; its owner finishes with release and the Closing fence (no live lease "
        "needed), not with release_expired"),
    AuthorityState.RELOCATING: (
        "is Relocating; end the move first with abort_relocation (back to Ready at the "
        "source) or finish it (seal, accept_relay_ready, commit_relocation), then release the "
        "Ready record if its owner expired"),
    AuthorityState.SEALED: (
        "is Sealed for a move; end the move first with abort_relocation (back to Ready at "
        "the source) or finish it (accept_relay_ready, commit_relocation), then release the "
        "Ready record if its owner expired"),
    AuthorityState.RELAY_READY: (
        "is RelayReady: the move is past relay-ready and can no longer be aborted (the source "
        "is never restored); its target {target} ends it with "
        "commit_relocation, or, once that target's lease is over, release_relay_ready ends "
        "the incarnation (the restart of the target's NodeId, or release --node, does it)"),
}


def release_expired_refusal(spot_id: str, record: AuthorityRecord | None, *,
                            object_generation: int, owner_generation: int) -> ZLinkError | None:
    """The error ReleaseExpired raises for ``record`` before looking at the lease, or ``None``.

    In order: no record is :class:`NotFound`; another ObjectGeneration or
    owner generation is :class:`StaleFence`; an Entry claim or a state other
    than Ready is :class:`InvalidOperation` naming the transaction to use.
    """
    if record is None:
        return NotFound(
            f"{spot_id!r} has no authority record (it is Missing): nothing to release; it was "
            "already released or closed, or never created"
        )
    if record.object_generation != object_generation:
        return StaleFence(
            f"{spot_id!r} is generation {record.object_generation}, not {object_generation}: "
            "the fence names another incarnation than the one holding the ID now; re-read the "
            "authority (zlink-trio inspect) before releasing anything"
        )
    if record.owner_generation != owner_generation:
        return StaleFence(
            f"{spot_id!r} generation {object_generation} is at owner generation "
            f"{record.owner_generation}, not {owner_generation}: it moved since it was read; "
            "re-read the authority (zlink-trio inspect) and check its owner again"
        )
    if record.kind is SpotKind.ENTRY:
        return InvalidOperation(
            f"{spot_id!r} is an Entry Spot; it ends with its node's claim (the node's next "
            "new_claim replaces an expired claim, or remove deletes it), never by release_expired"
        )
    if record.state is not AuthorityState.READY:
        why = _NOT_READY[record.state].format(target=record.relocation_target)
        return InvalidOperation(f"{spot_id!r} {why}")
    return None


def txn_release_expired(state: LocationState, spot_id: str, *, object_generation: int,
                        owner_generation: int, now: float) -> AuthorityRecord:
    """ReleaseExpired; see ``LocationStore.release_expired``."""
    validate_spot_id(spot_id)
    check_generation(object_generation, "object_generation")
    check_generation(owner_generation, "owner_generation")
    check_finite(now, "now")
    record = state.records.get(spot_id)
    refusal = release_expired_refusal(spot_id, record, object_generation=object_generation,
                                      owner_generation=owner_generation)
    if refusal is not None:
        raise refusal
    assert record is not None
    claim = state.claims.get((record.mesh, record.owner.node_rid))
    if (claim is not None and claim.lifecycle_generation == record.owner.lifecycle_generation
            and claim.is_live(now)):
        raise OwnerAlive(record, claim.lease_expires_at, now)
    step_to_missing(record.state, EV.release_expired)
    # -- writes --
    forget(state, record)
    shift(state.active, capacity_key(record.mesh, record.owner), -1)
    return record
