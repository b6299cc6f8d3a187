"""SpotContext: what a Spot instance gets from the runtime, and TimerHandle.

A Spot's constructor receives its :class:`SpotContext`.  Through it the Spot learns who
it is (``spot_id``, ``generation``, ``ref``), calls other Spots (``client``), registers
timers that run as turns of the Spot itself (``start_timer``), keeps durable state
(``state``) and reminders (``remind``), and -- for Instance
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
from zlink_trio.runtime.incarnation import reminders

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable
    from datetime import datetime, timedelta

    from zlink_trio.core.timers import TimerId
    from zlink_trio.runtime.calls.client import SpotClient
    from zlink_trio.runtime.declaration.reminder_message import Reminder
    from zlink_trio.runtime.declaration.spot_types import SpotType
    from zlink_trio.runtime.incarnation.durable_state import DurableState
    from zlink_trio.runtime.incarnation.owner_writes import OwnerWrites
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
    @property
    def writes(self) -> OwnerWrites | None: ...
    @property
    def ended(self) -> bool: ...

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
    def ended(self) -> bool:
        """Whether this incarnation has ended (closed, moved away, evicted, its activation
        failed): a context kept past that refuses every write (``state``, ``remind``)."""
        return self._incarnation.ended

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

    def now(self) -> float:
        """The store's clock, seconds: what a reminder's ``due`` and ``at=`` are read on
        (wall-clock time for a store shared between processes)."""
        return self._incarnation.rt.now()

    async def remind(self, name: str, *, at: float | datetime | None = None,
                     after: float | timedelta | None = None,
                     every: float | timedelta | None = None) -> Reminder:
        """Set (or replace) this Spot's durable reminder ``name`` (docs/reminders.md).

        It is due ``at`` a time on the store's clock (:meth:`now`; or an aware
        ``datetime``), or ``after`` a delay, and then, with ``every``, again every
        period (at least 1 s; ``every`` alone: first due one period from now). When due
        it is delivered to this Spot as a :class:`Reminder` message through the normal
        call path -- an idle-evicted or crashed Instance Spot is activated for it -- at
        least once, never twice at the same time. It outlives this incarnation, until
        :meth:`cancel_reminder`, its one due delivered, or the close of a User Spot.

        The store writes it only while this incarnation owns the Spot and serves (as
        ``ctx.state.save``): :class:`StaleFence` / :class:`Unavailable` otherwise, nothing
        written. Raises :class:`InvalidOperation` for a type without a ``Reminder``
        handler, an Actor, bad times, or a Spot that keeps 100 reminders already. Returns
        the reminder as stored.
        """
        return await reminders.remind(self._incarnation.writes, self._incarnation.spot_type,
                                      name, at=at, after=after, every=every)

    async def cancel_reminder(self, name: str) -> bool:
        """Delete this Spot's reminder ``name``; whether there was one. Fenced as
        :meth:`remind`. A delivery already on its way may still arrive."""
        return await reminders.cancel_reminder(self._incarnation.writes,
                                               self._incarnation.spot_type, name)

    async def reminders(self) -> list[Reminder]:
        """This Spot's reminders by name, each with its next due (one store read)."""
        return await reminders.reminders_of(self._incarnation.writes,
                                            self._incarnation.spot_type)

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
