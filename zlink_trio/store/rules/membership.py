"""Actor membership: the transactions that move an Actor between containers, and reads.

Theory of operation
-------------------
An Actor's authority record (kind ACTOR) names its **container**: the Spot ID of the
Entry or User Spot it belongs to (docs/actors.md). Creating an Actor is Reserve with a
container (``location.txn_reserve``, which checks the container and indexes the
member), closing one is BeginClose and Release like a Spot's; this module holds what
only membership has:

- :func:`txn_move_membership` -- Join and Leave on one node: the Actor's record names
  another container owned by the same owner lifecycle, in one fenced step (the Actor
  does not move between nodes, so nothing else changes but the StoreVersion);
- :func:`txn_members` -- the Actor records that name a container (a read).

The container index (``LocationState.members``) is written by the same transactions
that write the records it indexes, so a BeginClose that sees no member in it sees none
in the records either (``location.txn_begin_close`` refuses with
:class:`~zlink_trio.store.values.MembersRemain` otherwise).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from zlink_trio.core._checks import check_finite, check_generation
from zlink_trio.core.errors import InvalidOperation, StaleFence, ZLinkError
from zlink_trio.core.identity import SpotKind, validate_spot_id
from zlink_trio.core.records import AuthorityRecord, AuthorityState, OwnerFence, record_of
from zlink_trio.store.rules.location import (
    add_member,
    check_container,
    check_owner,
    drop_member,
)

if TYPE_CHECKING:
    from zlink_trio.store.rules.location import LocationState

__all__ = ("check_move_args", "move_refusal", "txn_members", "txn_move_membership")


def check_move_args(actor_id: str, *, object_generation: int, owner: OwnerFence,
                    container: str, now: float) -> None:
    """MoveMembership's argument checks, shared by every backend (nothing read)."""
    validate_spot_id(actor_id)
    check_generation(object_generation, "object_generation")
    if not isinstance(owner, OwnerFence):
        raise InvalidOperation(f"owner must be an OwnerFence, got {type(owner).__name__}")
    validate_spot_id(container)
    if container == actor_id:
        raise InvalidOperation(f"Actor {actor_id!r} cannot be its own container")
    check_finite(now, "now")


def move_refusal(actor_id: str, record: AuthorityRecord | None, *, object_generation: int,
                 owner: OwnerFence) -> ZLinkError | None:
    """The error MoveMembership raises for the Actor's ``record`` before the lease, or ``None``.

    In order: :class:`InvalidOperation` when there is no record of
    ``object_generation`` (a control names the current ActorRef) or it is not an
    Actor's; :class:`StaleFence` when ``owner`` does not own it;
    :class:`InvalidOperation` when it is not Ready. The backends that check in a script
    hand the record they found to this function, so every backend words it the same.
    """
    if record is None or record.object_generation != object_generation:
        return InvalidOperation(
            f"Actor {actor_id!r} generation {object_generation} is not the current "
            "incarnation; a control names the Actor's current ActorRef")
    if record.kind is not SpotKind.ACTOR:
        return InvalidOperation(f"{actor_id!r} is a {record.kind.name} Spot, not an Actor")
    if record.owner != owner:
        return StaleFence(f"Actor {actor_id!r} is owned by {record.owner}, not {owner}; "
                          "re-read its authority")
    if record.state is not AuthorityState.READY:
        return InvalidOperation(f"Actor {actor_id!r} is {record.state.value}; it changes "
                                "container only while it is Ready")
    return None


def txn_move_membership(state: LocationState, actor_id: str, *, object_generation: int,
                        owner: OwnerFence, container: str, now: float) -> AuthorityRecord:
    """MoveMembership; see ``LocationStore.move_membership``."""
    check_move_args(actor_id, object_generation=object_generation, owner=owner,
                    container=container, now=now)
    record = state.records.get(actor_id)
    refusal = move_refusal(actor_id, record, object_generation=object_generation,
                           owner=owner)
    if refusal is not None:
        raise refusal
    assert record is not None
    check_owner(state, record.mesh, owner, now)
    if record.container == container:
        return record  # already there: nothing to write
    check_container(state, container, owner)
    assert record.container is not None  # an ACTOR record names its container
    # The stored record's fields are valid; the container was checked above.
    moved = record_of(record.spot_id, record.kind, record.stable_type, record.mesh,
                      record.state, record.object_generation, record.owner_generation,
                      record.store_version + 1, record.owner, None, record.recovery_pointer,
                      None, None, container)
    # -- writes --
    state.records[actor_id] = moved
    drop_member(state, record.container, actor_id)
    add_member(state, container, actor_id)
    return moved


def txn_members(state: LocationState, container: str) -> list[AuthorityRecord]:
    """Members; see ``LocationStore.members``."""
    validate_spot_id(container)
    found = (state.records.get(i) for i in sorted(state.members.get(container, ())))
    return [r for r in found if r is not None]
