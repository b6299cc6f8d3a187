"""The sample Spots both demos run: a counter (an Instance Spot) and a chat room (a User Spot).

Theory of operation
-------------------
:class:`Counter` is created by the first message that asks for it with
Instance intent (``.instance_spot("counter")``) and adds each :class:`Add` to
a running :class:`Total`; idle for long enough, it is evicted, and the next
message with Instance intent creates a new incarnation. :class:`Room` is
created explicitly (``node.spots.create`` / ``get_or_create``) from a
:class:`RoomSpec`, and its ``on_create`` hook answers the creator with a
:class:`Welcome`.

What a demo checks beyond the replies -- that a factory ran, and only once;
that an idle counter was evicted -- happens inside a node, so the Spots
report it to :data:`events`, an :class:`Events` that each demo replaces with
its own before it starts a node: the one-node demo counts and prints, the
node processes of the multi-node demo append lines to a log their driver
reads. The default reports nothing.

Like every sample, this module imports only the public API.
"""

from __future__ import annotations

import attrs

import zlink_trio as zl

__all__ = ("Add", "Counter", "Events", "Room", "RoomSpec", "Total", "Welcome", "events")


@attrs.frozen
class Add:
    """Add ``n`` to a counter."""

    n: int


@attrs.frozen
class Total:
    """A counter's running total."""

    value: int


@attrs.frozen
class RoomSpec:
    """The creation request of a chat room."""

    topic: str


@attrs.frozen
class Welcome:
    """What a newly created room answers its creator."""

    text: str


class Events:
    """Where the sample Spots report what the demos check; this default ignores it all."""

    def factory_ran(self, ctx: zl.SpotContext) -> None:
        """A Spot's constructor ran: a new incarnation of ``ctx.spot_id``."""

    def evicted(self, ctx: zl.SpotContext, total: int) -> None:
        """An idle counter with ``total`` is closing with ``CloseReason.IDLE_EVICTED``."""


#: What the Spots report to; a demo assigns its own :class:`Events` before it starts a node.
events = Events()


@zl.instance_spot("counter", relocation=zl.RecreateOnRelocation())
class Counter:
    """An Instance Spot: created by the first message that asks for it."""

    def __init__(self, ctx: zl.SpotContext) -> None:
        self.ctx = ctx
        self.total = 0
        events.factory_ran(ctx)

    @zl.handler
    async def add(self, msg: Add) -> Total:
        self.total += msg.n
        return Total(self.total)

    async def on_close(self, reason: zl.CloseReason) -> None:
        if reason is zl.CloseReason.IDLE_EVICTED:
            events.evicted(self.ctx, self.total)


@zl.user_spot("room", relocation=zl.DisableRelocation())
class Room:
    """A User Spot: created explicitly through the SpotManager."""

    def __init__(self, ctx: zl.SpotContext, request: RoomSpec | None) -> None:
        self.topic = request.topic if request else "(none)"
        events.factory_ran(ctx)

    async def on_create(self, request: RoomSpec | None) -> Welcome:
        return Welcome(f"welcome to {self.topic}")
