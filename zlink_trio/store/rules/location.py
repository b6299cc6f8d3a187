"""The Location Store's transactions as pure functions over a plain state object.

Theory of operation
-------------------
:class:`LocationState` is a handful of dicts. Each ``txn_*`` function is one
transaction: it reads and checks everything first, builds every new value
(constructors validate and may raise), and only then mutates the state, so a
raise at any point leaves the state untouched. Nothing here awaits or reads a
clock, which makes these functions

- the memory backend (``memory.py`` wraps each one in a single critical
  section after a checkpoint), and
- the oracle the stateful and differential tests compare other backends to.

SQLite and Redis re-implement the same checks in SQL / Lua; the conformance
suite holds them to the same outcomes. Descriptor claims live in ``claims``,
relocation steps in ``relocation_steps``, startup recovery in ``recovery`` and
the operator's release in ``operator``; all share the helpers below.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import attrs

from zlink_trio.core._checks import MAX_GENERATION, check_finite, check_generation, check_int
from zlink_trio.core.errors import (
    CapacityExceeded,
    InvalidOperation,
    StaleFence,
    Unavailable,
    ZLinkError,
)
from zlink_trio.core.identity import (
    MAX_ID_BYTES,
    NodeRid,
    SpotKind,
    validate_spot_id,
    validate_stable_type,
    validate_user_spot_id,
)
from zlink_trio.core.records import (
    MOVING_STATES,
    AuthorityFence,
    AuthorityRecord,
    AuthorityState,
    CreationIntent,
    OwnerFence,
    RecoveryPointer,
    ReservationFence,
    record_of,
    reservation_fence,
    validate_mesh_name,
)
from zlink_trio.store.rules.authority import EV, step, step_to_missing
from zlink_trio.store.values import (
    MAX_PAGE_BYTES,
    MAX_PAGE_SIZE,
    AuthorityExists,
    LocationStatistics,
    MembersRemain,
    Page,
)

if TYPE_CHECKING:
    from collections.abc import Iterable

    from zlink_trio.core.descriptor import NodeClaim
    from zlink_trio.store.values import SavedState, StoredReminder

__all__ = (
    "CURSOR_PREFIX",
    "CapacityKey",
    "LocationState",
    "add_member",
    "capacity_key",
    "check_container",
    "check_owner",
    "check_reserve_args",
    "container_refusal",
    "drop_member",
    "forget",
    "next_generation",
    "page_of",
    "parse_cursor",
    "pointer_removal",
    "shift",
    "txn_abort_creating",
    "txn_begin_close",
    "txn_commit_ready",
    "txn_query",
    "txn_release",
    "txn_remove_recovery_pointer",
    "txn_reserve",
    "txn_statistics",
)

#: Capacity is counted per owner lifecycle: ``(mesh, node_rid, lifecycle_generation)``.
CapacityKey = tuple[str, NodeRid, int]

#: What every Query cursor starts with (the rest is the last Spot ID of the page).
CURSOR_PREFIX = "c1:"


@attrs.define
class LocationState:
    """Everything a memory Location Store holds. Mutated only by ``txn_*`` functions."""

    claims: dict[tuple[str, NodeRid], NodeClaim] = attrs.Factory(dict)
    records: dict[str, AuthorityRecord] = attrs.Factory(dict)
    #: NodeId -> last lifecycle generation issued (never decreases, survives Remove).
    lifecycles: dict[str, int] = attrs.Factory(dict)
    #: The store-wide ObjectGeneration sequence: the last value issued.
    last_generation: int = 0
    pending: dict[CapacityKey, int] = attrs.Factory(dict)
    active: dict[CapacityKey, int] = attrs.Factory(dict)
    #: Container Spot ID -> the IDs of the Actors whose records name it (docs/actors.md):
    #: an index of ``records``, written by the same transactions (:func:`add_member`,
    #: :func:`drop_member`); a container without members has no entry.
    members: dict[str, frozenset[str]] = attrs.Factory(dict)
    #: Spot ID -> its durable state (``store.rules.state``): outlives the records.
    saved: dict[str, SavedState] = attrs.Factory(dict)
    #: Spot ID -> its durable reminders sorted by name (``store.rules.reminders``).
    reminders: dict[str, tuple[StoredReminder, ...]] = attrs.Factory(dict)


def capacity_key(mesh: str, owner: OwnerFence) -> CapacityKey:
    """The capacity counter key of ``owner`` in ``mesh``."""
    return (mesh, owner.node_rid, owner.lifecycle_generation)


def shift(counter: dict[CapacityKey, int], key: CapacityKey, delta: int) -> None:
    """Write helper: add ``delta`` to a counter, dropping it at zero."""
    value = counter.get(key, 0) + delta
    assert value >= 0, (key, value)
    if value:
        counter[key] = value
    else:
        counter.pop(key, None)


def add_member(state: LocationState, container: str, actor_id: str) -> None:
    """Write helper: ``actor_id``'s record now names ``container``."""
    state.members[container] = state.members.get(container, frozenset()) | {actor_id}


def drop_member(state: LocationState, container: str, actor_id: str) -> None:
    """Write helper: ``actor_id``'s record no longer names ``container``."""
    left = state.members.get(container, frozenset()) - {actor_id}
    if left:
        state.members[container] = left
    else:
        state.members.pop(container, None)


def forget(state: LocationState, record: AuthorityRecord) -> None:
    """Write helper: delete ``record`` (and its memberships, for an Actor's record)."""
    del state.records[record.spot_id]
    if record.container is not None:
        drop_member(state, record.container, record.spot_id)
    if record.next_container is not None:
        drop_member(state, record.next_container, record.spot_id)


def check_container(state: LocationState, container: str, owner: OwnerFence) -> None:
    """That ``container`` can take a member now, for ``owner`` (docs/actors.md).

    It must be the Ready record of an Entry or User Spot that ``owner`` owns; raises
    :func:`container_refusal`'s error otherwise.
    """
    refusal = container_refusal(container, state.records.get(container), owner)
    if refusal is not None:
        raise refusal


def container_refusal(container: str, record: AuthorityRecord | None,
                      owner: OwnerFence) -> ZLinkError | None:
    """The error joining ``container`` (whose record is ``record``) raises, or ``None``.

    In order: :class:`InvalidOperation` when it has no record, or is an Instance Spot
    or an Actor (they have no members); :class:`StaleFence` when another owner holds
    it; :class:`Unavailable` while it is Creating, Closing or moving (retry once it is
    Ready). The backends that check in a script hand the container's record to this
    function, so every backend words a refusal the same way.
    """
    if record is None:
        return InvalidOperation(f"container {container!r} has no authority; an Actor joins "
                                "an existing Entry or User Spot")
    if record.kind not in (SpotKind.ENTRY, SpotKind.USER):
        return InvalidOperation(
            f"{container!r} is {record.kind.name}; only an Entry or User Spot has Actor "
            "members (an Instance Spot never does)")
    if record.owner != owner:
        return StaleFence(f"{container!r} is owned by {record.owner}, not {owner}; an Actor "
                          "joins a Spot on the node that owns it -- re-read its authority")
    if record.state is not AuthorityState.READY:
        return Unavailable(f"{container!r} is {record.state.value}; an Actor joins it only "
                           "while it is Ready")
    return None


def next_generation(state: LocationState) -> int:
    """The next ObjectGeneration (read only); CapacityExceeded if the sequence is spent."""
    if state.last_generation >= MAX_GENERATION:
        raise CapacityExceeded("the store's ObjectGeneration sequence is exhausted (2**63-1)")
    return state.last_generation + 1


def check_owner(state: LocationState, mesh: str, owner: OwnerFence, now: float) -> NodeClaim:
    """The live claim of ``owner`` in ``mesh``; StaleFence / Unavailable otherwise."""
    claim = state.claims.get((mesh, owner.node_rid))
    if claim is None or claim.lifecycle_generation != owner.lifecycle_generation:
        raise StaleFence(
            f"node {owner.node_rid} lifecycle {owner.lifecycle_generation} has no current claim "
            f"in mesh {mesh!r}; the node restarted or left, re-read its descriptor"
        )
    if not claim.is_live(now):
        raise Unavailable(
            f"the lease of node {owner.node_rid} lifecycle {owner.lifecycle_generation} expired "
            f"at {claim.lease_expires_at}; an expired owner cannot change authority"
        )
    return claim


def check_reserve_args(spot_id: str, *, kind: SpotKind, stable_type: str, mesh: str,
                       owner: OwnerFence, now: float, creation_intent: CreationIntent | None,
                       recovery_pointer: RecoveryPointer | None,
                       container: str | None = None) -> None:
    """Reserve's argument checks, shared by every backend (InvalidOperation, nothing read)."""
    # Each text check tests the common case first -- an ASCII str within the bound (and,
    # for the ID, not of the reserved Entry form) -- before the full validator.
    if not (type(spot_id) is str and spot_id.isascii() and 0 < len(spot_id) <= MAX_ID_BYTES
            and "-entry-" not in spot_id):
        validate_user_spot_id(spot_id)
    if kind not in (SpotKind.USER, SpotKind.INSTANCE) and (
            kind is not SpotKind.ACTOR or container is None):
        raise InvalidOperation(f"reserve creates USER or INSTANCE Spots, or an ACTOR in a "
                               f"container, not {kind!r}")
    if container is not None:
        if kind is not SpotKind.ACTOR:
            raise InvalidOperation("only an Actor's reservation names a container")
        validate_spot_id(container)
    if not (type(stable_type) is str and stable_type.isascii()
            and 0 < len(stable_type) <= MAX_ID_BYTES):
        validate_stable_type(stable_type)
    if not (type(mesh) is str and mesh.isascii() and 0 < len(mesh) <= MAX_ID_BYTES):
        validate_mesh_name(mesh)
    if not isinstance(owner, OwnerFence):
        raise InvalidOperation(f"owner must be an OwnerFence, got {type(owner).__name__}")
    if not isinstance(creation_intent, CreationIntent | None) or not isinstance(
            recovery_pointer, RecoveryPointer | None):
        raise InvalidOperation("creation_intent / recovery_pointer have the wrong type")
    if not (type(now) is float and math.isfinite(now)):
        check_finite(now, "now")


def txn_reserve(state: LocationState, spot_id: str, *, kind: SpotKind, stable_type: str,
                mesh: str, owner: OwnerFence, now: float,
                creation_intent: CreationIntent | None = None,
                recovery_pointer: RecoveryPointer | None = None,
                container: str | None = None) -> ReservationFence:
    """Reserve; see ``LocationStore.reserve``."""
    check_reserve_args(spot_id, kind=kind, stable_type=stable_type, mesh=mesh, owner=owner,
                       now=now, creation_intent=creation_intent,
                       recovery_pointer=recovery_pointer, container=container)
    current = state.records.get(spot_id)
    if current is not None:
        raise AuthorityExists(current)
    claim = check_owner(state, mesh, owner, now)
    if container is not None:
        check_container(state, container, owner)
    if not claim.descriptor.serves(stable_type, kind):
        raise InvalidOperation(
            f"node {owner.node_rid} does not serve stable type {stable_type!r} as "
            f"{kind.name}; reserve on a node whose descriptor serves it"
        )
    key = capacity_key(mesh, owner)
    load = state.active.get(key, 0) + state.pending.get(key, 0)
    if load >= claim.descriptor.capacity:
        raise CapacityExceeded(
            f"node {owner.node_rid} is at capacity ({load} of {claim.descriptor.capacity} "
            "active + pending); choose another node or retry later"
        )
    generation = next_generation(state)
    # Every field was checked above (check_reserve_args, the sequence): no second pass.
    record = record_of(spot_id, kind, stable_type, mesh, step(AuthorityState.MISSING, EV.reserve),
                       generation, 1, 1, owner, creation_intent, recovery_pointer,
                       None, None, container)
    fence = reservation_fence(record, claim.lease_expires_at)
    # -- writes --
    state.records[spot_id] = record
    if container is not None:
        add_member(state, container, spot_id)
    state.last_generation = generation
    shift(state.pending, key, +1)
    return fence


def _matches_reservation(record: AuthorityRecord, fence: ReservationFence) -> bool:
    return (record.object_generation == fence.object_generation
            and record.owner_generation == fence.owner_generation
            and (record.owner is fence.owner or record.owner == fence.owner))


def txn_commit_ready(state: LocationState, fence: ReservationFence, *,
                     now: float) -> AuthorityRecord:
    """CommitReady; see ``LocationStore.commit_ready``."""
    if not (type(now) is float and math.isfinite(now)):
        check_finite(now, "now")
    record = state.records.get(fence.spot_id)
    if record is not None and _matches_reservation(record, fence):
        if (record.state is AuthorityState.READY
                and record.store_version == fence.store_version + 1):
            return record  # this very commit already happened: idempotent retry
        if record.state is AuthorityState.CREATING and record.store_version == fence.store_version:
            check_owner(state, record.mesh, record.owner, now)
            # The stored record's fields are valid; Ready keeps no creation intent.
            ready = record_of(record.spot_id, record.kind, record.stable_type, record.mesh,
                              step(record.state, EV.commit_ready), record.object_generation,
                              record.owner_generation, record.store_version + 1,
                              record.owner, None, record.recovery_pointer, None, None,
                              record.container)
            key = capacity_key(record.mesh, record.owner)
            state.records[record.spot_id] = ready
            shift(state.pending, key, -1)
            shift(state.active, key, +1)
            return ready
    raise StaleFence(
        f"the reservation of {fence.spot_id!r} generation {fence.object_generation} no longer "
        "matches the store (aborted, committed or changed); re-read the authority"
    )


def txn_abort_creating(state: LocationState, fence: ReservationFence) -> bool:
    """AbortCreating; see ``LocationStore.abort_creating``."""
    record = state.records.get(fence.spot_id)
    if record is None or record.object_generation != fence.object_generation:
        return False
    if (record.state is not AuthorityState.CREATING or not _matches_reservation(record, fence)
            or record.store_version != fence.store_version):
        raise StaleFence(
            f"{fence.spot_id!r} generation {fence.object_generation} is {record.state.value} "
            f"at StoreVersion {record.store_version}, not the Creating reservation "
            f"{fence.store_version}; re-read the authority"
        )
    step_to_missing(record.state, EV.abort_creating)
    forget(state, record)
    shift(state.pending, capacity_key(record.mesh, record.owner), -1)
    return True


def txn_begin_close(state: LocationState, spot_id: str, *, object_generation: int,
                    owner: OwnerFence, now: float, expected_owner_generation: int | None = None,
                    expected_store_version: int | None = None) -> AuthorityRecord | None:
    """BeginClose; see ``LocationStore.begin_close``."""
    validate_spot_id(spot_id)
    check_generation(object_generation, "object_generation")
    check_finite(now, "now")
    record = state.records.get(spot_id)
    if record is None:
        return None
    if record.object_generation != object_generation:
        raise InvalidOperation(
            f"{spot_id!r} is now generation {record.object_generation}, not "
            f"{object_generation}; that incarnation is gone and a new one is not closed for you"
        )
    if record.kind is SpotKind.ENTRY:
        raise InvalidOperation(f"{spot_id!r} is an Entry Spot; it ends with its node's claim")
    if record.state is AuthorityState.CREATING:
        raise InvalidOperation(f"{spot_id!r} is still Creating; close it once it is Ready")
    if record.state in MOVING_STATES:
        raise Unavailable(f"{spot_id!r} is {record.state.value} for a move; retry after it")
    stale = (record.owner != owner
             or expected_owner_generation not in (None, record.owner_generation))
    if record.state is AuthorityState.CLOSING and not stale:
        return record  # already closing under this owner: idempotent
    if stale or expected_store_version not in (None, record.store_version):
        raise StaleFence(
            f"{spot_id!r} is owned by {record.owner} owner generation "
            f"{record.owner_generation} at StoreVersion {record.store_version}, not the "
            "expected fence; re-read the authority"
        )
    check_owner(state, record.mesh, owner, now)
    members = state.members.get(spot_id)
    if members:
        raise MembersRemain(record, len(members))
    closing = attrs.evolve(record, state=step(record.state, EV.begin_close),
                           store_version=record.store_version + 1)
    state.records[spot_id] = closing
    return closing


def txn_release(state: LocationState, fence: AuthorityFence) -> bool:
    """Release; see ``LocationStore.release``."""
    record = state.records.get(fence.spot_id)
    if record is None or record.object_generation != fence.object_generation:
        return False
    if (record.state is not AuthorityState.CLOSING or record.owner != fence.owner
            or record.owner_generation != fence.owner_generation):
        raise StaleFence(
            f"{fence.spot_id!r} is {record.state.value} under {record.owner} owner generation "
            f"{record.owner_generation}; only its Closing owner may release it"
        )
    step_to_missing(record.state, EV.release)
    forget(state, record)
    if record.kind in (SpotKind.USER, SpotKind.ACTOR):  # closed: its state and reminders end
        state.saved.pop(record.spot_id, None)
        state.reminders.pop(record.spot_id, None)
    shift(state.active, capacity_key(record.mesh, record.owner), -1)
    return True


def pointer_removal(record: AuthorityRecord | None, object_generation: int,
                    expected_version: int) -> bool:
    """RemoveRecoveryPointer's state checks: whether it removes; raises what it raises.

    ``False`` when the record is gone, of another generation or has no pointer;
    :class:`InvalidOperation` while Creating; :class:`StaleFence` when the StoreVersion
    is not ``expected_version``.
    """
    if record is None or record.object_generation != object_generation:
        return False
    if record.state is AuthorityState.CREATING:
        raise InvalidOperation(
            f"{record.spot_id!r} is Creating; its recovery pointer is still needed")
    if record.recovery_pointer is None:
        return False
    if record.store_version != expected_version:
        raise StaleFence(
            f"{record.spot_id!r} is at StoreVersion {record.store_version}, not "
            f"{expected_version}; re-read the record before removing its recovery pointer"
        )
    return True


def txn_remove_recovery_pointer(state: LocationState, spot_id: str, *, object_generation: int,
                                expected_version: int) -> bool:
    """RemoveRecoveryPointer; see ``LocationStore.remove_recovery_pointer``."""
    validate_spot_id(spot_id)
    check_generation(object_generation, "object_generation")
    check_generation(expected_version, "expected_version")
    record = state.records.get(spot_id)
    if not pointer_removal(record, object_generation, expected_version):
        return False
    assert record is not None
    remove_pointer(state, record)
    return True


def remove_pointer(state: LocationState, record: AuthorityRecord) -> None:
    """RemoveRecoveryPointer's write, after :func:`pointer_removal` said it removes."""
    # The stored record's fields are valid, and dropping the pointer breaks no invariant.
    state.records[record.spot_id] = record_of(
        record.spot_id, record.kind, record.stable_type, record.mesh, record.state,
        record.object_generation, record.owner_generation, record.store_version + 1,
        record.owner, record.creation_intent, None, record.relocation_target, None,
        record.container)


def parse_cursor(cursor: str | None) -> str | None:
    """The Spot ID a Query ``cursor`` resumes after (``None``: from the start).

    :class:`InvalidOperation` for anything ``query`` did not issue.
    """
    if cursor is None:
        return None
    if not isinstance(cursor, str) or not cursor.startswith(CURSOR_PREFIX):
        raise InvalidOperation(f"{cursor!r} is not a query cursor; pass a next_cursor")
    return validate_spot_id(cursor[len(CURSOR_PREFIX):])


def page_of(records: Iterable[AuthorityRecord], *, listed: int, max_bytes: int) -> Page:
    """The Query page of ``records`` (in Spot ID order, at most the page size).

    ``listed`` is how many IDs follow the cursor (at least one more than the page
    when another page follows). The page stops before the record that would make
    its encoded JSON array larger than ``max_bytes``; one record always fits.
    """
    taken: list[AuthorityRecord] = []
    size = 2  # "[" and "]"
    for record in records:
        grow = record.encoded_size() + (1 if taken else 0)
        if taken and size + grow > max_bytes:
            break
        taken.append(record)
        size += grow
    more = listed > len(taken)
    return Page(tuple(taken), CURSOR_PREFIX + taken[-1].spot_id if more else None)


def txn_query(state: LocationState, *, page_size: int, cursor: str | None = None,
              max_bytes: int = MAX_PAGE_BYTES) -> Page:
    """Query; see ``LocationStore.query``. ``max_bytes`` is lowered only by tests."""
    check_int(page_size, "page_size", 1, MAX_PAGE_SIZE)
    after = parse_cursor(cursor)
    # str order is code-point order, which is UTF-8 byte order for valid strings.
    ids = sorted(i for i in state.records if after is None or i > after)
    return page_of((state.records[i] for i in ids[:page_size]), listed=len(ids),
                   max_bytes=max_bytes)


def txn_statistics(state: LocationState) -> LocationStatistics:
    """Statistics; see ``LocationStore.statistics``."""
    by_state = {s: 0 for s in AuthorityState}
    for record in state.records.values():
        by_state[record.state] += 1
    return LocationStatistics(
        claims=len(state.claims), creating=by_state[AuthorityState.CREATING],
        ready=by_state[AuthorityState.READY], closing=by_state[AuthorityState.CLOSING],
        relocating=by_state[AuthorityState.RELOCATING], sealed=by_state[AuthorityState.SEALED],
        relay_ready=by_state[AuthorityState.RELAY_READY],
        last_object_generation=state.last_generation,
    )
