"""SpotContext: what a Spot instance gets from the runtime, and TimerHandle.

A Spot's constructor receives its :class:`SpotContext`.  Through it the Spot learns who
it is (``spot_id``, ``generation``, ``ref``), calls other Spots (``client``), registers
timers that run as turns of the Spot itself (``start_timer``), and -- for Instance
Spots and Actors -- closes itself after the current turn (``close``).  An Actor's
handlers get the same context (docs/actors.md): ``actor_ref`` names it; a Spot lists
its members on this node with ``members()``; ``actors`` creates and moves Actors.
The context is only valid for its incarnation: once the incarnation is closing, new
timers are refused.
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any, Protocol

from zlink_trio.core.errors import InvalidOperation
from zlink_trio.core.identity import SpotKind
from zlink_trio.core.records import ActorRef, SpotRef

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from zlink_trio.core.timers import TimerId
    from zlink_trio.runtime.calls.client import SpotClient
    from zlink_trio.runtime.declaration.spot_types import SpotType
    from zlink_trio.runtime.incarnation.durable_state import DurableState
    from zlink_trio.runtime.incarnation.timers import IncarnationTimers
    from zlink_trio.runtime.state import ActorOperations, NodeState

__all__ = ("SpotContext", "TimerHandle")


class _Incarnation(Protocol):
    """What a context reads of its incarnation
    (:class:`~zlink_trio.runtime.incarnation.incarnation.Incarnation`, which builds the
    context). A Protocol rather than that class: naming it here would close an import
    cycle between the incarnation and the public face it builds."""

    @property
    def rt(self) -> NodeState: ...
    @property
    def spot_type(self) -> SpotType: ...
    @property
    def spot_id(self) -> str: ...
    @property
    def generation(self) -> int: ...
    @property
    def mesh(self) -> str: ...
    @property
    def timers(self) -> IncarnationTimers: ...
    @property
    def durable(self) -> DurableState[Any] | None: ...

    def add_timer(self, delay: float, callback: Callable[[], Awaitable[object]],
                  period: float | None) -> TimerId: ...
    def request_self_close(self) -> None: ...


class TimerHandle:
    """A timer registered with :meth:`SpotContext.start_timer`; cancel it with :meth:`cancel`."""

    __slots__ = ("_incarnation", "_timer_id")

    def __init__(self, incarnation: _Incarnation, timer_id: TimerId) -> None:
        self._incarnation = incarnation
        self._timer_id = timer_id

    @property
    def active(self) -> bool:
        """Whether the timer is still registered (a fired one-shot or cancelled timer is not)."""
        return self._timer_id in self._incarnation.timers

    def cancel(self) -> bool:
        """Unregister the timer; ``True`` if it was registered. Idempotent, never raises.

        A tick already queued as a turn still runs; no further tick is queued.
        """
        return self._incarnation.timers.cancel(self._timer_id)


class SpotContext:
    """The runtime's face towards one Spot incarnation; passed to the Spot's constructor."""

    __slots__ = ("_incarnation",)

    def __init__(self, incarnation: _Incarnation) -> None:
        self._incarnation = incarnation

    @property
    def spot_id(self) -> str:
        """The global Spot ID."""
        return self._incarnation.spot_id

    @property
    def state(self) -> DurableState[Any]:
        """The durable state of a type declared with ``state=`` (docs/state.md):
        ``load()``, ``await save(value)``, ``await clear()``. Raises
        :class:`InvalidOperation` for a type that declares none."""
        durable = self._incarnation.durable
        if durable is None:
            spot_type = self._incarnation.spot_type
            raise InvalidOperation(
                f"{spot_type.stable_type!r} declares no durable state; declare its class "
                "with state= on the decorator (docs/state.md)")
        return durable

    @property
    def generation(self) -> int:
        """This incarnation's ObjectGeneration."""
        return self._incarnation.generation

    @property
    def stable_type(self) -> str:
        """The Spot's stable type."""
        return self._incarnation.spot_type.stable_type

    @property
    def kind(self) -> SpotKind:
        """USER, INSTANCE, or ACTOR in an Actor's handlers."""
        return self._incarnation.spot_type.kind

    @property
    def actor_ref(self) -> ActorRef:
        """This Actor's current ActorRef (its container included); InvalidOperation in a
        Spot's context."""
        membership = self._incarnation.rt.memberships.get(self._incarnation.spot_id)
        if membership is None or membership.ref.generation != self._incarnation.generation:
            raise InvalidOperation(
                f"{self.stable_type!r} is not an Actor Ready on this node; actor_ref is an "
                "Actor's own ref (a Spot's is ctx.ref)")
        return membership.ref

    @property
    def actors(self) -> ActorOperations:
        """The node's ``ActorManager`` (``node.actors``): create, join, leave, close Actors.

        ``ctx.actors.create("player").in_spot(ctx.ref)`` makes a member of this Spot.
        """
        return self._incarnation.rt.actors

    def members(self) -> list[ActorRef]:
        """This Spot's Actor members Ready on this node, in ActorId order (a snapshot)."""
        local = self._incarnation.rt.members.get(self._incarnation.spot_id)
        return [] if local is None else [local[i] for i in sorted(local)]

    @property
    def ref(self) -> SpotRef:
        """The SpotRef of this incarnation at this node."""
        incarnation = self._incarnation
        return SpotRef(spot_id=incarnation.spot_id, generation=incarnation.generation,
                       mesh=incarnation.mesh, node_rid=incarnation.rt.node_rid)

    @property
    def client(self) -> SpotClient:
        """The node's SpotClient, for outbound calls.

        Do not ``request`` the Spot itself from its own handler: it runs one turn at a
        time, so the request waits for the running turn and ends at its deadline.
        """
        return self._incarnation.rt.client

    def start_timer(
        self,
        delay: float,
        callback: Callable[[], Awaitable[object]],
        *,
        period: float | None = None,
    ) -> TimerHandle:
        """Run ``await callback()`` as a turn of this Spot after ``delay`` s, then every ``period``.

        ``callback`` is an ``async def`` method (or other async callable without
        arguments); it runs on the application lane, one turn at a time with the
        handlers. Periodic ticks missed while the Spot was busy are skipped, not
        burst. Every timer is cancelled when the incarnation closes. Raises
        :class:`InvalidOperation` for a callback that is not async, bad numbers, or
        an incarnation that is closing; :class:`CapacityExceeded` beyond 1,024 timers.
        """
        if not callable(callback) or not (
            inspect.iscoroutinefunction(callback)
            or inspect.iscoroutinefunction(getattr(callback, "__call__", None))  # noqa: B004
        ):
            raise InvalidOperation(
                f"start_timer needs an async callable without arguments, got {callback!r}; "
                "pass an 'async def' method of the Spot, e.g. ctx.start_timer(5, self.tick)"
            )
        return TimerHandle(self._incarnation,
                           self._incarnation.add_timer(delay, callback, period))

    def close(self) -> None:
        """Close this Instance Spot (or Actor) after the current turn, with reason CLOSED.

        Turns accepted before the close still run; ``on_close`` runs once; then the
        location is released and the next message with Instance intent activates a
        new generation (an Actor is gone: a message never re-creates it). Idempotent.
        The request is lifecycle work: however full the Spot's application lane is, it
        is admitted (on the lifecycle lane, whose bound only a bug reaches:
        ``CapacityExceeded`` then, and nothing changes). Raises
        :class:`InvalidOperation` for a User Spot (close it with
        ``node.spots.close(ref)``).
        """
        if self._incarnation.spot_type.kind not in (SpotKind.INSTANCE, SpotKind.ACTOR):
            raise InvalidOperation(
                f"{self.stable_type!r} is a User Spot; close it with node.spots.close(ref) "
                "(only Instance Spots close themselves from their context)"
            )
        self._incarnation.request_self_close()
