"""Builders shared by the store conformance tests."""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any

from zlink_trio.core.descriptor import NodeClaim, NodeDescriptor
from zlink_trio.core.identity import NodeRid, SpotKind, new_entry_spot_id
from zlink_trio.core.placement import Role

if TYPE_CHECKING:
    from zlink_trio.core.records import AuthorityRecord, OwnerFence, ReservationFence
    from zlink_trio.store import Store

MESH = "world"
LEASE = 10.0
SERVED = {"room": SpotKind.USER, "counter": SpotKind.INSTANCE, "player": SpotKind.ACTOR}
_counter = itertools.count(1)


def rid() -> NodeRid:
    """A fresh deterministic-enough NodeRid."""
    return NodeRid(next(_counter).to_bytes(16, "big"))


def descriptor(node_id: str = "node-a", *, mesh: str = MESH, capacity: int = 4,
               node_rid: NodeRid | None = None, entry: str | None = None,
               served: dict[str, SpotKind] | None = None) -> NodeDescriptor:
    return NodeDescriptor(
        mesh=mesh, node_rid=node_rid or rid(), node_id=node_id,
        endpoint=f"ws://127.0.0.1:9/{node_id}",
        roles=[Role.OBJECT_SERVER, Role.OBJECT_CLIENT],
        served_types=SERVED if served is None else served, capacity=capacity,
        entry_spot_id=entry or new_entry_spot_id(node_id),
    )


async def claim(store: Store, node_id: str = "node-a", *, now: float = 0.0,
                lease: float = LEASE, **kwargs: Any) -> NodeClaim:
    return await store.location.new_claim(descriptor(node_id, **kwargs), now=now, lease=lease)


async def reserve(store: Store, owner: NodeClaim | OwnerFence, spot_id: str = "r-1", *,
                  stable_type: str = "room", kind: SpotKind = SpotKind.USER,
                  now: float = 0.0, **kwargs: Any) -> ReservationFence:
    fence = owner.owner() if isinstance(owner, NodeClaim) else owner
    return await store.location.reserve(spot_id, kind=kind, stable_type=stable_type, mesh=MESH,
                                        owner=fence, now=now, **kwargs)


async def ready(store: Store, owner: NodeClaim, spot_id: str = "r-1",
                **kwargs: Any) -> AuthorityRecord:
    fence = await reserve(store, owner, spot_id, **kwargs)
    return await store.location.commit_ready(fence, now=0.0)


def one_sequence(store: Store) -> bool:
    """Whether ``store`` issues ObjectGenerations as one store-wide sequence.

    Spec 06 and docs/decisions.md promise every backend only this much: a generation is
    strictly increasing per Spot ID, unique store-wide and never reused. The memory,
    SQLite and Redis backends (and Redis Cluster with ``buckets=1``) promise more, a
    generation "larger than any the store ever issued" from one dense sequence, and
    the tests that rely on it check that extra promise only where this is true.
    """
    keys = getattr(store, "keys", None)
    return getattr(keys, "buckets", 1) == 1


async def issued(store: Store) -> object:
    """Where the backend's ObjectGeneration counters stand, to compare before and after.

    The protocol shows only the largest generation issued
    (``statistics().last_object_generation``); with one sequence that is the whole
    counter, so "no generation used" is "it did not move". Redis Cluster has a counter
    per bucket (docs/decisions.md), and one that moved below the largest would not show
    in the statistics, so there this reads every bucket's (its ``bucket_statistics``).
    """
    location: Any = store.location
    if not one_sequence(store):
        return [gen for _, gen, _ in await location.bucket_statistics()]
    return (await location.statistics()).last_object_generation


async def units(store: Store, owner: NodeClaim | OwnerFence, *,
                mesh: str = MESH) -> tuple[int, int]:
    """The ``(pending, active)`` capacity units the backend counts for ``owner``.

    Capacity counters are not part of the protocol (only their effect, CapacityExceeded,
    is), so this reads each backend's own bookkeeping: the memory state, SQLite's
    ``loc_capacity`` row, Redis's load hash.
    """
    fence = owner.owner() if isinstance(owner, NodeClaim) else owner
    location: Any = store.location
    if hasattr(location, "state"):  # memory://
        key = (mesh, fence.node_rid, fence.lifecycle_generation)
        return location.state.pending.get(key, 0), location.state.active.get(key, 0)
    if hasattr(location, "_db"):  # sqlite://
        row = await location._db.read(lambda conn: conn.execute(
            "SELECT pending, active FROM loc_capacity WHERE mesh = ? AND node_rid = ? AND "
            "lifecycle = ?", (mesh, str(fence.node_rid), fence.lifecycle_generation)).fetchone())
        return (0, 0) if row is None else (row[0], row[1])
    key = store.keys.load(mesh, fence.node_rid, fence.lifecycle_generation)  # type: ignore[attr-defined]
    ahead = 0
    if hasattr(location._run, "flush"):  # Redis Cluster: shifts within a lifecycle wait,
        await location._run.flush()  # and units taken ahead count as pending until used
        ahead = location._run.in_hand(mesh, fence.node_rid, fence.lifecycle_generation)
    values = await location._run.command("units", ["HMGET", key, "pending", "active"])
    pending, active = (0 if v is None else int(v) for v in values)
    return pending - ahead, active
