"""``node.actors`` (and ``ctx.actors``): create, join, leave, close, find and list Actors.

Theory of operation
-------------------
:class:`ActorManager` is the public face of ``actors.membership`` in the style of
``node.spots``: ``create`` returns a builder (``.in_spot(ref)``, ``.timeout(seconds)``,
each once, awaited once); the other operations are coroutines bounded, like
``node.spots.close``, by the node's ``default_timeout``. Every operation fixes one
deadline and validates its input before any store call. Nothing is retried behind the
caller's back. See docs/actors.md for what an Actor is and the rules below.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from zlink_trio.core.errors import InvalidOperation
from zlink_trio.core.identity import validate_stable_type
from zlink_trio.core.records import SpotRef
from zlink_trio.runtime.actors.membership import (
    close_actor,
    create_actor,
    find_actor,
    members_of,
    move_actor,
)
from zlink_trio.runtime.calls.builders import TimedBuilder, option
from zlink_trio.runtime.calls.deadlines import deadline_after
from zlink_trio.runtime.options import check_timeout

if TYPE_CHECKING:
    from collections.abc import Generator
    from typing import Self

    from zlink_trio.core.deadline import Deadline
    from zlink_trio.core.records import ActorRef
    from zlink_trio.runtime.coordinators.node_runtime import NodeRuntime

__all__ = ("ActorManager", "CreateActorCall")


def _deadline(rt: NodeRuntime, timeout: float | None) -> Deadline:
    return deadline_after(rt.options.default_timeout if timeout is None
                          else check_timeout(timeout))


class CreateActorCall(TimedBuilder):
    """``actors.create(type, actor_id=None)``: await it for the new Actor's ActorRef."""

    def __init__(self, rt: NodeRuntime, stable_type: str, actor_id: str | None) -> None:
        super().__init__()
        self._rt = rt
        self._type = stable_type
        self._actor_id = actor_id
        self._container: str | None = None

    def _describe(self) -> str:
        return f"the create of Actor type {self._type!r}"

    @option
    def in_spot(self, spot: SpotRef | str) -> Self:
        """Create the Actor as a member of this User Spot (owned by this node) instead
        of this node's Entry Spot."""
        self._option("in_spot")
        if isinstance(spot, SpotRef):
            self._container = spot.spot_id
        elif isinstance(spot, str):
            self._container = spot
        else:
            raise InvalidOperation(f".in_spot() takes a SpotRef or a Spot ID, got "
                                   f"{type(spot).__name__}")
        return self

    def __await__(self) -> Generator[Any, Any, ActorRef]:
        return self._run().__await__()

    async def _run(self) -> ActorRef:
        self._submit()
        stable_type = validate_stable_type(self._type)
        return await create_actor(self._rt, stable_type, self._actor_id, self._container,
                                  _deadline(self._rt, self._timeout))


class ActorManager:
    """Actors on this node and by ID anywhere: ``node.actors`` (and ``ctx.actors``)."""

    def __init__(self, rt: NodeRuntime) -> None:
        self._rt = rt

    def create(self, stable_type: str, actor_id: str | None = None) -> CreateActorCall:
        """Build the creation of an Actor of ``stable_type``; await it for its ActorRef.

        Without ``.in_spot(ref)`` the Actor starts on this node's Entry Spot. Without
        ``actor_id`` it gets a fresh uuid4 ID. An ID already taken by an Actor or a Spot
        is AlreadyExists; an Instance Spot, a Spot this node does not own or one that is
        not Ready cannot take a member (InvalidOperation, StaleFence or Unavailable).
        """
        return CreateActorCall(self._rt, stable_type, actor_id)

    async def join(self, ref: ActorRef, spot: SpotRef | str) -> ActorRef:
        """Make the Actor ``ref`` a member of the User Spot ``spot``; its new ActorRef.

        Runs on the node that hosts the Actor (NotFound elsewhere: ask that node). When
        another node owns the Spot, the Actor moves there with its queue and timers
        (docs/actors.md). InvalidOperation for a ref of another generation, an Instance
        Spot or an Actor as ``spot``.
        """
        return await move_actor(self._rt, ref, spot, _deadline(self._rt, None))

    async def leave(self, ref: ActorRef) -> ActorRef:
        """Return the Actor ``ref`` to the Entry Spot of the node it is on; its new ref."""
        return await move_actor(self._rt, ref, None, _deadline(self._rt, None))

    async def close(self, ref: ActorRef) -> bool:
        """Close the Actor incarnation ``ref`` names (on whichever node hosts it).

        ``True`` when it closed; ``False`` when it no longer existed. InvalidOperation
        for a ref of another generation than the current one.
        """
        return await close_actor(self._rt, ref, _deadline(self._rt, None))

    async def find(self, actor_id: str) -> ActorRef | None:
        """The Ready Actor ``actor_id``'s ActorRef, or ``None``."""
        return await find_actor(self._rt, actor_id, _deadline(self._rt, None))

    async def members(self, spot: SpotRef | str) -> list[ActorRef]:
        """The Actors that belong to ``spot`` (the store's view, in ActorId order)."""
        return await members_of(self._rt, spot, _deadline(self._rt, None))
