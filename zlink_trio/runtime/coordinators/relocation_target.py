"""Where a relocating Spot goes: the named node, or the one placement picks (docs/relocation.md).

:func:`choose_target` reads the live descriptor claims of the Spot's Mesh afresh and
keeps the other nodes that serve its stable type as its kind.  With ``to`` (a NodeId)
that node must be one of them -- whatever its placement weight: naming it is the
operator's choice --; without, ``core.placement`` chooses among them by weight and
remaining capacity, as it does for a new Spot.  The source itself is never
a candidate, so when no *other* node serves the type the reason says just that (not
that nobody serves it: the source does).  Capacity is checked again, atomically, by
BeginRelocation.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from zlink_trio.core.errors import NotFound, ZLinkError
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
        if to == rt.node_id:
            return None, (f"node {to!r} is the node that owns {what} already; name another "
                          "node or leave `to` out")
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
        chosen = choose_node(eligible, rt.random)
        return rt.peers.placed_claim(chosen.node_rid, chosen.node_id, what,
                                     "nothing moved"), ""
    except NotFound:  # no other node serves the type at all
        return None, (f"there is no other node to move {what} to: node {rt.node_id!r} is the "
                      f"only live node of mesh {record.mesh!r} that serves "
                      f"{record.kind.name} type {record.stable_type!r}; start another node "
                      "that registers it, then relocate again")
    except ZLinkError as exc:  # others serve it but take no new Spots, or have no room
        return None, f"no other live node can take {what}: {exc.message}"
