"""What placement decided on one read of the live claims, kept for the next activations.

Placement (:mod:`.placement`) reuses the claims it read last for
``placement_max_age``; from such a read, ``core.placement`` selects the Mesh and the
stable type and the hosts serving it -- decisions that depend on the claims still
live, this node's serving flag and the call's intent, but not on the load.  A
:class:`PlacementPlans` keeps one :class:`Plan` per such key for one read (a new read
starts a new one), so an activation only checks each host's room and, with several,
the rendezvous choice.

It also keeps the read's live claims (:meth:`PlacementPlans.live`): the list changes
only when another node's lease runs out, so it is filtered again only then, not for
every activation.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import attrs

if TYPE_CHECKING:
    from zlink_trio.core.descriptor import NodeClaim
    from zlink_trio.core.identity import NodeRid
    from zlink_trio.core.placement import PlacementCandidate

__all__ = ("PlacementPlans", "Plan", "PlanKey")

#: What a plan depends on besides the read: live claims, own serving flag, intent.
PlanKey = tuple[int, bool, str | None, str | None]


@attrs.frozen
class Plan:
    """Mesh, type and the hosts serving it; ``own`` is this node's index in ``hosts``."""

    mesh: str
    stable_type: str
    hosts: tuple[PlacementCandidate, ...]
    own: int | None


class PlacementPlans:
    """The plans decided on one claims read (``seen``), by :data:`PlanKey`."""

    __slots__ = ("_live", "_live_from", "_live_until", "_own", "plans", "seen")

    def __init__(self, seen: tuple[float, list[NodeClaim]], own: NodeRid) -> None:
        self.seen = seen
        self._own = own
        #: ``None``: the selection refused on that read (a fresh read decides then).
        self.plans: dict[PlanKey, Plan | None] = {}
        self._live: list[NodeClaim] = []
        # The list holds for ``_live_from <= now < _live_until``; empty: filter first.
        self._live_from = math.inf
        self._live_until = -math.inf

    def live(self, now: float) -> list[NodeClaim]:
        """The read's claims whose lease still runs at ``now``, and this node's own.

        This node's claim stays (its lease keeper renews it). The same list as filtering
        the read at ``now``: it is filtered again once ``now`` reaches the earliest
        lease end among the other claims kept (or goes back before the last filtering).
        """
        if not self._live_from <= now < self._live_until:
            own = self._own
            live = [c for c in self.seen[1]
                    if c.lease_expires_at > now or c.descriptor.node_rid == own]
            self._live, self._live_from = live, now
            self._live_until = min((c.lease_expires_at for c in live
                                    if c.descriptor.node_rid != own), default=math.inf)
        return self._live
