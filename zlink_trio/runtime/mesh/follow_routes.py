"""The Message Follow routes of one node: where the Spots that moved away went.

One :class:`FollowRoute` per Spot that relocated from this node, installed by the
relocation's commit and kept for ``MessageFollowDuration`` (:mod:`.message_follow`
uses them).  While a moved Spot's hold is being relayed to its new owner, its
:data:`RelayQueue` is here too (:attr:`FollowRoutes.relays`): every message this node
forwards to that Spot meanwhile joins the queue's tail instead of overtaking the hold.
Plain values and dicts: nothing here awaits or reads a clock.
"""

from __future__ import annotations

import collections
from typing import TYPE_CHECKING, TypeAlias

import attrs

if TYPE_CHECKING:
    from collections.abc import Callable

    from zlink_trio.core.errors import ZLinkError
    from zlink_trio.core.records import OwnerFence
    from zlink_trio.transport import Link

__all__ = ("FollowRoute", "FollowRoutes", "RelayItem", "RelayQueue")

#: One message waiting in a relay: called once, with the link to send it on (it
#: handles its own send errors), or with the error that keeps it from being sent.
RelayItem: TypeAlias = "Callable[[Link | ZLinkError], None]"
#: The messages of one Spot still to be relayed, oldest first; no bound of its own
#: (a relay has none): the relay drains it within the link's flow control.
RelayQueue: TypeAlias = "collections.deque[RelayItem]"


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

    __slots__ = ("_routes", "relays")

    def __init__(self) -> None:
        self._routes: dict[str, FollowRoute] = {}
        #: The relays under way, by Spot ID (see the module docstring).
        self.relays: dict[str, RelayQueue] = {}

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

    def start_relay(self, spot_id: str) -> RelayQueue:
        """The queue of a relay of ``spot_id``'s hold that starts now (one per Spot)."""
        queue: RelayQueue = collections.deque()
        self.relays[spot_id] = queue
        return queue

    def relay(self, spot_id: str) -> RelayQueue | None:
        """The queue of the relay of ``spot_id`` under way, if there is one."""
        relays = self.relays
        return relays.get(spot_id) if relays else None

    def end_relay(self, spot_id: str, queue: RelayQueue) -> None:
        """The relay that drained ``queue`` ended: sends to ``spot_id`` go straight out."""
        if self.relays.get(spot_id) is queue:
            del self.relays[spot_id]
