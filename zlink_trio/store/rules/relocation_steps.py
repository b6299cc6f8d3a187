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

Every step takes the :class:`AuthorityFence` the caller read (the source's:
AcceptRelayReady and CommitRelocation are the target's calls, but the record
stays owned by the source until the commit): ObjectGeneration, owner generation
and owner must match the record, else :class:`StaleFence`. Like ``location``,
each function checks everything before its first write.
"""

from __future__ import annotations

import attrs

from zlink_trio.core._checks import check_finite, check_generation
from zlink_trio.core.errors import CapacityExceeded, InvalidOperation, StaleFence
from zlink_trio.core.identity import SpotKind, validate_spot_id
from zlink_trio.core.records import (
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

__all__ = (
    "check_payload",
    "check_target",
    "container_mismatch",
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


def _fenced(state: LocationState, fence: AuthorityFence, *allowed: AuthorityState
            ) -> AuthorityRecord:
    record = state.records.get(fence.spot_id)
    if record is not None and _matches(record, fence) and record.state in allowed:
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
    """BeginRelocation's refusal of a Spot with Actor members, unless ``members_stay``
    (every backend raises this one)."""
    return InvalidOperation(
        f"{spot_id!r} has Actor members, and a Spot does not move with its members yet "
        "(a PerActor Spot moves without them); make them leave first")


def txn_begin_relocation(state: LocationState, fence: AuthorityFence, *, target: OwnerFence,
                         now: float, container: str | None = None,
                         members_stay: bool = False) -> AuthorityRecord:
    """BeginRelocation; see ``LocationStore.begin_relocation``."""
    check_finite(now, "now")
    check_target(target)
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
    if not members_stay and state.members.get(record.spot_id):
        # Until SpotWide moves carry members (docs/actors.md, "Rules the runtime holds"
        # 4), a move must never split a Spot from its Actors -- unless the Spot's unit is
        # PerActor (``members_stay``): then each member follows it in a move of its own.
        raise members_refusal(record.spot_id)
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
    if container is not None:
        check_container(state, container, target)
    moving = attrs.evolve(record, state=step(record.state, EV.begin_relocation),
                          relocation_target=target, next_container=container,
                          store_version=record.store_version + 1)
    state.records[record.spot_id] = moving
    if container is not None:  # a member of both until the move ends: neither closes
        add_member(state, container, record.spot_id)
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
    sealed = attrs.evolve(record, state=step(record.state, EV.seal),
                          store_version=record.store_version + 1)
    state.records[record.spot_id] = sealed
    return sealed


def txn_accept_relay_ready(state: LocationState, fence: AuthorityFence, *, target: OwnerFence,
                           now: float) -> AuthorityRecord:
    """AcceptRelayReady; see ``LocationStore.accept_relay_ready``."""
    check_finite(now, "now")
    check_target(target)
    record = state.records.get(fence.spot_id)
    if (record is not None and record.state is AuthorityState.RELAY_READY
            and record.relocation_target == target and _matches(record, fence)):
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
    state.records[record.spot_id] = relay
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
    state.records[record.spot_id] = moved
    if record.next_container not in (None, record.container):
        assert record.container is not None  # (an Actor's record names its container)
        drop_member(state, record.container, record.spot_id)
    shift(state.active, capacity_key(record.mesh, record.owner), -1)
    shift(state.pending, capacity_key(record.mesh, target), -1)
    shift(state.active, capacity_key(record.mesh, target), +1)
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
        raise past_relay_ready(record)
    record = _fenced(state, fence, AuthorityState.RELOCATING, AuthorityState.SEALED)
    target = record.relocation_target
    assert target is not None
    kept = attrs.evolve(record, state=step(record.state, EV.abort_relocation),
                        relocation_target=None, relocation_payload=None, next_container=None,
                        store_version=record.store_version + 1)
    state.records[record.spot_id] = kept
    if record.next_container not in (None, record.container):
        assert record.next_container is not None
        drop_member(state, record.next_container, record.spot_id)
    shift(state.pending, capacity_key(record.mesh, target), -1)
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
    # -- writes --
    forget(state, record)
    shift(state.active, capacity_key(record.mesh, record.owner), -1)
    shift(state.pending, capacity_key(record.mesh, target), -1)
    return record
