"""``NodeRuntime``: a node's state together with its catalog and mesh peers.

The coordinators (routing, placement, activation, create, close, recovery, lease, and
the handlers of what other nodes send) take a :class:`NodeRuntime` as their first
argument.  It is the node's :class:`~zlink_trio.runtime.state.NodeState` -- identity, options,
store, caches, lease -- plus the two collaborators ``open_node`` binds once they
exist: the :class:`~zlink_trio.runtime.incarnation.catalog.Catalog` (it needs the
node's nursery) and the :class:`~zlink_trio.runtime.mesh.peers.Peers` (they need the
runtime they serve).  Hosts, the catalog, the peers and the mesh's senders only see
the ``NodeState`` (and the ``Peers``) they are given, so nothing below the coordinators
imports this module.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from zlink_trio.runtime.coordinators.claims_refresh import ClaimsRefresh
from zlink_trio.runtime.mesh.follow_routes import FollowRoutes
from zlink_trio.runtime.state import NodeState

if TYPE_CHECKING:
    from zlink_trio.core.placement import PlacementCandidate
    from zlink_trio.runtime.coordinators.placement_plans import PlacementPlans
    from zlink_trio.runtime.incarnation.catalog import Catalog
    from zlink_trio.runtime.mesh.peers import Peers

__all__ = ("NodeRuntime",)


@attrs.define(eq=False)
class NodeRuntime(NodeState):
    """One node's state, catalog and peers (one per ``open_node``)."""

    #: Local incarnations and creation attempts; owns their nurseries.
    catalog: Catalog = attrs.field(init=False)
    #: The mesh: directory, links and pending replies.
    peers: Peers = attrs.field(init=False)
    #: Message Follow routes of the Spots that moved away from this node.
    follow: FollowRoutes = attrs.field(factory=FollowRoutes, init=False)
    #: What placement decided on the claims it read last (``placement._placed_here``).
    placement_plans: PlacementPlans | None = attrs.field(default=None, init=False)
    #: The placement candidates of the other nodes of the claims read last, by their
    #: descriptor's digest and whether they accept placements (``placement._candidates``).
    placement_candidates: dict[tuple[str, bool], PlacementCandidate] = attrs.field(
        factory=dict, init=False)
    #: The single-flight refresh of those claims ahead of their expiry (``.claims_refresh``).
    claims_refresh: ClaimsRefresh = attrs.field(factory=ClaimsRefresh, init=False)
