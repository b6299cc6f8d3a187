"""What placement decided on one read of the live claims, kept for the next activations.

Placement (:mod:`.placement`) reuses the claims it read last for
``placement_max_age``; from such a read, ``core.placement`` selects the Mesh and the
stable type and the hosts serving it -- decisions that depend on the claims still
live, this node's serving flag and the call's intent, but not on the load.  A
:class:`PlacementPlans` keeps one :class:`Plan` per such key for one read (a new read
starts a new one), so an activation only checks each host's room and, with several,
the rendezvous choice.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

if TYPE_CHECKING:
    from zlink_trio.core.descriptor import NodeClaim
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

    __slots__ = ("plans", "seen")

    def __init__(self, seen: tuple[float, list[NodeClaim]]) -> None:
        self.seen = seen
        #: ``None``: the selection refused on that read (a fresh read decides then).
        self.plans: dict[PlanKey, Plan | None] = {}
