"""Where a relocating Spot goes: the named node, or the one placement picks (06 §8).

:func:`choose_target` reads the live descriptor claims of the Spot's Mesh afresh and
keeps the other nodes that serve its stable type as its kind.  With ``to`` (a NodeId)
that node must be one of them -- whatever its placement weight: naming it is the
operator's choice --; without, ``core.placement`` chooses among them by weight and
remaining capacity, as it does for a new Spot.  The source itself is never
a candidate.  Capacity is checked again, atomically, by BeginRelocation.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from zlink_trio.core.errors import ZLinkError
from zlink_trio.core.placement import choose_node, eligible_nodes
from zlink_trio.runtime.coordinators.placement import candidates

if TYPE_CHECKING:
    from zlink_trio.core.descriptor import NodeClaim
    from zlink_trio.core.records import AuthorityRecord
    from zlink_trio.runtime.coordinators.node_runtime import NodeRuntime

__all__ = ("choose_target",)


async def choose_target(rt: NodeRuntime, record: AuthorityRecord,
                        to: str | None) -> tuple[NodeClaim | None, str]:
    """The claim of the target node, or ``None`` and why there is none."""
    found = [c for c in await candidates(rt) if c.node_rid != rt.node_rid]
    what = (f"Spot {record.spot_id!r} ({record.kind.name.title()} type "
            f"{record.stable_type!r}, mesh {record.mesh!r})")
    if to is not None:
        # A named node is the operator's choice: its placement weight does not matter
        # (a weight of 0 only keeps placement from choosing it); capacity is checked
        # by BeginRelocation.
        for candidate in found:
            claim = rt.peers.claim_by_rid(candidate.node_rid)
            if (claim is not None and claim.descriptor.node_id == to
                    and claim.descriptor.mesh == record.mesh
                    and claim.descriptor.serves(record.stable_type, record.kind)):
                return claim, ""
        return None, (f"node {to!r} is not a live node of mesh {record.mesh!r} that serves "
                      f"{record.stable_type!r}; name another node or leave `to` out")
    try:
        eligible = eligible_nodes(found, record.mesh, record.stable_type, record.kind)
    except ZLinkError as exc:
        return None, f"no other live node can take {what}: {exc.message}"
    try:
        chosen = choose_node(eligible, rt.random)
    except ZLinkError as exc:
        return None, f"no other live node can take {what}: {exc.message}"
    claim = rt.peers.claim_by_rid(chosen.node_rid)
    if claim is None:
        return None, f"node {chosen.node_rid} left the mesh while {what} was being placed"
    return claim, ""
