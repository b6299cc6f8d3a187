"""Relocation steps of the Location Store as pure transactions.

Theory of operation
-------------------
A planned move takes a Ready record through Relocating (target chosen, one
pending capacity unit reserved on it; the source still serves), Sealed (the
source stopped admission and holds ingress) and RelayReady (the target accepted
relay-ready: the point of no return) to Ready at the target, with the owner
generation one higher. Only Relocating and Sealed can abort back to Ready at the
source: after relay-ready the source is never restored, so
AbortRelocation refuses a RelayReady record with :class:`InvalidOperation` and
CommitRelocation is the only way on -- while the target lives: once the target's
lifecycle is over, ReleaseRelayReady ends the incarnation (RelayReady -> Missing,
the move is not resumed and the source not restored; restart recovery of the
target's NodeId or an operator takes it). A Sealed record may name the receipt of
the move's payload root (RecordRelocationPayload, written by the source before the
root itself), so whoever ends a move that died can delete the root; commit and
abort clear it. The procedure around these steps (payload capture, the relay
itself, Message Follow) belongs to the runtime; the store only keeps authority,
capacity and that receipt right.

**A SpotWide move carries members.** BeginRelocation with ``carry_members`` takes a
User Spot's Actor members along (docs/actors.md): each must be Ready, owned by the
Spot's owner and in no move of its own, and each member's record steps with the Spot's
in the same transaction -- Relocating, Sealed, RelayReady, then Ready at the target
with its own owner generation one higher (one aggregate commit), or back to Ready at
the source (abort), or Missing (ReleaseRelayReady). A carried member is an Actor record
that moves without a next container (:func:`is_carried`: an Actor's own move always
names one); its members index entry stays, so every step finds the group as
:func:`carried_members`. The Spot's steps are the group's only steps: a carried
member's own fence is refused (:func:`carried_refusal`), and while the group moves no
member can join, leave, close or be created in it (they need Ready records).

Every step takes the :class:`AuthorityFence` the caller read (the source's:
AcceptRelayReady and CommitRelocation are the target's calls, but the record
stays owned by the source until the commit): ObjectGeneration, owner generation
and owner must match the record, else :class:`StaleFence`. Like ``location``,
each function checks everything before its first write.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from zlink_trio.core._checks import check_finite, check_generation
from zlink_trio.core.errors import CapacityExceeded, InvalidOperation, StaleFence, Unavailable
from zlink_trio.core.identity import SpotKind, validate_spot_id
from zlink_trio.core.records import (
    MOVING_STATES,
    AuthorityFence,
    AuthorityRecord,
    AuthorityState,
    OwnerFence,
    RootReceipt,
)
from zlink_trio.store.rules.authority import EV, step, step_to_missing
from zlink_trio.store.rules.location import (
    LocationState,
    add_member,
    capacity_key,
    check_container,
    check_owner,
    drop_member,
    forget,
    shift,
)
from zlink_trio.store.values import TargetAlive

if TYPE_CHECKING:
    from statecharts.names import SpotAuthorityEvent

__all__ = (
    "carried_members",
    "carried_refusal",
    "check_member_options",
    "check_payload",
    "check_target",
    "container_mismatch",
    "is_carried",
    "member_refusal",
    "members_refusal",
    "past_relay_ready",
    "txn_abort_relocation",
    "txn_accept_relay_ready",
    "txn_begin_relocation",
    "txn_commit_relocation",
    "txn_record_relocation_payload",
    "txn_release_relay_ready",
    "txn_seal_relocation",
)


def _matches(record: AuthorityRecord | None, fence: AuthorityFence) -> bool:
    return (record is not None and record.object_generation == fence.object_generation
            and record.owner_generation == fence.owner_generation
            and record.owner == fence.owner)


def check_target(target: OwnerFence) -> None:
    """The ``target`` argument check of BeginRelocation and AcceptRelayReady (every backend)."""
    if not isinstance(target, OwnerFence):
        raise InvalidOperation(f"target must be an OwnerFence, got {type(target).__name__}")


def check_payload(payload: RootReceipt) -> None:
    """The ``payload`` argument check of RecordRelocationPayload (every backend)."""
    if not isinstance(payload, RootReceipt):
        raise InvalidOperation(f"payload must be a RootReceipt, got {type(payload).__name__}")


def is_carried(record: AuthorityRecord) -> bool:
    """Whether ``record`` is an Actor carried by its container's SpotWide move (it moves,
    and names no next container)."""
    return (record.kind is SpotKind.ACTOR and record.next_container is None
            and record.state in MOVING_STATES)


def carried_refusal(record: AuthorityRecord) -> InvalidOperation:
    """The refusal of a relocation step fenced by a carried member (every backend)."""
    return InvalidOperation(
        f"Actor {record.spot_id!r} moves with its Spot {record.container!r}; that Spot's "
        "relocation steps move it, never its own")


def carried_members(state: LocationState, record: AuthorityRecord) -> list[AuthorityRecord]:
    """The member records a SpotWide move of ``record`` carries, by Actor ID (none when
    ``record`` is an Actor's, or its members stay)."""
    if record.kind is SpotKind.ACTOR:
        return []
    found = (state.records.get(i) for i in sorted(state.members.get(record.spot_id, ())))
    return [m for m in found if m is not None and is_carried(m)]


def member_refusal(spot_id: str, member: AuthorityRecord, owner: OwnerFence
                   ) -> Unavailable | None:
    """Why ``member`` cannot move with its Spot ``spot_id`` (owned by ``owner``) now, or
    ``None`` (every backend words it so): :class:`Unavailable`, the member's own step
    passes."""
    if (member.state is AuthorityState.READY and member.owner == owner
            and member.container == spot_id and member.next_container is None):
        return None
    doing = (f"moving into {member.next_container!r}" if member.next_container is not None
             else member.state.value)
    return Unavailable(
        f"{spot_id!r} moves with its members, and its member {member.spot_id!r} is "
        f"{doing}; retry once that member's own join, move or close has ended")


def _group_step(state: LocationState, members: list[AuthorityRecord],
                event: SpotAuthorityEvent, target: OwnerFence | None) -> None:
    """Write helper: each carried member takes the Spot's step toward ``target`` (``None``:
    back at the source), StoreVersion + 1."""
    for member in members:
        state.records[member.spot_id] = attrs.evolve(
            member, state=step(member.state, event), store_version=member.store_version + 1,
            relocation_target=target)


def _fenced(state: LocationState, fence: AuthorityFence, *allowed: AuthorityState
            ) -> AuthorityRecord:
    record = state.records.get(fence.spot_id)
    if record is not None and _matches(record, fence) and record.state in allowed:
        if is_carried(record):
            raise carried_refusal(record)
        return record
    expected = "/".join(s.value for s in allowed)
    found = "missing" if record is None else (
        f"{record.state.value}, generation {record.object_generation}, owner generation "
        f"{record.owner_generation}, owner {record.owner}")
    why = (f"this step needs {expected}" if _matches(record, fence)
           else f"the relocation fence does not match (this step needs {expected})")
    raise StaleFence(f"{fence.spot_id!r} is {found}: {why}; re-read the authority and take "
                     "the step its state allows")


def container_mismatch(spot_id: str) -> InvalidOperation:
    """BeginRelocation's refusal of an Actor without a ``container`` or a Spot with one
    (every backend raises this one)."""
    return InvalidOperation(
        f"{spot_id!r}: an Actor moves into a container at the target (its Entry "
        "Spot, or the User Spot it joins), and only an Actor names one")


def members_refusal(spot_id: str) -> InvalidOperation:
    """BeginRelocation's refusal of a Spot with Actor members that neither stay nor are
    carried (every backend raises this one)."""
    return InvalidOperation(
        f"{spot_id!r} has Actor members; a Spot moves with them (carry_members, its "
        "SpotWide unit) or without them (members_stay, its PerActor unit), never "
        "away from them unasked")


def check_member_options(*, members_stay: bool, carry_members: bool) -> None:
    """BeginRelocation's argument check of the two member options (every backend)."""
    if members_stay and carry_members:
        raise InvalidOperation("members_stay and carry_members exclude each other: a "
                               "Spot's members either stay or move with it")


def txn_begin_relocation(state: LocationState, fence: AuthorityFence, *, target: OwnerFence,
                         now: float, container: str | None = None,
                         members_stay: bool = False,
                         carry_members: bool = False) -> AuthorityRecord:
    """BeginRelocation; see ``LocationStore.begin_relocation``."""
    check_finite(now, "now")
    check_target(target)
    check_member_options(members_stay=members_stay, carry_members=carry_members)
    if container is not None:
        validate_spot_id(container)
    record = state.records.get(fence.spot_id)
    if (record is not None and record.state is AuthorityState.RELOCATING
            and record.relocation_target == target and record.next_container == container):
        _fenced(state, fence, AuthorityState.RELOCATING)
        return record  # idempotent retry
    record = _fenced(state, fence, AuthorityState.READY)
    if record.kind is SpotKind.ENTRY:
        raise InvalidOperation(f"{record.spot_id!r} is an Entry Spot; Entry Spots never move")
    if (record.kind is SpotKind.ACTOR) != (container is not None):
        raise container_mismatch(record.spot_id)
    members: list[AuthorityRecord] = []
    if state.members.get(record.spot_id) and not members_stay:
        # A move never splits a Spot from its Actors unasked: a SpotWide Spot carries
        # them (``carry_members``), a PerActor Spot's follow it in moves of their own.
        if not carry_members:
            raise members_refusal(record.spot_id)
        for actor_id in sorted(state.members[record.spot_id]):
            member = state.records[actor_id]
            refusal = member_refusal(record.spot_id, member, record.owner)
            if refusal is not None:
                raise refusal
            members.append(member)
    if target.node_rid == record.owner.node_rid:
        raise InvalidOperation(f"{record.spot_id!r} already lives on node {target.node_rid}")
    check_owner(state, record.mesh, record.owner, now)
    claim = check_owner(state, record.mesh, target, now)
    for moving_one in (record, *members):
        if not claim.descriptor.serves(moving_one.stable_type, moving_one.kind):
            raise InvalidOperation(
                f"target {target.node_rid} does not serve {moving_one.stable_type!r} as "
                f"{moving_one.kind.name}; choose a node that serves it"
            )
    key = capacity_key(record.mesh, target)
    load = state.active.get(key, 0) + state.pending.get(key, 0)
    if load + len(members) >= claim.descriptor.capacity:
        raise CapacityExceeded(f"target {target.node_rid} is at capacity ({load} of "
                               f"{claim.descriptor.capacity}, and {1 + len(members)} would "
                               "move); choose another target")
    if container is not None:
        check_container(state, container, target)
    moving = attrs.evolve(record, state=step(record.state, EV.begin_relocation),
                          relocation_target=target, next_container=container,
                          store_version=record.store_version + 1)
    state.records[record.spot_id] = moving
    if container is not None:  # a member of both until the move ends: neither closes
        add_member(state, container, record.spot_id)
    _group_step(state, members, EV.begin_relocation, target)
    shift(state.pending, key, 1 + len(members))
    return moving


def txn_seal_relocation(state: LocationState, fence: AuthorityFence, *,
                        now: float) -> AuthorityRecord:
    """Seal; see ``LocationStore.seal_relocation``."""
    check_finite(now, "now")
    record = _fenced(state, fence, AuthorityState.RELOCATING, AuthorityState.SEALED)
    if record.state is AuthorityState.SEALED:
        return record
    check_owner(state, record.mesh, record.owner, now)
    sealed = attrs.evolve(record, state=step(record.state, EV.seal),
                          store_version=record.store_version + 1)
    members = carried_members(state, record)
    state.records[record.spot_id] = sealed
    _group_step(state, members, EV.seal, record.relocation_target)
    return sealed


def txn_accept_relay_ready(state: LocationState, fence: AuthorityFence, *, target: OwnerFence,
                           now: float) -> AuthorityRecord:
    """AcceptRelayReady; see ``LocationStore.accept_relay_ready``."""
    check_finite(now, "now")
    check_target(target)
    record = state.records.get(fence.spot_id)
    if (record is not None and record.state is AuthorityState.RELAY_READY
            and record.relocation_target == target and _matches(record, fence)
            and not is_carried(record)):
        return record  # idempotent retry
    record = _fenced(state, fence, AuthorityState.SEALED)
    if record.relocation_target != target:
        raise StaleFence(
            f"{record.spot_id!r} is sealed for a move to {record.relocation_target}, not to "
            f"{target}; only the target the move names accepts relay-ready, re-read the "
            "authority"
        )
    check_owner(state, record.mesh, target, now)
    relay = attrs.evolve(record, state=step(record.state, EV.accept_relay_ready),
                         store_version=record.store_version + 1)
    members = carried_members(state, record)
    state.records[record.spot_id] = relay
    _group_step(state, members, EV.accept_relay_ready, record.relocation_target)
    return relay


def txn_commit_relocation(state: LocationState, fence: AuthorityFence, *,
                          now: float) -> AuthorityRecord:
    """CommitRelocation; see ``LocationStore.commit_relocation``."""
    check_finite(now, "now")
    record = _fenced(state, fence, AuthorityState.RELAY_READY)
    target = record.relocation_target
    assert target is not None
    check_owner(state, record.mesh, target, now)
    moved = attrs.evolve(
        record, state=step(record.state, EV.commit_relocation), owner=target,
        relocation_target=None, relocation_payload=None,
        owner_generation=check_generation(record.owner_generation + 1, "owner generation"),
        store_version=record.store_version + 1,
        container=record.next_container or record.container, next_container=None,
    )
    members = carried_members(state, record)
    for member in members:  # checked before the first write, like every value
        check_generation(member.owner_generation + 1, "owner generation")
    state.records[record.spot_id] = moved
    if record.next_container not in (None, record.container):
        assert record.container is not None  # (an Actor's record names its container)
        drop_member(state, record.container, record.spot_id)
    for member in members:  # one aggregate commit: each at the target, its own generation
        state.records[member.spot_id] = attrs.evolve(
            member, state=step(member.state, EV.commit_relocation), owner=target,
            relocation_target=None, owner_generation=member.owner_generation + 1,
            store_version=member.store_version + 1)
    moving = 1 + len(members)
    shift(state.active, capacity_key(record.mesh, record.owner), -moving)
    shift(state.pending, capacity_key(record.mesh, target), -moving)
    shift(state.active, capacity_key(record.mesh, target), +moving)
    return moved


def past_relay_ready(record: AuthorityRecord) -> InvalidOperation:
    """AbortRelocation's refusal of a RelayReady ``record`` (every backend raises this one)."""
    return InvalidOperation(
        f"{record.spot_id!r} is past relay-ready: the target {record.relocation_target} "
        "accepted the relay, so the source is never restored and the move "
        "cannot be aborted; nothing was changed, finish the move with commit_relocation at "
        "the target"
    )


def txn_abort_relocation(state: LocationState, fence: AuthorityFence) -> AuthorityRecord:
    """AbortRelocation; see ``LocationStore.abort_relocation``."""
    record = state.records.get(fence.spot_id)
    if record is not None and record.state is AuthorityState.RELAY_READY and _matches(
            record, fence):
        raise carried_refusal(record) if is_carried(record) else past_relay_ready(record)
    record = _fenced(state, fence, AuthorityState.RELOCATING, AuthorityState.SEALED)
    target = record.relocation_target
    assert target is not None
    kept = attrs.evolve(record, state=step(record.state, EV.abort_relocation),
                        relocation_target=None, relocation_payload=None, next_container=None,
                        store_version=record.store_version + 1)
    members = carried_members(state, record)
    state.records[record.spot_id] = kept
    if record.next_container not in (None, record.container):
        assert record.next_container is not None
        drop_member(state, record.next_container, record.spot_id)
    _group_step(state, members, EV.abort_relocation, None)
    shift(state.pending, capacity_key(record.mesh, target), -1 - len(members))
    return kept


def txn_record_relocation_payload(state: LocationState, fence: AuthorityFence, *,
                                  payload: RootReceipt, now: float) -> AuthorityRecord:
    """RecordRelocationPayload; see ``LocationStore.record_relocation_payload``."""
    check_finite(now, "now")
    check_payload(payload)
    record = _fenced(state, fence, AuthorityState.SEALED)
    if record.relocation_payload == payload:
        return record  # idempotent retry
    check_owner(state, record.mesh, record.owner, now)
    named = attrs.evolve(record, relocation_payload=payload,
                         store_version=record.store_version + 1)
    state.records[record.spot_id] = named
    return named


def txn_release_relay_ready(state: LocationState, fence: AuthorityFence, *,
                            target: OwnerFence, now: float) -> AuthorityRecord | None:
    """ReleaseRelayReady; see ``LocationStore.release_relay_ready``."""
    check_finite(now, "now")
    check_target(target)
    record = state.records.get(fence.spot_id)
    if record is None or record.object_generation != fence.object_generation:
        return None  # that incarnation is gone: idempotent
    record = _fenced(state, fence, AuthorityState.RELAY_READY)
    if record.relocation_target != target:
        raise StaleFence(
            f"{record.spot_id!r} moves to {record.relocation_target}, not to {target}; "
            "re-read the authority and name the target the move names"
        )
    claim = state.claims.get((record.mesh, target.node_rid))
    if (claim is not None and claim.lifecycle_generation == target.lifecycle_generation
            and claim.is_live(now)):
        raise TargetAlive(record, claim.lease_expires_at, now)
    step_to_missing(record.state, EV.release_relay_ready)
    members = carried_members(state, record)
    # -- writes --
    for gone in (record, *members):  # the carried members end with their Spot
        forget(state, gone)
    shift(state.active, capacity_key(record.mesh, record.owner), -1 - len(members))
    shift(state.pending, capacity_key(record.mesh, target), -1 - len(members))
    return record
