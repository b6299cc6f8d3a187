"""The Message Follow routes of one node: where the Spots that moved away went (06 §6).

One :class:`FollowRoute` per Spot that relocated from this node, installed by the
relocation's commit and kept for ``MessageFollowDuration`` (:mod:`.message_follow`
uses them).  Plain values and a dict: nothing here awaits or reads a clock.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

if TYPE_CHECKING:
    from zlink_trio.core.records import OwnerFence

__all__ = ("FollowRoute", "FollowRoutes")


@attrs.frozen
class FollowRoute:
    """This node's committed route for a Spot that moved away (see the module docstring)."""

    spot_id: str
    object_generation: int
    #: The owner generation this node held; a message for it is followed.
    source_owner_generation: int
    target: OwnerFence
    target_owner_generation: int
    #: Trio-clock time after which the route is gone.
    expires_at: float


class FollowRoutes:
    """The Message Follow routes of one node, by Spot ID; expired ones are dropped."""

    __slots__ = ("_routes",)

    def __init__(self) -> None:
        self._routes: dict[str, FollowRoute] = {}

    def __len__(self) -> int:
        return len(self._routes)

    def install(self, route: FollowRoute) -> None:
        """Install (or replace) the route of ``route.spot_id``."""
        self._routes[route.spot_id] = route

    def get(self, spot_id: str, now: float) -> FollowRoute | None:
        """The live route of ``spot_id`` at Trio time ``now``, or ``None``."""
        route = self._routes.get(spot_id)
        if route is not None and now >= route.expires_at:
            del self._routes[spot_id]
            return None
        return route

    def drop(self, spot_id: str) -> None:
        """Forget the route of ``spot_id`` (if any)."""
        self._routes.pop(spot_id, None)

    def sweep(self, now: float) -> None:
        """Drop every expired route."""
        for spot_id in [s for s, r in self._routes.items() if now >= r.expires_at]:
            del self._routes[spot_id]
