"""Placement: choosing the Mesh, the stable type and the node for a new Spot.

Theory of operation
-------------------
Create, GetOrCreate and cold activation place a *new* User or Instance Spot
(docs/concepts.md, "Intent"). The runtime snapshots the node descriptors it
knows into :class:`PlacementCandidate` values and asks this module, in order:

1. **Which Mesh?** (:func:`select_mesh`) A Mesh is *eligible* when at least
   one of its nodes has the object-client or object-server role. ``in_mesh``
   given: it must be eligible, else :class:`NotFound`. Omitted: exactly one
   eligible Mesh is used; none is :class:`NotConfigured`, two or more is
   :class:`InvalidOperation` (pass ``in_mesh``).
2. **Which stable type?** Only *hosts* count: nodes of the Mesh with the
   object-server role whose descriptor is ``serving``. For Instance intent
   (:func:`select_instance_type`) a given type must be served as an Instance
   type by some host, else :class:`NotFound`; an omitted type is the single
   distinct Instance type of the Mesh's hosts (none: NotFound, several:
   InvalidOperation). For User create (:func:`select_user_type`) the type is
   always given and must be served as a User type. In both cases a type the
   hosts serve *only as the other kind* is :class:`TypeMismatch`, not
   NotFound: the type exists, the caller used the wrong operation for it, and
   the message says which one to use. A type that only object servers taking
   no new Spots now serve (draining or stopping: ``serving`` false) is
   :class:`Unavailable`, not NotFound: it exists and comes back when one of
   them is undrained or restarts, so the caller may retry.
3. **Which nodes have room?** (:func:`eligible_nodes`) A host is kept when
   ``active + pending < capacity`` and, if it has an active-object ceiling,
   ``active + pending < ceiling``: pending creations count, so a node whose
   in-flight creations would take it to the ceiling is "near the ceiling" and
   excluded. A host with placement weight 0 takes no new objects
   either (weight 0 is how an operator drains a node). None left is
   :class:`CapacityExceeded` with ``lane=None``.
4. **Which node?** (:func:`choose_node`) For a Spot ID (cold activation,
   get-or-create): weighted rendezvous hashing -- each node scores
   ``-weight / ln(u)`` with ``u`` in ``(0, 1)`` hashed from the Spot ID and its
   NodeRid, the highest wins -- so every caller that reads the same live nodes
   picks the same one, however many first calls race for the ID, and a node's
   share of new IDs is its weight over the total. Without an ID (``create()``'s
   fresh one, a relocation target) a weighted random choice with an injected
   ``random()`` in ``[0, 1)``. Because zero-weight nodes were removed in step 3 the
   total is always positive here. We chose "weight 0 means no new objects" over
   "uniform among zero-weight nodes when nothing else is left": a user who
   sets a weight to 0 to drain a node expects no new Spot to land there, even
   when the other nodes are full.

Rendezvous hashing shares out reminders too (:func:`reminder_partitions`): the reminders of a
Mesh are spread over :data:`REMINDER_PARTITIONS` partitions by Spot ID
(:func:`reminder_partition`), and each serving host scans the partitions it wins.

:func:`check_local_activation` is the second use of the ceiling: the target
node refuses a new local activation when it is at or over its ceiling, so a
request already routed to it (or a relocation arriving) cannot bypass it.

All functions are pure and deterministic given ``random`` (and the Spot ID);
candidates are considered in the order given. :class:`PlacementCandidate`, the node
as placement sees it, and :class:`Role` are :mod:`.placement_candidate`'s (and
importable from here).
"""

from __future__ import annotations

import functools
import hashlib
import math
from collections.abc import Callable, Iterable, Sequence
from typing import Final

import attrs

from zlink_trio.core.errors import (
    CapacityExceeded,
    InvalidOperation,
    NotConfigured,
    NotFound,
    TypeMismatch,
    Unavailable,
)
from zlink_trio.core.identity import SpotKind, validate_stable_type
from zlink_trio.core.placement_candidate import (
    PLACEABLE_KINDS,
    PlacementCandidate,
    Role,
    check_non_negative,
    roles_from,
    served_types_from,
)

__all__ = (
    "REMINDER_PARTITIONS",
    "Placement",
    "PlacementCandidate",
    "Random",
    "Role",
    "check_local_activation",
    "choose_node",
    "eligible_nodes",
    "place",
    "reminder_partition",
    "reminder_partitions",
    "roles_from",
    "select_instance_type",
    "select_mesh",
    "select_user_type",
    "served_types_from",
)

#: A source of floats uniformly distributed in ``[0, 1)`` (``random.random``).
Random = Callable[[], float]

#: How many partitions the reminders of a Mesh are spread over
#: (:func:`reminder_partition`); the live hosts share them out (:func:`reminder_partitions`).
REMINDER_PARTITIONS: Final = 64

@attrs.frozen(kw_only=True)
class Placement:
    """The outcome of :func:`place`: where the new Spot goes."""

    mesh: str
    stable_type: str
    node: PlacementCandidate


def _object_role(candidate: PlacementCandidate) -> bool:
    return bool(candidate.roles & {Role.OBJECT_CLIENT, Role.OBJECT_SERVER})


def _hosts(candidates: Iterable[PlacementCandidate], mesh: str) -> list[PlacementCandidate]:
    return [
        c for c in candidates
        if c.mesh == mesh and c.serving and Role.OBJECT_SERVER in c.roles
    ]


def select_mesh(candidates: Sequence[PlacementCandidate], in_mesh: str | None) -> str:
    """Return the Mesh to place in (step 4 of ``statecharts.cold_activation``; create too).

    Raises :class:`NotFound` if ``in_mesh`` names no Mesh with an
    object-role node; with ``in_mesh`` omitted, :class:`NotConfigured` when no
    Mesh has an object-role node and :class:`InvalidOperation` when several do.
    """
    meshes = sorted({c.mesh for c in candidates if _object_role(c)})
    if in_mesh is not None:
        if in_mesh not in meshes:
            raise NotFound(
                f"Mesh {in_mesh!r} has no node with the object-client or object-server role "
                f"(known object Meshes: {meshes}); check the in_mesh name or start a node there"
            )
        return in_mesh
    if not meshes:
        raise NotConfigured(
            "no Mesh has a node with the object-client or object-server role, so there is "
            "nowhere to place a new Spot; start an object server or configure a Mesh"
        )
    if len(meshes) > 1:
        raise InvalidOperation(
            f"several Meshes have object-role nodes ({meshes}); say which one with in_mesh()"
        )
    return meshes[0]


def _check_not_only_closed(candidates: Iterable[PlacementCandidate], mesh: str,
                           stable_type: str | None, kind: SpotKind) -> None:
    """Unavailable when object servers of ``mesh`` serve ``stable_type`` (``None``: any
    type) as ``kind`` but none of them takes new Spots now; the caller found no serving
    one."""
    closed = [c for c in candidates if c.mesh == mesh and not c.serving
              and Role.OBJECT_SERVER in c.roles
              and (kind in c.served_types.values() if stable_type is None
                   else c.served_types.get(stable_type) is kind)]
    if not closed:
        return
    what = (f"an {kind.name} Spot type" if stable_type is None
            else f"{kind.name} type {stable_type!r}")
    names = sorted(c.node_id for c in closed if c.node_id is not None)
    which = (("node " if len(names) == 1 else "nodes ") + ", ".join(map(repr, names))
             if len(names) == len(closed) else f"{len(closed)} node(s)")
    raise Unavailable(
        f"every node of Mesh {mesh!r} serving {what} ({which}) is draining or stopping and "
        "takes no new Spots; retry once one of them is undrained (zlink-trio undrain "
        "NODE_ID, or node.undrain() there) or has restarted, or start another node that "
        "registers it (zlink-trio nodes shows which nodes are draining)"
    )


def _check_kind_served(
    candidates: Sequence[PlacementCandidate], mesh: str, stable_type: str, kind: SpotKind
) -> None:
    hosts = _hosts(candidates, mesh)
    kinds = {c.served_types[stable_type] for c in hosts if stable_type in c.served_types}
    if kind in kinds:
        return
    if kinds:
        if kind is SpotKind.INSTANCE:
            what = "a User Spot type; create it with spots.create() or spots.get_or_create()"
        else:
            what = "an Instance Spot type; it is created by a call with instance_spot() intent"
        raise TypeMismatch(f"stable type {stable_type!r} is served in Mesh {mesh!r} as {what}")
    _check_not_only_closed(candidates, mesh, stable_type, kind)
    raise NotFound(
        f"no serving object server in Mesh {mesh!r} provides stable type {stable_type!r}; "
        "check the type name (it is case-sensitive) or start a node that registers it"
    )


def select_instance_type(
    candidates: Sequence[PlacementCandidate], mesh: str, stable_type: str | None
) -> str:
    """Return the stable type of a cold activation in ``mesh`` (its chart's steps 5-6).

    Given ``stable_type``: returned when some serving object server of the
    Mesh serves it as an Instance type; :class:`TypeMismatch` when it is served
    only as a User type; :class:`Unavailable` when only object servers that take
    no new Spots now (draining or stopping) serve it; :class:`NotFound` otherwise;
    :class:`InvalidOperation` if it is malformed. Omitted: the one distinct
    Instance type served there; for none, :class:`Unavailable` when draining or
    stopping nodes serve one, else :class:`NotFound`; :class:`InvalidOperation`
    for several.
    """
    hosts = _hosts(candidates, mesh)
    if stable_type is not None:
        validate_stable_type(stable_type)
        _check_kind_served(candidates, mesh, stable_type, SpotKind.INSTANCE)
        return stable_type
    types = sorted({
        t for c in hosts for t, kind in c.served_types.items() if kind is SpotKind.INSTANCE
    })
    if not types:
        _check_not_only_closed(candidates, mesh, None, SpotKind.INSTANCE)
        raise NotFound(
            f"no serving object server in Mesh {mesh!r} provides any Instance Spot type; "
            "register one on a node of that Mesh or choose another Mesh"
        )
    if len(types) > 1:
        raise InvalidOperation(
            f"Mesh {mesh!r} serves several Instance Spot types ({types}); name the one you "
            "mean with instance_spot(stable_type)"
        )
    return types[0]


def select_user_type(
    candidates: Sequence[PlacementCandidate], mesh: str, stable_type: str
) -> str:
    """Return ``stable_type`` if a serving object server of ``mesh`` serves it as a User type.

    Raises :class:`TypeMismatch` when it is served there only as an Instance
    type, :class:`Unavailable` when only object servers that take no new Spots now
    (draining or stopping) serve it, :class:`NotFound` when nobody serves it,
    :class:`InvalidOperation` when it is malformed.
    """
    validate_stable_type(stable_type)
    _check_kind_served(candidates, mesh, stable_type, SpotKind.USER)
    return stable_type


def eligible_nodes(
    candidates: Sequence[PlacementCandidate], mesh: str, stable_type: str, kind: SpotKind
) -> tuple[PlacementCandidate, ...]:
    """Return the hosts that may take one more ``kind`` Spot of ``stable_type`` in ``mesh``.

    A host is a serving object server of the Mesh that serves the type as
    ``kind``; it is kept when it has room (:attr:`PlacementCandidate.has_room`)
    and a positive weight. Raises :class:`Unavailable` if only object servers that
    take no new Spots now (draining or stopping) serve the type, :class:`NotFound`
    if no host serves it, :class:`CapacityExceeded` (``lane=None``) if none is left.
    """
    hosts = [c for c in _hosts(candidates, mesh) if c.served_types.get(stable_type) is kind]
    if not hosts:
        _check_not_only_closed(candidates, mesh, stable_type, kind)
        raise NotFound(
            f"no serving object server in Mesh {mesh!r} provides {kind.name} type "
            f"{stable_type!r}; start a node that registers it"
        )
    roomy = [c for c in hosts if c.has_room]
    kept = tuple(c for c in roomy if c.weight > 0)
    if not kept:
        why = (
            "every one is at its capacity or active-object ceiling" if not roomy
            else "those with room all have placement weight 0 (draining)"
        )
        raise CapacityExceeded(
            f"no node can take a new {stable_type!r} Spot in Mesh {mesh!r}: of {len(hosts)} "
            f"serving node(s), {why}; retry later, close idle Spots, or add capacity"
        )
    return kept


def _rendezvous_score(key: bytes, candidate: PlacementCandidate,
                      weight: float | None = None) -> float:
    return _score(key, candidate.node_rid.value,
                  candidate.weight if weight is None else weight)


def _score(key: bytes, node_rid: bytes, weight: float) -> float:
    digest = hashlib.blake2b(key + node_rid, digest_size=8).digest()
    u = (int.from_bytes(digest, "big") + 0.5) / 2.0**64  # in (0, 1), never 0 or 1
    return -weight / math.log(u)


def choose_node(eligible: Sequence[PlacementCandidate], random: Random, *,
                spot_id: str | None = None) -> PlacementCandidate:
    """Pick one node, each with probability ``weight / total weight``.

    With ``spot_id``: weighted rendezvous hashing (module docstring), the same node
    for the same ID and live nodes, ``random`` unused. Without: calls ``random()``
    exactly once. Zero-weight nodes are never chosen. Raises
    :class:`InvalidOperation` if ``eligible`` has no positive weight (use
    :func:`eligible_nodes` first) or ``random()`` is outside ``[0, 1)``.
    """
    weighted = [c for c in eligible if c.weight > 0]
    if not weighted:
        raise InvalidOperation(
            "choose_node needs at least one candidate with a positive weight; "
            "filter with eligible_nodes() first"
        )
    if spot_id is not None:
        key = spot_id.encode("utf-8")
        return max(weighted, key=lambda c: (_rendezvous_score(key, c), c.node_rid.value))
    draw = random()
    if not 0.0 <= draw < 1.0:
        raise InvalidOperation(f"random() must return a float in [0, 1), got {draw!r}")
    point = draw * math.fsum(c.weight for c in weighted)
    running = 0.0
    for candidate in weighted:
        running += candidate.weight
        if point < running:
            return candidate
    # Rounding can leave ``point`` equal to the running sum: take the last one.
    return weighted[-1]


def place(
    candidates: Sequence[PlacementCandidate],
    *,
    kind: SpotKind,
    stable_type: str | None,
    in_mesh: str | None,
    random: Random,
) -> Placement:
    """Run the whole selection for a new ``kind`` Spot: Mesh, type, capacity, weighted choice.

    ``kind`` USER requires ``stable_type``; INSTANCE allows omitting it.
    Raises what :func:`select_mesh`, :func:`select_user_type` /
    :func:`select_instance_type`, :func:`eligible_nodes` and
    :func:`choose_node` raise, in that order, and :class:`InvalidOperation`
    for another ``kind`` or a User placement without a type.
    """
    if kind not in PLACEABLE_KINDS:
        raise InvalidOperation(f"only USER and INSTANCE Spots are placed, not {kind!r}")
    mesh = select_mesh(candidates, in_mesh)
    if kind is SpotKind.USER:
        if stable_type is None:
            raise InvalidOperation("creating a User Spot needs its stable type")
        chosen_type = select_user_type(candidates, mesh, stable_type)
    else:
        chosen_type = select_instance_type(candidates, mesh, stable_type)
    node = choose_node(eligible_nodes(candidates, mesh, chosen_type, kind), random)
    return Placement(mesh=mesh, stable_type=chosen_type, node=node)


def reminder_partition(spot_id: str) -> int:
    """The reminder partition of ``spot_id``: in ``range(REMINDER_PARTITIONS)``, the same
    on every node and every store (docs/reminders.md)."""
    digest = hashlib.blake2b(spot_id.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big") % REMINDER_PARTITIONS


def reminder_partitions(candidates: Iterable[PlacementCandidate], mesh: str,
                        node: PlacementCandidate | None) -> list[int]:
    """The reminder partitions ``node`` scans in ``mesh``: those whose rendezvous winner,
    among the Mesh's serving hosts (each counted once, whatever its weight: a node drained
    to weight 0 still delivers), is ``node``. Every node that reads the same live
    descriptors gets a disjoint share, and together they cover every partition; a node
    that is no serving host of ``mesh`` (``None``, client-only, draining, stopping) gets
    none."""
    hosts = _hosts(candidates, mesh)
    if node is None or all(c.node_rid != node.node_rid for c in hosts):
        return []
    return list(_partitions_won(frozenset(c.node_rid.value for c in hosts),
                                node.node_rid.value))


@functools.lru_cache(maxsize=1_024)
def _partitions_won(hosts: frozenset[bytes], node_rid: bytes) -> tuple[int, ...]:
    """The partitions whose rendezvous winner among ``hosts`` is ``node_rid``.

    Remembered: a node asks once per ``placement_max_age`` and the hosts rarely change,
    while the answer costs one hash per partition and host (64 times N); one entry per
    node of the process (benchmarks run hundreds in one)."""
    mine = []
    for partition in range(REMINDER_PARTITIONS):
        key = b"reminders/%d" % partition
        winner = max(hosts, key=lambda rid: (_score(key, rid, 1.0), rid))
        if winner == node_rid:
            mine.append(partition)
    return tuple(mine)


def check_local_activation(active: int, pending: int, ceiling: int | None) -> None:
    """Refuse a new local activation when the node is at or over its active-object ceiling.

    ``pending`` counts the node's other in-flight activations, not the one
    being decided. Returns when ``active + pending < ceiling`` (or there is
    no ceiling); raises :class:`CapacityExceeded` (``lane=None``) otherwise,
    and :class:`InvalidOperation` for negative or non-int arguments. Pure.
    """
    if not (type(active) is int and type(pending) is int and active >= 0 <= pending):
        check_non_negative("active", active)
        check_non_negative("pending", pending)
    if ceiling is None:
        return
    check_non_negative("ceiling", ceiling)
    if active + pending >= ceiling:
        raise CapacityExceeded(
            f"this node is at its active-object ceiling of {ceiling} ({active} active, "
            f"{pending} activating), so it refuses a new activation; retry later, let idle "
            "Spots be evicted, or raise the ceiling"
        )
